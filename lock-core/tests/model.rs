//! Property tests: random operation sequences with random (sometimes backwards) time steps, run
//! against the table and against a deliberately naive reference model written here, which walks
//! time one millisecond at a time. Requests are exclusive or shared, on plain keys or keys of 2
//! permits (the lock kinds' one model: a shared lease takes a place, an exclusive one the key),
//! and a steal takes a key from all its holders.
//! After every step the outcome, the drained events, the gauges, every key's leases and queue and
//! the next wake-up must agree, and the invariants are checked on what the table reported: fences
//! strictly increase, never an exclusive lease beside another, never more shared leases than the
//! key's places, every expiry happens exactly at its lease's deadline and no later than the first
//! call at or after it, hand-offs follow the queue order, and a snapshot restores to a table whose
//! own snapshot is byte-identical.

use std::collections::{BTreeMap, VecDeque};

use lock_core::{
    AcquireOptions, AcquireOutcome, Duration, Event, EventKind, Fence, Grant, Instant, Limits,
    LockError, LockTable, Mode, ReleaseOutcome,
};
use proptest::prelude::*;

const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];
const OWNERS: [&str; 4] = ["o0", "o1", "o2", "o3"];

fn limits() -> Limits {
    Limits {
        max_keys: 3,
        max_waiters_per_key: 2,
        max_waiters: 4,
        max_holders_per_key: 3,
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
        kind: Kind,
    },
    Acquire {
        key: usize,
        owner: usize,
        ttl: u64,
        wait: u64,
        kind: Kind,
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
    Steal {
        key: usize,
        owner: usize,
        ttl: u64,
        kind: Kind,
    },
    Renew {
        key: usize,
        owner: usize,
        wait: u64,
    },
    Timeout,
    RoundTrip,
}

/// A request's kind: shared or exclusive, on a plain key or one of 2 permits.
#[derive(Clone, Copy, Debug)]
struct Kind {
    shared: bool,
    permits: u32,
}

impl Kind {
    fn options(self) -> AcquireOptions<'static> {
        let options = if self.shared {
            AcquireOptions::shared()
        } else {
            AcquireOptions::default()
        };
        options.permits(self.permits)
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    // Mostly plain keys (so that the exclusive path stays exercised as before), shared often.
    (prop_oneof![3 => Just(0u32), 1 => Just(2u32)], any::<bool>())
        .prop_map(|(permits, shared)| Kind { shared, permits })
}

/// An operation on one of the first `keys` keys.
fn op(keys: usize) -> impl Strategy<Value = Op> {
    let key = 0..keys;
    let owner = 0..OWNERS.len();
    prop_oneof![
        3 => (key.clone(), owner.clone(), 1..200u64, kind())
            .prop_map(|(key, owner, ttl, kind)| Op::Try { key, owner, ttl, kind }),
        3 => (key.clone(), owner.clone(), 1..200u64, 0..400u64, kind())
            .prop_map(|(key, owner, ttl, wait, kind)| Op::Acquire { key, owner, ttl, wait, kind }),
        3 => (key.clone(), owner.clone(), 0..4u64)
            .prop_map(|(key, owner, fence_back)| Op::Release { key, owner, fence_back }),
        2 => (key.clone(), owner.clone(), 0..4u64, 1..200u64)
            .prop_map(|(key, owner, fence_back, ttl)| Op::Extend { key, owner, fence_back, ttl }),
        2 => (key.clone(), owner.clone()).prop_map(|(key, owner)| Op::Cancel { key, owner }),
        1 => (key.clone(), owner.clone(), 1..200u64, kind())
            .prop_map(|(key, owner, ttl, kind)| Op::Steal { key, owner, ttl, kind }),
        2 => (key, owner, 0..300u64).prop_map(|(key, owner, wait)| Op::Renew { key, owner, wait }),
        2 => Just(Op::Timeout),
        1 => Just(Op::RoundTrip),
    ]
}

/// Time steps: mostly forward, sometimes standing still, sometimes backwards; operations on
/// the first `keys` keys.
fn step(keys: usize) -> impl Strategy<Value = (i64, Op)> {
    (
        prop_oneof![6 => 0..150i64, 2 => Just(0i64), 1 => -100..0i64],
        op(keys),
    )
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Expired(String, String, u64, u64),
    /// key, owner, fence, deadline, at, shared
    Granted(String, String, u64, u64, u64, bool),
    TimedOut(String, String, u64),
    /// key, owner, fence, at
    Stolen(String, String, u64, u64),
}

fn ev(e: Event) -> Ev {
    match e.kind {
        EventKind::Expired { owner, fence, .. } => Ev::Expired(e.key, owner, fence.0, e.at.0),
        EventKind::Granted {
            owner,
            fence,
            deadline,
            mode,
            ..
        } => Ev::Granted(
            e.key,
            owner,
            fence.0,
            deadline.0,
            e.at.0,
            mode == Mode::Shared,
        ),
        EventKind::WaitTimedOut { owner } => Ev::TimedOut(e.key, owner, e.at.0),
        EventKind::Stolen { owner, fence, .. } => Ev::Stolen(e.key, owner, fence.0, e.at.0),
    }
}

/// A lease: owner, fence, deadline, shared.
#[derive(Clone, Debug)]
struct MLease {
    owner: String,
    fence: u64,
    deadline: u64,
    shared: bool,
}

/// A waiter: owner, TTL, wait deadline, shared.
#[derive(Clone, Debug)]
struct MWaiter {
    owner: String,
    ttl: u64,
    wait: u64,
    shared: bool,
}

#[derive(Clone, Debug)]
struct MKey {
    /// In grant order (never empty while the key is in the model).
    holders: Vec<MLease>,
    queue: Vec<MWaiter>,
    /// 0: a plain key; N: N places (fixed at its first grant).
    permits: u32,
}

impl MKey {
    fn places(&self) -> usize {
        match self.permits {
            0 => limits().max_holders_per_key,
            n => n as usize,
        }
    }

    /// Web Locks' "grantable": exclusive on an empty key, shared beside shared leases only
    /// while a place is free.
    fn grantable(&self, shared: bool) -> bool {
        match shared {
            false => self.holders.is_empty(),
            true => self.holders.iter().all(|h| h.shared) && self.holders.len() < self.places(),
        }
    }
}

/// The reference model: plain maps and a millisecond-by-millisecond clock.
#[derive(Clone, Debug, Default)]
struct Model {
    clock: u64,
    last_fence: u64,
    keys: BTreeMap<String, MKey>,
    /// Leases lost (expired or stolen), within the limits: fence, key, owner, when, stolen.
    expired: VecDeque<(u64, String, String, u64, bool)>,
    events: Vec<Ev>,
}

fn grant(l: &MLease) -> Grant {
    Grant {
        fence: Fence(l.fence),
        deadline: Instant(l.deadline),
    }
}

impl Model {
    fn fence(&mut self) -> u64 {
        self.last_fence += 1;
        self.last_fence
    }

    /// Grants the head of the key's queue at `t` while it is grantable (one exclusive waiter,
    /// or shared waiters up to the first exclusive one or the last place); frees the key if
    /// nothing is left.
    fn hand_off(&mut self, key: &str, t: u64) {
        loop {
            let k = self.keys.get(key).unwrap();
            let Some(head) = k.queue.first() else { break };
            if !k.grantable(head.shared) {
                break;
            }
            let w = self.keys.get_mut(key).unwrap().queue.remove(0);
            let fence = self.fence();
            let lease = MLease {
                owner: w.owner.clone(),
                fence,
                deadline: t + w.ttl,
                shared: w.shared,
            };
            self.events.push(Ev::Granted(
                key.into(),
                w.owner,
                fence,
                t + w.ttl,
                t,
                w.shared,
            ));
            self.keys.get_mut(key).unwrap().holders.push(lease);
        }
        let k = &self.keys[key];
        if k.holders.is_empty() && k.queue.is_empty() {
            self.keys.remove(key);
        }
    }

    fn advance(&mut self, now: u64) -> u64 {
        let now = now.max(self.clock);
        for t in self.clock + 1..=now {
            // Keys with something due, in order of their first lease's fence.
            let mut due: Vec<(u64, String)> = self
                .keys
                .iter()
                .filter(|(_, k)| {
                    k.holders.iter().any(|h| h.deadline == t) || k.queue.iter().any(|w| w.wait == t)
                })
                .map(|(name, k)| (k.holders[0].fence, name.clone()))
                .collect();
            due.sort();
            for (_, name) in due {
                let k = self.keys.get_mut(&name).unwrap();
                let (gone, kept): (Vec<_>, Vec<_>) = k.queue.drain(..).partition(|w| w.wait == t);
                k.queue = kept;
                for w in gone {
                    self.events.push(Ev::TimedOut(name.clone(), w.owner, t));
                }
                let k = self.keys.get_mut(&name).unwrap();
                let (ended, live): (Vec<_>, Vec<_>) =
                    k.holders.drain(..).partition(|h| h.deadline == t);
                k.holders = live;
                for h in ended {
                    self.events
                        .push(Ev::Expired(name.clone(), h.owner.clone(), h.fence, t));
                    self.remember((h.fence, name.clone(), h.owner, t, false));
                }
                self.hand_off(&name, t);
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

    fn remember(&mut self, lost: (u64, String, String, u64, bool)) {
        self.expired.push_back(lost);
        while self.expired.len() > limits().max_expired_records {
            self.expired.pop_front();
        }
    }

    /// Takes the key now: every lease ends with a `stolen` event, the stealer leaves the queue
    /// and holds the key alone; the queue is kept. Exclusive only.
    fn steal(
        &mut self,
        key: &str,
        owner: &str,
        ttl: u64,
        kind: Kind,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let now = self.advance(now);
        let l = limits();
        if !self.keys.contains_key(key) && self.keys.len() >= l.max_keys {
            return Err(LockError::TableFull {
                max_keys: l.max_keys,
            });
        }
        if kind.shared {
            return Err(LockError::ModeMismatch);
        }
        if let Some(k) = self.keys.get(key) {
            if k.permits != kind.permits {
                return Err(LockError::PermitsMismatch { permits: k.permits });
            }
        }
        let fence = self.fence();
        let lease = MLease {
            owner: owner.into(),
            fence,
            deadline: now + ttl,
            shared: false,
        };
        let granted = grant(&lease);
        let k = self.keys.entry(key.into()).or_insert(MKey {
            holders: vec![],
            queue: vec![],
            permits: kind.permits,
        });
        let victims = std::mem::replace(&mut k.holders, vec![lease]);
        k.queue.retain(|w| w.owner != owner);
        for h in victims {
            self.events
                .push(Ev::Stolen(key.into(), h.owner.clone(), h.fence, now));
            self.remember((h.fence, key.into(), h.owner, now, true));
        }
        Ok(AcquireOutcome::Acquired(granted))
    }

    fn waiters(&self) -> usize {
        self.keys.values().map(|k| k.queue.len()).sum()
    }

    fn next_wakeup(&self) -> Option<u64> {
        self.keys
            .values()
            .flat_map(|k| {
                (k.holders.iter().map(|h| h.deadline)).chain(k.queue.iter().map(|w| w.wait))
            })
            .min()
    }

    fn acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl: u64,
        wait: u64,
        kind: Kind,
        now: u64,
    ) -> Result<AcquireOutcome, LockError> {
        let now = self.advance(now);
        let l = limits();
        let total_waiters = self.waiters();
        let lease = |fence| MLease {
            owner: owner.into(),
            fence,
            deadline: now + ttl,
            shared: kind.shared,
        };
        let Some(k) = self.keys.get(key) else {
            if self.keys.len() >= l.max_keys {
                return Err(LockError::TableFull {
                    max_keys: l.max_keys,
                });
            }
            let fence = self.fence();
            let new = lease(fence);
            let granted = grant(&new);
            self.keys.insert(
                key.into(),
                MKey {
                    holders: vec![new],
                    queue: vec![],
                    permits: kind.permits,
                },
            );
            return Ok(AcquireOutcome::Acquired(granted));
        };
        if k.permits != kind.permits {
            return Err(LockError::PermitsMismatch { permits: k.permits });
        }
        if let Some(h) = k.holders.iter().find(|h| h.owner == owner) {
            return match h.shared == kind.shared {
                true => Ok(AcquireOutcome::AlreadyHeld(grant(h))),
                false => Err(LockError::ModeMismatch),
            };
        }
        if let Some(i) = k.queue.iter().position(|w| w.owner == owner) {
            return match k.queue[i].shared == kind.shared {
                true => Ok(AcquireOutcome::AlreadyWaiting { position: i + 1 }),
                false => Err(LockError::ModeMismatch),
            };
        }
        if k.queue.is_empty() && k.grantable(kind.shared) {
            let fence = self.fence();
            let new = lease(fence);
            let granted = grant(&new);
            self.keys.get_mut(key).unwrap().holders.push(new);
            return Ok(AcquireOutcome::Acquired(granted));
        }
        if wait <= now {
            let earliest = k.holders.iter().map(|h| h.deadline).min().unwrap();
            return Err(LockError::Held {
                deadline: Instant(earliest),
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
        k.queue.push(MWaiter {
            owner: owner.into(),
            ttl,
            wait,
            shared: kind.shared,
        });
        Ok(AcquireOutcome::Queued {
            position: k.queue.len(),
        })
    }

    /// Why `owner` has no live lease with `fence` on `key`: remembered as expired or stolen,
    /// held by others only, or not held.
    fn refusal(&self, key: &str, owner: &str, fence: u64) -> LockError {
        // The table remembers lost leases within its limits only (its own clock applied
        // first, then the key's call), so a lease trimmed from the memory is `not-held`.
        let remembered = (self.expired.iter())
            .find(|e| e.0 == fence && e.1 == key && e.2 == owner)
            .map(|e| (e.3, e.4));
        match remembered {
            Some((at, false)) => {
                return LockError::Expired {
                    deadline: Instant(at),
                }
            }
            Some((at, true)) => return LockError::Stolen { at: Instant(at) },
            None => {}
        }
        match self.keys.get(key) {
            Some(k) if !k.holders.iter().any(|h| h.owner == owner) => LockError::NotOwner,
            _ => LockError::NotHeld,
        }
    }

    fn held(&self, key: &str, owner: &str, fence: u64) -> Option<usize> {
        (self.keys.get(key)?.holders.iter()).position(|h| h.owner == owner && h.fence == fence)
    }

    fn release(&mut self, key: &str, owner: &str, fence: u64, now: u64) -> Result<(), LockError> {
        let now = self.advance(now);
        let Some(i) = self.held(key, owner, fence) else {
            return Err(self.refusal(key, owner, fence));
        };
        self.keys.get_mut(key).unwrap().holders.remove(i);
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
        let Some(i) = self.held(key, owner, fence) else {
            return Err(self.refusal(key, owner, fence));
        };
        let h = &mut self.keys.get_mut(key).unwrap().holders[i];
        h.deadline = now + ttl;
        Ok(grant(h))
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
        if let Some(h) = k.holders.iter().find(|h| h.owner == owner) {
            return Ok(AcquireOutcome::AlreadyHeld(grant(h)));
        }
        let Some(i) = k.queue.iter().position(|w| w.owner == owner) else {
            return Err(LockError::NotWaiting);
        };
        k.queue[i].wait = k.queue[i].wait.max(wait_deadline);
        Ok(AcquireOutcome::AlreadyWaiting { position: i + 1 })
    }

    fn cancel(&mut self, key: &str, owner: &str, now: u64) -> Result<(), LockError> {
        let now = self.advance(now);
        let Some(k) = self.keys.get_mut(key) else {
            return Err(LockError::NotWaiting);
        };
        let Some(i) = k.queue.iter().position(|w| w.owner == owner) else {
            return Err(LockError::NotWaiting);
        };
        k.queue.remove(i);
        // A waiter leaving can make the next ones grantable (shared ones behind an exclusive).
        self.hand_off(key, now);
        Ok(())
    }
}

/// Invariants checked on what the table reported, independently of the model.
#[derive(Default)]
struct Observer {
    max_fence: u64,
    /// Live leases as reported: key -> (fence, deadline, shared), in grant order.
    live: BTreeMap<String, Vec<(u64, u64, bool)>>,
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

    /// A new lease on `key`: never exclusive beside another, never beside an exclusive one, at
    /// most `max_holders_per_key` in all.
    fn add(&mut self, key: &str, lease: (u64, u64, bool)) -> Result<(), TestCaseError> {
        self.fence(lease.0)?;
        let live = self.live.entry(key.into()).or_default();
        prop_assert!(
            live.is_empty() || (lease.2 && live.iter().all(|l| l.2)),
            "an exclusive lease beside another on {}: {:?} + {:?}",
            key,
            live,
            lease
        );
        prop_assert!(
            live.len() < limits().max_holders_per_key,
            "too many leases on {}",
            key
        );
        live.push(lease);
        Ok(())
    }

    fn remove(&mut self, key: &str, fence: u64) -> Option<(u64, u64, bool)> {
        let live = self.live.get_mut(key)?;
        let i = live.iter().position(|l| l.0 == fence)?;
        let lease = live.remove(i);
        if live.is_empty() {
            self.live.remove(key);
        }
        Some(lease)
    }

    fn event(&mut self, e: &Ev, clock: u64) -> Result<(), TestCaseError> {
        match e {
            Ev::Expired(key, _, fence, at) => {
                let lease = self.remove(key, *fence);
                prop_assert_eq!(
                    lease.map(|l| (l.0, l.1)),
                    Some((*fence, *at)),
                    "expiry of {} not at its deadline",
                    key
                );
                prop_assert!(*at <= clock, "expiry reported before it happened");
            }
            Ev::Granted(key, _, fence, deadline, _, shared) => {
                self.add(key, (*fence, *deadline, *shared))?;
            }
            Ev::TimedOut(_, _, at) => prop_assert!(*at <= clock),
            Ev::Stolen(key, _, fence, at) => {
                prop_assert!(
                    self.remove(key, *fence).is_some(),
                    "stole a lease never granted"
                );
                prop_assert!(*at <= clock);
            }
        }
        Ok(())
    }

    /// Nothing the table still reports as live is past its deadline.
    fn settled(&self, clock: u64) -> Result<(), TestCaseError> {
        for (key, leases) in &self.live {
            for (_, deadline, _) in leases {
                prop_assert!(
                    *deadline > clock,
                    "lease on {} outlived its deadline {} at {}",
                    key,
                    deadline,
                    clock
                );
            }
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
        // The lease a release ended: its hand-offs' grants come after its outcome.
        let mut released: Option<(String, u64)> = None;
        match &op {
            Op::Try {
                key,
                owner,
                ttl,
                kind,
            }
            | Op::Acquire {
                key,
                owner,
                ttl,
                kind,
                ..
            } => {
                let wait = if let Op::Acquire { wait, .. } = op {
                    now + wait
                } else {
                    0
                };
                let got = table.acquire_with(
                    KEYS[*key],
                    OWNERS[*owner],
                    Duration(*ttl),
                    Instant(wait),
                    &kind.options(),
                    Instant(now),
                );
                let want = model.acquire(KEYS[*key], OWNERS[*owner], *ttl, wait, *kind, now);
                prop_assert_eq!(&got, &want);
                let events: Vec<Ev> = table.drain_events().map(ev).collect();
                for e in &events {
                    obs.event(e, model.clock)?;
                }
                if let Ok(AcquireOutcome::Acquired(g)) = got {
                    obs.add(KEYS[*key], (g.fence.0, g.deadline.0, kind.shared))?;
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
                    released = Some((KEYS[*key].into(), fence));
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
                    let lease = obs
                        .live
                        .get_mut(KEYS[*key])
                        .and_then(|live| live.iter_mut().find(|l| l.0 == g.fence.0));
                    prop_assert!(lease.is_some(), "extended a lease the table never reported");
                    if let Some(lease) = lease {
                        lease.1 = g.deadline.0;
                    }
                }
            }
            Op::Steal {
                key,
                owner,
                ttl,
                kind,
            } => {
                let got = table.steal(
                    KEYS[*key],
                    OWNERS[*owner],
                    Duration(*ttl),
                    &kind.options(),
                    Instant(now),
                );
                let want = model.steal(KEYS[*key], OWNERS[*owner], *ttl, *kind, now);
                prop_assert_eq!(&got, &want);
                let events: Vec<Ev> = table.drain_events().map(ev).collect();
                for e in &events {
                    obs.event(e, model.clock)?;
                }
                if let Ok(AcquireOutcome::Acquired(g)) = got {
                    obs.add(KEYS[*key], (g.fence.0, g.deadline.0, false))?;
                    fences_by_key.insert(*key, g.fence.0);
                }
                prop_assert_eq!(events, std::mem::take(&mut model.events));
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
        let mut ended = released;
        for e in &events {
            // A release's time-driven events come before it; its hand-offs after it.
            if let (Some((key, fence)), Ev::Granted(..)) = (&ended, e) {
                obs.remove(key, *fence);
                ended = None;
            }
            obs.event(e, model.clock)?;
        }
        if let Some((key, fence)) = ended {
            obs.remove(&key, fence);
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
            let leases: Vec<(u64, u64, bool)> = (info.iter())
                .flat_map(|i| &i.holders)
                .map(|h| (h.fence.0, h.deadline.0, h.mode == Mode::Shared))
                .collect();
            let want_leases: Vec<(u64, u64, bool)> = (want.iter())
                .flat_map(|k| &k.holders)
                .map(|h| (h.fence, h.deadline, h.shared))
                .collect();
            prop_assert_eq!(leases, want_leases);
            prop_assert_eq!(
                info.as_ref().map_or(0, |i| i.permits),
                want.map_or(0, |k| k.permits)
            );
            let queue: Vec<(String, bool)> = (info.iter())
                .flat_map(|i| &i.waiters)
                .map(|w| (w.owner.clone(), w.mode == Mode::Shared))
                .collect();
            let want_queue: Vec<(String, bool)> = (want.iter())
                .flat_map(|k| &k.queue)
                .map(|w| (w.owner.clone(), w.shared))
                .collect();
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
    fn table_matches_the_reference_model(steps in prop::collection::vec(step(KEYS.len()), 1..80)) {
        run(steps)?;
    }

    /// One key, so that its leases and queue grow: shared holders with an exclusive waiter at
    /// the head and shared ones behind it, a head that leaves, permits filling up.
    #[test]
    fn one_busy_key_matches_the_reference_model(steps in prop::collection::vec(step(1), 1..60)) {
        run(steps)?;
    }
}
