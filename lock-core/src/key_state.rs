//! The per-key state machine: one key's lease and its FIFO wait queue.
//!
//! [`KeyState`] knows nothing of tables, hashing, timers or other keys. Every transition takes the
//! caller's `now` and a [`FenceSource`], first applies every time-driven change up to `now` (expiry,
//! hand-off, wait timeout), then the request, and returns a [`Transition`]: the outcome and the
//! events it produced, each with its true instant. A host that keeps per-key records elsewhere
//! (a database row, a Redis hash) can load a record, apply a transition and store it back with
//! compare-and-set; [`LockTable`](crate::LockTable) does exactly this over an in-memory index.
//!
//! The caller must pass a `now` that never goes backwards for this key (the table guarantees it by
//! clamping to its clock) and inputs checked with [`Limits`](crate::Limits). Nothing here panics on
//! any input.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::stored_name::{same, Name};
use crate::{
    AcquireOutcome, Corruption, Duration, EventKind, Fence, Grant, HolderInfo, Instant, KeyEvent,
    KeyInfo, LockError, WaiterInfo,
};

/// Where fresh fencing tokens come from. Each call must return a token strictly greater than every
/// token returned before, by this source and by any other source sharing the same resource.
pub trait FenceSource {
    /// A fresh fencing token.
    fn next_fence(&mut self) -> Fence;
}

/// The table's fencing-token counter: 1, 2, 3, ...
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FenceCounter {
    last: Fence,
}

impl FenceCounter {
    /// Highest last token a counter accepts (2^63): leaves more tokens than any table can use.
    pub const MAX_LAST: Fence = Fence::new(1 << 63);

    /// A counter whose next token is `last + 1`. `None` if `last` exceeds [`FenceCounter::MAX_LAST`].
    #[must_use]
    pub fn starting_after(last: Fence) -> Option<Self> {
        (last <= Self::MAX_LAST).then_some(FenceCounter { last })
    }

    /// The last token issued, 0 if none.
    #[must_use]
    pub fn last(&self) -> Fence {
        self.last
    }
}

impl FenceSource for FenceCounter {
    fn next_fence(&mut self) -> Fence {
        self.last = self.last.saturating_next();
        self.last
    }
}

/// Memory of leases that expired, so that a late `release`/`extend` by their holder answers
/// [`LockError::Expired`] instead of [`LockError::NotHeld`].
pub trait ExpiredLeases {
    /// If `owner`'s lease with this `fence` (on the key being asked about) expired and is still
    /// remembered, its deadline.
    fn expired_at(&self, owner: &str, fence: Fence) -> Option<Instant>;
}

/// Remembers nothing: every forgotten lease is simply "not held".
impl ExpiredLeases for () {
    fn expired_at(&self, _owner: &str, _fence: Fence) -> Option<Instant> {
        None
    }
}

/// How much room the wait queues have, passed to [`KeyState::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueRoom {
    /// Longest queue of this key.
    pub max_waiters_per_key: usize,
    /// Most waiters in the whole table.
    pub max_waiters: usize,
    /// Waiters already queued in the whole table.
    pub waiters_in_table: usize,
}

/// A live lease of one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    owner: Name,
    fence: Fence,
    deadline: Instant,
}

impl Lease {
    /// A lease record, e.g. loaded from an external store.
    #[must_use]
    pub fn new(owner: &str, fence: Fence, deadline: Instant) -> Self {
        Lease {
            owner: Name::new(owner),
            fence,
            deadline,
        }
    }
    /// Its owner.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.owner.as_str()
    }
    /// Its fencing token.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.fence
    }
    /// Its deadline: live while `now < deadline`.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
    fn grant(&self) -> Grant {
        Grant {
            fence: self.fence,
            deadline: self.deadline,
        }
    }
}

/// A caller waiting for a key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiter {
    owner: Name,
    ttl: Duration,
    wait_deadline: Instant,
}

