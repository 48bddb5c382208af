//! Property tests of the lock kinds (shared leases, permits, steal, minimum hold, lock-delay,
//! metadata) on random operation sequences with random (sometimes backwards) time:
//!
//! - **The time rules**: the same calls with extra `handle_timeout` / `handle_timeout_bounded`
//!   calls slipped in at random earlier instants give the same answers and the same events (each
//!   change happens at its own instant, whatever the order in which timeouts are handled).
//! - **The invariants**, checked on what inspection shows after every call: at most one live
//!   exclusive lease per key and never beside a live shared one; no more live leases than the
//!   key's permits (or `max_holders_per_key`); nothing kept past its deadline; an owner holds at
//!   most one live lease per key and never also waits for it.
//! - **Fences** strictly increase over every grant, direct, by hand-off or by steal, and are never
//!   reissued; a snapshot restores to a table whose own snapshot is byte-identical.

use std::collections::BTreeSet;

use lock_core::{
    AcquireOptions, Duration, Event, EventKind, Fence, Instant, Limits, LockTable, Mode, Request,
    Response,
};
use proptest::prelude::*;

const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const OWNERS: [&str; 4] = ["o0", "o1", "o2", "o3"];
const METADATA: [&str; 2] = ["", "job 7"];

fn limits() -> Limits {
    Limits {
        max_waiters_per_key: 3,
        max_holders_per_key: 3,
        expired_retention: Duration(300),
        max_expired_records: 4,
        ..Limits::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// key, owner, ttl, wait (0: try), shared, permits, min hold (per mille of ttl), lock-delay,
    /// metadata, wait kept alive for (0: the whole wait).
    Acquire(usize, usize, u64, u64, bool, u32, u64, u64, bool, u64),
    Steal(usize, usize, u64, u64),
    Release(usize, usize, u64),
    Extend(usize, usize, u64, u64),
    Cancel(usize, usize),
    Renew(usize, usize, u64),
    Timeout,
    RoundTrip,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    let o = 0..OWNERS.len();
    prop_oneof![
        8 => (k.clone(), o.clone(), 1..200u64, prop_oneof![Just(0u64), 1..400u64], any::<bool>(),
              prop_oneof![3 => Just(0u32), 1 => Just(2u32)], prop_oneof![Just(0u64), 1..1000u64],
              prop_oneof![2 => Just(0u64), 1 => 1..80u64], any::<bool>(), prop_oneof![2 => Just(0u64), 1 => 1..60u64])
            .prop_map(|(k, o, t, w, s, p, m, d, md, a)| Op::Acquire(k, o, t, w, s, p, m, d, md, a)),
        1 => (k.clone(), o.clone(), 1..200u64, prop_oneof![Just(0u64), 1..80u64])
            .prop_map(|(k, o, t, d)| Op::Steal(k, o, t, d)),
        4 => (k.clone(), o.clone(), 0..3u64).prop_map(|(k, o, b)| Op::Release(k, o, b)),
        2 => (k.clone(), o.clone(), 0..3u64, 1..200u64).prop_map(|(k, o, b, t)| Op::Extend(k, o, b, t)),
        1 => (k.clone(), o.clone()).prop_map(|(k, o)| Op::Cancel(k, o)),
        2 => (k, o, 0..300u64).prop_map(|(k, o, w)| Op::Renew(k, o, w)),
        2 => Just(Op::Timeout),
        1 => Just(Op::RoundTrip),
    ]
}

/// A step: time moved by `dt`, then at most two extra timeout calls at earlier instants (each
/// `(how far back, bounded to how many changes)`) on the second table only, then the operation.
type StepSpec = (i64, Vec<(u64, Option<u32>)>, Op);

fn step() -> impl Strategy<Value = StepSpec> {
    (
        prop_oneof![6 => 0..150i64, 2 => Just(0i64), 1 => -100..0i64],
        prop::collection::vec(
            (0..150u64, prop_oneof![Just(None), (0..3u32).prop_map(Some)]),
            0..3,
        ),
        op(),
    )
}

fn request(op: &Op, now: u64, last: u64) -> Option<Request<'static>> {
    let fence = |back: u64| Fence(last.saturating_sub(back).max(1));
    let t = Instant(now);
    Some(match *op {
        Op::Acquire(k, o, ttl, wait, shared, permits, min, delay, md, alive) => {
            Request::AcquireWith {
                key: KEYS[k],
                owner: OWNERS[o],
                ttl: Duration(ttl),
                wait_deadline: Instant(if wait == 0 { 0 } else { now + wait }),
                options: AcquireOptions {
                    mode: if shared {
                        Mode::Shared
                    } else {
                        Mode::Exclusive
                    },
                    permits,
                    min_hold: Duration(ttl * min / 1000),
                    lock_delay: Duration(delay),
                    metadata: METADATA[usize::from(md)],
                    wait_alive: Duration(alive),
                },
                now: t,
            }
        }
        Op::Steal(k, o, ttl, delay) => Request::Steal {
            key: KEYS[k],
            owner: OWNERS[o],
            ttl: Duration(ttl),
            options: AcquireOptions {
                lock_delay: Duration(delay),
                ..AcquireOptions::default()
            },
            now: t,
        },
        Op::Release(k, o, back) => Request::Release {
            key: KEYS[k],
            owner: OWNERS[o],
            fence: fence(back),
            now: t,
        },
        Op::Extend(k, o, back, ttl) => Request::Extend {
            key: KEYS[k],
            owner: OWNERS[o],
            fence: fence(back),
            ttl: Duration(ttl),
            now: t,
        },
        Op::Cancel(k, o) => Request::CancelWait {
            key: KEYS[k],
            owner: OWNERS[o],
            now: t,
        },
        Op::Renew(k, o, wait) => Request::RenewWait {
            key: KEYS[k],
            owner: OWNERS[o],
            wait_deadline: Instant(now + wait),
            now: t,
        },
        Op::Timeout => Request::HandleTimeout { now: t },
        Op::RoundTrip => return None,
    })
}

