//! [`LockHost`]: a thread-safe handle over one lock component instance, with blocking acquire,
//! lease guards, keep-alive, lost-lock callbacks, one timer thread and optional persistence.
//!
//! Every request follows the same steps, under the one state lock: read the clock ([`Inner::begin`]:
//! renewing the clock reservation if it ran out, then applying the expiries due by now in bounded
//! slices), make the request, drain the table's events, and run the callbacks they produced
//! after unlocking.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::builder::LockHostBuilder;
use crate::clock::Clock;
use crate::lease::{ended_by, Lease, LeaseShared, LostCallback, LostLease};
use crate::persist::{self, Reservation, CLOCK_BLOCK, FENCE_BLOCK};
use crate::timer::Shutdown;
use crate::{ComponentTable, Error, HostError};
use lock_core::{AcquireOutcome, Event, EventKind, Fence, Grant, Instant, KeyInfo, Stats};

/// What [`LockHostBuilder::on_persist_error`] keeps.
pub(crate) type PersistErrorHook = Box<dyn Fn(&Error) + Send + Sync>;

/// Callbacks collected under the lock, run after it is released.
pub(crate) type Callbacks = Vec<(LostCallback, LostLease)>;

/// A thread-safe, cheap-to-clone handle over one lock table in one component instance.
///
/// ```no_run
/// use std::time::Duration;
/// let locks = host_wasmtime::LockHost::new()?;
/// let lease = locks.acquire("nightly-report", "host-1/worker-3", Duration::from_secs(30), Duration::from_secs(5))?;
/// lease.keep_alive(); // extends before expiry until released
/// lease.on_lost(|lost| eprintln!("lost {} (fence {})", lost.key, lost.fence));
/// // ... do the work, passing lease.fence() to the resource ...
/// lease.release()?; // also runs on drop
/// # Ok::<(), host_wasmtime::Error>(())
/// ```
#[derive(Clone)]
pub struct LockHost {
    pub(crate) inner: Arc<Inner>,
    pub(crate) _shutdown: Arc<Shutdown>,
}

impl std::fmt::Debug for LockHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockHost")
    }
}

/// What a host found in its persisted files at start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Whether a table file was there (otherwise the table started empty).
    pub loaded: bool,
    /// Live leases restored.
    pub leases: usize,
    /// Waiters dropped: they belonged to the previous process, which cannot collect a hand-off.
    pub waiters_dropped: u32,
    /// Every fence this host issues is above this (the previous run's reservation).
    pub fence_floor: Fence,
    /// The clock reading the host resumed at.
    pub clock: Instant,
}

/// Persistence settings and the two files' writers.
pub(crate) struct Persistence {
    pub(crate) path: std::path::PathBuf,
    pub(crate) interval: Duration,
    /// Serialises writes of the table file, from its snapshot to its rename.
    pub(crate) save_io: Mutex<()>,
    /// Serialises writes of the reservation file; holds the ceilings on disk.
    pub(crate) reserve_io: Mutex<Reservation>,
    pub(crate) on_error: Option<PersistErrorHook>,
}

pub(crate) struct Inner {
    pub(crate) state: Mutex<State>,
    /// Signalled when a blocked acquire's outcome arrives (or the table became unusable).
    pub(crate) granted: Condvar,
    /// Signalled when the next wake-up may have moved earlier.
    pub(crate) timer: Condvar,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) persist: Option<Persistence>,
    pub(crate) recovery: Option<Recovery>,
}

