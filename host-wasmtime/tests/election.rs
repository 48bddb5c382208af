//! Leader election among the plugins of one host (`host_wasmtime::election`), on a manual
//! clock: every term moves only when the test moves time, so each promise is attacked at an
//! exact instant (`docs/election.md`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use host_wasmtime::election::{BadCampaign, CampaignOptions, Control, Election, StopReason};
use host_wasmtime::{Error, LockHost, ManualClock};
use lock_core::{Fence, LockError};

const NAME: &str = "indexer";

fn host(clock: &ManualClock) -> LockHost {
    LockHost::builder().clock(clock.clone()).build().unwrap()
}

fn options(ttl_ms: u64) -> CampaignOptions {
    CampaignOptions::new(lock_core::Duration(ttl_ms))
}

/// Waits (real time, bounded) until `done` holds.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2_000 {
        if done() {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
    panic!("timed out waiting for {what}");
}

/// A resource that refuses a write with a fence older than one it accepted.
#[derive(Default)]
struct Fenced(Mutex<Vec<(String, Fence)>>);

impl Fenced {
    fn write(&self, who: &str, fence: Fence) -> bool {
        let mut writes = self.0.lock().unwrap();
        if writes.last().is_some_and(|(_, f)| *f > fence) {
            return false;
        }
        writes.push((who.to_owned(), fence));
        true
    }

    fn wrote(&self, who: &str) -> bool {
        self.0.lock().unwrap().iter().any(|(w, _)| w == who)
    }
}

/// Shuts every campaign down, the leader's last (so that no waiter can be handed a term before
/// it was asked to leave), and lets waiting ones see their wait end (their wait is on the
/// host's clock).
fn shut_down_all(
    host: &LockHost,
    clock: &ManualClock,
    controls: &[(&str, Control)],
    running: &AtomicUsize,
) {
    let leader = host.leader(NAME).unwrap().map(|l| l.candidate);
    let (last, first): (Vec<_>, Vec<_>) = controls
        .iter()
        .partition(|(c, _)| leader.as_deref() == Some(*c));
    for (_, c) in first.iter().chain(&last) {
        c.shut_down();
    }
    let returned = (0..2_000).any(|_| {
        clock.advance(1_000);
        host.tick();
        thread::sleep(Duration::from_millis(5));
        running.load(Ordering::SeqCst) == 0
    });
    assert!(returned || thread::panicking(), "a campaign did not return");
}

/// Shuts every campaign down when dropped, also while a failed assertion unwinds (the scope
/// would otherwise wait for the campaigns' threads forever).
struct Leave<'a> {
    host: &'a LockHost,
    clock: &'a ManualClock,
    controls: &'a [(&'a str, Control)],
    running: &'a AtomicUsize,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        shut_down_all(self.host, self.clock, self.controls, self.running);
    }
}

