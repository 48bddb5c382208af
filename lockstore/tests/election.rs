//! Leader election with real processes on every store that processes share: three
//! `lockstore elect` candidates whose command (this test binary, `elect_worker`) writes to a
//! fenced resource while it leads. The leader is killed with `SIGKILL`, another is stopped
//! (`SIGSTOP`, its whole tree) past its TTL and continued, a third resigns (`SIGUSR1`), and the
//! others leave (`SIGTERM`). A checker reads every process's log on one clock
//! (`CLOCK_MONOTONIC`): fences strictly increase, a term's believed interval (its start to its
//! stop, less the time it was stopped) never overlaps the next term's, every term that was not
//! killed has a stop, no write made while it believed it led was refused, a write of a deposed
//! leader is refused by fence, and the candidate that stays leads when the others leave.
//! Also `Election::run` in one process (threads), and `lockstore leader`.

#[path = "../../lock-store/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_store::election::{CampaignOptions, Control, Election, StopReason};
use lock_store::{Fence, Locks};

const NAME: &str = "scheduler";
const TTL_MS: u64 = 1_000;

/// This machine's monotonic clock in ms, the same in every process.
fn mono_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap() * 1000 + u64::try_from(t.tv_nsec).unwrap() / 1_000_000
}

/// The command each candidate runs while it leads (when `ELECT_WORKER` is set: `log|resource`):
/// logs its start, writes to the fenced resource every 10 ms (logging whether the write was
/// taken), and logs its stop when it gets `SIGTERM`.
#[test]
fn elect_worker() {
    let Ok(spec) = std::env::var("ELECT_WORKER") else {
        return;
    };
    let (log, resource) = spec.split_once('|').unwrap();
    let fence: u64 = std::env::var("EXPIRING_LOCK_FENCE")
        .unwrap()
        .parse()
        .unwrap();
    let me = std::env::var("EXPIRING_LOCK_OWNER").unwrap();
    let term = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&term)).unwrap();
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut line = |text: String| {
        out.write_all(format!("{text}\n").as_bytes()).unwrap();
    };
    line(format!("start {me} {fence} {}", mono_ms()));
    loop {
        if term.load(Ordering::SeqCst) {
            line(format!("stop {me} {fence} {}", mono_ms()));
            return;
        }
        let at = mono_ms();
        let taken = fenced_write(Path::new(resource), fence);
        line(format!("write {me} {fence} {at} {taken}"));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Takes the fenced resource's writer lock: an `flock` on `<resource>.lock`, held until the
/// returned file is dropped. Unlike `common::fenced_write`'s `O_EXCL` guard file, the kernel
/// drops it when its process dies: here a leader is killed with `SIGKILL` at any instant, its
/// command with it, possibly mid-write, and a guard file left behind would stop every later
/// writer (each next leader's command spinning before its first write, deaf to its stop).
fn resource_lock(resource: &Path) -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("{}.lock", resource.display()))
        .unwrap();
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).unwrap();
    file
}

/// The fenced resource of these tests: a file holding the highest fence it took; a write with
/// a lower fence is refused (a leader writes many times in one term: the same fence is taken
/// again). Answers whether the write was taken.
fn fenced_write(resource: &Path, fence: u64) -> bool {
    let _turn = resource_lock(resource);
    let seen: u64 = std::fs::read_to_string(resource)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let taken = fence >= seen;
    if taken {
        std::fs::write(resource, fence.to_string()).unwrap();
    }
    taken
}

