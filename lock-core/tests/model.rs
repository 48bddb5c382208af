//! Property tests: random operation sequences with random (sometimes backwards) time steps, run
//! against the table and against a deliberately naive reference model written here, which walks
//! time one millisecond at a time. After every step the outcome, the drained events, the gauges
//! and the next wake-up must agree, and the invariants are checked on what the table reported:
//! fences strictly increase, every expiry happens exactly at its lease's deadline and no later
//! than the first call at or after it, hand-offs follow the queue order, and a snapshot restores
//! to a table whose own snapshot is byte-identical.

use std::collections::{BTreeMap, VecDeque};

use lock_core::{
    AcquireOutcome, Duration, Event, EventKind, Fence, Grant, Instant, Limits, LockError,
    LockTable, ReleaseOutcome,
};
use proptest::prelude::*;

const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];
const OWNERS: [&str; 4] = ["o0", "o1", "o2", "o3"];

fn limits() -> Limits {
    Limits {
        max_keys: 3,
        max_waiters_per_key: 2,
        max_waiters: 4,
        expired_retention: Duration(400),
        max_expired_records: 3,
        ..Limits::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Try {
        key: usize,
        owner: usize,
        ttl: u64,
    },
    Acquire {
        key: usize,
        owner: usize,
        ttl: u64,
        wait: u64,
    },
    Release {
        key: usize,
        owner: usize,
        fence_back: u64,
    },
    Extend {
        key: usize,
        owner: usize,
        fence_back: u64,
        ttl: u64,
    },
    Cancel {
        key: usize,
        owner: usize,
    },
    Renew {
        key: usize,
        owner: usize,
        wait: u64,
    },
    Timeout,
    RoundTrip,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let owner = 0..OWNERS.len();
    prop_oneof![
        3 => (key.clone(), owner.clone(), 1..200u64).prop_map(|(key, owner, ttl)| Op::Try { key, owner, ttl }),
        3 => (key.clone(), owner.clone(), 1..200u64, 0..400u64)
            .prop_map(|(key, owner, ttl, wait)| Op::Acquire { key, owner, ttl, wait }),
        3 => (key.clone(), owner.clone(), 0..4u64)
            .prop_map(|(key, owner, fence_back)| Op::Release { key, owner, fence_back }),
        2 => (key.clone(), owner.clone(), 0..4u64, 1..200u64)
            .prop_map(|(key, owner, fence_back, ttl)| Op::Extend { key, owner, fence_back, ttl }),
        1 => (key.clone(), owner.clone()).prop_map(|(key, owner)| Op::Cancel { key, owner }),
        2 => (key, owner, 0..300u64).prop_map(|(key, owner, wait)| Op::Renew { key, owner, wait }),
        2 => Just(Op::Timeout),
        1 => Just(Op::RoundTrip),
    ]
}

/// Time steps: mostly forward, sometimes standing still, sometimes backwards.
fn step() -> impl Strategy<Value = (i64, Op)> {
    (
        prop_oneof![6 => 0..150i64, 2 => Just(0i64), 1 => -100..0i64],
        op(),
    )
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Expired(String, String, u64, u64),
    Granted(String, String, u64, u64, u64),
    TimedOut(String, String, u64),
}

fn ev(e: Event) -> Ev {
    match e.kind {
        EventKind::Expired { owner, fence, .. } => Ev::Expired(e.key, owner, fence.0, e.at.0),
        EventKind::Granted {
            owner,
            fence,
            deadline,
            ..
        } => Ev::Granted(e.key, owner, fence.0, deadline.0, e.at.0),
        EventKind::WaitTimedOut { owner } => Ev::TimedOut(e.key, owner, e.at.0),
        EventKind::Stolen { .. } => unreachable!("this model never steals"),
    }
}

#[derive(Clone, Debug)]
struct MKey {
    holder: (String, u64, u64),     // owner, fence, deadline
    queue: Vec<(String, u64, u64)>, // owner, ttl, wait deadline
}

/// The reference model: plain maps and a millisecond-by-millisecond clock.
#[derive(Clone, Debug, Default)]
struct Model {
    clock: u64,
    last_fence: u64,
    keys: BTreeMap<String, MKey>,
    expired: VecDeque<(u64, String, String, u64)>, // fence, key, owner, deadline
    events: Vec<Ev>,
}

impl Model {
    fn fence(&mut self) -> u64 {
        self.last_fence += 1;
        self.last_fence
    }

    /// Gives the key to the head of its queue at `t`, or frees it.
    fn hand_off(&mut self, key: &str, t: u64) {
        let k = self.keys.get_mut(key).unwrap();
        if k.queue.is_empty() {
            self.keys.remove(key);
            return;
        }
        let (owner, ttl, _) = k.queue.remove(0);
        self.last_fence += 1;
        let fence = self.last_fence;
        let k = self.keys.get_mut(key).unwrap();
        k.holder = (owner.clone(), fence, t + ttl);
        self.events
            .push(Ev::Granted(key.into(), owner, fence, t + ttl, t));
    }

    fn advance(&mut self, now: u64) -> u64 {
        let now = now.max(self.clock);
        for t in self.clock + 1..=now {
            let mut due: Vec<(u64, String)> = self
                .keys
                .iter()
                .filter(|(_, k)| k.holder.2 == t || k.queue.iter().any(|w| w.2 == t))
                .map(|(name, k)| (k.holder.1, name.clone()))
                .collect();
            due.sort();
            for (_, name) in due {
                let k = self.keys.get_mut(&name).unwrap();
                let (gone, kept): (Vec<_>, Vec<_>) = k.queue.drain(..).partition(|w| w.2 == t);
                k.queue = kept;
                let holder = k.holder.clone();
                for w in gone {
                    self.events.push(Ev::TimedOut(name.clone(), w.0, t));
                }
                if holder.2 == t {
                    self.events
                        .push(Ev::Expired(name.clone(), holder.0.clone(), holder.1, t));
                    let l = limits();
                    self.expired
                        .push_back((holder.1, name.clone(), holder.0, t));
                    while self.expired.len() > l.max_expired_records {
                        self.expired.pop_front();
                    }
                    self.hand_off(&name, t);
                }
            }
        }
        while self
            .expired
            .front()
            .is_some_and(|e| e.3 + limits().expired_retention.0 <= now)
        {
            self.expired.pop_front();
        }
        self.clock = now;
        now
    }

    fn waiters(&self) -> usize {
        self.keys.values().map(|k| k.queue.len()).sum()
    }

    fn next_wakeup(&self) -> Option<u64> {
        self.keys
            .values()
            .flat_map(|k| std::iter::once(k.holder.2).chain(k.queue.iter().map(|w| w.2)))
            .min()
    }

    fn acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl: u64,
        wait: u64,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let now = self.advance(now);
        let l = limits();
        let total_waiters = self.waiters();
        let Some(k) = self.keys.get(key) else {
            if self.keys.len() >= l.max_keys {
                return Err(LockError::TableFull {
                    max_keys: l.max_keys,
                });
            }
            let fence = self.fence();
            self.keys.insert(
                key.into(),
                MKey {
                    holder: (owner.into(), fence, now + ttl),
                    queue: vec![],
                },
            );
            return Ok(AcquireOutcome::Acquired(Grant {
                fence: Fence(fence),
                deadline: Instant(now + ttl),
            }));
        };
        if k.holder.0 == owner {
            return Ok(AcquireOutcome::AlreadyHeld(Grant {
                fence: Fence(k.holder.1),
                deadline: Instant(k.holder.2),
            }));
        }
        if let Some(i) = k.queue.iter().position(|w| w.0 == owner) {
            return Ok(AcquireOutcome::AlreadyWaiting { position: i + 1 });
        }
        if wait <= now {
            return Err(LockError::Held {
                deadline: Instant(k.holder.2),
            });
        }
        if k.queue.len() >= l.max_waiters_per_key {
            return Err(LockError::QueueFull {
                max_waiters_per_key: l.max_waiters_per_key,
            });
        }
        if total_waiters >= l.max_waiters {
            return Err(LockError::TooManyWaiters {
                max_waiters: l.max_waiters,
            });
        }
        let k = self.keys.get_mut(key).unwrap();
        k.queue.push((owner.into(), ttl, wait));
        Ok(AcquireOutcome::Queued {
            position: k.queue.len(),
        })
    }

    /// Why `owner` has no live lease with `fence` on `key`.
    fn refusal(&self, key: &str, owner: &str, fence: u64) -> LockError {
        if let Some(e) = self
            .expired
            .iter()
            .find(|e| e.0 == fence && e.1 == key && e.2 == owner)
        {
            return LockError::Expired {
                deadline: Instant(e.3),
            };
        }
        match self.keys.get(key) {
            Some(k) if k.holder.0 != owner => LockError::NotOwner,
            _ => LockError::NotHeld,
        }
    }

    fn holds(&self, key: &str, owner: &str, fence: u64) -> bool {
        self.keys
            .get(key)
            .is_some_and(|k| k.holder.0 == owner && k.holder.1 == fence)
    }

    fn release(&mut self, key: &str, owner: &str, fence: u64, now: u64) -> Result<(), LockError> {
        let now = self.advance(now);
        if !self.holds(key, owner, fence) {
            return Err(self.refusal(key, owner, fence));
        }
        self.hand_off(key, now);
        Ok(())
    }

    fn extend(
        &mut self,
        key: &str,
        owner: &str,
        fence: u64,
        ttl: u64,
        now: u64,
    ) -> Result<Grant, LockError> {
        let now = self.advance(now);
        if !self.holds(key, owner, fence) {
            return Err(self.refusal(key, owner, fence));
        }
        let k = self.keys.get_mut(key).unwrap();
        k.holder.2 = now + ttl;
        Ok(Grant {
            fence: Fence(fence),
            deadline: Instant(now + ttl),
        })
    }

    fn renew(
        &mut self,
        key: &str,
        owner: &str,
        wait_deadline: u64,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        self.advance(now);
        let Some(k) = self.keys.get_mut(key) else {
            return Err(LockError::NotWaiting);
        };
        if k.holder.0 == owner {
            return Ok(AcquireOutcome::AlreadyHeld(Grant {
                fence: Fence(k.holder.1),
                deadline: Instant(k.holder.2),
            }));
        }
        let Some(i) = k.queue.iter().position(|w| w.0 == owner) else {
            return Err(LockError::NotWaiting);
        };
        k.queue[i].2 = k.queue[i].2.max(wait_deadline);
        Ok(AcquireOutcome::AlreadyWaiting { position: i + 1 })
    }

    fn cancel(&mut self, key: &str, owner: &str, now: u64) -> Result<(), LockError> {
        self.advance(now);
        let Some(k) = self.keys.get_mut(key) else {
            return Err(LockError::NotWaiting);
        };
        let Some(i) = k.queue.iter().position(|w| w.0 == owner) else {
            return Err(LockError::NotWaiting);
        };
        k.queue.remove(i);
        Ok(())
    }
}

