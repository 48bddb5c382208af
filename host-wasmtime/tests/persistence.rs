//! Persistence: what survives a restart, what a crash cannot break (fencing tokens, the clock),
//! and how bad files and unwritable places are refused, naming the file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use host_wasmtime::{Error, LockHost, ManualClock, SandboxLimits, FENCE_BLOCK};
use lock_core::LockError;
use lock_core::{Fence, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;
const HOUR: Duration = Duration::from_secs(3600);

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockhost-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn persisted(path: &Path, clock: &ManualClock) -> Result<LockHost, Error> {
    LockHost::builder()
        .clock(clock.clone())
        .persist_to(path, HOUR)
        .build()
}

/// Ends a host the way `kill -9` does: no shutdown save, no release. The timer thread is left
/// running with the host's state (as it would have been until the kill), but the path is not
/// used by it again unless a renewal falls due, which an idle manual clock never makes due.
fn crash(host: LockHost) {
    std::mem::forget(host);
}

#[test]
fn a_restart_keeps_leases_and_never_reuses_a_fence() {
    let dir = scratch("round-trip");
    let path = dir.join("table.lock");
    let clock = ManualClock::at(1_000);
    let host = persisted(&path, &clock).unwrap();
    let lease = host.try_acquire("job", "a", MS(60_000)).unwrap();
    assert_eq!(lease.fence(), Fence(1));
    host.save().unwrap();
    std::mem::forget(lease);
    drop(host);

    let host = persisted(&path, &clock).unwrap();
    let recovery = host.recovery().unwrap();
    assert!(recovery.loaded);
    assert_eq!(recovery.leases, 1);
    let info = host.inspect("job").unwrap().expect("the lease survived");
    assert_eq!(
        (
            info.holder().unwrap().owner.as_str(),
            info.holder().unwrap().fence.0,
            info.holder().unwrap().deadline.0
        ),
        ("a", 1, 61_000)
    );
    assert_eq!(
        host.try_acquire("job", "b", MS(10)).unwrap_err(),
        Error::Lock(LockError::Held {
            deadline: Instant(61_000)
        })
    );
    assert!(host.try_acquire("other", "b", MS(10)).unwrap().fence().0 > 1);
}

/// Issue 9, defect 1: grants after the last save used to be issued again after a crash (the
/// first save, at start, held an empty table: a crash in the first interval restarted at 1).
#[test]
fn fences_issued_after_the_last_save_are_never_issued_again_after_a_crash() {
    let dir = scratch("crash-fences");
    let path = dir.join("table.lock");
    let clock = ManualClock::at(10_000);
    let mut issued = Vec::new();
    for round in 0..5 {
        let host = persisted(&path, &clock).unwrap();
        if round > 0 {
            let floor = host.recovery().unwrap().fence_floor.0;
            assert!(floor >= *issued.iter().max().unwrap(), "round {round}");
        }
        for i in 0..50 {
            let lease = host.try_acquire(&format!("k{i}"), "w", MS(5)).unwrap();
            issued.push(lease.fence().0);
            lease.release().unwrap();
            clock.advance(1);
        }
        // No save at all in this run: the crash loses every grant's table state.
        crash(host);
    }
    let mut sorted = issued.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), issued.len(), "a fence was issued twice");
    assert!(issued.windows(2).all(|w| w[0] < w[1]));
}

/// A block of tokens runs out mid-run: the next block is reserved before a token beyond it is
/// handed out, so even a crash right after is safe.
#[test]
fn running_past_a_reserved_block_reserves_the_next_one_first() {
    let dir = scratch("block");
    let path = dir.join("table.lock");
    let clock = ManualClock::at(10_000);
    let host = persisted(&path, &clock).unwrap();
    let n = FENCE_BLOCK + 10;
    let mut last = 0;
    for _ in 0..n {
        let lease = host.try_acquire("k", "w", MS(5)).unwrap();
        last = lease.fence().0;
        lease.release().unwrap();
    }
    assert_eq!(last, n);
    crash(host);
    let host = persisted(&path, &clock).unwrap();
    let floor = host.recovery().unwrap().fence_floor.0;
    assert!(floor >= n, "{floor} < {n}");
    let fence = host.try_acquire("another", "w2", MS(5)).unwrap().fence().0;
    assert!(fence > floor, "{fence} <= {floor}");
}

