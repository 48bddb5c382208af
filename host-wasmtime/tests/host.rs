//! The host library against the real component, with a manual clock: no test depends on
//! machine speed (threads only block on hand-offs that the test triggers).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

mod common;

use host_wasmtime::{Error, HostError, LockComponent, LockHost, ManualClock, SandboxLimits};
use lock_core::LockError;
use lock_core::{Fence, Instant};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn host(clock: &ManualClock) -> LockHost {
    LockHost::builder().clock(clock.clone()).build().unwrap()
}

/// Waits (in real time, generously) until `key` has a queue of `n`, so a test can act only once
/// a blocked thread is really queued.
fn wait_for_queue(host: &LockHost, key: &str, n: usize) {
    for _ in 0..2_000 {
        if host
            .inspect(key)
            .unwrap()
            .is_some_and(|i| i.waiters.len() == n)
        {
            return;
        }
        thread::sleep(MS(5));
    }
    panic!("{key} never had {n} waiters");
}

#[test]
fn blocking_acquire_is_granted_by_hand_off_on_release() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let a = host.try_acquire("job", "a", MS(1_000)).unwrap();
    let h = host.clone();
    let b = thread::spawn(move || {
        h.acquire("job", "b", MS(500), MS(60_000))
            .map(|l| (l.fence().0, l.deadline().0))
    });
    wait_for_queue(&host, "job", 1);
    clock.advance(10);
    a.release().unwrap();
    assert_eq!(b.join().unwrap().unwrap(), (2, 510));
}

#[test]
fn blocking_acquire_is_granted_by_hand_off_on_expiry() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let a = host.try_acquire("job", "a", MS(100)).unwrap();
    let h = host.clone();
    let b = thread::spawn(move || {
        h.acquire("job", "b", MS(100), MS(60_000)).map(|l| {
            let f = l.fence().0;
            std::mem::forget(l);
            f
        })
    });
    wait_for_queue(&host, "job", 1);
    clock.advance(100);
    host.tick();
    assert_eq!(b.join().unwrap().unwrap(), 2);
    assert!(a.is_lost());
    assert!(matches!(
        a.release(),
        Err(Error::Lock(LockError::Expired {
            deadline: Instant(100)
        }))
    ));
}

#[test]
fn blocking_acquire_times_out() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let _a = host.try_acquire("job", "a", MS(10_000)).unwrap();
    let h = host.clone();
    let b = thread::spawn(move || h.acquire("job", "b", MS(100), MS(50)).map(|l| l.fence().0));
    wait_for_queue(&host, "job", 1);
    clock.advance(50);
    assert_eq!(b.join().unwrap().unwrap_err(), Error::WaitTimedOut);
    assert_eq!(host.inspect("job").unwrap().unwrap().waiters.len(), 0);
}

#[test]
fn keep_alive_holds_a_lease_past_its_first_deadline_until_released() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let lease = host.try_acquire("job", "a", MS(300)).unwrap();
    lease.keep_alive();
    for _ in 0..10 {
        clock.advance(100);
        host.tick();
    }
    assert_eq!(clock_now(&host), 1_000);
    assert!(!lease.is_lost());
    assert!(
        lease.deadline().0 > 1_000,
        "deadline {}",
        lease.deadline().0
    );
    assert_eq!(
        host.inspect("job")
            .unwrap()
            .unwrap()
            .holder()
            .unwrap()
            .fence
            .0,
        1
    );
    assert!(host.stats().unwrap().extended >= 4);
    lease.release().unwrap();
    clock.advance(1_000);
    host.tick();
    assert_eq!(host.inspect("job").unwrap(), None);
    assert_eq!(host.stats().unwrap().expired, 0);
}

fn clock_now(host: &LockHost) -> u64 {
    host.now().0
}

#[test]
fn on_lost_fires_exactly_once_and_a_panicking_callback_is_contained() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let fired = Arc::new(AtomicUsize::new(0));
    let lease = host.try_acquire("job", "a", MS(100)).unwrap();
    let f = Arc::clone(&fired);
    lease.on_lost(move |lost| {
        assert_eq!(
            (lost.key.as_str(), lost.fence.0, lost.at.0),
            ("job", 1, 100)
        );
        f.fetch_add(1, Ordering::SeqCst);
    });
    let panicky = host.try_acquire("other", "a", MS(100)).unwrap();
    panicky.on_lost(|_| panic!("a buggy callback"));
    clock.advance(150);
    host.tick();
    host.tick();
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(lease.is_lost() && panicky.is_lost());
    // Registering after the loss fires at once, still only once.
    let late = Arc::new(AtomicUsize::new(0));
    let l = Arc::clone(&late);
    lease.on_lost(move |_| {
        l.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(late.load(Ordering::SeqCst), 1);
    // The host still works.
    assert_eq!(host.try_acquire("job", "b", MS(100)).unwrap().fence().0, 3);
}

#[test]
fn a_request_that_finds_a_lease_expired_reports_the_loss_itself() {
    // Requests skip polling the table's events while nothing can be due; once a deadline has
    // passed, the next request must poll and fire on_lost before it returns (not wait for the
    // timer thread, which sleeps in real time here and is never ticked by this test).
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let fired = Arc::new(AtomicUsize::new(0));
    let lease = host.try_acquire("job", "a", MS(100)).unwrap();
    let f = Arc::clone(&fired);
    lease.on_lost(move |_| {
        f.fetch_add(1, Ordering::SeqCst);
    });
    let other = host.try_acquire("other", "b", MS(10_000)).unwrap();
    other.release().unwrap();
    assert_eq!(fired.load(Ordering::SeqCst), 0, "nothing was due yet");
    clock.advance(100);
    let _unrelated = host.try_acquire("unrelated", "c", MS(10_000)).unwrap();
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert!(lease.is_lost());
}

#[test]
fn release_is_idempotent_and_runs_on_drop() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let lease = host.try_acquire("job", "a", MS(100)).unwrap();
    lease.release().unwrap();
    lease.release().unwrap();
    drop(lease);
    assert_eq!(host.stats().unwrap().released, 1);
    {
        let _scoped = host.try_acquire("job", "a", MS(100)).unwrap();
        assert!(host.inspect("job").unwrap().is_some());
    }
    assert_eq!(host.inspect("job").unwrap(), None);
    let held = host.try_acquire("job", "a", MS(100)).unwrap();
    assert_eq!(
        host.try_acquire("job", "b", MS(100)).unwrap_err(),
        Error::Lock(LockError::Held {
            deadline: Instant(100)
        })
    );
    drop(held);
}