impl Waiter {
    /// A waiter record, e.g. loaded from an external store.
    #[must_use]
    pub fn new(owner: &str, ttl: Duration, wait_deadline: Instant) -> Self {
        Waiter {
            owner: Name::new(owner),
            ttl,
            wait_deadline,
        }
    }
    /// Who waits.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.owner.as_str()
    }
    /// The TTL its lease gets on hand-off.
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
    /// It waits while `now < wait_deadline`.
    #[must_use]
    pub fn wait_deadline(&self) -> Instant {
        self.wait_deadline
    }
}

/// The result of one transition: the outcome of the request and the events it produced, in the
/// order they happened.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition<T> {
    /// The answer to the request.
    pub outcome: Result<T, LockError>,
    /// Time-driven events (and hand-offs) that happened during the call, oldest first.
    pub events: Vec<KeyEvent>,
}

/// `now + ttl`, refused if it does not fit: a direct grant or an extension always yields a
/// lease that is live at `now`. (A hand-off at `t` saturates instead: the waiter's wait deadline
/// is after `t`, so `t < u64::MAX` and the lease is still live at `t`.)
fn deadline_after(now: Instant, ttl: Duration) -> Result<Instant, LockError> {
    now.checked_add(ttl)
        .ok_or(LockError::DeadlineOverflow { now, ttl })
}

/// One key: an optional live lease and a FIFO queue of waiters (never waiters without a lease).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyState {
    lease: Option<Lease>,
    /// Boxed on purpose: most keys have no waiters, and a boxed queue costs 8 bytes per key
    /// instead of 32.
    #[allow(clippy::box_collection)]
    queue: Option<Box<VecDeque<Waiter>>>,
}

impl KeyState {
    /// A free key.
    #[must_use]
    pub fn new() -> Self {
        KeyState::default()
    }