/// Three plugins: one leads, the others wait in line; a resignation hands the key to the next
/// at once (the clock does not move), with a higher fence; never two bodies at a time.
#[test]
fn three_plugins_elect_one_and_a_resignation_hands_over_at_once() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let inside = AtomicUsize::new(0);
    let running = AtomicUsize::new(3);
    let terms: Mutex<Vec<(String, Fence, Option<StopReason>)>> = Mutex::default();
    let elections: Vec<Election> = ["a", "b", "c"]
        .iter()
        .map(|c| {
            Election::new(&host, NAME, c, options(1_000))
                .unwrap()
                .metadata(&format!("plugin {c}"))
        })
        .collect();
    let controls: Vec<(&str, Control)> = ["a", "b", "c"]
        .into_iter()
        .zip(elections.iter().map(Election::control))
        .collect();
    thread::scope(|s| {
        for (i, e) in elections.iter().enumerate() {
            let (inside, running, terms) = (&inside, &running, &terms);
            let who = ["a", "b", "c"][i];
            s.spawn(move || {
                let led = e.run(|term| {
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two bodies at once"
                    );
                    terms.lock().unwrap().push((who.into(), term.fence(), None));
                    let reason = loop {
                        if let Some(r) = term.wait_stop(Duration::from_millis(50)) {
                            break r;
                        }
                    };
                    terms
                        .lock()
                        .unwrap()
                        .push((who.into(), term.fence(), Some(reason)));
                    inside.fetch_sub(1, Ordering::SeqCst);
                });
                running.fetch_sub(1, Ordering::SeqCst);
                led.unwrap()
            });
        }
        let _leave = Leave {
            host: &host,
            clock: &clock,
            controls: &controls,
            running: &running,
        };
        until("a first leader and two in line", || {
            host.inspect(NAME)
                .unwrap()
                .is_some_and(|k| k.waiters.len() == 2)
        });
        for round in 0..4 {
            let leader = host.leader(NAME).unwrap().unwrap();
            assert_eq!(leader.metadata, format!("plugin {}", leader.candidate));
            // Its body runs before it resigns (a resignation heard before the body started
            // stops the term without running it: a race of this test's threads, not the hand-off
            // it checks).
            until("the leader's body runs", || {
                terms
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|t| t.1 == leader.fence && t.2.is_none())
            });
            let at = host.now();
            let i = ["a", "b", "c"]
                .iter()
                .position(|c| *c == leader.candidate)
                .unwrap();
            controls[i].1.resign();
            until("the next leader", || {
                host.leader(NAME)
                    .unwrap()
                    .is_some_and(|l| l.fence > leader.fence)
            });
            let next = host.leader(NAME).unwrap().unwrap();
            assert_ne!(
                next.candidate, leader.candidate,
                "round {round}: FIFO hands it on"
            );
            assert_eq!(host.now(), at, "handed over with no time passing");
            assert_eq!(
                next.since,
                Some(at),
                "round {round}: it leads since the hand-off"
            );
        }
        // The last leader's body runs too before everyone shuts down.
        let last = host.leader(NAME).unwrap().unwrap();
        until("the last leader's body runs", || {
            terms
                .lock()
                .unwrap()
                .iter()
                .any(|t| t.1 == last.fence && t.2.is_none())
        });
        shut_down_all(&host, &clock, &controls, &running);
    });
    let terms = terms.into_inner().unwrap();
    // Each term began, stopped by resignation (the last by shut-down), in fence order.
    let starts: Vec<_> = terms.iter().filter(|t| t.2.is_none()).collect();
    assert_eq!(starts.len(), 5, "{terms:?}");
    assert!(starts.windows(2).all(|w| w[0].1 < w[1].1), "{terms:?}");
    for (i, pair) in terms.chunks(2).enumerate() {
        assert_eq!(
            (&pair[0].0, pair[0].1),
            (&pair[1].0, pair[1].1),
            "{terms:?}"
        );
        let expect = if i < 4 {
            StopReason::Resigned
        } else {
            StopReason::ShutDown
        };
        assert_eq!(pair[1].2, Some(expect), "{terms:?}");
    }
    assert_eq!(host.leader(NAME).unwrap(), None);
}

/// A leader whose plugin stalls past its TTL (the clock jumps): its stop signal fires, the next
/// candidate leads, and a write the stalled leader tries afterwards is refused by fence.
#[test]
fn a_stalled_leader_is_deposed_and_its_late_write_is_refused() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let fenced = Fenced::default();
    let running = AtomicUsize::new(2);
    let stops: Mutex<Vec<(String, StopReason, bool)>> = Mutex::default();
    let a = Election::new(&host, NAME, "a", options(1_000)).unwrap();
    let b = Election::new(&host, NAME, "b", options(1_000)).unwrap();
    let controls = [("a", a.control()), ("b", b.control())];
    thread::scope(|s| {
        let (fenced, running, stops) = (&fenced, &running, &stops);
        let _leave = Leave {
            host: &host,
            clock: &clock,
            controls: &controls,
            running,
        };
        s.spawn(move || {
            a.run(|term| {
                assert!(fenced.write("a", term.fence()));
                let reason = loop {
                    if let Some(r) = term.wait_stop(Duration::from_millis(20)) {
                        break r;
                    }
                };
                // Ignores its stop until the next leader has written, then writes late.
                until("b's first write", || fenced.wrote("b"));
                let late = fenced.write("a", term.fence());
                stops.lock().unwrap().push(("a".into(), reason, late));
            })
            .unwrap();
            running.fetch_sub(1, Ordering::SeqCst);
        });
        until("a leads", || {
            host.leader(NAME)
                .unwrap()
                .is_some_and(|l| l.candidate == "a")
        });
        s.spawn(move || {
            b.run(|term| {
                assert!(fenced.write("b", term.fence()));
                let reason = term.wait_stop(Duration::from_secs(10)).unwrap();
                stops.lock().unwrap().push(("b".into(), reason, true));
            })
            .unwrap();
            running.fetch_sub(1, Ordering::SeqCst);
        });
        until("b waits in line", || {
            host.inspect(NAME)
                .unwrap()
                .is_some_and(|k| k.waiters.len() == 1)
        });
        // a's plugin stalls: 1.5 TTL pass at once, nothing extends its lease.
        clock.advance(1_500);
        host.tick();
        until("b leads", || fenced.wrote("b"));
        until("a's late write", || stops.lock().unwrap().len() == 1);
        shut_down_all(&host, &clock, &controls, running);
    });
    let stops = stops.into_inner().unwrap();
    let (who, reason, late) = &stops[0];
    assert_eq!(who, "a");
    assert!(
        matches!(reason, StopReason::Unrenewed | StopReason::Lost),
        "{reason:?}"
    );
    assert!(!late, "the deposed leader's write was accepted");
    assert_eq!(stops[1].1, StopReason::ShutDown);
}