pub(crate) struct State {
    pub(crate) table: ComponentTable,
    /// (key, owner) of blocked acquires.
    pub(crate) waiting: HashSet<(String, String)>,
    /// Hand-off results for blocked acquires.
    pub(crate) outcomes: HashMap<(String, String), WaitOutcome>,
    /// Live guards by fence, for lost-lock notification.
    pub(crate) watchers: HashMap<Fence, Arc<LeaseShared>>,
    /// Keep-alive renewals: (due, fence).
    pub(crate) keepalives: BTreeSet<(Instant, Fence)>,
    pub(crate) keepalive_of: HashMap<Fence, Instant>,
    pub(crate) shutdown: bool,
    pub(crate) next_save: Instant,
    /// The instant the timer thread sleeps until; 0 while it is awake. Requests wake it only
    /// when they create something due earlier, so the hot path never pays for a context switch.
    pub(crate) armed: Instant,
    /// No time-driven change (expiry, hand-off at expiry, wait timeout) is due before this
    /// instant: the table's next wake-up as last read, lowered by every deadline created since
    /// (see [`Inner::arm`]). A request at an earlier `now` skips the catch-up and, unless it is
    /// a release that may hand off, the event drain (each a component call).
    pub(crate) quiet_until: Instant,
    /// Most key wake-ups applied per catch-up call: small enough that the events of one slice
    /// never overflow the table's event queue, and that one slice stays far below the call bound.
    pub(crate) slice: u32,
    /// The ceilings known to be on disk (`None` without persistence).
    pub(crate) ceilings: Option<Reservation>,
    /// The highest fence handed out.
    pub(crate) fence_seen: Fence,
    /// A ceiling is near: the timer thread should move it ahead.
    pub(crate) renew_wanted: bool,
    /// The last failed periodic save, shutdown save or reservation write, until a save succeeds.
    pub(crate) persist_error: Option<Error>,
}

pub(crate) enum WaitOutcome {
    Granted(Grant),
    TimedOut,
    Failed(Error),
}

pub(crate) fn run_callbacks(callbacks: Callbacks) {
    for (callback, lost) in callbacks {
        // A panicking callback must not take the timer thread (or a caller) down.
        let _ = catch_unwind(AssertUnwindSafe(|| callback(&lost)));
    }
}

/// Most key wake-ups per catch-up call for these limits (see [`State::slice`]).
pub(crate) fn slice_for(limits: &lock_core::Limits) -> u32 {
    let per_change = 2 + limits.max_waiters_per_key;
    let slice = (limits.max_pending_events / per_change).clamp(1, 10_000);
    u32::try_from(slice).unwrap_or(10_000)
}

impl Inner {
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, State>, Error> {
        self.state
            .lock()
            .map_err(|_| Error::Persist("lock host state poisoned by a panic".into()))
    }

    /// A component call's result: a trap wakes every blocked acquirer, which then fails at once.
    pub(crate) fn call<T>(&self, result: Result<T, HostError>) -> Result<T, Error> {
        result.map_err(|e| {
            self.granted.notify_all();
            Error::Host(e)
        })
    }

    /// One request: locks the state, brings the table up to now ([`begin`](Self::begin)), runs
    /// `f` at that `now`, unlocks, and only then runs the `on_lost` callbacks collected.
    pub(crate) fn request<T>(
        &self,
        f: impl FnOnce(&mut State, Instant, &mut Callbacks) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut callbacks = Vec::new();
        let result = self.lock().and_then(|mut st| {
            let now = self.begin(&mut st, &mut callbacks)?;
            f(&mut st, now, &mut callbacks)
        });
        run_callbacks(callbacks);
        result
    }

    /// Reads the clock for a request and brings the table up to it: the clock reservation is
    /// renewed first if the reading passed it, then every change due by now is applied in
    /// bounded slices and its events dispatched.
    pub(crate) fn begin(
        &self,
        st: &mut State,
        callbacks: &mut Callbacks,
    ) -> Result<Instant, Error> {
        let now = self.clock.now();
        if let Some(ceilings) = st.ceilings {
            if now > ceilings.clock_ceiling {
                self.renew_now(
                    st,
                    Reservation {
                        fence_ceiling: Fence::ZERO,
                        clock_ceiling: now.saturating_add(CLOCK_BLOCK),
                    },
                )?;
            } else if now.saturating_add(lock_core::Duration(CLOCK_BLOCK.0 / 2))
                > ceilings.clock_ceiling
            {
                self.want_renewal(st);
            }
        }
        if now >= st.quiet_until {
            loop {
                let more = self.call(st.table.handle_timeout_bounded(now, st.slice))?;
                self.drain(st, callbacks);
                if !more {
                    break;
                }
            }
            st.quiet_until = self.call(st.table.next_wakeup())?.unwrap_or(Instant::MAX);
        }
        Ok(now)
    }