    /// Rebuilds a key from stored parts, checking its invariants: waiters only behind a lease,
    /// no owner twice, the holder not among the waiters, and nothing that ended at or before `now`.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn from_parts(
        lease: Option<Lease>,
        waiters: Vec<Waiter>,
        now: Instant,
    ) -> Result<Self, Corruption> {
        match &lease {
            None if !waiters.is_empty() => return Err(Corruption::WaitersWithoutLease),
            Some(l) if l.deadline <= now => return Err(Corruption::LeaseAlreadyExpired),
            _ => {}
        }
        for (i, w) in waiters.iter().enumerate() {
            if w.wait_deadline <= now {
                return Err(Corruption::WaitAlreadyTimedOut);
            }
            if w.ttl.is_zero() {
                return Err(Corruption::WaiterZeroTtl);
            }
            if lease.as_ref().is_some_and(|l| l.owner == w.owner) {
                return Err(Corruption::HolderAlsoWaiting);
            }
            if waiters[..i].iter().any(|o| o.owner == w.owner) {
                return Err(Corruption::OwnerWaitingTwice);
            }
        }
        let queue = (!waiters.is_empty()).then(|| Box::new(VecDeque::from(waiters)));
        Ok(KeyState { lease, queue })
    }

    /// Rewrites the lease's fence (a store record settles its provisional fences this way).
    pub(crate) fn map_fence(&mut self, f: impl Fn(Fence) -> Fence) {
        if let Some(lease) = self.lease.as_mut() {
            lease.fence = f(lease.fence);
        }
    }

    /// The live lease, if any (as of the last transition).
    #[must_use]
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The waiters, first in line first.
    pub fn waiters(&self) -> impl Iterator<Item = &Waiter> {
        self.queue.iter().flat_map(|q| q.iter())
    }

    /// Number of waiters.
    #[must_use]
    pub fn waiter_count(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.len())
    }

    /// True when no lease is held (and therefore nobody waits): the record can be dropped.
    #[must_use]
    pub fn is_free(&self) -> bool {
        self.lease.is_none()
    }

    /// The earliest instant at which this key changes by time alone (a lease deadline or a wait
    /// deadline), or `None` if it is free.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        let lease = self.lease.as_ref()?;
        let waits = self
            .queue
            .iter()
            .flat_map(|q| q.iter())
            .map(|w| w.wait_deadline);
        Some(waits.fold(lease.deadline, Instant::min))
    }

    /// Inspection: the holder and the queue, or `None` if the key is free.
    #[must_use]
    pub fn info(&self) -> Option<KeyInfo> {
        let lease = self.lease.as_ref()?;
        Some(KeyInfo {
            holder: HolderInfo {
                owner: lease.owner.as_str().into(),
                fence: lease.fence,
                deadline: lease.deadline,
            },
            waiters: self
                .queue
                .iter()
                .flat_map(|q| q.iter())
                .map(|w| WaiterInfo {
                    owner: w.owner.as_str().into(),
                    ttl: w.ttl,
                    wait_deadline: w.wait_deadline,
                })
                .collect(),
        })
    }

    /// Applies every time-driven change with an instant `<= now`, in order of their instants:
    /// waiters whose wait deadline passed leave (before a lease ending at the same instant is
    /// handed off: intervals are half-open), an expired lease ends and the head waiter is granted
    /// the lock at the expiry instant, possibly several times in a row. Calling it again with the
    /// same or an earlier `now` does nothing.
    pub fn advance(&mut self, now: Instant, fences: &mut impl FenceSource) -> Vec<KeyEvent> {
        let mut events = Vec::new();
        self.advance_into(now, fences, &mut events);
        events
    }

    #[inline]
    fn advance_into(
        &mut self,
        now: Instant,
        fences: &mut impl FenceSource,
        out: &mut Vec<KeyEvent>,
    ) {
        // The usual case, checked without a call: a free key, or a live lease and nobody waiting.
        let quiet = match (&self.lease, &self.queue) {
            (None, _) => true,
            (Some(lease), None) => lease.deadline > now,
            _ => false,
        };
        if !quiet {
            self.catch_up(now, fences, out);
        }
    }

    fn catch_up(&mut self, now: Instant, fences: &mut impl FenceSource, out: &mut Vec<KeyEvent>) {
        while let Some(at) = self.next_deadline().filter(|&t| t <= now) {
            self.time_out_waiters(at, out);
            if self.lease.as_ref().is_some_and(|l| l.deadline <= at) {
                if let Some(lease) = self.lease.take() {
                    out.push(KeyEvent {
                        at: lease.deadline,
                        kind: EventKind::Expired {
                            owner: lease.owner.as_str().into(),
                            fence: lease.fence,
                        },
                    });
                }
                self.hand_off(at, fences, out);
            }
        }
    }

    fn time_out_waiters(&mut self, at: Instant, out: &mut Vec<KeyEvent>) {
        let Some(queue) = self.queue.as_mut() else {
            return;
        };
        if queue.iter().all(|w| w.wait_deadline > at) {
            return;
        }
        let mut kept = VecDeque::with_capacity(queue.len());
        for w in queue.drain(..) {
            if w.wait_deadline <= at {
                out.push(KeyEvent {
                    at: w.wait_deadline,
                    kind: EventKind::WaitTimedOut {
                        owner: w.owner.as_str().into(),
                    },
                });
            } else {
                kept.push_back(w);
            }
        }
        *queue.as_mut() = kept;
        self.drop_empty_queue();
    }

    /// Grants the lock to the head waiter at `at` (the key must be free).
    #[inline]
    fn hand_off(&mut self, at: Instant, fences: &mut impl FenceSource, out: &mut Vec<KeyEvent>) {
        if self.queue.is_some() {
            self.hand_off_to_head(at, fences, out);
        }
    }

    fn hand_off_to_head(
        &mut self,
        at: Instant,
        fences: &mut impl FenceSource,
        out: &mut Vec<KeyEvent>,
    ) {
        let Some(waiter) = self.queue.as_mut().and_then(|q| q.pop_front()) else {
            return;
        };
        self.drop_empty_queue();
        let fence = fences.next_fence();
        let deadline = at.saturating_add(waiter.ttl);
        out.push(KeyEvent {
            at,
            kind: EventKind::Granted {
                owner: waiter.owner.as_str().into(),
                fence,
                deadline,
            },
        });
        self.lease = Some(Lease {
            owner: waiter.owner,
            fence,
            deadline,
        });
    }

    fn drop_empty_queue(&mut self) {
        if self.queue.as_ref().is_some_and(|q| q.is_empty()) {
            self.queue = None;
        }
    }

    fn position_of(&self, owner: &str) -> Option<usize> {
        self.queue
            .as_ref()
            .and_then(|q| q.iter().position(|w| w.owner.is(owner)))
    }

    /// Acquires the key for `owner` with `ttl`, waiting in the queue while `now < wait_deadline`
    /// if another owner holds it. A `wait_deadline` that is not after `now` makes this a
    /// try-acquire: [`LockError::Held`] instead of queueing.
    pub fn acquire(
        &mut self,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        now: Instant,
        room: QueueRoom,
        fences: &mut impl FenceSource,
    ) -> Transition<AcquireOutcome> {
        let mut events = Vec::new();
        self.advance_into(now, fences, &mut events);
        let outcome = self.acquire_now(owner, ttl, wait_deadline, now, room, fences);
        Transition { outcome, events }
    }

    fn acquire_now(
        &mut self,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        now: Instant,
        room: QueueRoom,
        fences: &mut impl FenceSource,
    ) -> Result<AcquireOutcome, LockError> {
        let Some(lease) = &self.lease else {
            let deadline = deadline_after(now, ttl)?;
            let lease = Lease {
                owner: Name::new(owner),
                fence: fences.next_fence(),
                deadline,
            };
            let grant = lease.grant();
            self.lease = Some(lease);
            return Ok(AcquireOutcome::Acquired(grant));
        };
        if lease.owner.is(owner) {
            return Ok(AcquireOutcome::AlreadyHeld(lease.grant()));
        }
        if let Some(index) = self.position_of(owner) {
            return Ok(AcquireOutcome::AlreadyWaiting {
                position: index + 1,
            });
        }
        if wait_deadline <= now {
            return Err(LockError::Held {
                deadline: lease.deadline,
            });
        }
        if self.waiter_count() >= room.max_waiters_per_key {
            return Err(LockError::QueueFull {
                max_waiters_per_key: room.max_waiters_per_key,
            });
        }
        if room.waiters_in_table >= room.max_waiters {
            return Err(LockError::TooManyWaiters {
                max_waiters: room.max_waiters,
            });
        }
        let queue = self.queue.get_or_insert_with(Box::default);
        queue.push_back(Waiter {
            owner: Name::new(owner),
            ttl,
            wait_deadline,
        });
        Ok(AcquireOutcome::Queued {
            position: queue.len(),
        })
    }

    /// Finds `owner`'s live lease with `fence`, or says why there is none. The checks, in order:
    /// the live lease matches; the lease expired (during this call's own catch-up, or per
    /// `history`); another owner holds the key; otherwise not held.
    fn find_lease(
        &mut self,
        owner: &str,
        fence: Fence,
        history: &impl ExpiredLeases,
        events: &[KeyEvent],
    ) -> Result<&mut Lease, LockError> {
        let live = (self.lease.as_ref())
            .is_some_and(|lease| lease.fence == fence && lease.owner.is(owner));
        if !live {
            return Err(self.why_not_held(owner, fence, history, events));
        }
        self.lease.as_mut().ok_or(LockError::NotHeld)
    }

    /// Why `owner` holds no live lease with `fence` (the error path of `find_lease`).
    fn why_not_held(
        &self,
        owner: &str,
        fence: Fence,
        history: &impl ExpiredLeases,
        events: &[KeyEvent],
    ) -> LockError {
        let expired_now = events.iter().find_map(|e| match &e.kind {
            EventKind::Expired { owner: o, fence: f } if *f == fence && same(o, owner) => {
                Some(e.at)
            }
            _ => None,
        });
        let held_by_other = self.lease.as_ref().is_some_and(|l| !l.owner.is(owner));
        match expired_now.or_else(|| history.expired_at(owner, fence)) {
            Some(deadline) => LockError::Expired { deadline },
            None if held_by_other => LockError::NotOwner,
            None => LockError::NotHeld,
        }
    }

    /// Releases `owner`'s lease with `fence`; the head waiter, if any, is granted the lock at `now`.
    pub fn release(
        &mut self,
        owner: &str,
        fence: Fence,
        now: Instant,
        history: &impl ExpiredLeases,
        fences: &mut impl FenceSource,
    ) -> Transition<()> {
        let mut events = Vec::new();
        self.advance_into(now, fences, &mut events);
        let outcome = self.find_lease(owner, fence, history, &events).map(|_| ());
        if outcome.is_ok() {
            self.lease = None;
            self.hand_off(now, fences, &mut events);
        }
        Transition { outcome, events }
    }

    /// Moves the deadline of `owner`'s lease with `fence` to `now + ttl` (earlier or later); the
    /// fence stays the same.
    pub fn extend(
        &mut self,
        owner: &str,
        fence: Fence,
        ttl: Duration,
        now: Instant,
        history: &impl ExpiredLeases,
        fences: &mut impl FenceSource,
    ) -> Transition<Grant> {
        let mut events = Vec::new();
        self.advance_into(now, fences, &mut events);
        let outcome = self
            .find_lease(owner, fence, history, &events)
            .and_then(|lease| {
                lease.deadline = deadline_after(now, ttl)?;
                Ok(lease.grant())
            });
        Transition { outcome, events }
    }

    /// Keeps `owner`'s place in the queue alive: moves its wait deadline to `wait_deadline` if
    /// that is later (never earlier). A waiting client that renews now and then, with a deadline a
    /// short while ahead, stays in line as long as it lives; if it dies, its wait times out soon
    /// after its last renewal and the queue moves on without handing the key to a dead waiter.
    ///
    /// Answers [`AcquireOutcome::AlreadyWaiting`] with its place, or
    /// [`AcquireOutcome::AlreadyHeld`] if the key was handed to `owner` meanwhile (so the waiter
    /// learns of its grant from the renewal).
    ///
    /// # Errors
    /// [`LockError::NotWaiting`] if `owner` neither waits for nor holds the key (its wait timed
    /// out or was cancelled, or its lease ended).
    pub fn renew_wait(
        &mut self,
        owner: &str,
        wait_deadline: Instant,
        now: Instant,
        fences: &mut impl FenceSource,
    ) -> Transition<AcquireOutcome> {
        let mut events = Vec::new();
        self.advance_into(now, fences, &mut events);
        let outcome = match (&self.lease, self.position_of(owner)) {
            (Some(lease), _) if lease.owner.is(owner) => {
                Ok(AcquireOutcome::AlreadyHeld(lease.grant()))
            }
            (_, Some(index)) => {
                if let Some(waiter) = self.queue.as_mut().and_then(|q| q.get_mut(index)) {
                    waiter.wait_deadline = waiter.wait_deadline.max(wait_deadline);
                }
                Ok(AcquireOutcome::AlreadyWaiting {
                    position: index + 1,
                })
            }
            _ => Err(LockError::NotWaiting),
        };
        Transition { outcome, events }
    }

    /// Takes every waiter out of the queue (as a `cancel_wait` each, after applying time up to
    /// `now`); the outcome is how many left.
    pub fn cancel_all_waits(
        &mut self,
        now: Instant,
        fences: &mut impl FenceSource,
    ) -> Transition<usize> {
        let mut events = Vec::new();
        self.advance_into(now, fences, &mut events);
        let outcome = Ok(self.queue.take().map_or(0, |q| q.len()));
        Transition { outcome, events }
    }

    /// Takes `owner` out of the wait queue.
    pub fn cancel_wait(
        &mut self,
        owner: &str,
        now: Instant,
        fences: &mut impl FenceSource,
    ) -> Transition<()> {
        let mut events = Vec::new();
        self.advance_into(now, fences, &mut events);
        let outcome = match (self.position_of(owner), self.queue.as_mut()) {
            (Some(index), Some(queue)) => {
                queue.remove(index);
                self.drop_empty_queue();
                Ok(())
            }
            _ => Err(LockError::NotWaiting),
        };
        Transition { outcome, events }
    }
}
