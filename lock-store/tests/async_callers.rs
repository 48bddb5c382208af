//! The blocking API called from async code (a tokio runtime, either flavour), on every store:
//! no call panics (the PostgreSQL store blocks on a runtime of its own, which tokio forbids
//! inside another), a `Lease` dropped there is released when the drop returns (a healthy
//! store), and dropping the last `Locks` there does not panic either. A holder whose path to
//! its store goes silent is dropped in async code: the drop returns long before the store's
//! bound.
mod common;

use std::time::{Duration, Instant};

use common::proxy::{locks_through, Fault};
use lock_store::Locks;

/// Both runtime flavours, each running `f` inside `block_on`.
fn in_each_runtime(f: impl Fn(&str)) {
    let current = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    current.block_on(async { f("current-thread") });
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    multi.block_on(async { f("multi-thread") });
}

#[test]
fn the_blocking_api_works_inside_an_async_runtime() {
    let mut stores = common::store_urls();
    stores.push(("memory", "memory:".into()));
    for (label, url) in stores {
        in_each_runtime(|flavour| {
            let ns = common::unique_namespace("async");
            let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
            let locks = Locks::open(&url, &ns).unwrap();
            let other = Locks::open(&url, &ns).unwrap();
            let held = other
                .try_acquire("job", "other", Duration::from_secs(30))
                .unwrap();
            // Waiting opens the store's listening connection from async code too.
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(200));
                    held.release().unwrap();
                });
                let lease = locks
                    .acquire("job", "a", Duration::from_secs(30), Duration::from_secs(20))
                    .unwrap();
                lease.keep_alive();
                drop(lease);
                assert_eq!(
                    locks.inspect("job").unwrap(),
                    None,
                    "{label} ({flavour}): not released when the drop returned"
                );
            });
            drop(other);
            drop(locks);
        });
    }
}

#[test]
fn a_lease_dropped_in_async_code_does_not_hold_the_executor_for_a_silent_store() {
    for (label, real) in common::server_urls() {
        let ns = common::unique_namespace("asyncdrop");
        let _cleanup = common::Cleanup(|| common::uninstall(&real, &ns));
        let bound = Duration::from_secs(30);
        let (locks, proxy) = locks_through(&real, &ns, bound);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let took = runtime.block_on(async {
            let lease = locks
                .try_acquire("job", "a", Duration::from_secs(60))
                .unwrap();
            proxy.set(Fault::Blackhole);
            let start = Instant::now();
            drop(lease);
            drop(locks);
            start.elapsed()
        });
        assert!(
            took < bound / 3,
            "{label}: the drop held the executor {took:?}"
        );
        proxy.set(Fault::None);
        drop(runtime);
    }
}
