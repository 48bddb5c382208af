//! `lockstore run` and `lockstore elect` as an operator's supervisor meets them, on every store:
//! - `SIGTERM` while waiting in line, raced against the holder's release: `lockstore` leaves the
//!   line and exits 143; the key is never left handed to it;
//! - `lockstore` stopped alone (`SIGSTOP`) past the TTL: its guard stops the command before the
//!   next holder's command starts (one log file, appended in the order things happened);
//! - a fixed owner or candidate id reused (a second run beside the first, a candidate restarted
//!   within its TTL): never a second run or term on one fence;
//! - an operator's `SIGTERM` escalated to `SIGKILL` after `--grace`; a closed stderr never ends
//!   a campaign; `--bound`, and a prompt exit once a lost lease's command has stopped;
//! - a store recovering after a change of authority: a try exits 5 at once, naming the
//!   recovery's end; a run that may wait starts its command only after that end.
#[path = "../../lock-store/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lock_store::Locks;
use rustix::process::{kill_process, Pid, Signal};

const S: Duration = Duration::from_secs(1);

fn lockstore() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockstore"))
}

fn signal(child: &Child, signal: Signal) {
    kill_process(Pid::from_child(child), signal).unwrap();
}

/// A fresh namespace of each store, removed afterwards; `check(label, url, ns, dir)` with a
/// scratch directory of its own.
fn each_store(purpose: &str, check: impl Fn(&str, &str, &str, &Path)) {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace(purpose);
        let dir = std::env::temp_dir().join(format!("{ns}_{label}"));
        std::fs::create_dir_all(&dir).unwrap();
        let _cleanup = common::Cleanup(|| {
            common::uninstall(&url, &ns);
            let _ = std::fs::remove_dir_all(&dir);
        });
        check(label, &url, &ns, &dir);
    }
}

/// Waits until `f` answers true (`common::eventually`'s liveness margin).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    common::eventually(what, || f().then_some(()));
}

/// Whether `owner` waits in `key`'s line.
fn waits(locks: &Locks, key: &str, owner: &str) -> bool {
    (locks.inspect(key).unwrap()).is_some_and(|i| i.waiters.iter().any(|w| w.owner == owner))
}