/// The clock continues from the reservation: a restarted host never reads a time below one the
/// previous run used, even when its table file is old.
#[test]
fn the_restarted_clock_is_never_behind_the_previous_run() {
    let dir = scratch("clock");
    let path = dir.join("table.lock");
    let host = LockHost::builder().persist_to(&path, HOUR).build().unwrap();
    host.save().unwrap();
    // Time passes in the first run (the real clock); the reservation follows it.
    std::thread::sleep(MS(50));
    let lease = host.try_acquire("k", "a", MS(10_000)).unwrap();
    let promised = lease.deadline().0;
    let used = host.now().0;
    std::mem::forget(lease);
    crash(host);
    let host = LockHost::builder().persist_to(&path, HOUR).build().unwrap();
    assert!(host.now().0 >= used, "{} < {used}", host.now().0);
    let lease = host.try_acquire("fresh", "b", MS(10_000)).unwrap();
    assert!(lease.deadline().0 >= promised);
}

/// The same when the wall clock stepped back while the host was down, so the downtime it
/// measures is zero: without the clock reservation the host would resume at its last save's
/// clock, behind readings it had already used.
#[test]
fn a_wall_clock_stepped_back_never_turns_the_restarted_clock_back() {
    let dir = scratch("clock-step");
    let path = dir.join("table.lock");
    let host = LockHost::builder().persist_to(&path, HOUR).build().unwrap();
    host.save().unwrap();
    std::thread::sleep(MS(200));
    let used = host.try_acquire("k", "a", MS(10_000)).map(|l| {
        let used = host.now().0;
        std::mem::forget(l);
        used
    });
    let used = used.unwrap();
    crash(host);
    // Move the save an hour into the future of this machine's wall clock (within the day a
    // restart tolerates) and re-seal the file: the host now measures no downtime at all.
    let mut bytes = std::fs::read(&path).unwrap();
    let wall = u64::from_le_bytes(bytes[10..18].try_into().unwrap()) + 3_600_000;
    bytes[10..18].copy_from_slice(&wall.to_le_bytes());
    let body = bytes.len() - 4;
    let crc = lock_core::crc32(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let host = LockHost::builder().persist_to(&path, HOUR).build().unwrap();
    assert!(host.now().0 >= used, "{} < {used}", host.now().0);
}

/// Issue 9, defect 2: a waiter saved in a snapshot belonged to a thread of the previous process;
/// restored, it used to be handed the lock and a later unrelated acquire by the same owner name
/// picked that stale grant up while the table said someone else held the key.
#[test]
fn restored_waiters_are_dropped_and_never_become_anyones_lease() {
    let dir = scratch("waiters");
    let path = dir.join("table.lock");
    let clock = ManualClock::at(1_000);
    {
        let host = persisted(&path, &clock).unwrap();
        let lease = host.try_acquire("job", "worker-a", MS(100)).unwrap();
        let waiter = {
            let host = host.clone();
            std::thread::spawn(move || host.acquire("job", "worker-w", MS(100), MS(60_000)))
        };
        while host.inspect("job").unwrap().unwrap().waiters.is_empty() {
            std::thread::sleep(MS(2));
        }
        host.save().unwrap();
        std::mem::forget(lease);
        crash(host);
        // The waiting thread would die with its process; here it is left blocked.
        std::mem::forget(waiter);
    }
    let host = persisted(&path, &clock).unwrap();
    assert_eq!(host.recovery().unwrap().waiters_dropped, 1);
    let info = host.inspect("job").unwrap().unwrap();
    assert!(info.waiters.is_empty());
    // The restored lease expires; nobody is handed the key.
    clock.advance(200);
    host.tick();
    assert!(host.inspect("job").unwrap().is_none());
    let b = host.try_acquire("job", "worker-b", MS(1_000)).unwrap();
    // The same owner name as the dropped waiter, later: refused like anyone else.
    let err = host.acquire("job", "worker-w", MS(100), MS(0)).unwrap_err();
    assert!(matches!(err, Error::Lock(LockError::Held { .. })), "{err}");
    let held = host.inspect("job").unwrap().unwrap();
    assert_eq!(
        (
            held.holder().unwrap().owner.as_str(),
            held.holder().unwrap().fence.0
        ),
        ("worker-b", b.fence().0)
    );
}

#[test]
fn build_fails_naming_a_path_that_cannot_be_written() {
    let dir = scratch("unwritable");
    let path = dir.join("missing-dir").join("table.lock");
    let err = LockHost::builder()
        .persist_to(&path, HOUR)
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Persist(m) if m.contains("missing-dir")),
        "{err}"
    );
}

