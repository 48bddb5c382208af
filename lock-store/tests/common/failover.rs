//! What the failover tests share: the TTL of their leases, grants in a row, and what a promoted
//! server kept of the leases granted before.
#![allow(dead_code)]

use std::time::Duration;

use lock_core::Fence;
use lock_store::{Lease, Locks};

/// The leases' TTL: longer than any test, so that no lease ends by itself.
pub const TTL: Duration = Duration::from_secs(60);

/// `n` grants of `key` to "holder", each released: their fences.
pub fn grants(locks: &Locks, key: &str, n: usize) -> Vec<Fence> {
    (0..n)
        .map(|_| {
            let lease = locks.try_acquire(key, "holder", TTL).unwrap();
            let fence = lease.fence();
            lease.release().unwrap();
            fence
        })
        .collect()
}

/// How long a server that took over the namespace refuses grants (its recovery): the first
/// grant it is asked for answers [`StoreError::Recovering`](lock_store::StoreError::Recovering),
/// whose span this is. Panics on any other answer.
pub fn recovery(locks: &Locks) -> Duration {
    match locks.try_acquire("recovery-probe", "prober", TTL) {
        Err(lock_store::Error::Store(lock_store::StoreError::Recovering { until, at, .. })) => {
            Duration::from_millis(until.0.saturating_sub(at.0))
        }
        Ok(lease) => panic!("granted {:?} while recovering", lease.fence()),
        Err(e) => panic!("not a recovery: {e}"),
    }
}

/// A server that took over after leases of [`TTL`] were granted recovers for about that long
/// (from the instant it found out, a moment before it answers).
pub fn recovers_for_the_ttl(promoted: &Locks) {
    let span = recovery(promoted);
    assert!(
        span <= TTL && span > TTL - Duration::from_secs(1),
        "recovers for {span:?}"
    );
}

/// For each lease of `held` that `promoted` lost: its key is not granted to anyone else while the
/// lease may live (the promoted server recovers at least until the lease's deadline).
pub fn lost_keys_wait_out_their_leases(promoted: &Locks, held: &[Lease]) {
    for lease in held {
        let info = promoted.inspect(lease.key()).unwrap();
        let holder = info.as_ref().and_then(|i| i.holder().cloned());
        if holder.is_some_and(|h| h.fence == lease.fence()) {
            continue;
        }
        match promoted.try_acquire(lease.key(), "another", TTL) {
            Err(lock_store::Error::Store(lock_store::StoreError::Recovering { until, .. })) => {
                assert!(
                    until >= lease.deadline(),
                    "{}: recovering until {until:?}, the lost lease lives until {:?}",
                    lease.key(),
                    lease.deadline()
                );
            }
            Ok(other) => panic!(
                "{}: granted {:?} while the lost lease {:?} lives",
                lease.key(),
                other.fence(),
                lease.fence()
            ),
            Err(e) => panic!("{}: {e}", lease.key()),
        }
    }
}

/// For each lease of `held`: its key, and whether `promoted` has it with its holder and fence.
pub fn kept_on(promoted: &Locks, held: &[Lease]) -> Vec<(String, bool)> {
    held.iter()
        .map(|lease| {
            let info = promoted.inspect(lease.key()).unwrap();
            let holder = info.as_ref().and_then(|i| i.holder().cloned());
            let kept = holder.is_some_and(|h| h.owner == "holder" && h.fence == lease.fence());
            (lease.key().to_owned(), kept)
        })
        .collect()
}