#[test]
fn with_lock_releases_when_the_closure_returns() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let fence = host
        .with_lock("job", "a", MS(100), MS(0), |lease| lease.fence().0)
        .unwrap();
    assert_eq!(fence, 1);
    assert_eq!(host.inspect("job").unwrap(), None);
}

#[test]
fn threads_hammering_keys_never_overlap_and_fences_increase() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    const KEYS: usize = 4;
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    let last_fence: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let violations = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (host, busy, last_fence, violations) = (
                host.clone(),
                Arc::clone(&busy),
                Arc::clone(&last_fence),
                Arc::clone(&violations),
            );
            thread::spawn(move || {
                for i in 0..300 {
                    let k = (t * 7 + i) % KEYS;
                    let owner = format!("thread-{t}");
                    let Ok(lease) =
                        host.acquire(&format!("key-{k}"), &owner, MS(60_000), MS(60_000))
                    else {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("{owner} was not granted key-{k}"));
                        continue;
                    };
                    if busy[k].swap(true, Ordering::SeqCst) {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("two holders of key-{k}"));
                    }
                    let previous = last_fence[k].swap(lease.fence().0, Ordering::SeqCst);
                    if lease.fence().0 <= previous {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("fence {} after {previous}", lease.fence().0));
                    }
                    busy[k].store(false, Ordering::SeqCst);
                    lease.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*violations.lock().unwrap(), Vec::<String>::new());
    let stats = host.stats().unwrap();
    assert_eq!(stats.acquired + stats.handed_off, 8 * 300);
    assert_eq!(stats.live_leases, 0);
}

#[test]
fn a_trapping_component_returns_an_error_and_the_host_stays_up() {
    let clock = ManualClock::at(0);
    // A call that runs past its time bound (here: a zero bound, so the first call does) traps:
    // the table answers a typed error, is poisoned, and refuses later calls.
    let component = LockComponent::embedded().unwrap();
    let mut table = component
        .instantiate(&lock_core::Limits::default(), 0, SandboxLimits::default())
        .unwrap();
    let _ = table
        .try_acquire("k", "a", lock_core::Duration(1_000), Instant(0))
        .unwrap()
        .unwrap();
    table.set_call_timeout(Duration::ZERO);
    let trap = table.snapshot(Instant(1)).unwrap_err();
    assert!(matches!(trap, HostError::Trap(_)), "{trap}");
    assert!(table.is_poisoned());
    table.set_call_timeout(Duration::from_secs(1));
    let refused = table
        .try_acquire("x", "a", lock_core::Duration(10), Instant(2))
        .unwrap_err();
    assert!(matches!(refused, HostError::Poisoned(_)), "{refused}");
    assert!(refused
        .to_string()
        .contains("unusable since the component trapped"));

    // Out of memory inside the sandbox: a trap, not a host crash.
    let small = LockHost::builder()
        .clock(clock)
        .sandbox(SandboxLimits {
            memory_bytes: 2 << 20,
            ..SandboxLimits::default()
        })
        .build()
        .unwrap();
    let (err, _held) = common::fill_until_trap(&small);
    assert!(matches!(err, Error::Host(HostError::Trap(_))), "{err}");
}

#[test]
fn the_component_imports_nothing() {
    let component = LockComponent::embedded().unwrap();
    assert_eq!(component.imports(), Vec::<String>::new());
}

#[test]
fn the_on_disk_artifact_loads_from_its_file_and_answers_in_the_core_types() {
    let file = std::path::Path::new(env!("LOCK_COMPONENT_FILE"));
    let component = LockComponent::from_file(file).unwrap();
    assert_eq!(component.imports(), Vec::<String>::new());
    let mut table = component
        .instantiate(&lock_core::Limits::default(), 0, SandboxLimits::default())
        .unwrap();
    assert_eq!(
        table
            .try_acquire("k", "a", lock_core::Duration(100), Instant(0))
            .unwrap(),
        Ok(lock_core::AcquireOutcome::Acquired(lock_core::Grant {
            fence: Fence(1),
            deadline: Instant(100)
        }))
    );
    assert_eq!(
        table
            .try_acquire("k", "b", lock_core::Duration(100), Instant(5))
            .unwrap(),
        Err(LockError::Held {
            deadline: Instant(100)
        })
    );
    let missing =
        LockComponent::from_file(std::path::Path::new("/nonexistent/lock.wasm")).unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/lock.wasm"),
        "{missing}"
    );
}