/// Issue 9, defect 6: periodic and shutdown saves used to fail without a word.
#[test]
fn failed_saves_are_reported_by_hook_status_and_save() {
    let dir = scratch("failing-save");
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let path = sub.join("table.lock");
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let clock = ManualClock::at(1_000);
    let host = {
        let seen = Arc::clone(&seen);
        LockHost::builder()
            .clock(clock.clone())
            .persist_to(&path, MS(10))
            .on_persist_error(move |e| seen.lock().unwrap().push(e.to_string()))
            .build()
            .unwrap()
    };
    assert!(host.persist_error().is_none());
    // The directory disappears under the host (retried: a background write may be under way).
    while let Err(e) = std::fs::remove_dir_all(&sub) {
        assert_eq!(e.kind(), std::io::ErrorKind::DirectoryNotEmpty, "{e}");
    }
    clock.advance(20);
    host.tick(); // a save falls due and fails
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|m| m.contains("table.lock")),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(matches!(host.persist_error(), Some(Error::Persist(_))));
    assert!(matches!(host.save(), Err(Error::Persist(m)) if m.contains("table.lock")));
    // Fixed again: the next save succeeds and clears the status.
    std::fs::create_dir_all(&sub).unwrap();
    host.save().unwrap();
    assert!(host.persist_error().is_none());
}

