//! The lock table: many keys, one clock, one timer, one event queue.

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use crate::expired_log::{ExpiredLog, ExpiredOfKey, ExpiredRecord};
use crate::key_state::{FenceCounter, KeyState, Record, Room, Transition};
use crate::stored_name::{hash_name, Name};
use crate::timer_heap::{Timer, TimerHeap};
use crate::{
    snapshot, AcquireOptions, AcquireOutcome, Duration, Event, EventKind, Fence, Grant, Instant,
    KeyEvent, KeyInfo, Limits, LockError, QueryPage, ReleaseOutcome, Stats,
};

/// A table of expiring, owner-checked, fenced locks, driven entirely by the caller's clock.
///
/// # How to drive it
/// The table never reads a clock, sleeps or spawns. Every call takes `now`, a monotonic count of
/// milliseconds from the host; a `now` earlier than one already seen is treated as the latest one
/// seen (time never runs backwards inside the table). The host loop is:
///
/// 1. **Inputs**: call [`try_acquire`](Self::try_acquire), [`acquire`](Self::acquire),
///    [`release`](Self::release), [`extend`](Self::extend), [`cancel_wait`](Self::cancel_wait),
///    [`renew_wait`](Self::renew_wait)
///    as requests come in, and [`handle_timeout`](Self::handle_timeout) when the timer fires.
/// 2. **Outputs**: after each call, drain [`poll_event`](Self::poll_event) until it returns `None`
///    (expiries, i.e. lost locks; hand-offs to waiters; wait timeouts).
/// 3. **Timer**: re-arm the host's one timer for [`next_wakeup`](Self::next_wakeup).
///
/// Every time-driven change takes effect at its own instant, whether or not the host woke up then:
/// a late or missing `handle_timeout` only delays the *reporting* of events (each carries its true
/// instant). Calling `handle_timeout` early or twice is harmless.
///
/// # Example
/// ```
/// use lock_core::{AcquireOutcome, Duration, EventKind, Fence, Instant, LockError, LockTable};
///
/// let mut table = LockTable::default();
/// let AcquireOutcome::Acquired(lease) = table.try_acquire("nightly-report", "worker-a", Duration(1_000), Instant(0))?
/// else { unreachable!() };
/// assert_eq!((lease.fence, lease.deadline), (Fence(1), Instant(1_000)));
///
/// // Another worker is refused, and told when to retry.
/// assert_eq!(
///     table.try_acquire("nightly-report", "worker-b", Duration(1_000), Instant(10)),
///     Err(LockError::Held { deadline: Instant(1_000) })
/// );
///
/// // worker-a forgets to release; the host's timer fires at the deadline.
/// assert_eq!(table.next_wakeup(), Some(Instant(1_000)));
/// table.handle_timeout(Instant(1_000));
/// let lost = table.poll_event().unwrap();
/// assert!(matches!(lost.kind, EventKind::Expired { fence: Fence(1), .. }));
///
/// // worker-a learns it lost the lock; worker-b gets it with a higher fence.
/// assert_eq!(table.release("nightly-report", "worker-a", Fence(1), Instant(1_001)), Err(LockError::Expired { deadline: Instant(1_000) }));
/// assert!(matches!(table.try_acquire("nightly-report", "worker-b", Duration(1_000), Instant(1_001))?,
///                  AcquireOutcome::Acquired(lease) if lease.fence == Fence(2)));
/// # Ok::<(), LockError>(())
/// ```
#[derive(Clone, Debug)]
pub struct LockTable {
    limits: Limits,
    seed: u64,
    hasher: FixedState,
    index: HashTable<u32>,
    slots: Vec<Option<Record>>,
    free: Vec<u32>,
    timers: TimerHeap,
    fences: FenceCounter,
    clock: Instant,
    waiters: usize,
    expired: ExpiredLog,
    events: VecDeque<Event>,
    counters: Stats,
}

impl Default for LockTable {
    /// A table with [`Limits::default`].
    fn default() -> Self {
        LockTable::build(Limits::default(), 0)
    }
}