/// The invariants of every key, as inspection shows them at the table's clock.
fn check_keys(table: &mut LockTable, now: u64) -> Result<(), TestCaseError> {
    let clock = table.clock();
    for key in KEYS {
        let Some(info) = table.inspect(key, Instant(now)).unwrap() else {
            continue;
        };
        let live: Vec<_> = info.holders.iter().filter(|h| h.ended.is_none()).collect();
        let exclusive = live.iter().filter(|h| h.mode == Mode::Exclusive).count();
        prop_assert!(exclusive <= 1, "{key}: two exclusive leases: {info:?}");
        prop_assert!(
            exclusive == 0 || live.len() == 1,
            "{key}: exclusive beside shared: {info:?}"
        );
        let cap = match info.permits {
            0 => limits().max_holders_per_key,
            n => n as usize,
        };
        prop_assert!(
            live.len() <= cap,
            "{key}: more leases than places: {info:?}"
        );
        for h in &info.holders {
            prop_assert!(
                h.deadline > clock,
                "{key}: kept past its deadline at {clock:?}: {info:?}"
            );
        }
        let owners: BTreeSet<&str> = live.iter().map(|h| h.owner.as_str()).collect();
        prop_assert_eq!(owners.len(), live.len(), "{}: an owner holds twice", key);
        for w in &info.waiters {
            prop_assert!(
                !owners.contains(w.owner.as_str()),
                "{key}: a holder also waits"
            );
            prop_assert!(
                clock < w.wait_deadline && w.wait_deadline <= w.wait_end,
                "{key}: a place kept past its wait's end, or after it timed out: {info:?}"
            );
        }
        let fences: Vec<u64> = info.holders.iter().map(|h| h.fence.0).collect();
        prop_assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "{key}: leases out of grant order"
        );
    }
    Ok(())
}

/// Every fence issued, in issue order: each new one above every earlier one.
#[derive(Default)]
struct Fences {
    issued: BTreeSet<u64>,
    last: u64,
}

impl Fences {
    fn issue(&mut self, fence: Fence) -> Result<(), TestCaseError> {
        prop_assert!(fence.0 > self.last, "fence {} after {}", fence.0, self.last);
        prop_assert!(
            self.issued.insert(fence.0),
            "fence {} issued twice",
            fence.0
        );
        self.last = fence.0;
        Ok(())
    }
}

fn run(steps: Vec<StepSpec>) -> Result<(), TestCaseError> {
    let mut plain = LockTable::new(limits()).unwrap();
    let mut slipped = LockTable::new(limits()).unwrap();
    let (mut plain_events, mut slipped_events): (Vec<Event>, Vec<Event>) = (vec![], vec![]);
    let mut fences = Fences::default();
    let mut now: u64 = 0;
    for (i, (dt, extra, op)) in steps.into_iter().enumerate() {
        let before = now;
        now = now.saturating_add_signed(dt);
        // Extra timeout calls, at instants between the previous call and this one.
        for (back, bound) in extra {
            let at = Instant(now.saturating_sub(back).max(before.min(now)));
            match bound {
                None => slipped.handle_timeout(at),
                Some(n) => while slipped.handle_timeout_bounded(at, n) && n > 0 {},
            }
        }
        slipped_events.extend(slipped.drain_events());
        let last = plain.stats(Instant::ZERO).last_fence.0;
        match request(&op, now, last) {
            Some(request) => {
                let got = plain.handle(request);
                let also = slipped.handle(request);
                prop_assert_eq!(&got, &also, "step {}: {:?}", i, request);
                let events: Vec<Event> = plain.drain_events().collect();
                for e in &events {
                    if let EventKind::Granted { fence, .. } = e.kind {
                        fences.issue(fence)?;
                    }
                }
                if let Response::Acquire(Ok(lock_core::AcquireOutcome::Acquired(g))) = got {
                    // A release's hand-offs come after its answer; an acquire's grant after the
                    // time-driven events before it, a steal's after the leases it ends.
                    fences.issue(g.fence)?;
                }
                plain_events.extend(events);
            }
            None => {
                let bytes = plain.snapshot(Instant(now));
                let mut restored = LockTable::from_snapshot(limits(), 0, &bytes).unwrap();
                prop_assert_eq!(restored.snapshot(Instant(now)), bytes.clone(), "step {}", i);
                plain_events.extend(plain.drain_events());
                plain = restored;
                let other = slipped.snapshot(Instant(now));
                slipped_events.extend(slipped.drain_events());
                slipped = LockTable::from_snapshot(limits(), 0, &other).unwrap();
            }
        }
        slipped_events.extend(slipped.drain_events());
        prop_assert_eq!(&plain_events, &slipped_events, "events after step {}", i);
        check_keys(&mut plain, now)?;
        check_keys(&mut slipped, now)?;
        prop_assert_eq!(
            plain.stats(Instant(now)),
            slipped.stats(Instant(now)),
            "step {}",
            i
        );
        prop_assert_eq!(plain.next_wakeup(), slipped.next_wakeup());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_kinds_keep_the_time_rules_the_invariants_and_the_fences(
        steps in prop::collection::vec(step(), 1..70)
    ) {
        run(steps)?;
    }
}