    /// Makes sure `fence` may leave the host: at or below the durable fence ceiling (renewed
    /// inline if not, which happens only if the timer thread fell a whole block behind).
    pub(crate) fn admit_fence(&self, st: &mut State, fence: Fence) -> Result<(), Error> {
        st.fence_seen = st.fence_seen.max(fence);
        let Some(ceilings) = st.ceilings else {
            return Ok(());
        };
        if fence > ceilings.fence_ceiling {
            self.renew_now(
                st,
                Reservation {
                    fence_ceiling: fence.saturating_add(FENCE_BLOCK),
                    clock_ceiling: Instant::ZERO,
                },
            )?;
        } else if fence.saturating_add(FENCE_BLOCK / 2) > ceilings.fence_ceiling {
            self.want_renewal(st);
        }
        Ok(())
    }

    fn want_renewal(&self, st: &mut State) {
        if !st.renew_wanted {
            st.renew_wanted = true;
            st.armed = Instant::ZERO;
            self.timer.notify_all();
        }
    }

    /// Writes ceilings at least `want` (never lower than those on disk); returns them.
    fn write_ceilings(&self, want: Reservation) -> Result<Reservation, Error> {
        let Some(p) = &self.persist else {
            return Ok(want);
        };
        let mut on_disk = p
            .reserve_io
            .lock()
            .map_err(|_| Error::Persist("reservation writer poisoned by a panic".into()))?;
        let next = Reservation {
            fence_ceiling: on_disk.fence_ceiling.max(want.fence_ceiling),
            clock_ceiling: on_disk.clock_ceiling.max(want.clock_ceiling),
        };
        if next != *on_disk {
            persist::save_reservation(&p.path, next)?;
            *on_disk = next;
        }
        Ok(next)
    }

