//! Leader election in async code (`lock_store::aio::election`), over the memory store on real
//! time: a resignation hands over at once, a shut-down in line drops its wait and leaves nothing
//! behind, a body that ignores its stop is dropped after the grace, a campaign whose id already
//! waits in line asks again, one that finds the line full only waits, and on every store a dropped
//! `run` future releases its lease at once (the process tests in
//! `election.rs` attack the blocking face on every store).
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_store::aio::election::{CampaignOptions, Election, StopReason};
use lock_store::aio::Locks;
use lock_store::Fence;

const NAME: &str = "scheduler";

/// A body's term as it saw it: who, its fence, why it stopped (`None`: it began).
type Seen = (&'static str, Fence, Option<StopReason>);

/// Sets its flag when dropped: a body's future holds one to tell whether it was dropped.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Waits (at most 10 s) until `who` waits in line for the election's key.
async fn in_line(locks: &Locks, who: &str) {
    common::eventually_async(
        &format!("{who} in line"),
        Duration::from_secs(10),
        || async {
            let info = locks.inspect(NAME).await.unwrap()?;
            info.waiters.iter().any(|w| w.owner == who).then_some(())
        },
    )
    .await;
}

/// A body that records its term's fence in `led` and returns at its stop signal.
fn recording(
    led: &Arc<Mutex<Option<Fence>>>,
) -> impl FnMut(
    lock_store::aio::election::Term,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    let led = Arc::clone(led);
    move |term| {
        let led = Arc::clone(&led);
        Box::pin(async move {
            *led.lock().unwrap() = Some(term.fence());
            term.stop().await;
        })
    }
}

fn options(ttl_ms: u64) -> CampaignOptions {
    CampaignOptions::new(Duration::from_millis(ttl_ms).into())
}

/// Two candidates: the first leads, its resignation hands the key to the second (a higher
/// fence, the first's body returned before); the second's shut-down, asked while in line,
/// returns at once, well within its wait in line, and leaves no waiter behind.
#[test]
fn a_resignation_hands_over_and_a_shut_down_in_line_leaves_nothing() {
    common::runtime(2).block_on(async {
        let locks = Locks::open("memory:", "aio_election_resign").await.unwrap();
        let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let a = Election::new(&locks, NAME, "a", options(2_000)).unwrap();
        let b = Election::new(&locks, NAME, "b", options(2_000))
            .unwrap()
            .metadata("10.0.0.2");
        let (ca, cb) = (a.control(), b.control());
        let body = |who: &'static str| {
            let log = Arc::clone(&log);
            move |term: lock_store::aio::election::Term| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().unwrap().push((who, term.fence(), None));
                    let reason = term.stop().await;
                    assert_eq!(term.stopped(), Some(reason));
                    log.lock().unwrap().push((who, term.fence(), Some(reason)));
                }
            }
        };
        let (a_done, a_returned) = tokio::sync::oneshot::channel();
        let run_a = async {
            let led = a.run(body("a")).await;
            let _ = a_done.send(());
            led
        };
        let script = async {
            let first = common::eventually_async("a leads", Duration::from_secs(5), || async {
                locks
                    .leader(NAME)
                    .await
                    .unwrap()
                    .filter(|l| l.candidate == "a")
            })
            .await;
            common::eventually_async("b in line", Duration::from_secs(5), || async {
                let info = locks.inspect(NAME).await.unwrap()?;
                (info.waiters.len() == 1).then_some(())
            })
            .await;
            ca.resign();
            // b leads once its body runs (the store hands it the key a little before).
            common::eventually_async("b's body", Duration::from_secs(5), || async {
                let log = log.lock().unwrap();
                log.iter().any(|t| t.0 == "b").then_some(())
            })
            .await;
            let second = locks.leader(NAME).await.unwrap().unwrap();
            assert_eq!(second.candidate, "b");
            assert!(second.fence > first.fence);
            assert_eq!(second.metadata, "10.0.0.2");
            // Since the hand-off: not before a's term began (in the same millisecond, on a
            // fast store).
            assert!(first.since.is_some() && second.since >= first.since);
            // a campaigns again, in line behind b; its shut-down drops its wait at once (well
            // within the 5 s a wait in line lasts before it is asked again).
            common::eventually_async("a in line", Duration::from_secs(5), || async {
                let info = locks.inspect(NAME).await.unwrap()?;
                (info.waiters.len() == 1).then_some(())
            })
            .await;
            ca.shut_down();
            tokio::time::timeout(Duration::from_secs(4), a_returned)
                .await
                .expect("a's shut-down in line was heard at once")
                .unwrap();
            // The dropped acquire's task cancels its place in line (it does not outlive it).
            let info =
                common::eventually_async("a's place gone", Duration::from_secs(5), || async {
                    let info = locks.inspect(NAME).await.unwrap()?;
                    info.waiters.is_empty().then_some(info)
                })
                .await;
            assert_eq!(info.holder().unwrap().owner, "b");
            cb.shut_down();
        };
        let all = async { tokio::join!(run_a, b.run(body("b")), script) };
        let (ra, rb, ()) = tokio::time::timeout(Duration::from_secs(30), all)
            .await
            .unwrap();
        assert_eq!(
            (ra.unwrap(), rb.unwrap()),
            (1, 1),
            "{:?}",
            log.lock().unwrap()
        );
        assert_eq!(locks.leader(NAME).await.unwrap(), None);
        let log = log.lock().unwrap().clone();
        assert_eq!(log.len(), 4, "{log:?}");
        assert_eq!(log[0].0, "a");
        assert_eq!(log[1], ("a", log[0].1, Some(StopReason::Resigned)));
        assert_eq!(log[2].0, "b");
        assert!(log[2].1 > log[0].1);
        assert_eq!(log[3], ("b", log[2].1, Some(StopReason::ShutDown)));
    });
}