/// Invariants checked on what the table reported, independently of the model.
#[derive(Default)]
struct Observer {
    max_fence: u64,
    /// Live leases as reported: key -> (fence, deadline).
    live: BTreeMap<String, (u64, u64)>,
}

impl Observer {
    fn fence(&mut self, fence: u64) -> Result<(), TestCaseError> {
        prop_assert!(
            fence > self.max_fence,
            "fence {} after {}",
            fence,
            self.max_fence
        );
        self.max_fence = fence;
        Ok(())
    }

    fn event(&mut self, e: &Ev, clock: u64) -> Result<(), TestCaseError> {
        match e {
            Ev::Expired(key, _, fence, at) => {
                let lease = self.live.remove(key);
                prop_assert_eq!(
                    lease,
                    Some((*fence, *at)),
                    "expiry of {} not at its deadline",
                    key
                );
                prop_assert!(*at <= clock, "expiry reported before it happened");
            }
            Ev::Granted(key, _, fence, deadline, _) => {
                self.fence(*fence)?;
                prop_assert!(!self.live.contains_key(key), "two live leases on {}", key);
                self.live.insert(key.clone(), (*fence, *deadline));
            }
            Ev::TimedOut(_, _, at) => prop_assert!(*at <= clock),
        }
        Ok(())
    }

