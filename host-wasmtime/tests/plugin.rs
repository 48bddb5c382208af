//! Two plugin components linked to one shared lock table race for one job: exactly one runs it.

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
        let answers = job_plugins::race(&locks, 2, &job).unwrap();
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
            ran[0].contains(&format!("fence {}", info.holder.fence.0)),
            "{answers:?} vs {info:?}"
        );
    }
}