impl LockTable {
    /// An empty table with these limits.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] if a limit is out of range.
    pub fn new(limits: Limits) -> Result<Self, LockError> {
        LockTable::with_seed(limits, 0)
    }

    /// An empty table whose key hashing is seeded with `seed`. Hosts that take keys from
    /// untrusted parties should pass a random seed (hash flooding); outcomes never depend on it.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] if a limit is out of range.
    pub fn with_seed(limits: Limits, seed: u64) -> Result<Self, LockError> {
        limits.validate()?;
        Ok(LockTable::build(limits, seed))
    }

    fn build(limits: Limits, seed: u64) -> Self {
        LockTable {
            limits,
            seed,
            hasher: FixedState::with_seed(seed),
            index: HashTable::new(),
            slots: Vec::new(),
            free: Vec::new(),
            timers: TimerHeap::default(),
            fences: FenceCounter::default(),
            clock: Instant::ZERO,
            waiters: 0,
            expired: ExpiredLog::default(),
            events: VecDeque::new(),
            counters: Stats::default(),
        }
    }

    /// The limits this table enforces.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The table's clock: the latest `now` it has seen.
    #[must_use]
    pub fn clock(&self) -> Instant {
        self.clock
    }

    // ----- inputs -------------------------------------------------------------------------

    /// Takes `key` for `owner` for `ttl` ms if it is free, without waiting.
    ///
    /// # Errors
    /// [`LockError::Held`] (with the holder's deadline) if another owner holds it, or a validation
    /// or limit error; none of them changes the table.
    #[inline]
    pub fn try_acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        now: Instant,
    ) -> Result<AcquireOutcome, LockError> {
        self.acquire(key, owner, ttl, Instant::ZERO, now)
    }

    /// Takes `key` for `owner` for `ttl` ms, or queues `owner` (FIFO) until `wait_deadline` if
    /// another owner holds it. A queued owner is later granted the lock by hand-off
    /// ([`EventKind::Granted`]) or leaves with [`EventKind::WaitTimedOut`] once
    /// `now >= wait_deadline`. A `wait_deadline` that is not after `now` makes this a
    /// [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    /// [`LockError::Held`] when not waiting, [`LockError::QueueFull`],
    /// [`LockError::TooManyWaiters`], [`LockError::TableFull`], or a validation error.
    #[inline]
    pub fn acquire(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        now: Instant,
    ) -> Result<AcquireOutcome, LockError> {
        self.acquire_with(
            key,
            owner,
            ttl,
            wait_deadline,
            &AcquireOptions::EXCLUSIVE,
            now,
        )
    }

    /// [`acquire`](Self::acquire) with options: shared mode and permits, a minimum hold, a
    /// lock-delay, metadata (see [`AcquireOptions`]). A shared request is granted at once while
    /// the key holds only shared leases, a place is free and nobody waits; otherwise it queues
    /// (FIFO, whatever the mode) or, with a `wait_deadline` not after `now`, is refused.
    ///
    /// # Errors
    /// Those of [`acquire`](Self::acquire), the options' validation errors,
    /// [`LockError::PermitsMismatch`] and [`LockError::ModeMismatch`].
    pub fn acquire_with(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        options: &AcquireOptions<'_>,
        now: Instant,
    ) -> Result<AcquireOutcome, LockError> {
        let result = self.acquire_inner(key, owner, ttl, wait_deadline, options, now);
        match &result {
            Ok(AcquireOutcome::Acquired(_)) => self.counters.acquired += 1,
            Ok(AcquireOutcome::Queued { .. }) => self.counters.queued += 1,
            Ok(_) => {}
            Err(_) => self.counters.rejected += 1,
        }
        result
    }

    /// Takes `key` now for `owner`, whatever its leases (Web Locks' `steal`): every live lease
    /// ends with an [`EventKind::Stolen`] event (its holder's late `release`/`extend` answers
    /// [`LockError::Stolen`]), places kept by ended leases are freed, and `owner` gets a new
    /// exclusive lease with a fresh fence. The queue is kept. Counted as an acquire, and each
    /// lease it ends in [`Stats::stolen`].
    ///
    /// # Errors
    /// A validation error, [`LockError::ModeMismatch`] for shared options (a steal is
    /// exclusive), [`LockError::PermitsMismatch`], [`LockError::DeadlineOverflow`] or
    /// [`LockError::TableFull`]; none of them changes the table.
    pub fn steal(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
        now: Instant,
    ) -> Result<AcquireOutcome, LockError> {
        let result = self.steal_inner(key, owner, ttl, options, now);
        self.count(&result, |c| c.acquired += 1);
        result
    }

    fn steal_inner(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
        now: Instant,
    ) -> Result<AcquireOutcome, LockError> {
        let (now, hash, existing) = self.admit(key, owner, ttl, options, now)?;
        self.apply_to(existing, key, hash, |state, _, fences, room| {
            state.steal(owner, ttl, options, now, room, fences)
        })
    }

    /// The checks of an acquire or a steal, in order: the request, then time up to `now`, then
    /// room for a new key. Answers the clamped `now`, the key's hash and its slot, if in use.
    #[inline(always)]
    fn admit(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
        now: Instant,
    ) -> Result<(Instant, u64, Option<u32>), LockError> {
        self.limits.check_key(key)?;
        self.limits.check_owner(owner)?;
        self.limits.check_ttl(ttl)?;
        if !options.is_plain() {
            options.validate(ttl, &self.limits)?;
        }
        let now = self.advance(now);
        let hash = self.hash(key);
        let existing = self.find(hash, key);
        if existing.is_none() && self.index.len() >= self.limits.max_keys {
            return Err(LockError::TableFull {
                max_keys: self.limits.max_keys,
            });
        }
        Ok((now, hash, existing))
    }

    fn acquire_inner(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        options: &AcquireOptions<'_>,
        now: Instant,
    ) -> Result<AcquireOutcome, LockError> {
        let (now, hash, existing) = self.admit(key, owner, ttl, options, now)?;
        self.apply_to(existing, key, hash, |state, _, fences, room| {
            state.acquire(owner, ttl, wait_deadline, options, now, room, fences)
        })
    }

    /// Ends `owner`'s lease with `fence` on `key`. If others wait, the first is granted the lock at
    /// `now` ([`EventKind::Granted`]). A lease with a minimum hold that has not passed keeps its
    /// place until then instead ([`ReleaseOutcome::HeldUntil`]); waiters are handed the key at
    /// that instant.
    ///
    /// # Errors
    /// In this order of precedence: [`LockError::Expired`] if that lease already ran out (the
    /// holder lost the lock), [`LockError::NotOwner`] if another owner holds the key,
    /// [`LockError::NotHeld`] otherwise; or a validation error. None of them changes the table.
    pub fn release(
        &mut self,
        key: &str,
        owner: &str,
        fence: Fence,
        now: Instant,
    ) -> Result<ReleaseOutcome, LockError> {
        let mut repeated = false;
        let result = self.release_inner(key, owner, fence, now, &mut repeated);
        // Releasing again a lease that keeps its place (a minimum hold) ends nothing.
        self.count(&result, |c| c.released += u64::from(!repeated));
        result
    }

    fn release_inner(
        &mut self,
        key: &str,
        owner: &str,
        fence: Fence,
        now: Instant,
        repeated: &mut bool,
    ) -> Result<ReleaseOutcome, LockError> {
        self.limits.check_key(key)?;
        self.limits.check_owner(owner)?;
        let now = self.advance(now);
        let hash = self.hash(key);
        self.apply(key, hash, |state, history, fences, room| {
            *repeated = state.released_early(owner, fence).is_some();
            state.release(owner, fence, now, room, history, fences)
        })
    }

    /// Moves the deadline of `owner`'s lease with `fence` on `key` to `now + ttl`; the fence does
    /// not change.
    ///
    /// # Errors
    /// The same as [`release`](Self::release), plus TTL validation errors.
    pub fn extend(
        &mut self,
        key: &str,
        owner: &str,
        fence: Fence,
        ttl: Duration,
        now: Instant,
    ) -> Result<Grant, LockError> {
        let result = self.extend_inner(key, owner, fence, ttl, now);
        self.count(&result, |c| c.extended += 1);
        result
    }

    fn extend_inner(
        &mut self,
        key: &str,
        owner: &str,
        fence: Fence,
        ttl: Duration,
        now: Instant,
    ) -> Result<Grant, LockError> {
        self.limits.check_key(key)?;
        self.limits.check_owner(owner)?;
        self.limits.check_ttl(ttl)?;
        let now = self.advance(now);
        let hash = self.hash(key);
        self.apply(key, hash, |state, history, fences, room| {
            state.extend(owner, fence, ttl, now, room, history, fences)
        })
    }

    /// Takes `owner` out of `key`'s wait queue.
    ///
    /// # Errors
    /// [`LockError::NotWaiting`] if it is not queued there (any more), or a validation error.
    pub fn cancel_wait(&mut self, key: &str, owner: &str, now: Instant) -> Result<(), LockError> {
        let result = self.cancel_inner(key, owner, now);
        self.count(&result, |c| c.cancelled += 1);
        result
    }

    fn cancel_inner(&mut self, key: &str, owner: &str, now: Instant) -> Result<(), LockError> {
        self.limits.check_key(key)?;
        self.limits.check_owner(owner)?;
        let now = self.advance(now);
        let hash = self.hash(key);
        self.apply(key, hash, |state, _, fences, room| {
            state.cancel_wait(owner, now, room, fences)
        })
    }

    /// Keeps `owner`'s place in `key`'s queue alive: moves its wait deadline to `wait_deadline`
    /// if that is later (never earlier). Answers [`AcquireOutcome::AlreadyWaiting`] with its
    /// place, or [`AcquireOutcome::AlreadyHeld`] if the key was handed to `owner` meanwhile.
    /// Waiters in another process than the table (over a shared store) renew a short wait
    /// deadline as long as they live, so that a dead waiter leaves the queue soon instead of
    /// being handed the key (see `KeyState::renew_wait`).
    ///
    /// # Errors
    /// [`LockError::NotWaiting`] if `owner` neither waits for nor holds `key`, or a validation
    /// error. None of them changes the table.
    pub fn renew_wait(
        &mut self,
        key: &str,
        owner: &str,
        wait_deadline: Instant,
        now: Instant,
    ) -> Result<AcquireOutcome, LockError> {
        self.limits.check_key(key)?;
        self.limits.check_owner(owner)?;
        let now = self.advance(now);
        let hash = self.hash(key);
        self.apply(key, hash, |state, _, fences, room| {
            state.renew_wait(owner, wait_deadline, now, room, fences)
        })
    }

    /// Applies every time-driven change up to `now`. Call it when the timer set for
    /// [`next_wakeup`](Self::next_wakeup) fires; calling it early, late or twice is harmless.
    /// Costs O(changes · log n), never a scan of all keys.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// [`handle_timeout`](Self::handle_timeout) in bounded slices: applies at most `max_changes`
    /// of the key wake-ups due by `now` (each expires a lease, hands it off or times out
    /// waiters of one key), in the same order `handle_timeout` would, and returns `true` if
    /// more are due. The clock moves only as far as the last change applied while some remain,
    /// so nothing is applied out of order; call it again (draining events in between) until it
    /// returns `false` before any other call at `now`, and every call stays bounded however
    /// many leases ran out at once (after downtime, say). Run to completion, it leaves exactly
    /// the state and events of one `handle_timeout(now)`. `max_changes == 0` changes nothing.
    pub fn handle_timeout_bounded(&mut self, now: Instant, max_changes: u32) -> bool {
        self.apply_due(self.clock.max(now), max_changes as usize)
    }

    /// Makes every fencing token issued from now on greater than `floor` (no effect if the table
    /// already issued `floor` or more; a floor above [`FenceCounter::MAX_LAST`], more tokens than
    /// any table can use, is taken as that maximum). A host that persists the table reserves
    /// tokens ahead durably and raises the floor of a restored table to its reservation, so no
    /// token handed out before a crash is issued again after it.
    pub fn raise_fence_floor(&mut self, floor: Fence) {
        if floor > self.fences.last() {
            if let Some(raised) = FenceCounter::starting_after(floor.min(FenceCounter::MAX_LAST)) {
                self.fences = raised;
            }
        }
    }

    /// Takes every waiter out of every queue at `now`, as one [`cancel_wait`](Self::cancel_wait)
    /// each (counted as cancelled, no events), and returns how many left. A host calls it after
    /// restoring a table whose waiters belonged to a process that is gone: nobody would collect
    /// their hand-offs, and a lease granted to nobody would hold the key until it expires.
    pub fn cancel_all_waits(&mut self, now: Instant) -> usize {
        let now = self.advance(now);
        let room = Room::of(&self.limits, self.waiters);
        let mut cancelled = 0;
        for slot in 0..self.slots.len() {
            let Some(record) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if record.state.waiter_count() == 0 {
                continue;
            }
            let Transition { outcome, events } =
                record.state.cancel_all_waits(now, &room, &mut self.fences);
            cancelled += outcome.unwrap_or(0);
            let key = record.key.clone();
            self.absorb(key.as_str(), events);
            self.settle(slot as u32, hash_name(&self.hasher, key.as_bytes()));
        }
        self.waiters = self.waiters.saturating_sub(cancelled);
        self.counters.cancelled += cancelled as u64;
        cancelled
    }

    // ----- outputs ------------------------------------------------------------------------

    /// Runs a batch of requests encoded with [`wire`](crate::wire) (their fields in `requests`,
    /// their keys and owners in `names`) and appends one encoded response per request to `out`,
    /// in order; returns how many requests ran. Each request is exactly the corresponding single
    /// call. A malformed request is answered
    /// [`Response::Malformed`](crate::wire::Response::Malformed) and ends the batch (the bytes
    /// after it cannot be trusted to start a request).
    pub fn run_batch(&mut self, requests: &[u8], names: &str, out: &mut Vec<u8>) -> usize {
        use crate::wire::{encode_response, Response};
        let mut ran = 0;
        for request in crate::wire::decode_requests(requests, names) {
            let response = request.map_or(Response::Malformed, |request| self.handle(request));
            encode_response(out, &response);
            if !matches!(response, Response::Malformed) {
                ran += 1;
            }
        }
        ran
    }

    /// Number of events waiting to be drained (without draining them), so a host can skip the
    /// drain call when there is nothing to report.
    #[must_use]
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// The earliest instant at which anything changes by time alone (a lease deadline or a wait
    /// deadline), or `None` if nothing is pending. One timer for the whole table suffices.
    #[must_use]
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.timers.peek().map(|t| t.at)
    }

    /// The oldest undrained event, if any. Drain after every call.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Every undrained event, oldest first.
    pub fn drain_events(&mut self) -> impl Iterator<Item = Event> + '_ {
        self.events.drain(..)
    }

    // ----- inspection ---------------------------------------------------------------------

    /// The holder and wait queue of `key` at `now`, or `None` if it is free.
    ///
    /// # Errors
    /// A key validation error.
    pub fn inspect(&mut self, key: &str, now: Instant) -> Result<Option<KeyInfo>, LockError> {
        if let Err(e) = self.limits.check_key(key) {
            self.counters.rejected += 1;
            return Err(e);
        }
        self.advance(now);
        let hash = self.hash(key);
        Ok(self
            .find(hash, key)
            .and_then(|slot| self.record(slot))
            .and_then(|r| r.state.info()))
    }

    /// Every key in use whose name starts with `prefix` and comes after `after` in byte order
    /// (`""` for the first page), with its leases and waiters: at most `limit` keys, in byte
    /// order, and the cursor of the next page if more match (Web Locks' `query()`, for
    /// dashboards). Costs one pass over the keys in use, O(n log limit).
    ///
    /// # Errors
    /// [`LockError::QueryLimit`] if `limit` is 0 or above [`QUERY_MAX`](crate::QUERY_MAX); a prefix or cursor
    /// longer than `max_key_bytes` or holding a control character is refused as a key would be
    /// (an empty one is fine). None of them changes the table.
    pub fn query(
        &mut self,
        prefix: &str,
        after: &str,
        limit: usize,
        now: Instant,
    ) -> Result<QueryPage, LockError> {
        if let Err(e) = self.limits.check_query(prefix, after, limit) {
            self.counters.rejected += 1;
            return Err(e);
        }
        self.advance(now);
        // The `limit + 1` smallest matching keys (a max-heap of slots by name): one more than a
        // page, to know whether another page follows.
        let mut smallest: BinaryHeap<(&[u8], u32)> = BinaryHeap::with_capacity(limit + 2);
        for (slot, record) in self.slots.iter().enumerate() {
            let Some(record) = record else { continue };
            if QueryPage::matches(prefix, after, record.key.as_str()) {
                smallest.push((record.key.as_bytes(), slot as u32));
                if smallest.len() > limit + 1 {
                    smallest.pop();
                }
            }
        }
        let page = smallest.into_sorted_vec();
        let keys = page.iter().filter_map(|&(_, slot)| {
            let record = self.record(slot)?;
            Some((String::from(record.key.as_str()), record.state.info()?))
        });
        Ok(QueryPage::from_ordered(keys, limit))
    }

    /// Gauges and counters at `now`.
    pub fn stats(&mut self, now: Instant) -> Stats {
        self.advance(now);
        Stats {
            live_leases: self.index.len(),
            waiters: self.waiters,
            expired_records: self.expired.len(),
            pending_events: self.events.len(),
            clock: self.clock,
            last_fence: self.fences.last(),
            ..self.counters
        }
    }

    /// The latest instant the table holds: its clock, and every lease deadline and wait
    /// deadline. Bindings whose numbers are narrower than `u64` (JS numbers are exact up to
    /// 2^53 - 1) check it, with [`Stats::last_fence`], before taking a snapshot they could not
    /// report exactly. Costs one pass over the keys.
    #[must_use]
    pub fn latest_instant(&self) -> Instant {
        self.slots
            .iter()
            .flatten()
            .flat_map(|r| {
                let leases = r.state.leases().map(crate::Lease::deadline);
                leases.chain(r.state.waiters().map(crate::Waiter::wait_deadline))
            })
            .fold(self.clock, Instant::max)
    }

    // ----- snapshot -----------------------------------------------------------------------

    /// Serialises the whole table at `now` (leases, waiters, fence counter, clock, remembered
    /// expiries, counters) into versioned, checksummed bytes. Undrained events are not included:
    /// drain them first. Keys are written in byte order, so equal tables give equal bytes.
    pub fn snapshot(&mut self, now: Instant) -> Vec<u8> {
        self.advance(now);
        // Sorted on pre-extracted byte slices: a plain slice comparison keeps the sort's many
        // inlined comparisons small (comparing `Name`s there doubled the sort's code in wasm).
        let mut sorted: Vec<(&[u8], &Record)> = (self.slots.iter().flatten())
            .map(|r| (r.key.as_bytes(), r))
            .collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let keys: Vec<&Record> = sorted.into_iter().map(|(_, r)| r).collect();
        snapshot::encode(&snapshot::SnapshotRef {
            clock: self.clock,
            last_fence: self.fences.last(),
            counters: &self.counters,
            keys: &keys,
            expired: &self.expired,
        })
    }

    /// Replaces this table's state by the one in `bytes`, keeping this table's limits and hash
    /// seed. Neither time nor fences run backwards inside one table: the restored table keeps the
    /// later of the two clocks (leases of the snapshot that ended meanwhile expire, at their own
    /// instants, and are reported as events) and the higher of the two fence counters, so a grant
    /// after restoring an older snapshot never reuses a token this table already issued.
    /// Undrained events of the replaced state are discarded: drain them first.
    ///
    /// # Errors
    /// A `Snapshot*` error if the bytes are truncated, corrupt, of another version, or hold more
    /// than this table's limits; the table is then left exactly as it was.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), LockError> {
        let mut restored = LockTable::from_snapshot(self.limits.clone(), self.seed, bytes)?;
        if self.fences.last() > restored.fences.last() {
            restored.fences = self.fences;
        }
        restored.advance(self.clock);
        *self = restored;
        Ok(())
    }

    /// A new table with these limits and hash seed, from snapshot bytes.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`], or a `Snapshot*` error as for [`restore`](Self::restore).
    pub fn from_snapshot(limits: Limits, seed: u64, bytes: &[u8]) -> Result<Self, LockError> {
        limits.validate()?;
        let decoded = snapshot::decode(bytes, &limits)?;
        let mut table = LockTable::build(limits, seed);
        table.clock = decoded.clock;
        table.fences = decoded.fences;
        table.counters = decoded.counters;
        for (key, state) in decoded.keys {
            let hash = hash_name(&table.hasher, key.as_bytes());
            table.waiters += state.waiter_count();
            let slot = table.insert(hash, Record { key, state });
            table.settle(slot, hash);
        }
        for (fence, record) in decoded.expired {
            table.expired.record(fence, record, &table.limits);
        }
        table.expired.prune(table.clock, &table.limits);
        Ok(table)
    }

    // ----- internals ----------------------------------------------------------------------

    /// Moves the clock to `now` (never back) and applies every due change, in instant order.
    #[inline]
    fn advance(&mut self, now: Instant) -> Instant {
        self.clock = self.clock.max(now);
        let now = self.clock;
        // The usual case, checked without a call: no timer due and no expiry record to forget.
        if self.timers.peek().is_some_and(|t| t.at <= now) || !self.expired.is_empty() {
            self.apply_due(now, usize::MAX);
        }
        now
    }

    /// The slow part of [`advance`](Self::advance) and the whole of
    /// [`handle_timeout_bounded`](Self::handle_timeout_bounded): applies up to `max_changes` due
    /// timers in order, moving the clock to each one's instant; if that many were applied and
    /// more are due, stops there and answers `true`; otherwise moves the clock to `target`,
    /// forgets old expiry records and answers `false`.
    fn apply_due(&mut self, target: Instant, max_changes: usize) -> bool {
        let mut applied = 0;
        while let Some(timer) = self.timers.peek().copied() {
            if timer.at > target {
                break;
            }
            if applied == max_changes {
                return true;
            }
            self.clock = self.clock.max(timer.at);
            self.apply_timer(timer);
            applied += 1;
        }
        self.clock = target;
        self.expired.prune(target, &self.limits);
        false
    }

    /// Applies one due key wake-up at its own instant.
    fn apply_timer(&mut self, timer: Timer) {
        let Some(record) = self
            .slots
            .get_mut(timer.slot as usize)
            .and_then(Option::as_mut)
        else {
            self.timers.remove(timer.slot);
            return;
        };
        let before = record.state.waiter_count();
        let room = Room::of(&self.limits, self.waiters);
        let events = record.state.advance(timer.at, &room, &mut self.fences);
        self.waiters = self.waiters + record.state.waiter_count() - before;
        let key = record.key.clone();
        self.absorb(key.as_str(), events);
        let hash = hash_name(&self.hasher, key.as_bytes());
        self.settle(timer.slot, hash);
    }

    /// Runs one per-key transition on `key` (a fresh free state if the key is absent), records
    /// its events, and re-indexes the key.
    fn apply<T>(
        &mut self,
        key: &str,
        hash: u64,
        op: impl FnOnce(&mut KeyState, &ExpiredOfKey<'_>, &mut FenceCounter, &Room) -> Transition<T>,
    ) -> Result<T, LockError> {
        let existing = self.find(hash, key);
        self.apply_to(existing, key, hash, op)
    }

    /// [`apply`](Self::apply) with the key's slot already looked up.
    fn apply_to<T>(
        &mut self,
        existing: Option<u32>,
        key: &str,
        hash: u64,
        op: impl FnOnce(&mut KeyState, &ExpiredOfKey<'_>, &mut FenceCounter, &Room) -> Transition<T>,
    ) -> Result<T, LockError> {
        let room = Room::of(&self.limits, self.waiters);
        let mut fresh = KeyState::new();
        let state = match existing.and_then(|s| self.slots.get_mut(s as usize)) {
            Some(Some(record)) => &mut record.state,
            _ => &mut fresh,
        };
        let before = state.waiter_count();
        let history = self.expired.for_key(key);
        let Transition { outcome, events } = op(state, &history, &mut self.fences, &room);
        self.waiters = self.waiters + state.waiter_count() - before;
        self.absorb(key, events);
        match existing {
            Some(slot) => self.settle(slot, hash),
            None if !fresh.is_free() => {
                let slot = self.insert(
                    hash,
                    Record {
                        key: Name::new(key),
                        state: fresh,
                    },
                );
                self.settle(slot, hash);
            }
            None => {}
        }
        outcome
    }

    fn count<T>(&mut self, result: &Result<T, LockError>, on_ok: impl FnOnce(&mut Stats)) {
        match result {
            Ok(_) => on_ok(&mut self.counters),
            Err(_) => self.counters.rejected += 1,
        }
    }

    /// Records the events of `key`: counters, expired-lease memory, the event queue.
    #[inline]
    fn absorb(&mut self, key: &str, events: Vec<KeyEvent>) {
        if !events.is_empty() {
            self.absorb_events(key, events);
        }
    }

    fn absorb_events(&mut self, key: &str, events: Vec<KeyEvent>) {
        for KeyEvent { at, kind } in events {
            match &kind {
                EventKind::Expired { owner, fence, .. }
                | EventKind::Stolen { owner, fence, .. } => {
                    let stolen = matches!(kind, EventKind::Stolen { .. });
                    match stolen {
                        true => self.counters.stolen += 1,
                        false => self.counters.expired += 1,
                    }
                    let record = ExpiredRecord {
                        key: Name::new(key),
                        owner: Name::new(owner),
                        deadline: at,
                        stolen,
                    };
                    self.expired.record(*fence, record, &self.limits);
                }
                EventKind::Granted { .. } => self.counters.handed_off += 1,
                EventKind::WaitTimedOut { .. } => self.counters.wait_timed_out += 1,
            }
            if self.events.len() >= self.limits.max_pending_events {
                self.events.pop_front();
                self.counters.events_dropped += 1;
            }
            self.events.push_back(Event {
                key: String::from(key),
                at,
                kind,
            });
        }
    }

    fn hash(&self, key: &str) -> u64 {
        hash_name(&self.hasher, key.as_bytes())
    }

    fn record(&self, slot: u32) -> Option<&Record> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    fn find(&self, hash: u64, key: &str) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(hash, |&s| {
                slots
                    .get(s as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|r| r.key.is(key))
            })
            .copied()
    }

    fn insert(&mut self, hash: u64, record: Record) -> u32 {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(record);
                slot
            }
            None => {
                self.slots.push(Some(record));
                (self.slots.len() - 1) as u32
            }
        };
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index.insert_unique(hash, slot, |&s| {
            slots
                .get(s as usize)
                .and_then(Option::as_ref)
                .map_or(0, |r| hash_name(hasher, r.key.as_bytes()))
        });
        slot
    }

    /// After a transition of `slot`: re-arm its timer, or drop the record if the key is free.
    fn settle(&mut self, slot: u32, hash: u64) {
        let Some(record) = self.record(slot) else {
            return;
        };
        match (record.state.lease(), record.state.next_deadline()) {
            (Some(lease), Some(at)) => {
                let fence = lease.fence();
                self.timers.schedule(slot, at, fence);
            }
            _ => {
                self.timers.remove(slot);
                if let Ok(entry) = self.index.find_entry(hash, |&s| s == slot) {
                    entry.remove();
                }
                self.slots[slot as usize] = None;
                self.free.push(slot);
            }
        }
    }
}
