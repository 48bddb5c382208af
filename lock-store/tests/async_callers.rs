//! The blocking API called from async code (a tokio runtime, either flavour), on every store:
//! no call panics (the PostgreSQL store blocks on a runtime of its own, which tokio forbids
//! inside another), a `Lease` dropped there is released when the drop returns (a healthy
//! store), and dropping the last `Locks` there does not panic either. A holder whose path to
//! its store goes silent is dropped in async code: the drop returns long before the store's
//! bound. A blocking election run on a runtime's thread leads, hands over and leaves.
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::proxy::{locks_through, Fault};
use lock_store::election::{CampaignOptions, Election, StopReason};
use lock_store::{Fence, Locks};

/// The terms a test's bodies saw: who, the fence, why it stopped (`None`: it began).
type Seen = Arc<Mutex<Vec<(&'static str, Fence, Option<StopReason>)>>>;

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

/// A blocking election run on an async runtime's own thread (`Election::run` called inside
/// `block_on`, either flavour), on every store: its asks, waits in line, extensions and releases
/// neither panic nor stall, its term starts, a resignation hands the key to the other candidate
/// (whose campaign runs on a plain thread) with a higher fence, it campaigns again and leads
/// again when the other shuts down, and its own shut-down ends its `run` with nothing held.
#[test]
fn a_blocking_election_runs_inside_an_async_runtime() {
    let mut stores = common::store_urls();
    stores.push(("memory", "memory:".into()));
    for (label, url) in stores {
        in_each_runtime(|flavour| {
            let ns = common::unique_namespace("asyncelect");
            let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
            let locks = Locks::open(&url, &ns).unwrap();
            let options = CampaignOptions::new(Duration::from_millis(1_000).into());
            let a = Election::new(&locks, "scheduler", "a", options).unwrap();
            let b = Election::new(&locks, "scheduler", "b", options).unwrap();
            let (ca, cb) = (a.control(), b.control());
            let seen: Seen = Arc::default();
            let body = |who: &'static str| {
                let seen = Arc::clone(&seen);
                move |term: &lock_store::election::Term| {
                    seen.lock().unwrap().push((who, term.fence(), None));
                    let stop = term.wait_stop(Duration::from_secs(60));
                    seen.lock().unwrap().push((who, term.fence(), stop));
                }
            };
            let began = |who: &str, n: usize| {
                let seen = Arc::clone(&seen);
                let who = who.to_owned();
                move || {
                    let start = Instant::now();
                    while seen
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|t| t.0 == who && t.2.is_none())
                        .count()
                        < n
                    {
                        assert!(start.elapsed() < Duration::from_secs(20), "{who} leads");
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            };
            let terms = std::thread::scope(|s| {
                let (a_led, b_led, a_again) = (began("a", 1), began("b", 1), began("a", 2));
                let (b, locks) = (&b, &locks);
                // Directs the two from a plain thread while `a` runs on the runtime's thread (a
                // failed wait shuts both down as it unwinds: a failure, not a hang).
                s.spawn(move || {
                    let _leave = Leave(vec![ca.clone(), cb.clone()]);
                    a_led();
                    s.spawn(move || b.run(body("b")).unwrap());
                    let start = Instant::now();
                    while !locks
                        .inspect("scheduler")
                        .unwrap()
                        .is_some_and(|i| i.waiters.iter().any(|w| w.owner == "b"))
                    {
                        assert!(start.elapsed() < Duration::from_secs(20), "b in line");
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    ca.resign();
                    b_led();
                    cb.shut_down();
                    a_again();
                    ca.shut_down();
                });
                a.run(body("a"))
            });
            let seen = seen.lock().unwrap();
            assert_eq!(terms.ok(), Some(2), "{label} ({flavour}): {seen:?}");
            let stops: Vec<(&str, Option<StopReason>)> = seen
                .iter()
                .filter(|t| t.2.is_some())
                .map(|t| (t.0, t.2))
                .collect();
            assert_eq!(
                stops,
                [
                    ("a", Some(StopReason::Resigned)),
                    ("b", Some(StopReason::ShutDown)),
                    ("a", Some(StopReason::ShutDown))
                ],
                "{label} ({flavour})"
            );
            let fences: Vec<Fence> = seen.iter().filter(|t| t.2.is_none()).map(|t| t.1).collect();
            assert!(
                fences.windows(2).all(|w| w[0] < w[1]),
                "{label}: {fences:?}"
            );
            assert!(locks.leader("scheduler").unwrap().is_none());
        });
    }
}

/// Shuts the campaigns down when dropped.
struct Leave(Vec<lock_store::election::Control>);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0
            .iter()
            .for_each(lock_store::election::Control::shut_down);
    }
}
