//! The crash loop: a child process holding leases with persistence is killed with `SIGKILL` at
//! random points (saves every millisecond in some rounds, so kills land mid-save) and restarted,
//! again and again. Checked across every round: no fencing token is ever handed out twice, every
//! lease saved before the kill is there after it, and no lease the child got is one the table
//! does not hold.
//!
//! `LOCK_CRASH_ROUNDS` sets the number of rounds (default 12, a minute or so in a debug build).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use host_wasmtime::LockHost;

mod common;
use common::{env_number, Rng};

const CHILD_ENV: &str = "LOCK_CRASH_CHILD";

/// The child's work (runs only when spawned by the parent test, with `CHILD_ENV` set): grants
/// on 40 keys as fast as it can, some leases held for an hour, the rest short and released or
/// dropped; every grant checked against the table and reported on stdout before the next.
#[test]
#[ignore = "the crash loop's child process; run by crash_loop_never_reissues_a_fence"]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, '|');
    let (path, interval, round) = (
        parts.next().unwrap().to_owned(),
        parts.next().unwrap().parse::<u64>().unwrap(),
        parts.next().unwrap().to_owned(),
    );
    let host = LockHost::builder()
        .persist_to(&path, Duration::from_millis(interval))
        .build()
        .unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").unwrap();
    let mut rng = Rng(u64::from(std::process::id()) | 1);
    // Never outlive a parent that failed before killing us.
    let started = std::time::Instant::now();
    for i in 0u64.. {
        if started.elapsed() > Duration::from_secs(300) {
            return;
        }
        let key = format!("k{}", rng.below(40));
        let owner = format!("r{round}-{i}");
        let long = rng.below(8) == 0;
        let ttl = Duration::from_millis(if long { 3_600_000 } else { 5 + rng.below(40) });
        let Ok(lease) = host.try_acquire(&key, &owner, ttl) else {
            continue;
        };
        match host.inspect(&key) {
            Ok(Some(info))
                if info.holder().unwrap().owner == owner
                    && info.holder().unwrap().fence.0 == lease.fence().0 => {}
            other => writeln!(
                out,
                "VIOLATION {key} {owner} {} table: {other:?}",
                lease.fence().0
            )
            .unwrap(),
        }
        writeln!(
            out,
            "GRANT {key} {owner} {} {}",
            lease.fence().0,
            u8::from(long)
        )
        .unwrap();
        out.flush().unwrap();
        if long {
            std::mem::forget(lease);
        } else if rng.below(2) == 0 {
            let _ = lease.release();
        } else {
            std::thread::sleep(Duration::from_millis(rng.below(3)));
            drop(lease);
        }
        if i % 25 == 24 {
            host.save().unwrap();
            writeln!(out, "SAVED").unwrap();
            out.flush().unwrap();
        }
    }
}

/// A child process that is killed if the test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn crash_loop_never_reissues_a_fence() {
    let rounds = env_number("LOCK_CRASH_ROUNDS", 12);
    let dir = std::env::temp_dir().join(format!("lockhost-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("table.lock");
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ u64::from(std::process::id()));
    let mut issued: HashSet<u64> = HashSet::new();
    let mut max_fence = 0;
    // Long leases known to be in a completed save: key -> (owner, fence).
    let mut durable: HashMap<String, (String, u64)> = HashMap::new();
    let mut grants_total = 0;
    for round in 0..rounds {
        let interval = [1, 50, 1_000][usize::try_from(round % 3).unwrap()];
        let mut child = KillOnDrop(
            Command::new(&exe)
                .args([
                    "crash_child",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, format!("{}|{interval}|{round}", path.display()))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let stdout = BufReader::new(child.0.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait for the child to be up, then let it work for a random while and kill it.
        // (The test harness prints its own words first, on the same line.)
        while !rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the child starts")
            .ends_with("READY")
        {}
        std::thread::sleep(Duration::from_millis(20 + rng.below(400)));
        child.0.kill().unwrap(); // SIGKILL on Unix
        child.0.wait().unwrap();
        reader.join().unwrap();
        let mut pending: Vec<(String, String, u64)> = Vec::new();
        for line in rx.try_iter() {
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["GRANT", key, owner, fence, long] => {
                    let fence: u64 = fence.parse().unwrap();
                    assert!(
                        issued.insert(fence),
                        "round {round}: fence {fence} issued twice"
                    );
                    max_fence = max_fence.max(fence);
                    grants_total += 1;
                    if *long == "1" {
                        pending.push(((*key).to_owned(), (*owner).to_owned(), fence));
                    }
                }
                ["SAVED"] => {
                    for (key, owner, fence) in pending.drain(..) {
                        durable.insert(key, (owner, fence));
                    }
                }
                _ if line.starts_with("VIOLATION") => panic!("round {round}: {line}"),
                _ => {}
            }
        }
        // The restart, checked: the floor is above every token seen, saved leases are back.
        let host = LockHost::builder()
            .persist_to(&path, Duration::from_secs(3600))
            .build()
            .unwrap_or_else(|e| panic!("round {round}: restart failed: {e}"));
        let recovery = host.recovery().unwrap();
        assert!(
            recovery.fence_floor.0 >= max_fence,
            "round {round}: floor {} below issued {max_fence}",
            recovery.fence_floor.0
        );
        for (key, (owner, fence)) in &durable {
            let info = host.inspect(key).unwrap();
            assert_eq!(
                info.as_ref().map(|i| (
                    i.holder().unwrap().owner.as_str(),
                    i.holder().unwrap().fence.0
                )),
                Some((owner.as_str(), *fence)),
                "round {round}: saved lease on {key} lost"
            );
        }
        let probe = host
            .try_acquire(
                "parent-probe",
                &format!("p{round}"),
                Duration::from_millis(1),
            )
            .unwrap();
        assert!(
            issued.insert(probe.fence().0) && probe.fence().0 > max_fence,
            "round {round}"
        );
        max_fence = probe.fence().0;
        drop(probe);
        drop(host);
    }
    assert!(
        grants_total > rounds,
        "the children did work: {grants_total} grants"
    );
    eprintln!(
        "{rounds} crash rounds, {grants_total} grants, {} saved long leases",
        durable.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