/// A body that panics shuts the campaign down: its lease is released before the panic comes
/// out of `run`, so another plugin can lead at once.
#[test]
fn a_panicking_body_releases_its_lease_and_the_panic_comes_out_of_run() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let election = Election::new(&host, NAME, "a", options(1_000)).unwrap();
    let panic = catch_unwind(AssertUnwindSafe(|| {
        election.run(|_| panic!("the body failed"))
    }))
    .unwrap_err();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"the body failed"));
    assert_eq!(host.leader(NAME).unwrap(), None);
    let next = host.try_acquire(NAME, "b", Duration::from_secs(1)).unwrap();
    assert!(next.fence() > Fence(0));
}

/// Bad options and a bad name are refused with their typed errors, and nothing is held.
#[test]
fn bad_options_and_a_bad_name_are_refused() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let mut bad = options(1_000);
    bad.margin = lock_core::Duration(600);
    assert!(matches!(
        Election::new(&host, NAME, "a", bad).err(),
        Some(BadCampaign::MarginTooLong { .. })
    ));
    let election = Election::new(&host, "", "a", options(1_000)).unwrap();
    let err = election.run(|_| unreachable!("no term")).unwrap_err();
    assert!(matches!(err, Error::Lock(LockError::KeyEmpty)), "{err:?}");
    assert_eq!(host.stats().unwrap().live_leases, 0);
}

/// A candidate whose wait in line ends without a grant (each wait lasts 5 s, then it asks
/// again) is back in line at once, not after the retry pause: a resignation at that moment
/// still hands the key over with no time passing.
#[test]
fn a_wait_in_line_that_ends_asks_again_at_once() {
    let clock = ManualClock::at(0);
    let host = host(&clock);
    let running = AtomicUsize::new(2);
    let a = Election::new(&host, NAME, "a", options(30_000)).unwrap();
    let b = Election::new(&host, NAME, "b", options(30_000)).unwrap();
    let controls = [("a", a.control()), ("b", b.control())];
    let waiting = || {
        host.inspect(NAME)
            .unwrap()
            .is_some_and(|k| k.waiters.len() == 1)
    };
    thread::scope(|s| {
        let running = &running;
        let _leave = Leave {
            host: &host,
            clock: &clock,
            controls: &controls,
            running,
        };
        for e in [&a, &b] {
            s.spawn(move || {
                e.run(|term| {
                    let _ = term.wait_stop(Duration::from_secs(30));
                })
                .unwrap();
                running.fetch_sub(1, Ordering::SeqCst);
            });
            until("a leader and its follower", || {
                host.leader(NAME).unwrap().is_some()
            });
        }
        until("b in line", waiting);
        let first = host.leader(NAME).unwrap().unwrap();
        // b's wait in line ends (5 s on the host's clock; a's lease lasts 30 s)...
        clock.advance(5_000);
        host.tick();
        // ...and b is back in line with no time passing (a failed assertion shuts every
        // campaign down through `_leave`: a failure, not a hang).
        let back = within(|| {
            waiting()
                && host.inspect(NAME).unwrap().unwrap().waiters[0].wait_deadline
                    > lock_core::Instant(5_000)
        });
        assert!(back, "b was not back in line at once");
        controls[0].1.resign();
        let handed = within(|| {
            host.leader(NAME)
                .unwrap()
                .is_some_and(|l| l.fence > first.fence)
        });
        assert!(handed, "the resignation did not hand the key to b");
        assert_eq!(host.now(), lock_core::Instant(5_000));
    });
}