/// The child's exit, waited for at most 20 s (then killed: a failure).
fn exit_of(mut child: Child, what: &str) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > 20 * S {
            let _ = child.kill();
            panic!("{what}: still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn sigterm_while_in_line_leaves_the_line_even_as_the_key_is_handed_over() {
    each_store("cli_giveup", |label, url, ns, dir| {
        let locks = Locks::open(url, ns).unwrap();
        let ran = dir.join("ran");
        for round in 0..6 {
            let key = format!("job{round}");
            let holder = locks.try_acquire(&key, "holder", 30 * S).unwrap();
            let waiter = lockstore()
                .args(["run", "--store", url, "--namespace", ns, "--key", &key])
                .args(["--owner", "waiter", "--ttl", "30s", "--wait", "30s", "--"])
                .args(["sh", "-c", &format!("echo ran >> {}", ran.display())])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            until("the waiter in line", || waits(&locks, &key, "waiter"));
            // The release and the signal land in either order, or together.
            match round % 3 {
                0 => {
                    signal(&waiter, Signal::TERM);
                    holder.release().unwrap();
                }
                1 => {
                    holder.release().unwrap();
                    signal(&waiter, Signal::TERM);
                }
                _ => {
                    let releasing = std::thread::spawn(move || holder.release());
                    signal(&waiter, Signal::TERM);
                    releasing.join().unwrap().unwrap();
                }
            }
            let out = exit_of(waiter, label);
            let stderr = String::from_utf8_lossy(&out.stderr);
            // 143: it gave up; 0 would mean it was handed the key and ran before the signal
            // came (then it released it).
            let gave_up = out.status.code() == Some(143);
            assert!(
                gave_up || out.status.code() == Some(0),
                "{label} round {round}: {out:?}"
            );
            if gave_up {
                assert!(
                    stderr.contains("left the line") || stderr.contains("released, not running"),
                    "{label}: {stderr}"
                );
            }
            // Nothing of the waiter is left: another owner takes the key now, not a TTL later.
            let next = locks.try_acquire(&key, "next", 30 * S);
            let next = next.unwrap_or_else(|e| {
                panic!(
                    "{label} round {round}: stranded ({e}): {:?}",
                    locks.inspect(&key)
                )
            });
            next.release().unwrap();
        }
        let runs = std::fs::read_to_string(&ran).unwrap_or_default();
        assert!(
            runs.lines().count() < 6,
            "{label}: no round gave up in time"
        );
    });
}

/// A command that logs to `log` every 20 ms with `tag` until `SIGTERM`, then logs
/// `<tag> stopped` and exits 7; `started` on stdout first.
fn logging_command(tag: &str, log: &Path) -> Vec<String> {
    let log = log.display();
    let script = format!(
        "trap 'echo {tag} stopped >> {log}; exit 7' TERM; echo started; \
         while :; do echo {tag} writes >> {log}; sleep 0.02; done"
    );
    vec!["sh".into(), "-c".into(), script]
}

/// Checks the shared log: `first` stopped before `second` started, and never wrote after.
fn stopped_before(log: &Path, first: &str, second: &str, label: &str) {
    let text = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let stopped = lines.iter().position(|l| *l == format!("{first} stopped"));
    let started = lines.iter().position(|l| l.starts_with(second));
    let (Some(stopped), Some(started)) = (stopped, started) else {
        panic!("{label}: {first} never stopped or {second} never started:\n{text}");
    };
    assert!(
        stopped < started,
        "{label}: {second} began before {first} had stopped:\n{text}"
    );
    assert!(
        !lines[started..].iter().any(|l| l.starts_with(first)),
        "{label}: {first} wrote after {second} began:\n{text}"
    );
}

#[test]
fn a_stopped_lockstore_run_cannot_keep_its_command_running_past_the_lease() {
    each_store("cli_pause_run", |label, url, ns, dir| {
        let log = dir.join("log");
        let mut first = lockstore()
            .args(["run", "--store", url, "--namespace", ns, "--key", "job"])
            .args(["--owner", "first", "--ttl", "1s", "--grace", "300ms", "--"])
            .args(logging_command("first", &log))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        common::wait_for_line(&mut first, "started");
        let locks = Locks::open(url, ns).unwrap();
        let second = lockstore()
            .args(["run", "--store", url, "--namespace", ns, "--key", "job"])
            .args(["--owner", "second", "--ttl", "1s", "--wait", "20s", "--"])
            .args([
                "sh",
                "-c",
                &format!("echo second began >> {}", log.display()),
            ])
            .spawn()
            .unwrap();
        until("the second in line", || waits(&locks, "job", "second"));
        // `lockstore` alone is stopped: its guard and its command go on.
        signal(&first, Signal::STOP);
        let out = exit_of(second, label);
        assert_eq!(out.status.code(), Some(0), "{label}: {out:?}");
        stopped_before(&log, "first", "second", label);
        signal(&first, Signal::CONT);
        let out = exit_of(first, label);
        assert_eq!(out.status.code(), Some(4), "{label}: lost: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no extension was heard of"),
            "{label}: {stderr}"
        );
    });
}

#[test]
fn a_stopped_lockstore_elect_cannot_keep_its_command_leading_past_the_lease() {
    each_store("cli_pause_elect", |label, url, ns, dir| {
        let log = dir.join("log");
        let elect = |id: &str| {
            lockstore()
                .args(["elect", "--store", url, "--namespace", ns, "--ttl", "1s"])
                .args(["--candidate", id, "sched", "--"])
                .args(logging_command(id, &log))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        };
        let mut a = elect("a");
        common::wait_for_line(&mut a, "started");
        let mut b = elect("b");
        let locks = Locks::open(url, ns).unwrap();
        until("b in line", || waits(&locks, "sched", "b"));
        signal(&a, Signal::STOP);
        common::wait_for_line(&mut b, "started");
        until("b's first write", || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains("b writes"))
        });
        stopped_before(&log, "a", "b", label);
        signal(&a, Signal::CONT);
        signal(&a, Signal::TERM);
        signal(&b, Signal::TERM);
        assert_eq!(exit_of(a, label).status.code(), Some(0), "{label}");
        assert_eq!(exit_of(b, label).status.code(), Some(0), "{label}");
    });
}