    fn renew_now(&self, st: &mut State, want: Reservation) -> Result<(), Error> {
        match self.write_ceilings(want) {
            Ok(written) => {
                st.ceilings = Some(written);
                Ok(())
            }
            Err(e) => {
                st.persist_error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The timer thread's part of the reservation: moves both ceilings a block ahead of what
    /// was used, with the state unlocked while the file is written.
    pub(crate) fn renew_ahead(&self) {
        let want = {
            let Ok(mut st) = self.lock() else { return };
            if !std::mem::take(&mut st.renew_wanted) {
                return;
            }
            Reservation {
                fence_ceiling: st.fence_seen.saturating_add(FENCE_BLOCK),
                clock_ceiling: self.clock.now().saturating_add(CLOCK_BLOCK),
            }
        };
        let written = self.write_ceilings(want);
        let Ok(mut st) = self.lock() else { return };
        match written {
            Ok(written) => {
                let known = st.ceilings.unwrap_or_default();
                st.ceilings = Some(Reservation {
                    fence_ceiling: known.fence_ceiling.max(written.fence_ceiling),
                    clock_ceiling: known.clock_ceiling.max(written.clock_ceiling),
                });
            }
            Err(e) => {
                drop(st);
                self.report(e);
            }
        }
    }

    /// Records a failed background write and tells the hook.
    pub(crate) fn report(&self, e: Error) {
        if let Ok(mut st) = self.lock() {
            st.persist_error = Some(e.clone());
        }
        if let Some(hook) = self.persist.as_ref().and_then(|p| p.on_error.as_ref()) {
            let _ = catch_unwind(AssertUnwindSafe(|| hook(&e)));
        }
    }

    /// The earliest instant the timer thread must act at. Refreshes `quiet_until` from the
    /// table (called with the lock held, right after `run_due` drained every event).
    pub(crate) fn next_due(&self, st: &mut State) -> Option<Instant> {
        let table = st.table.next_wakeup();
        st.quiet_until = match table {
            Ok(Some(at)) => at,
            Ok(None) => Instant::MAX,
            Err(_) => Instant::ZERO,
        };
        let table = table.ok().flatten();
        let keepalive = st.keepalives.first().map(|(due, _)| *due);
        let save = self.persist.as_ref().map(|_| st.next_save);
        [table, keepalive, save].into_iter().flatten().min()
    }

    /// Applies what is due, renews due keep-alives, and says whether a save is due. Returns
    /// callbacks to run unlocked.
    pub(crate) fn run_due(&self, st: &mut State, callbacks: &mut Callbacks) -> bool {
        let Ok(now) = self.begin(st, callbacks) else {
            return false;
        };
        while let Some(&(due, fence)) = st.keepalives.first() {
            if due > now {
                break;
            }
            st.keepalives.remove(&(due, fence));
            st.keepalive_of.remove(&fence);
            let Some(shared) = st.watchers.get(&fence).cloned() else {
                continue;
            };
            match st
                .table
                .extend(&shared.key, &shared.owner, fence, shared.ttl, now)
            {
                Ok(Ok(grant)) => {
                    shared
                        .deadline
                        .store(grant.deadline.0, std::sync::atomic::Ordering::SeqCst);
                    self.arm(st, grant.deadline);
                    schedule_keepalive(st, &shared);
                }
                Ok(Err(e)) => {
                    self.refused(st, &shared, e, callbacks);
                }
                Err(_) => self.granted.notify_all(),
            }
        }
        match &self.persist {
            Some(p) if now >= st.next_save => {
                st.next_save = now.saturating_add(span(p.interval));
                true
            }
            _ => false,
        }
    }

    /// Records that a table deadline falls at `at` (a new lease or wait deadline): wakes the
    /// timer thread if it sleeps past `at`, and lowers `quiet_until`.
    pub(crate) fn arm(&self, st: &mut State, at: Instant) {
        st.quiet_until = st.quiet_until.min(at);
        self.arm_keepalive(st, at);
    }

    /// Wakes the timer thread if it sleeps past `at` (a keep-alive due time).
    pub(crate) fn arm_keepalive(&self, st: &mut State, at: Instant) {
        if at < st.armed {
            st.armed = Instant::ZERO;
            self.timer.notify_all();
        }
    }

    /// Drains the events a release may have produced: a hand-off, possible only if one of our
    /// acquirers waits (restored waiters are dropped at start).
    pub(crate) fn drain_after_release(&self, st: &mut State, callbacks: &mut Callbacks) {
        if !st.waiting.is_empty() {
            self.drain(st, callbacks);
        }
    }

    /// A release, extend or keep-alive of `shared` was refused with `e`: if the refusal says the
    /// lease is over (expired, or no longer this owner's), the lease is lost, once. The table
    /// reports expiries as events too; this covers the lease whose event was already gone
    /// (dropped past `max_pending_events`, or its expiry record forgotten). Returns the error.
    pub(crate) fn refused(
        &self,
        st: &mut State,
        shared: &LeaseShared,
        e: lock_core::LockError,
        callbacks: &mut Callbacks,
    ) -> Error {
        let deadline = Instant(shared.deadline.load(std::sync::atomic::Ordering::SeqCst));
        if let Some(at) = ended_by(&e, deadline) {
            self.forget(st, shared.fence);
            shared.lose(at, callbacks);
        }
        Error::Lock(e)
    }

    /// Stops watching the lease with `fence` (released or lost).
    pub(crate) fn forget(&self, st: &mut State, fence: Fence) {
        st.watchers.remove(&fence);
        if let Some(due) = st.keepalive_of.remove(&fence) {
            st.keepalives.remove(&(due, fence));
        }
    }

    /// Drains the table's events and dispatches them: expiries to their leases' `on_lost`,
    /// hand-offs and wait timeouts to the blocked acquirers. A hand-off to an owner nobody here
    /// waits for (its acquirer gave up between the table's decision and ours) is released at
    /// once, so that no later caller can ever pick it up.
    pub(crate) fn drain(&self, st: &mut State, callbacks: &mut Callbacks) {
        loop {
            let Ok(events) = st.table.poll_events() else {
                self.granted.notify_all();
                return;
            };
            if events.is_empty() {
                return;
            }
            let mut orphans = Vec::new();
            for Event { key, at, kind } in events {
                match kind {
                    EventKind::Expired { fence, .. } => {
                        if let Some(shared) = st.watchers.get(&fence).cloned() {
                            self.forget(st, fence);
                            shared.lose(at, callbacks);
                        }
                    }
                    EventKind::Granted {
                        owner,
                        fence,
                        deadline,
                    } => {
                        let id = (key, owner);
                        if !st.waiting.contains(&id) {
                            orphans.push((id, fence, at));
                            continue;
                        }
                        let outcome = match self.admit_fence(st, fence) {
                            Ok(()) => WaitOutcome::Granted(Grant { fence, deadline }),
                            Err(e) => {
                                orphans.push((id.clone(), fence, at));
                                WaitOutcome::Failed(e)
                            }
                        };
                        self.arm(st, deadline);
                        st.outcomes.insert(id, outcome);
                        self.granted.notify_all();
                    }
                    EventKind::WaitTimedOut { owner } => {
                        let id = (key, owner);
                        if st.waiting.contains(&id) {
                            st.outcomes.insert(id, WaitOutcome::TimedOut);
                            self.granted.notify_all();
                        }
                    }
                }
            }
            if orphans.is_empty() {
                return;
            }
            for ((key, owner), fence, at) in orphans {
                let _ = st.table.release(&key, &owner, fence, at);
            }
        }
    }

    /// Saves the table file now: the snapshot under the state lock, the write after it.
    pub(crate) fn save(&self) -> Result<(), Error> {
        let Some(p) = &self.persist else {
            return Ok(());
        };
        let _writer = p
            .save_io
            .lock()
            .map_err(|_| Error::Persist("table file writer poisoned by a panic".into()))?;
        let result = self
            .request(|st, now, _| self.call(st.table.snapshot(now)))
            .and_then(|bytes| persist::save(&p.path, &bytes));
        if let Ok(mut st) = self.lock() {
            st.persist_error = result.as_ref().err().cloned();
        }
        result
    }
}

pub(crate) fn schedule_keepalive(st: &mut State, shared: &LeaseShared) {
    // Renew once two thirds of the TTL have passed.
    let deadline = Instant(shared.deadline.load(std::sync::atomic::Ordering::SeqCst));
    let due = deadline.saturating_sub(lock_core::Duration(shared.ttl.0 / 3));
    if let Some(old) = st.keepalive_of.insert(shared.fence, due) {
        st.keepalives.remove(&(old, shared.fence));
    }
    st.keepalives.insert((due, shared.fence));
}

pub(crate) fn span(d: Duration) -> lock_core::Duration {
    lock_core::Duration(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl LockHost {
    /// A host with default limits, the embedded component and the real clock.
    ///
    /// # Errors
    /// See [`LockHostBuilder::build`].
    pub fn new() -> Result<Self, Error> {
        Self::builder().build()
    }

    /// A builder for limits, clock, sandbox and persistence.
    #[must_use]
    pub fn builder() -> LockHostBuilder {
        LockHostBuilder::default()
    }

    /// The host clock's current reading (ms).
    #[must_use]
    pub fn now(&self) -> Instant {
        self.inner.clock.now()
    }

    /// What was found in the persisted files at start (`None` without persistence).
    #[must_use]
    pub fn recovery(&self) -> Option<Recovery> {
        self.inner.recovery.clone()
    }

    /// The last failed periodic save, shutdown save or token reservation, until a save
    /// succeeds (`None` if all is well or without persistence). Failures are also passed to
    /// the hook set with [`LockHostBuilder::on_persist_error`].
    #[must_use]
    pub fn persist_error(&self) -> Option<Error> {
        self.inner
            .lock()
            .ok()
            .and_then(|st| st.persist_error.clone())
    }

    /// Takes `key` for `owner` if it is free, without waiting. If `owner` already holds it, the
    /// guard is for the same lease (a retried acquire is safe).
    ///
    /// # Errors
    /// [`Error::Lock`] with `held(deadline)` if another owner holds it, or any other lock error.
    pub fn try_acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<Lease, Error> {
        let ttl = span(ttl);
        self.inner.request(|st, now, callbacks| {
            match self
                .inner
                .call(st.table.try_acquire(key, owner, ttl, now))??
            {
                AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                    self.guard(st, key, owner, ttl, g, callbacks)
                }
                AcquireOutcome::Queued { .. } | AcquireOutcome::AlreadyWaiting { .. } => {
                    Err(Error::AlreadyWaiting)
                }
            }
        })
    }

    /// Takes `key` for `owner`, blocking the calling thread until the lock is handed over by the
    /// table's FIFO queue or `wait` has passed. A zero `wait` is a [`try_acquire`](Self::try_acquire):
    /// a held key is refused with `held(deadline)`, never `WaitTimedOut`.
    ///
    /// Never returns a lease that is already over: a hand-off whose lease expired before this
    /// thread woke up is dropped and the acquire goes on (a new request to the table) until
    /// `wait` has passed.
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`] if not granted in time, [`Error::AlreadyWaiting`] if this owner
    /// already waits for this key in another call, or [`Error::Lock`] / [`Error::Host`] (at
    /// once, also for a thread already blocked, when the component traps).
    pub fn acquire(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, Error> {
        let ttl = span(ttl);
        let mut callbacks = Vec::new();
        let result = self.acquire_locked(key, owner, ttl, wait, &mut callbacks);
        run_callbacks(callbacks);
        result
    }

    fn acquire_locked(
        &self,
        key: &str,
        owner: &str,
        ttl: lock_core::Duration,
        wait: Duration,
        callbacks: &mut Callbacks,
    ) -> Result<Lease, Error> {
        let inner = &self.inner;
        let mut st = inner.lock()?;
        let mut now = inner.begin(&mut st, callbacks)?;
        let wait_deadline = now.saturating_add(span(wait));
        let id = (key.to_owned(), owner.to_owned());
        loop {
            let outcome = inner.call(st.table.acquire(key, owner, ttl, wait_deadline, now))?;
            match outcome? {
                AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                    return self.guard(&mut st, key, owner, ttl, g, callbacks);
                }
                AcquireOutcome::AlreadyWaiting { .. } => return Err(Error::AlreadyWaiting),
                AcquireOutcome::Queued { .. } => {}
            }
            st.waiting.insert(id.clone());
            inner.arm(&mut st, wait_deadline);
            let outcome = loop {
                if let Some(outcome) = st.outcomes.remove(&id) {
                    break Ok(outcome);
                }
                if st.shutdown {
                    break Err(Error::WaitTimedOut);
                }
                if st.table.is_poisoned() {
                    break Err(Error::Host(HostError::Poisoned(
                        "the table became unusable while waiting".into(),
                    )));
                }
                now = match inner.begin(&mut st, callbacks) {
                    Ok(now) => now,
                    Err(e) => break Err(e),
                };
                if st.outcomes.contains_key(&id) {
                    continue;
                }
                // The table decides when the wait is over; wake up at its deadline to let
                // `begin` apply it (or earlier, when a hand-off signals).
                let step =
                    Duration::from_millis(wait_deadline.saturating_since(now).0.clamp(1, 50));
                st = inner
                    .granted
                    .wait_timeout(st, step)
                    .map_err(|_| Error::Persist("lock host state poisoned by a panic".into()))?
                    .0;
            };
            st.waiting.remove(&id);
            match outcome {
                Ok(WaitOutcome::Granted(g)) => {
                    // The hand-off may have ended before this thread woke: the table, brought
                    // up to now, says whether it is still ours. If not, never hand out a lease
                    // that ended: ask the table again with what remains of the wait.
                    now = inner.begin(&mut st, callbacks)?;
                    let held = inner.call(st.table.inspect(key, now))??;
                    if let Some(info) =
                        held.filter(|i| i.holder.owner == owner && i.holder.fence == g.fence)
                    {
                        let grant = Grant {
                            fence: info.holder.fence,
                            deadline: info.holder.deadline,
                        };
                        return self.guard(&mut st, key, owner, ttl, grant, callbacks);
                    }
                }
                Ok(WaitOutcome::TimedOut) => return Err(Error::WaitTimedOut),
                Ok(WaitOutcome::Failed(e)) => return Err(e),
                Err(e) => {
                    // Leave the queue, so no hand-off is ever made to a caller that left.
                    let _ = st.table.cancel_wait(key, owner, now);
                    inner.drain(&mut st, callbacks);
                    return Err(e);
                }
            }
        }
    }

    /// Runs `work` while holding `key`, releasing when it returns (or panics).
    ///
    /// # Errors
    /// The errors of [`acquire`](Self::acquire); the release error if the lease was lost
    /// meanwhile ([`Error::Lock`] with `expired`): the work may have overlapped another holder.
    pub fn with_lock<R>(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        work: impl FnOnce(&Lease) -> R,
    ) -> Result<R, Error> {
        let lease = self.acquire(key, owner, ttl, wait)?;
        let value = work(&lease);
        lease.release()?;
        Ok(value)
    }

    /// The holder and queue of `key`, if held.
    ///
    /// # Errors
    /// [`Error::Lock`] for an invalid key, or [`Error::Host`].
    pub fn inspect(&self, key: &str) -> Result<Option<KeyInfo>, Error> {
        self.with_table(|t, now| t.inspect(key, now).map(|r| r.map_err(Error::Lock)))?
    }

    /// Gauges and counters.
    ///
    /// # Errors
    /// [`Error::Host`].
    pub fn stats(&self) -> Result<Stats, Error> {
        self.with_table(|t, now| t.stats(now))
    }

    /// The whole table as snapshot bytes.
    ///
    /// # Errors
    /// [`Error::Host`].
    pub fn snapshot(&self) -> Result<Vec<u8>, Error> {
        self.with_table(|t, now| t.snapshot(now))
    }

    /// Saves the table to the persistence file now (no-op without persistence).
    ///
    /// # Errors
    /// [`Error::Persist`] if the file cannot be written.
    pub fn save(&self) -> Result<(), Error> {
        self.inner.save()
    }

    /// Does now what the timer thread does at its next wake-up (expiries, hand-offs, lost-lock
    /// callbacks, keep-alives, a due save). Useful with a [`ManualClock`](crate::ManualClock).
    pub fn tick(&self) {
        let mut callbacks = Vec::new();
        let save_due = match self.inner.lock() {
            Ok(mut st) => self.inner.run_due(&mut st, &mut callbacks),
            Err(_) => false,
        };
        self.inner.timer.notify_all();
        run_callbacks(callbacks);
        self.inner.renew_ahead();
        if save_due {
            if let Err(e) = self.inner.save() {
                self.inner.report(e);
            }
        }
    }

    fn with_table<T>(
        &self,
        f: impl FnOnce(&mut ComponentTable, Instant) -> Result<T, HostError>,
    ) -> Result<T, Error> {
        self.inner
            .request(|st, now, _| self.inner.call(f(&mut st.table, now)))
    }

    /// The guard for a grant, once its fence is covered by the reservation. If the reservation
    /// cannot be written the lease is released at once and the error returned: a token that is
    /// not durably reserved never leaves the host.
    fn guard(
        &self,
        st: &mut State,
        key: &str,
        owner: &str,
        ttl: lock_core::Duration,
        g: Grant,
        callbacks: &mut Callbacks,
    ) -> Result<Lease, Error> {
        if let Err(e) = self.inner.admit_fence(st, g.fence) {
            let now = self.inner.clock.now();
            let _ = st.table.release(key, owner, g.fence, now);
            self.inner.drain_after_release(st, callbacks);
            return Err(e);
        }
        let shared = st
            .watchers
            .entry(g.fence)
            .or_insert_with(|| Arc::new(LeaseShared::new(key, owner, g.fence, ttl, g.deadline)))
            .clone();
        self.inner.arm(st, g.deadline);
        Ok(Lease {
            host: self.clone(),
            shared,
        })
    }
}