/// A writer holding the resource's lock (when `ELECT_LOCK_HOLDER` names the resource): takes
/// it, says so on stdout, and holds it until killed.
#[test]
fn lock_holder() {
    let Ok(resource) = std::env::var("ELECT_LOCK_HOLDER") else {
        return;
    };
    let _turn = resource_lock(Path::new(&resource));
    println!("holding");
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A writer killed with `SIGKILL` while it holds the fenced resource's lock (as a leader's
/// command killed mid-write) leaves the resource writable: the next writer's write is taken.
#[test]
fn a_writer_killed_mid_write_leaves_the_resource_writable() {
    let dir = std::env::temp_dir().join(common::unique_namespace("elect_writer"));
    std::fs::create_dir_all(&dir).unwrap();
    let resource = dir.join("resource");
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "lock_holder", "--nocapture", "--test-threads=1"])
        .env("ELECT_LOCK_HOLDER", &resource)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(holder.stdout.take().unwrap());
    let held = (&mut stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.ends_with("holding"));
    assert!(held, "the holder did not take the lock");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = resource.clone();
    std::thread::spawn(move || tx.send(fenced_write(&path, 7)));
    let taken = rx.recv_timeout(Duration::from_secs(10));
    assert_eq!(
        taken,
        Ok(true),
        "a write after the killed writer was not taken within 10 s"
    );
    assert!(!fenced_write(&resource, 6), "a lower fence is refused");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One candidate: its `lockstore elect` process and what it printed (with when, on the
/// monotonic clock).
struct Candidate {
    id: String,
    child: Child,
    lines: Arc<Mutex<Vec<(u64, String)>>>,
}

impl Candidate {
    fn start(id: &str, url: &str, ns: &str, log: &Path, resource: &Path) -> Self {
        let me = std::env::current_exe().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_lockstore"))
            .args(["elect", "--store", url, "--namespace", ns, "--ttl", "1s"])
            .args([
                "--candidate",
                id,
                "--metadata",
                &format!("{id}.internal:8080"),
                NAME,
            ])
            .arg("--")
            .arg(me)
            .args(["--exact", "elect_worker", "--nocapture", "--test-threads=1"])
            .env(
                "ELECT_WORKER",
                format!("{}|{}", log.display(), resource.display()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push((mono_ms(), line));
            }
        });
        Candidate {
            id: id.to_owned(),
            child,
            lines,
        }
    }

    fn pid(&self) -> rustix::process::Pid {
        rustix::process::Pid::from_child(&self.child)
    }

    fn printed(&self, text: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|(_, l)| l.contains(text))
    }

    /// What it printed so far, one line each.
    fn transcript(&self) -> String {
        let lines = self.lines.lock().unwrap();
        lines.iter().map(|(_, l)| format!("  {l}\n")).collect()
    }

    /// Sends it `SIGTERM` (leave the election) and expects it to exit 0.
    fn leave(&mut self, label: &str) {
        rustix::process::kill_process(self.pid(), rustix::process::Signal::TERM).unwrap();
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "{label}: {} exited {status:?}: {}",
            self.id,
            self.stderr()
        );
    }

    fn stderr(&self) -> String {
        let lines = self.lines.lock().unwrap();
        lines.iter().map(|(_, l)| format!("{l}\n")).collect()
    }
}

/// `pid` and every process below it (from /proc).
fn tree(pid: i32) -> Vec<i32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let parent = all[i];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(p) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split(' ').nth(1))
                .and_then(|s| s.parse::<i32>().ok());
            if ppid == Some(parent) && !all.contains(&p) {
                all.push(p);
            }
        }
        i += 1;
    }
    all
}

fn signal_tree(pid: i32, signal: rustix::process::Signal) {
    for p in tree(pid) {
        let _ = rustix::process::kill_process(rustix::process::Pid::from_raw(p).unwrap(), signal);
    }
}

/// A logged term.
#[derive(Debug, Clone)]
struct Term {
    who: String,
    fence: u64,
    start: u64,
    stop: Option<u64>,
    /// Writes: (when, taken).
    writes: Vec<(u64, bool)>,
}

fn read_terms(log: &Path) -> Vec<Term> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut terms: Vec<Term> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (who, fence, at) = (
            f[1].to_owned(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
        );
        match f[0] {
            "start" => terms.push(Term {
                who,
                fence,
                start: at,
                stop: None,
                writes: Vec::new(),
            }),
            "stop" => {
                if let Some(t) = terms.iter_mut().find(|t| t.fence == fence) {
                    t.stop = Some(at);
                }
            }
            _ => {
                if let Some(t) = terms.iter_mut().find(|t| t.fence == fence) {
                    t.writes.push((at, f[4] == "true"));
                }
            }
        }
    }
    terms.sort_by_key(|t| t.fence);
    terms
}

/// The checker (see the module's documentation). `killed`: fences whose leader was killed
/// with `SIGKILL` (no stop can be logged); `paused`: (fence, from, to) when a leader's tree
/// was stopped.
fn check(label: &str, terms: &[Term], killed: &[u64], paused: &[(u64, u64, u64)]) {
    for w in terms.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(
            a.fence < b.fence,
            "{label}: fences not increasing: {terms:#?}"
        );
        if killed.contains(&a.fence) {
            continue;
        }
        let stop = a
            .stop
            .unwrap_or_else(|| panic!("{label}: a term without a stop: {a:?}"));
        // Its belief, less the time it was stopped: it acted as the leader only before the
        // next term began (the stop comes first thing when it continues).
        let acted_until = match paused.iter().find(|(f, _, _)| *f == a.fence) {
            Some((_, from, _)) => (*from).min(stop),
            None => stop,
        };
        assert!(
            acted_until <= b.start,
            "{label}: terms overlap: {a:?} believed it led past {b:?}'s start"
        );
    }
    for t in terms {
        let believed_end = paused
            .iter()
            .find(|(f, _, _)| *f == t.fence)
            .map_or(t.stop.unwrap_or(u64::MAX), |(_, from, _)| *from);
        for (at, taken) in &t.writes {
            if *at < believed_end {
                assert!(
                    taken,
                    "{label}: a write of fence {} at {at} refused while it led: {terms:#?}",
                    t.fence
                );
            }
        }
    }
}

fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < within, "waited {within:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn leader_of(url: &str, ns: &str) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_lockstore"))
        .args(["leader", "--store", url, "--namespace", ns, "--json", NAME])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    json["leader"]["candidate"].as_str().map(str::to_owned)
}

fn election_on(label: &str, url: &str) {
    let ns = common::unique_namespace("elect");
    let _cleanup = common::Cleanup(|| common::uninstall(url, &ns));
    drop(Locks::open(url, &ns).unwrap());
    let dir = std::env::temp_dir().join(&ns);
    std::fs::create_dir_all(&dir).unwrap();
    let (log, resource) = (dir.join("terms.log"), dir.join("resource"));
    let mut all: Vec<Candidate> = ["c0", "c1", "c2"]
        .iter()
        .map(|id| Candidate::start(id, url, &ns, &log, &resource))
        .collect();
    let leading = |all: &[Candidate]| -> Option<String> {
        let terms = read_terms(&log);
        let last = terms.last()?;
        (last.stop.is_none() && all.iter().any(|c| c.id == last.who)).then(|| last.who.clone())
    };
    let first = wait_for("a first leader", Duration::from_secs(20), || leading(&all));
    assert_eq!(leader_of(url, &ns).as_deref(), Some(first.as_str()));

    // SIGKILL the leader: its guard kills its command; a follower leads within the TTL (plus
    // the store's look interval).
    let i = all.iter().position(|c| c.id == first).unwrap();
    let mut dead = all.remove(i);
    let killed_fence = read_terms(&log).last().unwrap().fence;
    let t0 = mono_ms();
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let second = wait_for("a leader after the kill", Duration::from_secs(20), || {
        leading(&all).filter(|w| *w != first)
    });
    let failover = read_terms(&log).last().unwrap().start - t0;
    assert!(
        failover < TTL_MS + 3_000,
        "{label}: failover after SIGKILL took {failover} ms"
    );

    // SIGSTOP the new leader's whole tree past its TTL: the third candidate leads; SIGCONT:
    // its lockstore stops its term first thing, and a write its command tries is refused by
    // fence.
    let j = all.iter().position(|c| c.id == second).unwrap();
    let paused_fence = read_terms(&log).last().unwrap().fence;
    let pid = all[j].pid().as_raw_nonzero().get();
    let from = mono_ms();
    signal_tree(pid, rustix::process::Signal::STOP);
    let third = wait_for(
        "a leader while one is stopped",
        Duration::from_secs(20),
        || {
            let terms = read_terms(&log);
            let last = terms.last()?;
            (last.fence > paused_fence).then(|| last.who.clone())
        },
    );
    std::thread::sleep(Duration::from_millis(300)); // the new leader writes meanwhile
    let to = mono_ms();
    signal_tree(pid, rustix::process::Signal::CONT);
    let said = |reason: &str| all[j].printed(&format!("(fence {paused_fence}): {reason}"));
    wait_for(
        "the stopped leader hears it",
        Duration::from_secs(20),
        || said("").then_some(()),
    );
    // Unrenewed: its own clock passed the stop instant; lost: an extension sent just before
    // the pause was answered first. Either way it stops before it writes again (its command,
    // stopped by its guard at that instant, returning first says nothing else).
    assert!(
        said("unrenewed") || said("lost"),
        "{label}: the paused leader stopped for another reason:\n{}",
        all[j].transcript()
    );
    let stopped = wait_for("its command stopped", Duration::from_secs(20), || {
        read_terms(&log)
            .into_iter()
            .find(|t| t.fence == paused_fence && t.stop.is_some())
    });
    // The resource refused every write it made after the next term wrote.
    let next_start = read_terms(&log)
        .into_iter()
        .find(|t| t.fence > paused_fence)
        .unwrap()
        .start;
    for (at, taken) in &stopped.writes {
        if *at > next_start + 100 {
            assert!(
                !taken,
                "{label}: a deposed leader's write was taken at {at}"
            );
        }
    }

    // SIGUSR1: the leader resigns; the next in line leads at once (one round trip). The deposed
    // candidate must be in line first: it rejoins only after its command stopped, and a
    // resignation while nobody waits hands the key back to the resigner.
    let deposed = all[j].id.clone();
    let locks = Locks::open(url, &ns).unwrap();
    wait_for(
        "the deposed candidate in line again",
        Duration::from_secs(20),
        || {
            let info = locks.inspect(NAME).ok()??;
            info.waiters
                .iter()
                .any(|w| w.owner == deposed)
                .then_some(())
        },
    );
    let k = all.iter().position(|c| c.id == third).unwrap();
    let before = read_terms(&log).last().unwrap().fence;
    let t1 = mono_ms();
    rustix::process::kill_process(all[k].pid(), rustix::process::Signal::USR1).unwrap();
    let handed = wait_for(
        "a leader after the resignation",
        Duration::from_secs(20),
        || {
            let terms = read_terms(&log);
            let last = terms.last()?;
            (last.fence > before).then(|| last.clone())
        },
    );
    assert_ne!(
        handed.who, third,
        "{label}: the next in line leads, not the resigner"
    );
    let resign_handover = handed.start - t1;
    assert!(
        resign_handover < 3_000,
        "{label}: the hand-off after a resignation took {resign_handover} ms"
    );

    // The others leave (SIGTERM): the one that stays leads.
    let stay = third.clone();
    for c in all.iter_mut().filter(|c| c.id != stay) {
        c.leave(label);
        // Its last line reaches the reader thread a little after its exit.
        wait_for(
            &format!("{}'s leaving line", c.id),
            Duration::from_secs(5),
            || c.printed("leaves").then_some(()),
        );
    }
    wait_for("the one that stays leads", Duration::from_secs(20), || {
        let terms = read_terms(&log);
        let last = terms.last()?;
        (last.who == stay && last.stop.is_none()).then_some(())
    });
    assert_eq!(leader_of(url, &ns).as_deref(), Some(stay.as_str()));
    for c in &mut all {
        let _ = rustix::process::kill_process(c.pid(), rustix::process::Signal::TERM);
        let _ = c.child.wait();
    }
    wait_for("no leader", Duration::from_secs(10), || {
        leader_of(url, &ns).is_none().then_some(())
    });
    let terms = read_terms(&log);
    check(label, &terms, &[killed_fence], &[(paused_fence, from, to)]);
    println!(
        "{label}: {} terms; failover after SIGKILL {failover} ms (ttl {TTL_MS} ms), after a resignation {resign_handover} ms",
        terms.len()
    );
}