/// A body that ignores its stop signal is dropped (cancelled) once the grace has passed, and
/// its lease released: the next candidate leads, and the body never ran again.
#[test]
fn a_body_that_ignores_its_stop_is_dropped_after_the_grace() {
    common::runtime(2).block_on(async {
        let locks = Locks::open("memory:", "aio_election_grace").await.unwrap();
        let mut once = options(1_000);
        once.once = true;
        let a = Election::new(&locks, NAME, "a", once).unwrap();
        let control = a.control();
        let dropped = Arc::new(AtomicBool::new(false));
        let stopped_at = Arc::new(Mutex::new(None));
        let body = {
            let (dropped, stopped_at) = (Arc::clone(&dropped), Arc::clone(&stopped_at));
            move |term: lock_store::aio::election::Term| {
                let guard = Dropped(Arc::clone(&dropped));
                let stopped_at = Arc::clone(&stopped_at);
                async move {
                    let _guard = guard;
                    let reason = term.stop().await;
                    *stopped_at.lock().unwrap() = Some((reason, std::time::Instant::now()));
                    std::future::pending::<()>().await;
                }
            }
        };
        let script = async {
            common::eventually_async("a leads", Duration::from_secs(5), || async {
                locks.leader(NAME).await.unwrap()
            })
            .await;
            control.resign();
        };
        let (led, ()) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(a.run(body), script)
        })
        .await
        .expect("the ignoring body was dropped, not waited for");
        assert_eq!(led.unwrap(), 1);
        assert!(dropped.load(Ordering::SeqCst));
        let (reason, at) = stopped_at.lock().unwrap().unwrap();
        assert_eq!(reason, StopReason::Resigned);
        // Dropped no sooner than the grace (a fifth of the TTL) after its stop signal.
        assert!(at.elapsed() >= Duration::from_millis(200));
        assert_eq!(locks.leader(NAME).await.unwrap(), None);
    });
}