    fn granted(&mut self, key: &str, g: Grant) -> Result<(), TestCaseError> {
        self.fence(g.fence.0)?;
        prop_assert!(!self.live.contains_key(key), "two live leases on {}", key);
        self.live.insert(key.into(), (g.fence.0, g.deadline.0));
        Ok(())
    }

    /// Nothing the table still reports as live is past its deadline.
    fn settled(&self, clock: u64) -> Result<(), TestCaseError> {
        for (key, (_, deadline)) in &self.live {
            prop_assert!(
                *deadline > clock,
                "lease on {} outlived its deadline {} at {}",
                key,
                deadline,
                clock
            );
        }
        Ok(())
    }
}

fn run(steps: Vec<(i64, Op)>) -> Result<(), TestCaseError> {
    let mut table = LockTable::new(limits()).unwrap();
    let mut model = Model::default();
    let mut obs = Observer::default();
    let mut now: u64 = 0;
    let mut fences_by_key: BTreeMap<usize, u64> = BTreeMap::new();
    for (dt, op) in steps {
        now = now.saturating_add_signed(dt);
        let fence_for = |key: usize, back: u64, fences: &BTreeMap<usize, u64>| {
            fences
                .get(&key)
                .copied()
                .unwrap_or(1)
                .saturating_sub(back)
                .max(1)
        };
        // Granted events of a release happen after its outcome; the others before.
        let mut released: Option<String> = None;
        match &op {
            Op::Try { key, owner, ttl }
            | Op::Acquire {
                key, owner, ttl, ..
            } => {
                let wait = if let Op::Acquire { wait, .. } = op {
                    now + wait
                } else {
                    0
                };
                let got = table.acquire(
                    KEYS[*key],
                    OWNERS[*owner],
                    Duration(*ttl),
                    Instant(wait),
                    Instant(now),
                );
                let want = model.acquire(KEYS[*key], OWNERS[*owner], *ttl, wait, now);
                prop_assert_eq!(&got, &want);
                let events: Vec<Ev> = table.drain_events().map(ev).collect();
                for e in &events {
                    obs.event(e, model.clock)?;
                }
                if let Ok(AcquireOutcome::Acquired(g)) = got {
                    obs.granted(KEYS[*key], g)?;
                    fences_by_key.insert(*key, g.fence.0);
                }
                prop_assert_eq!(events, std::mem::take(&mut model.events));
            }
            Op::Release {
                key,
                owner,
                fence_back,
            } => {
                let fence = fence_for(*key, *fence_back, &fences_by_key);
                let got = table
                    .release(KEYS[*key], OWNERS[*owner], Fence(fence), Instant(now))
                    .map(|o| assert_eq!(o, ReleaseOutcome::Released));
                prop_assert_eq!(&got, &model.release(KEYS[*key], OWNERS[*owner], fence, now));
                if got.is_ok() {
                    released = Some(KEYS[*key].into());
                }
            }
            Op::Extend {
                key,
                owner,
                fence_back,
                ttl,
            } => {
                let fence = fence_for(*key, *fence_back, &fences_by_key);
                let got = table.extend(
                    KEYS[*key],
                    OWNERS[*owner],
                    Fence(fence),
                    Duration(*ttl),
                    Instant(now),
                );
                prop_assert_eq!(
                    &got,
                    &model.extend(KEYS[*key], OWNERS[*owner], fence, *ttl, now)
                );
                if let Ok(g) = got {
                    let events: Vec<Ev> = table.drain_events().map(ev).collect();
                    for e in &events {
                        obs.event(e, model.clock)?;
                    }
                    prop_assert_eq!(events, std::mem::take(&mut model.events));
                    obs.live
                        .insert(KEYS[*key].into(), (g.fence.0, g.deadline.0));
                }
            }
            Op::Cancel { key, owner } => {
                let got = table.cancel_wait(KEYS[*key], OWNERS[*owner], Instant(now));
                prop_assert_eq!(&got, &model.cancel(KEYS[*key], OWNERS[*owner], now));
            }
            Op::Renew { key, owner, wait } => {
                let got = table.renew_wait(
                    KEYS[*key],
                    OWNERS[*owner],
                    Instant(now + wait),
                    Instant(now),
                );
                let want = model.renew(KEYS[*key], OWNERS[*owner], now + wait, now);
                prop_assert_eq!(&got, &want);
                let events: Vec<Ev> = table.drain_events().map(ev).collect();
                for e in &events {
                    obs.event(e, model.clock)?;
                }
                prop_assert_eq!(events, std::mem::take(&mut model.events));
            }
            Op::Timeout => {
                table.handle_timeout(Instant(now));
                model.advance(now);
            }
            Op::RoundTrip => {
                let bytes = table.snapshot(Instant(now));
                model.advance(now);
                let events: Vec<Ev> = table.drain_events().map(ev).collect();
                for e in &events {
                    obs.event(e, model.clock)?;
                }
                prop_assert_eq!(events, std::mem::take(&mut model.events));
                let mut restored = LockTable::from_snapshot(limits(), 0, &bytes).unwrap();
                prop_assert_eq!(
                    restored.snapshot(Instant(model.clock)),
                    bytes,
                    "restored table differs"
                );
                table = restored;
            }
        }
        let events: Vec<Ev> = table.drain_events().map(ev).collect();
        for e in &events {
            if released.is_some() && matches!(e, Ev::Granted(..)) {
                obs.live.remove(released.as_deref().unwrap_or_default());
            }
            obs.event(e, model.clock)?;
        }
        if let Some(key) = released {
            if !events
                .iter()
                .any(|e| matches!(e, Ev::Granted(k, ..) if *k == key))
            {
                obs.live.remove(&key);
            }
        }
        prop_assert_eq!(events, std::mem::take(&mut model.events));
        obs.settled(model.clock)?;
        let stats = table.stats(Instant(now));
        prop_assert_eq!(stats.clock, Instant(model.clock));
        prop_assert_eq!(stats.live_leases, model.keys.len());
        prop_assert_eq!(stats.waiters, model.waiters());
        prop_assert_eq!(stats.last_fence, Fence(model.last_fence));
        prop_assert_eq!(stats.expired_records, model.expired.len());
        prop_assert_eq!(table.next_wakeup(), model.next_wakeup().map(Instant));
        for key in KEYS {
            let info = table.inspect(key, Instant(now)).unwrap();
            let want = model.keys.get(key);
            prop_assert_eq!(
                info.as_ref()
                    .and_then(|i| i.holder())
                    .map(|h| (h.fence.0, h.deadline.0)),
                want.map(|k| (k.holder.1, k.holder.2))
            );
            let queue: Vec<String> = info
                .map(|i| i.waiters.into_iter().map(|w| w.owner).collect())
                .unwrap_or_default();
            let want_queue: Vec<String> = want
                .map(|k| k.queue.iter().map(|w| w.0.clone()).collect())
                .unwrap_or_default();
            prop_assert_eq!(queue, want_queue);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn table_matches_the_reference_model(steps in prop::collection::vec(step(), 1..80)) {
        run(steps)?;
    }
}
