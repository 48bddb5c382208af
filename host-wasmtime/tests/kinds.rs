//! The lock kinds through `LockHost` (the real component, a hand-driven clock): shared leases
//! and permits side by side, a query, a steal whose victims' `on_lost` fire exactly once and say
//! `stolen` (by the event, or by a refused call when the event is gone), a minimum hold that keeps
//! the key after its release, and the kinds kept across a save and restart.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use host_wasmtime::{AcquireOptions, Error, LockHost, LostLease, ManualClock, Mode};
use lock_core::{Instant, LeaseEnd, LockError};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// An `on_lost` that records what it was told, and how often.
fn recording(log: &Arc<Mutex<Vec<LostLease>>>) -> impl FnOnce(&LostLease) + Send + 'static {
    let log = Arc::clone(log);
    move |lost| log.lock().unwrap().push(lost.clone())
}

#[test]
fn shared_leases_permits_and_query() {
    let clock = ManualClock::at(0);
    let host = LockHost::builder().clock(clock.clone()).build().unwrap();
    let pool = AcquireOptions::shared().permits(2).metadata("gpu");
    let a = host
        .acquire_with("pool", "a", MS(100), MS(0), &pool)
        .unwrap();
    let b = host
        .acquire_with("pool", "b", MS(100), MS(0), &pool)
        .unwrap();
    assert!(b.fence() > a.fence());
    let full = host
        .acquire_with("pool", "c", MS(100), MS(0), &pool)
        .unwrap_err();
    assert!(
        matches!(full, Error::Lock(LockError::Held { .. })),
        "{full}"
    );
    let three = AcquireOptions::shared().permits(3);
    let mismatch = host
        .acquire_with("pool", "c", MS(100), MS(0), &three)
        .unwrap_err();
    assert!(
        matches!(
            mismatch,
            Error::Lock(LockError::PermitsMismatch { permits: 2 })
        ),
        "{mismatch}"
    );
    let _plain = host.try_acquire("other", "d", MS(100)).unwrap();
    let page = host.query("", "", 10).unwrap();
    let keys: Vec<&str> = page.keys.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["other", "pool"]);
    let info = &page.keys[1].1;
    assert_eq!(info.permits, 2);
    assert!(info
        .holders
        .iter()
        .all(|h| h.mode == Mode::Shared && h.metadata == "gpu"));
    let paged = host.query("", "", 1).unwrap();
    assert_eq!(paged.next.as_deref(), Some("other"));
    assert!(matches!(
        host.query("", "", 0),
        Err(Error::Lock(LockError::QueryLimit { max: 1000 }))
    ));
    // One release frees one place, for a waiter in another thread.
    let waiter = {
        let host = host.clone();
        std::thread::spawn(move || {
            let pool = AcquireOptions::shared().permits(2).metadata("gpu");
            host.acquire_with("pool", "c", MS(100), MS(10_000), &pool)
                .map(|l| l.fence())
        })
    };
    while host.inspect("pool").unwrap().unwrap().waiters.is_empty() {
        std::thread::sleep(MS(1));
    }
    a.release().unwrap();
    assert!(waiter.join().unwrap().unwrap() > b.fence());
}

#[test]
fn a_steal_fires_each_victims_on_lost_once_saying_stolen() {
    let clock = ManualClock::at(0);
    let host = LockHost::builder().clock(clock.clone()).build().unwrap();
    let reader = AcquireOptions::shared();
    let log = Arc::new(Mutex::new(Vec::new()));
    let victims: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|owner| {
            let lease = host
                .acquire_with("doc", owner, MS(1000), MS(0), &reader)
                .unwrap();
            lease.on_lost(recording(&log));
            lease
        })
        .collect();
    clock.advance(10);
    let shared_steal = host.steal("doc", "op", MS(1000), &reader).unwrap_err();
    assert!(
        matches!(shared_steal, Error::Lock(LockError::ModeMismatch)),
        "{shared_steal}"
    );
    let thief = host
        .steal("doc", "op", MS(1000), &AcquireOptions::EXCLUSIVE)
        .unwrap();
    assert!(victims.iter().all(|v| thief.fence() > v.fence()));
    {
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(
            log.iter().all(|l| l.stolen && l.at == Instant(10)),
            "{log:?}"
        );
    }
    for victim in &victims {
        assert!(victim.is_lost());
        let late = victim.release().unwrap_err();
        assert!(
            matches!(late, Error::Lock(LockError::Stolen { at: Instant(10) })),
            "{late}"
        );
    }
    drop(victims);
    assert_eq!(log.lock().unwrap().len(), 2, "on_lost ran again");
    // An `on_lost` set after the loss runs at once, and says stolen too.
    let late_log = Arc::new(Mutex::new(Vec::new()));
    let holder = host.try_acquire("job", "x", MS(1000)).unwrap();
    host.steal("job", "op", MS(1000), &AcquireOptions::EXCLUSIVE)
        .unwrap();
    holder.on_lost(recording(&late_log));
    assert!(late_log.lock().unwrap()[0].stolen);
    assert_eq!(thief.release(), Ok(()));
}

#[test]
fn a_minimum_hold_keeps_the_key_after_its_release() {
    let clock = ManualClock::at(0);
    let host = LockHost::builder().clock(clock.clone()).build().unwrap();
    let job = AcquireOptions::default().min_hold(MS(60));
    let lease = host
        .acquire_with("nightly", "a", MS(100), MS(0), &job)
        .unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&fired);
    lease.on_lost(move |_| {
        count.fetch_add(1, Ordering::SeqCst);
    });
    clock.advance(10);
    lease.release().unwrap();
    let info = host.inspect("nightly").unwrap().unwrap();
    assert_eq!(info.holders[0].ended, Some(LeaseEnd::Released));
    assert_eq!(info.holders[0].deadline, Instant(60));
    let held = host.try_acquire("nightly", "b", MS(100)).unwrap_err();
    assert!(
        matches!(
            held,
            Error::Lock(LockError::Held {
                deadline: Instant(60)
            })
        ),
        "{held}"
    );
    clock.advance(50);
    host.tick();
    host.try_acquire("nightly", "b", MS(100)).unwrap();
    assert_eq!(
        fired.load(Ordering::SeqCst),
        0,
        "a released lease is not lost"
    );
}

#[test]
fn the_kinds_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("kinds-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let clock = ManualClock::at(0);
    let open = || {
        LockHost::builder()
            .clock(clock.clone())
            .persist_to(dir.join("table"), Duration::from_secs(3600))
            .build()
            .unwrap()
    };
    let first = open();
    let reader = AcquireOptions::shared().metadata("kept");
    let a = first
        .acquire_with("doc", "a", MS(1000), MS(0), &reader)
        .unwrap();
    let b = first
        .acquire_with("doc", "b", MS(1000), MS(0), &reader)
        .unwrap();
    first.save().unwrap();
    let (fa, fb) = (a.fence(), b.fence());
    std::mem::forget((a, b)); // the process "dies" holding them
    drop(first);
    let second = open();
    let info = second.inspect("doc").unwrap().unwrap();
    let held: Vec<_> = info
        .holders
        .iter()
        .map(|h| (h.fence, h.mode, h.metadata.as_str()))
        .collect();
    assert_eq!(
        held,
        [(fa, Mode::Shared, "kept"), (fb, Mode::Shared, "kept")]
    );
    let c = second
        .acquire_with("doc", "c", MS(1000), MS(0), &reader)
        .unwrap();
    assert!(c.fence() > fb);
    let _ = std::fs::remove_dir_all(&dir);
}