/// On every store this build has: dropping a leader's `run` future mid-term drops its body and
/// releases its lease, so the candidate in line leads long before the lease's TTL (30 s) could
/// have freed the key, with a higher fence.
/// A campaign whose candidate id already waits in line (a replica restarted under the id it
/// died waiting with; here another caller with that id, still waiting) asks again after its
/// retry pause instead of ending with `AlreadyWaiting` (it did), and leads once the key comes
/// to that id. The blocking face's process test kills the waiter on every store.
#[test]
fn a_campaign_whose_id_already_waits_asks_again() {
    common::runtime(2).block_on(async {
        let locks = Locks::open("memory:", "aio_election_waits").await.unwrap();
        let ttl = Duration::from_secs(30);
        let held = locks.acquire(NAME, "x", ttl, Duration::ZERO).await.unwrap();
        let waiting = tokio::spawn({
            let locks = locks.clone();
            async move { locks.acquire(NAME, "b", ttl, Duration::from_secs(60)).await }
        });
        in_line(&locks, "b").await;
        let b = Election::new(&locks, NAME, "b", options(1_000)).unwrap();
        let cb = b.control();
        let led: Arc<Mutex<Option<Fence>>> = Arc::default();
        let body = recording(&led);
        let mut run = Box::pin(b.run(body));
        // Its first ask meets the place its id already has; the holder leaves a little later.
        tokio::select! {
            r = &mut run => panic!("the campaign ended: {r:?}"),
            () = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
        held.release().await.unwrap();
        let fence = tokio::select! {
            r = &mut run => panic!("the campaign ended: {r:?}"),
            f = common::eventually_async("b's body", Duration::from_secs(10), || async {
                *led.lock().unwrap()
            }) => f,
        };
        let leader = locks.leader(NAME).await.unwrap().unwrap();
        assert_eq!((leader.candidate.as_str(), leader.fence), ("b", fence));
        cb.shut_down();
        let terms = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the shut-down ends the run");
        assert_eq!(terms.unwrap(), 1);
        assert!(locks.leader(NAME).await.unwrap().is_none());
        drop(waiting.await);
    });
}

/// A campaign that finds the line full (`queue-full`: the key's waiters at the store's
/// `max_waiters_per_key` of 1) asks again after its retry pause instead of ending (it did, on
/// every face), and leads once there is room: the holder leaves, the one in line leads and
/// leaves, and the campaign is handed the key with a higher fence.
#[test]
fn a_full_line_only_delays_an_async_campaign() {
    common::runtime(2).block_on(async {
        let limits = lock_store::Limits {
            max_waiters_per_key: 1,
            ..lock_store::Limits::default()
        };
        let locks = lock_store::Options::new()
            .limits(limits)
            .open_async("memory:", "aio_election_full")
            .await
            .unwrap();
        let ttl = Duration::from_secs(30);
        let held = locks.acquire(NAME, "x", ttl, Duration::ZERO).await.unwrap();
        let waiting = tokio::spawn({
            let locks = locks.clone();
            async move { locks.acquire(NAME, "y", ttl, Duration::from_secs(60)).await }
        });
        in_line(&locks, "y").await;
        let c = Election::new(&locks, NAME, "c", options(1_000)).unwrap();
        let cc = c.control();
        let led: Arc<Mutex<Option<Fence>>> = Arc::default();
        let body = recording(&led);
        let mut run = Box::pin(c.run(body));
        // Its asks meet the full line for a while (a few retry pauses).
        tokio::select! {
            r = &mut run => panic!("the campaign ended: {r:?}"),
            () = tokio::time::sleep(Duration::from_millis(600)) => {}
        }
        assert_eq!(*led.lock().unwrap(), None);
        held.release().await.unwrap();
        let y = waiting.await.unwrap().unwrap();
        let y_fence = y.fence();
        // c asks again within its retry pause and waits in line behind y.
        tokio::select! {
            r = &mut run => panic!("the campaign ended: {r:?}"),
            () = in_line(&locks, "c") => {}
        }
        y.release().await.unwrap();
        let fence = tokio::select! {
            r = &mut run => panic!("the campaign ended: {r:?}"),
            f = common::eventually_async("c's body", Duration::from_secs(10), || async {
                *led.lock().unwrap()
            }) => f,
        };
        assert!(fence > y_fence, "{fence:?} after {y_fence:?}");
        cc.shut_down();
        let terms = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the shut-down ends the run");
        assert_eq!(terms.unwrap(), 1);
    });
}

#[test]
fn dropping_the_leaders_run_future_releases_its_lease_on_every_store() {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("aio_election_drop");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        common::runtime(2).block_on(async {
            let locks = Locks::open(&url, &ns).await.unwrap();
            let a = Election::new(&locks, NAME, "a", options(30_000)).unwrap();
            let b = Election::new(&locks, NAME, "b", options(30_000)).unwrap();
            let cb = b.control();
            let a_dropped = Arc::new(AtomicBool::new(false));
            let b_led = Arc::new(AtomicBool::new(false));
            let a_body = {
                let a_dropped = Arc::clone(&a_dropped);
                move |term: lock_store::aio::election::Term| {
                    let guard = Dropped(Arc::clone(&a_dropped));
                    async move {
                        let _guard = guard;
                        term.stop().await;
                    }
                }
            };
            let b_body = {
                let b_led = Arc::clone(&b_led);
                move |term: lock_store::aio::election::Term| {
                    let b_led = Arc::clone(&b_led);
                    async move {
                        b_led.store(true, Ordering::SeqCst);
                        term.stop().await;
                    }
                }
            };
            let (a_leads, b_starts) = tokio::sync::oneshot::channel::<()>();
            let run_b = async {
                b_starts.await.unwrap(); // b campaigns once a leads
                b.run(b_body).await
            };
            let script = async {
                let mut a_run = Box::pin(a.run(a_body));
                let leads = |who: &'static str| {
                    let locks = &locks;
                    // Before a's first call installs the namespace, reading it fails: not yet.
                    move || async move {
                        let leader = locks.leader(NAME).await.ok().flatten();
                        leader.filter(|l| l.candidate == who)
                    }
                };
                let first = tokio::select! {
                    _ = &mut a_run => panic!("{label}: a's run ended"),
                    l = common::eventually_async("a leads", Duration::from_secs(10), leads("a")) => l,
                };
                a_leads.send(()).unwrap();
                let b_in_line = || async {
                    let info = locks.inspect(NAME).await.unwrap()?;
                    (info.waiters.len() == 1).then_some(())
                };
                tokio::select! {
                    _ = &mut a_run => panic!("{label}: a's run ended"),
                    () = common::eventually_async("b in line", Duration::from_secs(10), b_in_line) => {},
                };
                assert!(!a_dropped.load(Ordering::SeqCst), "{label}");
                drop(a_run);
                assert!(a_dropped.load(Ordering::SeqCst), "{label}: a's body dropped");
                // Half the TTL: a lease left to expire would free the key only after 30 s.
                let next =
                    common::eventually_async("b leads", Duration::from_secs(15), leads("b")).await;
                assert!(next.fence > first.fence, "{label}");
                common::eventually_async("b's body", Duration::from_secs(10), || async {
                    b_led.load(Ordering::SeqCst).then_some(())
                })
                .await;
                cb.shut_down();
            };
            let (led, ()) = tokio::time::timeout(Duration::from_secs(60), async {
                tokio::join!(run_b, script)
            })
            .await
            .unwrap_or_else(|_| panic!("{label}: the script ran out of time"));
            assert_eq!(led.unwrap(), 1, "{label}");
            assert_eq!(locks.leader(NAME).await.unwrap(), None, "{label}");
        });
    }
}