/// Runs `candidate`'s campaign on `host` while `x` holds the key and `waiter` waits in line, so
/// that its first ask is refused; checks that the refusal does not end it (it did); frees the
/// line (the waiter's lease is kept to the end if `keep`, else released), moves the clock by
/// the retry pause, and checks that the campaign leads. Answers the fence its body led with and
/// the one the waiter was handed.
fn leads_after_a_refused_ask(
    host: &LockHost,
    clock: &ManualClock,
    candidate: &str,
    waiter: &str,
    keep: bool,
) -> (Fence, Fence) {
    let ttl = Duration::from_secs(30);
    let held = host.acquire(NAME, "x", ttl, Duration::ZERO).unwrap();
    let running = AtomicUsize::new(1);
    let election = Election::new(host, NAME, candidate, options(30_000)).unwrap();
    let controls = [(candidate, election.control())];
    let ended: Mutex<Option<Result<u64, Error>>> = Mutex::new(None);
    let body_fence: Mutex<Option<Fence>> = Mutex::new(None);
    let handed = thread::scope(|s| {
        let (running, ended, body_fence) = (&running, &ended, &body_fence);
        let waiting = s.spawn(move || host.acquire(NAME, waiter, ttl, Duration::from_secs(60)));
        until("the waiter in line", || {
            host.inspect(NAME)
                .unwrap()
                .is_some_and(|k| k.waiters.len() == 1)
        });
        let _leave = Leave {
            host,
            clock,
            controls: &controls,
            running,
        };
        let election = &election;
        s.spawn(move || {
            let r = election.run(|term| {
                *body_fence.lock().unwrap() = Some(term.fence());
                let _ = term.wait_stop(Duration::from_secs(30));
            });
            *ended.lock().unwrap() = Some(r);
            running.fetch_sub(1, Ordering::SeqCst);
        });
        // Its first ask is refused: it waits its retry pause (1 s of the host's clock, which
        // does not move), not ending.
        let gave_up = within(|| ended.lock().unwrap().is_some());
        // Free the line before asserting, so that a failure ends the test instead of leaving
        // the waiter blocked on a clock that does not move.
        held.release().unwrap();
        let lease = waiting.join().unwrap().unwrap();
        let handed = lease.fence();
        let kept = if keep {
            Some(lease)
        } else {
            lease.release().unwrap();
            None
        };
        assert!(!gave_up, "the campaign ended: {:?}", ended.lock().unwrap());
        clock.advance(1_000);
        host.tick();
        assert!(
            within(|| body_fence.lock().unwrap().is_some()),
            "{candidate} did not lead: {:?}",
            ended.lock().unwrap()
        );
        let leader = host.leader(NAME).unwrap().unwrap();
        assert_eq!(leader.candidate, candidate);
        assert_eq!(Some(leader.fence), *body_fence.lock().unwrap());
        drop(kept);
        handed
    });
    assert_eq!(ended.into_inner().unwrap().unwrap().unwrap(), 1);
    (body_fence.into_inner().unwrap().unwrap(), handed)
}

/// A campaign whose candidate id already waits in line (another caller of the host waiting as
/// it) asks again after its retry pause instead of ending with `AlreadyWaiting` (it did), and
/// leads once the key comes to that id, with the fence that waiter was handed.
#[test]
fn a_campaign_whose_id_already_waits_asks_again() {
    let clock = ManualClock::at(0);
    let (led, handed) = leads_after_a_refused_ask(&host(&clock), &clock, "b", "b", true);
    assert_eq!(led, handed);
}

/// A campaign that finds the line full (`queue-full`: the key's waiters at the host's limit)
/// asks again after its retry pause instead of ending (it did), and leads once there is room.
#[test]
fn a_full_line_only_delays_a_campaign() {
    let clock = ManualClock::at(0);
    let limits = lock_core::Limits {
        max_waiters_per_key: 1,
        ..lock_core::Limits::default()
    };
    let host = LockHost::builder()
        .clock(clock.clone())
        .limits(limits)
        .build()
        .unwrap();
    let (led, handed) = leads_after_a_refused_ask(&host, &clock, "c", "y", false);
    assert!(led > handed, "a new term after y's: {led:?} {handed:?}");
}

/// Whether `done` holds within 2 s (real time).
fn within(mut done: impl FnMut() -> bool) -> bool {
    (0..400).any(|_| {
        let ok = done();
        if !ok {
            thread::sleep(Duration::from_millis(5));
        }
        ok
    })
}