/// The fence a `lockstore` says it holds or leads with, from its stderr line.
fn fence_of(line: &str) -> Option<u64> {
    let (_, rest) = line.split_once("with fence ")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn one_owner_id_never_runs_twice_on_one_fence() {
    each_store("cli_same_id", |label, url, ns, _dir| {
        let mut first = lockstore()
            .args(["run", "--store", url, "--namespace", ns, "--key", "cron"])
            .args(["--owner", "nightly", "--ttl", "30s", "--"])
            .args(["sh", "-c", "echo started; sleep 30"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        common::wait_for_line(&mut first, "started");
        // An overlapping run with the same fixed owner: refused (exit 3), and it says why.
        let second = lockstore()
            .args(["run", "--store", url, "--namespace", ns, "--key", "cron"])
            .args(["--owner", "nightly", "--ttl", "30s", "--", "true"])
            .output()
            .unwrap();
        assert_eq!(second.status.code(), Some(3), "{label}: {second:?}");
        let said = String::from_utf8_lossy(&second.stderr);
        assert!(said.contains("held by this owner id"), "{label}: {said}");
        signal(&first, Signal::TERM);
        let _ = exit_of(first, label);
    });
}

#[test]
fn a_candidate_restarted_within_its_ttl_never_leads_on_its_old_fence() {
    each_store("cli_restart", |label, url, ns, _dir| {
        let start = || {
            lockstore()
                .args(["elect", "--store", url, "--namespace", ns, "--ttl", "2s"])
                .args(["--candidate", "replica-1", "sched", "--", "sleep", "60"])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let leads = |child: &mut Child| {
            let mut reader = BufReader::new(child.stderr.as_mut().unwrap());
            loop {
                let mut line = String::new();
                assert!(reader.read_line(&mut line).unwrap() > 0, "{label}: no lead");
                if line.contains(" leads ") {
                    return fence_of(&line).unwrap();
                }
            }
        };
        let mut old = start();
        let old_fence = leads(&mut old);
        // Killed (its guard takes the command with it) and restarted at once by a supervisor.
        signal(&old, Signal::KILL);
        let _ = old.wait();
        let mut new = start();
        // Not the old term's fence: it waited for that lease to end rather than take it over.
        let new_fence = leads(&mut new);
        assert!(
            new_fence > old_fence,
            "{label}: the restarted candidate led on fence {new_fence} (old {old_fence})"
        );
        signal(&new, Signal::TERM);
        assert_eq!(exit_of(new, label).status.code(), Some(0), "{label}");
    });
}

/// A SQLite file of the test's own.
fn sqlite(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("locks.db").display())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(common::unique_namespace(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn an_operators_sigterm_to_a_command_that_ignores_it_is_followed_by_sigkill_after_the_grace() {
    let dir = scratch("cli_escalate");
    let url = sqlite(&dir);
    let mut run = lockstore()
        .args(["run", "--store", &url, "--key", "job", "--ttl", "30s"])
        .args(["--grace", "300ms", "--", "sh", "-c"])
        .arg("trap '' TERM; echo started; while :; do sleep 0.02; done")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_line(&mut run, "started");
    signal(&run, Signal::TERM);
    let out = exit_of(run, "escalate");
    // 137: the command was killed (128 + SIGKILL), and the key released at once.
    assert_eq!(out.status.code(), Some(137), "{out:?}");
    let locks = Locks::open(&url, "default").unwrap();
    assert_eq!(locks.inspect("job").unwrap(), None);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_closed_stderr_never_ends_a_campaign() {
    let dir = scratch("cli_stderr");
    let url = sqlite(&dir);
    let mut elect = lockstore()
        .args(["elect", "--store", &url, "--ttl", "1s", "--candidate", "c"])
        .args(["sched", "--", "sh", "-c", "echo started; sleep 60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_line(&mut elect, "started");
    // Its supervisor's pipe goes away; then it has things to say (a resignation, a new term).
    drop(elect.stderr.take());
    signal(&elect, Signal::USR1);
    common::wait_for_line(&mut elect, "started");
    signal(&elect, Signal::TERM);
    let out = exit_of(elect, "stderr");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bound_limits_each_store_call_and_a_lost_run_exits_once_its_command_stopped() {
    for (label, url) in common::server_urls() {
        let ns = common::unique_namespace("cli_bound");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        drop(lock_store::store::open(&url, &ns, lock_store::store::DEFAULT_BOUND).unwrap());
        let proxy = common::proxy::Proxy::for_url(&url);
        let through = proxy.url(&url);
        let mut run = lockstore()
            .args([
                "run",
                "--store",
                &through,
                "--namespace",
                &ns,
                "--key",
                "job",
            ])
            .args(["--ttl", "1s", "--bound", "10s", "--grace", "0s", "--"])
            .args(["sh", "-c", "echo started; sleep 60"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        common::wait_for_line(&mut run, "started");
        // The path goes silent: extensions get no answer; the lease ends on lockstore's clock.
        proxy.set(common::proxy::Fault::Blackhole);
        let silent = Instant::now();
        let mut run = run;
        while run.try_wait().unwrap().is_none() {
            // Not a timing: the lease (1 s) and less than one call's bound (10 s) is the most a
            // `lockstore` that does not wait on the silent store can take; one that releases
            // after the loss waits for the extension in flight and then its release, each up
            // to the bound.
            assert!(
                silent.elapsed() < 11 * S,
                "{label}: lockstore waited on the silent store after its command stopped"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = run.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{label}: {out:?}");
        proxy.set(common::proxy::Fault::None);
        // A bad value of --bound is a usage error.
        let bad = lockstore()
            .args(["inspect", "--store", &url, "--bound", "soon", "job"])
            .output()
            .unwrap();
        assert_eq!(bad.status.code(), Some(2), "{label}: {bad:?}");
    }
}

/// A store that took over a namespace (a failover: docs/stores.md, "Recovery after a change of
/// authority") grants nothing while a lease written before may live: `lockstore run --wait 0`
/// exits 5 at once and says until when, without running its command; `lockstore run --wait 10s`
/// waits the recovery out and runs its command after its end (the store's clock is this
/// machine's). On Redis: the recovery is the client protocol's, the same on every store
/// (`lock-store/tests/recovery.rs` runs the three), and the take-over is written behind the
/// CLI's back with a Redis command.
#[cfg(feature = "redis")]
#[test]
fn a_recovering_store_refuses_a_try_and_a_waiting_run_starts_after_it() {
    let url = common::redis_url();
    let ns = common::unique_namespace("cli_recovery");
    let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
    let run = |key: &str, wait: &str, command: &[&str]| {
        let mut cmd = lockstore();
        cmd.args(["run", "--store", &url, "--namespace", &ns, "--key", key])
            .args(["--ttl", "2s", "--wait", wait, "--"])
            .args(command);
        cmd.output().unwrap()
    };
    // A lease of 2 s written (and released): a new authority recovers for as long.
    assert!(run("kept", "0", &["true"]).status.success());
    let mut admin = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("HSET")
        .arg(format!("{{el:{ns}}}:authority"))
        .arg("id")
        .arg("another server")
        .query::<()>(&mut admin)
        .unwrap();
    let marker = std::env::temp_dir().join(format!("{ns}.ran"));
    let touch = format!("touch {}", marker.display());
    let tried = run("free", "0", &["sh", "-c", &touch]);
    let said = String::from_utf8_lossy(&tried.stderr).into_owned();
    assert_eq!(tried.status.code(), Some(5), "{said}");
    assert!(!marker.exists(), "the command ran during the recovery");
    let until: u64 = said
        .split_once("(until ")
        .and_then(|(_, rest)| rest.split_once(" ms"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no recovery's end in {said:?}"));
    let waited = run("free", "10s", &["sh", "-c", "date +%s%3N"]);
    assert_eq!(
        waited.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    let started: u64 = String::from_utf8_lossy(&waited.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(
        started >= until,
        "the command started at {started} ms, the recovery ended at {until} ms"
    );
}
