//! The state behind a [`LockHost`](crate::LockHost) and the one path every request takes: under
//! the state lock, read the clock ([`Inner::begin`]: renewing the clock reservation if it ran
//! out, then applying the expiries due by now in bounded slices), make the request, drain the
//! table's events into lease callbacks and waiter outcomes, and run the callbacks after
//! unlocking ([`Inner::request`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::clock::Clock;
use crate::lease_shared::{run_callbacks, Callbacks, LeaseShared};
use crate::persist::{self, Recovery, Reservation, CLOCK_BLOCK};
use crate::{ComponentTable, Error, HostError};
use lock_core::{Event, EventKind, Fence, Grant, Instant, LeaseLoss};

/// What [`LockHostBuilder::on_persist_error`](crate::LockHostBuilder::on_persist_error) keeps.
pub(crate) type PersistErrorHook = Box<dyn Fn(&Error) + Send + Sync>;

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
        if let Some(end) = e.lease_loss(deadline) {
            self.forget(st, shared.fence);
            shared.lose(end, callbacks);
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
                    EventKind::Expired { fence, .. } | EventKind::Stolen { fence, .. } => {
                        if let Some(shared) = st.watchers.get(&fence).cloned() {
                            self.forget(st, fence);
                            let stolen = matches!(kind, EventKind::Stolen { .. });
                            shared.lose(LeaseLoss { at, stolen }, callbacks);
                        }
                    }
                    EventKind::Granted {
                        owner,
                        fence,
                        deadline,
                        ..
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