/// Issue 9, defect 7: hosts persisting to `shared.one` and `shared.two` shared `shared.tmp`.
#[test]
fn neighbouring_files_never_share_a_temporary() {
    let dir = scratch("neighbours");
    let clock = ManualClock::at(1_000);
    let one = persisted(&dir.join("shared.one"), &clock).unwrap();
    let two = persisted(&dir.join("shared.two"), &clock).unwrap();
    let _a = one.try_acquire("only-in-one", "a", HOUR).unwrap();
    let _b = two.try_acquire("only-in-two", "b", HOUR).unwrap();
    let writers: Vec<_> = [one.clone(), two.clone()]
        .into_iter()
        .map(|h| std::thread::spawn(move || (0..200).for_each(|_| h.save().unwrap())))
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    std::mem::forget(_a);
    std::mem::forget(_b);
    drop((one, two));
    let one = persisted(&dir.join("shared.one"), &clock).unwrap();
    let two = persisted(&dir.join("shared.two"), &clock).unwrap();
    assert!(one.inspect("only-in-one").unwrap().is_some());
    assert!(one.inspect("only-in-two").unwrap().is_none());
    assert!(two.inspect("only-in-two").unwrap().is_some());
    assert!(two.inspect("only-in-one").unwrap().is_none());
    // A path that itself ends in `.tmp` is written through a temporary of its own.
    let tmp_named = persisted(&dir.join("state.tmp"), &clock).unwrap();
    let _c = tmp_named.try_acquire("k", "c", HOUR).unwrap();
    tmp_named.save().unwrap();
    std::mem::forget(_c);
    drop(tmp_named);
    let again = persisted(&dir.join("state.tmp"), &clock).unwrap();
    assert!(again.inspect("k").unwrap().is_some());
    drop(again);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name().to_string_lossy().ends_with(".tmp") && e.file_name() != "state.tmp"
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Issue 9, defects 8 and 9 and the corruption sweep: every truncation and every single-bit flip
/// of a table file either loads exactly the saved table or fails naming the file; so does the
/// reservation file.
#[test]
fn every_truncation_and_bit_flip_loads_exactly_or_fails_naming_the_file() {
    let dir = scratch("corruption");
    let path = dir.join("table.lock");
    let clock = ManualClock::at(5_000);
    {
        let host = persisted(&path, &clock).unwrap();
        for (k, o) in [("a", "x"), ("bb", "y"), ("ccc", "z")] {
            std::mem::forget(host.try_acquire(k, o, HOUR).unwrap());
        }
        host.save().unwrap();
        crash(host);
    }
    let good = std::fs::read(&path).unwrap();
    let good_reserve = std::fs::read(dir.join("table.lock.reserve")).unwrap();
    let expected = persisted(&path, &clock).unwrap().snapshot().unwrap();
    let check = |label: &str| match persisted(&path, &clock) {
        Ok(host) => assert_eq!(
            host.snapshot().unwrap(),
            expected,
            "{label} loaded differently"
        ),
        Err(Error::Persist(m)) => assert!(m.contains("table.lock"), "{label}: {m}"),
        Err(e) => panic!("{label}: {e}"),
    };
    for len in 0..good.len() {
        std::fs::write(&path, &good[..len]).unwrap();
        std::fs::write(dir.join("table.lock.reserve"), &good_reserve).unwrap();
        check(&format!("truncated to {len}"));
    }
    let mut loaded = 0;
    for bit in 0..good.len() * 8 {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&path, &bad).unwrap();
        std::fs::write(dir.join("table.lock.reserve"), &good_reserve).unwrap();
        if persisted(&path, &clock).is_ok() {
            loaded += 1;
        }
        check(&format!("bit {bit} flipped"));
    }
    assert_eq!(loaded, 0, "a flipped bit loaded");
    std::fs::write(&path, &good).unwrap();
    for bit in 0..good_reserve.len() * 8 {
        let mut bad = good_reserve.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(dir.join("table.lock.reserve"), &bad).unwrap();
        let err = persisted(&path, &clock).unwrap_err();
        assert!(
            matches!(&err, Error::Persist(m) if m.contains("table.lock.reserve")),
            "{err}"
        );
    }
    // A table file without its reservation is refused: its tokens could be reissued.
    std::fs::remove_file(dir.join("table.lock.reserve")).unwrap();
    let err = persisted(&path, &clock).unwrap_err();
    assert!(
        matches!(&err, Error::Persist(m) if m.contains("reservation")),
        "{err}"
    );
}

/// Issue 9, defect 9: a file too big for the sandbox's memory names the file and the cap.
#[test]
fn a_file_beyond_the_memory_cap_names_the_file_and_the_cap() {
    let dir = scratch("memory-cap");
    let path = dir.join("table.lock");
    let clock = ManualClock::at(1_000);
    {
        let host = persisted(&path, &clock).unwrap();
        for i in 0..20_000 {
            std::mem::forget(
                host.try_acquire(&format!("key-{i:08}-{}", "x".repeat(40)), "owner", HOUR)
                    .unwrap(),
            );
        }
        host.save().unwrap();
        crash(host);
    }
    let err = LockHost::builder()
        .clock(clock)
        .sandbox(SandboxLimits {
            memory_bytes: 2 << 20,
            ..SandboxLimits::default()
        })
        .persist_to(&path, HOUR)
        .build()
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("table.lock"), "{message}");
    assert!(message.contains("2097152"), "{message}");
}
