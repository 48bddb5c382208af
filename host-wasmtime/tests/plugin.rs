//! Plugin components race for one job: exactly one runs it, whether they share one lock table in
//! one host process or a store between two host processes.

#[path = "../examples/job_plugins.rs"]
mod job_plugins;

use host_wasmtime::{LockHost, ManualClock};

#[test]
fn exactly_one_plugin_runs_the_job() {
    let locks = LockHost::builder()
        .clock(ManualClock::at(0))
        .build()
        .unwrap();
    for round in 0..5 {
        let job = format!("job-{round}");
        let service = job_plugins::LockService::Host(locks.clone());
        let answers = job_plugins::race(&service, 2, &job, "plugin").unwrap();
        let ran: Vec<_> = answers.iter().filter(|a| a.starts_with("ran ")).collect();
        let skipped: Vec<_> = answers
            .iter()
            .filter(|a| a.starts_with("skipped "))
            .collect();
        assert_eq!((ran.len(), skipped.len()), (1, 1), "{answers:?}");
        assert!(skipped[0].ends_with(": held"), "{answers:?}");
        let info = locks
            .inspect(&job)
            .unwrap()
            .expect("the winner holds the job's lock");
        assert!(
            ran[0].contains(&format!("fence {}", info.holder().unwrap().fence.0)),
            "{answers:?} vs {info:?}"
        );
    }
}

/// Two host processes (replicas), each with a plugin instance, share one store: the same
/// component decides in both, exactly one plugin runs the job, and the store names the winner
/// with the fence its plugin was given.
#[test]
fn two_host_processes_share_one_store() {
    let dir = std::env::temp_dir().join(format!("job-plugins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("locks.db").display());
    for round in 0..3 {
        let job = format!("job-{round}");
        let children: Vec<_> = (1..=2)
            .map(|i| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "host_process_child", "--nocapture", "--quiet"])
                    .env("JOB_PLUGIN_HOST", format!("{url}\n{job}\nhost-{i}"))
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let answers: Vec<String> = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                assert!(out.status.success(), "{out:?}");
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.lines()
                    .find_map(|l| l.strip_prefix("answer: "))
                    .unwrap_or_else(|| panic!("no answer in {text:?}"))
                    .to_owned()
            })
            .collect();
        let ran: Vec<_> = answers.iter().filter(|a| a.starts_with("ran ")).collect();
        assert_eq!(ran.len(), 1, "{answers:?}");
        assert!(
            answers.iter().any(|a| a == &format!("skipped {job}: held")),
            "{answers:?}"
        );
        let locks = lock_store::Locks::open(&url, "plugins").unwrap();
        let info = locks.inspect(&job).unwrap().expect("the winner holds it");
        assert!(
            ran[0].contains(&format!("fence {}", info.holder().unwrap().fence.0)),
            "{answers:?} vs {info:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child of [`two_host_processes_share_one_store`]: one host process (does nothing unless
/// started by it).
#[test]
fn host_process_child() {
    let Ok(spec) = std::env::var("JOB_PLUGIN_HOST") else {
        return;
    };
    let [url, job, worker] = spec.split('\n').collect::<Vec<_>>()[..] else {
        panic!("bad JOB_PLUGIN_HOST {spec:?}");
    };
    let answer = job_plugins::host_process(url, "plugins", job, worker).unwrap();
    println!("answer: {answer}");
}
