//! The no-op store: every acquire is granted (it is not a lock), fences still grow, the holder's
//! own calls answer from what its client remembers, and nothing is kept.

use std::time::Duration;

use lock_core::LockError;
use lock_store::{store::NoopStore, store::Store, Error, Locks, StoreError};

const TTL: Duration = Duration::from_secs(30);

#[test]
fn every_acquire_is_granted_with_a_higher_fence() {
    let locks = Locks::open("noop:", "jobs").unwrap();
    let other = Locks::open("noop:", "jobs").unwrap();
    let first = locks.try_acquire("nightly", "a", TTL).unwrap();
    let second = locks.try_acquire("nightly", "b", TTL).unwrap();
    let third = other.try_acquire("nightly", "c", TTL).unwrap();
    assert!(first.fence() < second.fence(), "{first:?} {second:?}");
    assert_ne!(third.fence(), second.fence());
    // The newest lease of a key extends and releases like any lease.
    second.extend(TTL).unwrap();
    second.release().unwrap();
    third.release().unwrap();
    // The overlapped one was never kept: its release says so (documented).
    assert!(matches!(
        first.release(),
        Err(Error::Lock(LockError::NotHeld))
    ));
    // Nothing is kept.
    assert_eq!(locks.inspect("nightly").unwrap(), None);
    assert!(locks.keys().unwrap().is_empty());
}

#[test]
fn with_lock_runs_the_work_and_releases() {
    let locks = Locks::open("noop:", "jobs").unwrap();
    for _ in 0..3 {
        let got = locks
            .with_lock("report", "a", TTL, Duration::ZERO, |lease| lease.fence())
            .unwrap();
        assert!(got.0 > 0);
    }
    // Waiting is never needed: a held key is granted at once.
    let _held = locks.try_acquire("report", "x", TTL).unwrap();
    let lease = locks
        .acquire("report", "y", TTL, Duration::from_secs(60))
        .unwrap();
    lease.release().unwrap();
}

#[test]
fn fences_grow_across_restarts_and_bad_names_are_refused() {
    let mut before = NoopStore::new("jobs").unwrap();
    let last = before.last_fence().unwrap();
    let locks = Locks::new(NoopStore::new("jobs").unwrap());
    let lease = locks.try_acquire("k", "a", TTL).unwrap();
    assert!(lease.fence() > last);
    // A restarted process starts from its clock: tokens above every one issued before.
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    assert!(lease.fence().0 > micros - 60_000_000, "{lease:?}");
    assert!(matches!(
        NoopStore::new("Bad Name"),
        Err(StoreError::Namespace { .. })
    ));
    assert!(before.describe().contains("keeps nothing"));
}