#[test]
fn candidates_in_processes_on_every_store() {
    for (label, url) in common::store_urls() {
        if url.starts_with("memory:") {
            continue;
        }
        election_on(label, &url);
    }
}

/// A store server restarted under the candidates: a throwaway Redis, once stopped without
/// persistence (every record gone: the next terms start from an empty store) and once killed
/// with an append-only file synced at every write (the leader's record comes back). Each time
/// the leader, cut off, stops its term by its own clock; after the restart someone leads again,
/// and the checker holds over every term: fences increase (the fenced resource takes the new
/// leader's writes), terms do not overlap, every ended term has its stop.
#[cfg(feature = "redis")]
#[test]
fn candidates_ride_out_a_restart_of_their_store_server() {
    use common::redis_server::{Throwaway, AOF_ALWAYS, NO_PERSISTENCE};
    for (label, persistence, kill) in [
        ("redis restarted without persistence", NO_PERSISTENCE, false),
        ("redis killed with appendfsync always", AOF_ALWAYS, true),
    ] {
        let server = Throwaway::new(3, persistence);
        let url = server.url();
        let ns = common::unique_namespace("elect_restart");
        drop(Locks::open(&url, &ns).unwrap());
        let dir = std::env::temp_dir().join(&ns);
        std::fs::create_dir_all(&dir).unwrap();
        let (log, resource) = (dir.join("terms.log"), dir.join("resource"));
        let mut all: Vec<Candidate> = ["c0", "c1", "c2"]
            .iter()
            .map(|id| Candidate::start(id, &url, &ns, &log, &resource))
            .collect();
        let live = |terms: &[Term]| terms.last().filter(|t| t.stop.is_none()).cloned();
        let before = wait_for("a first leader", Duration::from_secs(20), || {
            live(&read_terms(&log))
        });
        // All three campaign before the server goes (a candidate still starting would find it
        // down: `lockstore elect` cannot open a store it cannot reach).
        let locks = Locks::open(&url, &ns).unwrap();
        wait_for("the other two in line", Duration::from_secs(20), || {
            let info = locks.inspect(NAME).ok()??;
            (info.waiters.len() == 2).then_some(())
        });
        drop(locks);
        if kill {
            server.kill();
        } else {
            server.shutdown();
        }
        // Down for more than a TTL: the leader cannot extend, and stops by its own clock.
        let down = mono_ms();
        std::thread::sleep(Duration::from_millis(TTL_MS + 300));
        server.start();
        let after = wait_for(
            "a leader after the restart",
            Duration::from_secs(20),
            || live(&read_terms(&log)).filter(|t| t.fence > before.fence && t.start > down),
        );
        // It writes, and the fenced resource takes its writes.
        wait_for("the new leader's writes", Duration::from_secs(10), || {
            let terms = read_terms(&log);
            let t = terms.iter().find(|t| t.fence == after.fence)?;
            t.writes.iter().any(|(_, taken)| *taken).then_some(())
        });
        for c in &mut all {
            c.leave(label);
        }
        let terms = read_terms(&log);
        let first = terms.iter().find(|t| t.fence == before.fence).unwrap();
        assert!(
            first.stop.is_some_and(|stop| stop < down + TTL_MS),
            "{label}: the cut-off leader stopped by its own clock: {terms:#?}"
        );
        check(label, &terms, &[], &[]);
        println!("{label}: {} terms", terms.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `lockstore elect` started while its store's server is down (a replica and its Redis
/// restarted together) waits for it instead of exiting: it says so once, campaigns once the
/// server answers, and leads; a `SIGTERM` while it waits for the server leaves at once, exit 0.
#[cfg(feature = "redis")]
#[test]
fn elect_rides_out_a_store_that_is_down_at_its_start() {
    use common::redis_server::{Throwaway, NO_PERSISTENCE};
    let server = Throwaway::new(1, NO_PERSISTENCE);
    let url = server.url();
    let ns = common::unique_namespace("elect_down");
    server.shutdown();
    let spawn = || {
        let mut elect = Command::new(env!("CARGO_BIN_EXE_lockstore"))
            .args(["elect", "--store", &url, "--namespace", &ns, "--ttl", "1s"])
            .args(["--candidate", "patient", NAME])
            .args(["--", "sh", "-c", "while :; do sleep 0.05; done"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(elect.stderr.take().unwrap());
        (elect, stderr.lines().map_while(Result::ok))
    };
    let term = |elect: &std::process::Child| {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(elect),
            rustix::process::Signal::TERM,
        )
        .unwrap();
    };
    // Left while it waits for the server.
    let (mut elect, mut lines) = spawn();
    let waiting = lines.next().unwrap_or_default();
    assert!(waiting.contains("campaigns once it answers"), "{waiting}");
    term(&elect);
    let rest: Vec<String> = lines.collect();
    assert!(elect.wait().unwrap().success(), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("leaves")), "{rest:?}");
    // Leads once the server is back.
    let (mut elect, mut lines) = spawn();
    let waiting = lines.next().unwrap_or_default();
    assert!(waiting.contains("campaigns once it answers"), "{waiting}");
    server.start();
    let led = lines.find(|l| l.contains(" leads "));
    assert!(led.is_some(), "it never led");
    assert_eq!(leader_of(&url, &ns).as_deref(), Some("patient"));
    term(&elect);
    let rest: Vec<String> = lines.collect();
    assert!(elect.wait().unwrap().success(), "{rest:?}");
    assert_eq!(leader_of(&url, &ns), None);
}

/// A fresh SQLite file's URL and a namespace, for the CLI tests below.
fn sqlite_store(prefix: &str) -> (std::path::PathBuf, String, String) {
    let ns = common::unique_namespace(prefix);
    let dir = std::env::temp_dir().join(&ns);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("locks.db").display());
    (dir, url, ns)
}

/// A stop right after a term's start (here a resignation sent the moment `lockstore` says it
/// leads, before its guard has started the command) reaches the command: it ends by `SIGTERM`,
/// not by `SIGKILL` after the grace (before the guard was waited for, the `SIGTERM` found a
/// tree without the command: seen in CI as a term whose command never logged its stop, after
/// a store restart made a grant arrive just before its stop instant). Five terms in a row.
#[test]
fn elect_stop_right_after_the_start_reaches_the_command() {
    let (dir, url, ns) = sqlite_store("elect_early_stop");
    for round in 0..5 {
        let mut elect = Command::new(env!("CARGO_BIN_EXE_lockstore"))
            .args(["elect", "--store", &url, "--namespace", &ns, "--ttl", "10s"])
            .args(["--grace", "5s", "--once", "--candidate", "early", NAME])
            .args(["--", "sh", "-c", "while :; do sleep 0.05; done"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(elect.stderr.take().unwrap());
        let mut printed = String::new();
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap() > 0 {
            printed.push_str(&line);
            if line.contains(" leads ") {
                break;
            }
            line.clear();
        }
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&elect),
            rustix::process::Signal::USR1,
        )
        .unwrap();
        std::io::Read::read_to_string(&mut stderr, &mut printed).unwrap();
        let status = elect.wait().unwrap();
        assert!(status.success(), "round {round}: {status:?}: {printed}");
        assert!(
            printed.contains("resigned"),
            "round {round}: no resignation: {printed}"
        );
        assert!(
            !printed.contains("SIGKILL"),
            "round {round}: the SIGTERM missed the command: {printed}"
        );
    }
    assert_eq!(leader_of(&url, &ns), None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lockstore elect` with a command that ignores `SIGTERM`: at its stop (a resignation) the
/// command gets `SIGTERM`, then `SIGKILL` once `--grace` has passed; the lease is released only
/// then, and with `--once` `lockstore` exits 0 with nothing left running.
#[test]
fn elect_kills_a_command_that_ignores_its_stop_after_the_grace() {
    let (dir, url, ns) = sqlite_store("elect_grace");
    let pid_file = dir.join("pid");
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 0.05; done",
        pid_file.display()
    );
    let mut elect = Command::new(env!("CARGO_BIN_EXE_lockstore"))
        .args(["elect", "--store", &url, "--namespace", &ns, "--ttl", "2s"])
        .args([
            "--grace",
            "300ms",
            "--once",
            "--candidate",
            "stubborn",
            NAME,
        ])
        .args(["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let command: i32 = wait_for("the command", Duration::from_secs(20), || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    assert_eq!(leader_of(&url, &ns).as_deref(), Some("stubborn"));
    let resigned = std::time::Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&elect),
        rustix::process::Signal::USR1,
    )
    .unwrap();
    let status = wait_for("lockstore to exit", Duration::from_secs(20), || {
        elect.try_wait().unwrap()
    });
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut elect.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(
        resigned.elapsed() >= Duration::from_millis(300),
        "released before the grace: {stderr}"
    );
    assert!(
        stderr.contains("did not stop within the grace: SIGKILL"),
        "{stderr}"
    );
    let gone = rustix::process::Pid::from_raw(command)
        .is_none_or(|pid| rustix::process::test_kill_process(pid).is_err());
    assert!(gone, "the command {command} still runs: {stderr}");
    assert_eq!(leader_of(&url, &ns), None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lockstore leader --watch --json` prints one line per change: each new term (with its
/// candidate, a higher fence and since when it leads) and "no leader" between them.
#[test]
fn leader_watch_prints_each_term_once() {
    let (dir, url, ns) = sqlite_store("elect_watch");
    let locks = Locks::open(&url, &ns).unwrap();
    // The namespace exists (a watcher of one that does not prints nothing until it does).
    locks
        .try_acquire("other", "x", Duration::from_secs(1))
        .unwrap()
        .release()
        .unwrap();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_lockstore"))
        .args(["leader", "--store", &url, "--namespace", &ns, "--json"])
        .args(["--watch", "--every", "20ms", NAME])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<serde_json::Value>::new()));
    let sink = Arc::clone(&lines);
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock()
                .unwrap()
                .push(serde_json::from_str(&line).unwrap());
        }
    });
    let seen = |n: usize| {
        wait_for(&format!("{n} lines"), Duration::from_secs(10), || {
            (lines.lock().unwrap().len() >= n).then_some(())
        });
        // Looked at many times since: still no other line.
        std::thread::sleep(Duration::from_millis(200));
    };
    seen(1);
    let ttl = Duration::from_secs(30);
    let a = locks.try_acquire(NAME, "a", ttl).unwrap();
    seen(2);
    a.extend(ttl).unwrap(); // the same term: no line
    std::thread::sleep(Duration::from_millis(200));
    a.release().unwrap();
    seen(3);
    let b = locks.try_acquire(NAME, "b", ttl).unwrap();
    seen(4);
    let _ = watch.kill();
    let _ = watch.wait();
    let lines = lines.lock().unwrap().clone();
    let leaders: Vec<Option<(String, u64)>> = lines
        .iter()
        .map(|l| {
            let leader = &l["leader"];
            leader["candidate"]
                .as_str()
                .map(|c| (c.to_owned(), leader["fence"].as_u64().unwrap()))
        })
        .collect();
    assert_eq!(
        leaders,
        vec![
            None,
            Some(("a".to_owned(), a.fence().0)),
            None,
            Some(("b".to_owned(), b.fence().0)),
        ],
        "{lines:?}"
    );
    assert!(b.fence() > a.fence());
    // Each term says since when it leads: its lease's grant, `ttl` before the deadline the
    // watcher saw first (a fresh grant), later for the later term.
    let since = |line: &serde_json::Value| {
        let leader = &line["leader"];
        let since = leader["since_ms"].as_u64().expect("since_ms");
        assert!(
            leader["since"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{line}"
        );
        assert_eq!(
            leader["deadline_ms"].as_u64().unwrap() - since,
            ttl.as_millis() as u64,
            "{line}"
        );
        since
    };
    assert!(since(&lines[1]) <= since(&lines[3]), "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A body's term as it saw it: who, its fence, why it stopped.
type Seen = (String, Fence, Option<StopReason>);

/// `Election::run` in one process: two candidates on threads; the first leads, resigns, and
/// the second leads at once with a higher fence; shut down, both return.
#[test]
fn election_run_with_threads() {
    let locks = Locks::open("memory:", "elect_threads").unwrap();
    let options = CampaignOptions::new(Duration::from_millis(TTL_MS).into());
    let a = Election::new(&locks, NAME, "a", options).unwrap();
    let b = Election::new(&locks, NAME, "b", options).unwrap();
    let (ca, cb) = (a.control(), b.control());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    std::thread::scope(|s| {
        // A failed assertion below shuts both campaigns down as it unwinds: a failure, not a
        // scope waiting for their threads forever.
        let _leave = ShutDownOnDrop(vec![ca.clone(), cb.clone()]);
        for (e, who) in [(&a, "a"), (&b, "b")] {
            let seen = Arc::clone(&seen);
            s.spawn(move || {
                e.run(|term| {
                    seen.lock()
                        .unwrap()
                        .push((who.to_owned(), term.fence(), None));
                    let stop = loop {
                        if let Some(r) = term.wait_stop(Duration::from_millis(20)) {
                            break r;
                        }
                    };
                    seen.lock()
                        .unwrap()
                        .push((who.to_owned(), term.fence(), Some(stop)));
                })
                .unwrap()
            });
            std::thread::sleep(Duration::from_millis(100));
        }
        let leader = wait_for("a leads", Duration::from_secs(5), || {
            locks.leader(NAME).unwrap().filter(|l| l.candidate == "a")
        });
        std::thread::sleep(Duration::from_millis(1_500)); // extended past its TTL
        let still = locks.leader(NAME).unwrap().unwrap();
        assert_eq!(still.fence, leader.fence);
        // Its extensions keep since when it leads.
        assert!(leader.since.is_some());
        assert_eq!(still.since, leader.since);
        ca.resign();
        let next = wait_for("b leads", Duration::from_secs(5), || {
            locks.leader(NAME).unwrap().filter(|l| l.candidate == "b")
        });
        assert!(next.fence > leader.fence);
        // b leads since the hand-off, after a's 1.5 s and more.
        assert!(next.since >= leader.since.map(|s| s + lock_core::Duration(1_500)));
        // Shut down once b's body runs: a grant heard after a shut-down starts no term.
        wait_for("b's body", Duration::from_secs(5), || {
            (seen.lock().unwrap().iter())
                .any(|t| t.0 == "b" && t.2.is_none())
                .then_some(())
        });
        ca.shut_down();
        cb.shut_down();
    });
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!((seen[0].0.as_str(), seen[0].2), ("a", None));
    assert_eq!(seen[1], ("a".into(), seen[0].1, Some(StopReason::Resigned)));
    assert_eq!((seen[2].0.as_str(), seen[2].2), ("b", None));
    assert_eq!(seen[3], ("b".into(), seen[2].1, Some(StopReason::ShutDown)));
    assert!(locks.leader(NAME).unwrap().is_none());
}

/// A replica killed while it waited in line restarts under the same candidate id: its old
/// place (a `lockstore run` waiting as that owner, `SIGKILL`ed) is still in the store for up to
/// the wait keep-alive, so the new campaign's first ask is answered "already waiting". The
/// campaign asks again after its retry pause instead of failing (it did fail, with
/// `Error::AlreadyWaiting`), and leads once the holder leaves. On every store processes share.
#[test]
fn a_candidate_restarted_under_the_id_it_died_waiting_with_still_campaigns() {
    for (label, url) in common::store_urls() {
        if url.starts_with("memory:") {
            continue;
        }
        let ns = common::unique_namespace("elect_stale");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let locks = Locks::open(&url, &ns).unwrap();
        let held = (locks.acquire(NAME, "x", Duration::from_secs(30), Duration::ZERO)).unwrap();
        let mut waiting = Command::new(env!("CARGO_BIN_EXE_lockstore"))
            .args(["run", "--store", &url, "--namespace", &ns, "--key", NAME])
            .args([
                "--ttl", "30s", "--wait", "60s", "--owner", "b", "--", "true",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let in_line = |locks: &Locks| {
            let info = locks.inspect(NAME).unwrap()?;
            info.waiters.iter().any(|w| w.owner == "b").then_some(())
        };
        wait_for("b in line", Duration::from_secs(10), || in_line(&locks));
        waiting.kill().unwrap();
        waiting.wait().unwrap();
        assert!(in_line(&locks).is_some(), "{label}: its place outlives it");
        let options = CampaignOptions::new(Duration::from_millis(TTL_MS).into());
        let b = Election::new(&locks, NAME, "b", options).unwrap();
        let control = b.control();
        let body_fence: Mutex<Option<Fence>> = Mutex::new(None);
        let led = std::thread::scope(|s| {
            let _leave = ShutDownOnDrop(vec![control.clone()]);
            let run = s.spawn(|| {
                b.run(|term| {
                    *body_fence.lock().unwrap() = Some(term.fence());
                    while term.wait_stop(Duration::from_millis(20)).is_none() {}
                })
            });
            // Its first ask meets its old place; the holder leaves a little later.
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                !run.is_finished(),
                "{label}: the campaign ended: {:?}",
                run.join()
            );
            held.release().unwrap();
            // Its body runs (the store's leader may be "b" before that: its old place, handed
            // the key, which the campaign then finds already its own).
            let fence = wait_for("b's body", Duration::from_secs(10), || {
                *body_fence.lock().unwrap()
            });
            let leader = locks.leader(NAME).unwrap().unwrap();
            assert_eq!(
                (leader.candidate.as_str(), leader.fence),
                ("b", fence),
                "{label}"
            );
            assert!(fence > Fence(1), "{label}: {leader:?}");
            control.shut_down();
            run.join().unwrap()
        });
        assert_eq!(led.unwrap_or_else(|e| panic!("{label}: {e}")), 1, "{label}");
        assert!(locks.leader(NAME).unwrap().is_none(), "{label}");
    }
}

/// Shuts these campaigns down when dropped, also while a failed assertion unwinds.
struct ShutDownOnDrop(Vec<Control>);

impl Drop for ShutDownOnDrop {
    fn drop(&mut self) {
        self.0.iter().for_each(Control::shut_down);
    }
}

/// A gray failure: the leader's path to the store goes silent (a proxy that forwards nothing
/// and keeps its connections open). Its extensions hang, yet its stop signal fires a margin
/// before its lease's end on its own clock, and its command has stopped before the next leader
/// starts: the believed intervals do not overlap.
#[test]
fn a_leader_cut_off_from_its_store_stops_before_the_next_leads() {
    for (label, url) in common::server_urls() {
        if url.starts_with("memory:") {
            continue;
        }
        let ns = common::unique_namespace("elect_gray");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        drop(Locks::open(&url, &ns).unwrap());
        let dir = std::env::temp_dir().join(&ns);
        std::fs::create_dir_all(&dir).unwrap();
        let (log, resource) = (dir.join("terms.log"), dir.join("resource"));
        let proxy = common::proxy::Proxy::for_url(&url);
        let mut cut = Candidate::start("cut", &proxy.url(&url), &ns, &log, &resource);
        wait_for(
            "the proxied candidate leads",
            Duration::from_secs(20),
            || {
                read_terms(&log)
                    .last()
                    .filter(|t| t.who == "cut")
                    .map(|_| ())
            },
        );
        let mut other = Candidate::start("other", &url, &ns, &log, &resource);
        std::thread::sleep(Duration::from_millis(500));
        proxy.set(common::proxy::Fault::Blackhole);
        let next = wait_for("the other leads", Duration::from_secs(20), || {
            read_terms(&log).into_iter().find(|t| t.who == "other")
        });
        let terms = read_terms(&log);
        let first = &terms[0];
        let stop = first
            .stop
            .unwrap_or_else(|| panic!("{label}: no stop: {terms:#?}"));
        assert_eq!(first.who, "cut");
        assert!(
            cut.printed(&format!("(fence {}): unrenewed", first.fence)),
            "{label}: {}",
            cut.stderr()
        );
        assert!(
            stop < next.start,
            "{label}: the cut-off leader stopped at {stop}, after the next began at {}",
            next.start
        );
        check(label, &terms, &[], &[]);
        for c in [&mut cut, &mut other] {
            let _ = rustix::process::kill_process(c.pid(), rustix::process::Signal::TERM);
        }
        proxy.set(common::proxy::Fault::None);
        proxy.reset();
        for c in [&mut cut, &mut other] {
            let _ = c.child.wait();
        }
        println!(
            "{label}: cut off; stopped {} ms before the next leader began",
            next.start - stop
        );
    }
}