/// A gray failure on every server store: the async leader's path goes silent (a proxy that
/// forwards nothing and keeps its connections open). Its extensions hang, yet its body is told
/// `unrenewed` before the next leader's body begins (one process, one clock: the believed
/// terms do not overlap), and its shut-down, asked while the path is still silent, ends its run
/// within the calls' bound (its release once waited for its own unpolled extension for good).
#[test]
fn an_async_leader_cut_off_from_its_store_stops_before_the_next_leads() {
    /// (who, fence, when, why it stopped: `None` when it began).
    type Event = (&'static str, Fence, std::time::Instant, Option<StopReason>);
    for (label, url) in common::server_urls() {
        let ns = common::unique_namespace("aio_election_gray");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let proxy = common::proxy::Proxy::for_url(&url);
        common::runtime(2).block_on(async {
            let cut_off = Locks::open(&proxy.url(&url), &ns).await.unwrap();
            let locks = Locks::open(&url, &ns).await.unwrap();
            let a = Election::new(&cut_off, NAME, "cut", options(1_000)).unwrap();
            let b = Election::new(&locks, NAME, "other", options(1_000)).unwrap();
            let (ca, cb) = (a.control(), b.control());
            let log: Arc<Mutex<Vec<Event>>> = Arc::default();
            let body = |who: &'static str| {
                let log = Arc::clone(&log);
                move |term: lock_store::aio::election::Term| {
                    let log = Arc::clone(&log);
                    async move {
                        let now = std::time::Instant::now;
                        log.lock().unwrap().push((who, term.fence(), now(), None));
                        let reason = term.stop().await;
                        log.lock()
                            .unwrap()
                            .push((who, term.fence(), now(), Some(reason)));
                    }
                }
            };
            let (a_leads, b_starts) = tokio::sync::oneshot::channel::<()>();
            let (a_ended_tx, a_ended) = tokio::sync::oneshot::channel::<()>();
            let run_b = async {
                b_starts.await.unwrap();
                b.run(body("other")).await
            };
            let began = |who: &'static str| {
                let log = Arc::clone(&log);
                move || {
                    let log = Arc::clone(&log);
                    async move {
                        let log = log.lock().unwrap();
                        log.iter().find(|e| e.0 == who && e.3.is_none()).copied()
                    }
                }
            };
            let script = async {
                common::eventually_async("cut leads", Duration::from_secs(10), began("cut")).await;
                a_leads.send(()).unwrap();
                common::eventually_async("other in line", Duration::from_secs(10), || async {
                    let info = locks.inspect(NAME).await.ok().flatten()?;
                    (info.waiters.len() == 1).then_some(())
                })
                .await;
                proxy.set(common::proxy::Fault::Blackhole);
                let next = common::eventually_async(
                    "other leads",
                    Duration::from_secs(20),
                    began("other"),
                )
                .await;
                let log = log.lock().unwrap().clone();
                let stop = (log.iter())
                    .find(|e| e.0 == "cut" && e.3.is_some())
                    .unwrap_or_else(|| {
                        panic!("{label}: the cut-off leader never stopped: {log:?}")
                    });
                assert_eq!(stop.3, Some(StopReason::Unrenewed), "{label}");
                assert!(next.1 > stop.1, "{label}: {log:?}");
                assert!(
                    stop.2 < next.2,
                    "{label}: the cut-off leader stopped after the next began: {log:?}"
                );
                println!(
                    "{label}: stopped {:?} before the next began",
                    next.2 - stop.2
                );
                // Shut down while the path is still silent: the run ends within the calls'
                // bound (5 s), not once the path comes back.
                ca.shut_down();
                cb.shut_down();
                tokio::time::timeout(Duration::from_secs(20), a_ended)
                    .await
                    .unwrap_or_else(|_| {
                        panic!("{label}: the cut-off run hangs after its shut-down")
                    })
                    .unwrap();
                proxy.set(common::proxy::Fault::None);
                proxy.reset();
            };
            let run_a = async {
                let led = a.run(body("cut")).await;
                let _ = a_ended_tx.send(());
                led
            };
            let all = async { tokio::join!(run_a, run_b, script) };
            let (led_a, led_b, ()) = tokio::time::timeout(Duration::from_secs(90), all)
                .await
                .unwrap_or_else(|_| panic!("{label}: the campaigns did not end"));
            assert_eq!((led_a.unwrap(), led_b.unwrap()), (1, 1), "{label}");
        });
    }
}
