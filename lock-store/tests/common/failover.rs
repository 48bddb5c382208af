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
