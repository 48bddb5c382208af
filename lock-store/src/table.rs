//! [`StoreTable`]: a store seen as one lock table, driven by the caller's clock, so the shared
//! conformance vectors (and any generic table driver) run unchanged over every store.
//!
//! A store has no table-wide timer: each key changes lazily, when someone next touches it
//! (in production, a waiter's own timer at the key's next deadline). A table applies every key's
//! due changes before each call. `StoreTable` plays that timer: before each call it sweeps the
//! namespace's due keys, one wake-up at a time in the table's order (instant, then the lease's
//! fence), each a `handle-timeout` of that key at its own instant through the store. The calls
//! themselves are the same compare-and-set transitions a replica runs.
//!
//! Statistics are the table view's own: gauges from a scan of the namespace and the store's
//! fence counter, counters of what this table's calls did. What a store cannot have is refused
//! with [`TableFault::Unsupported`]: snapshots and restores of a whole table, and the three
//! recovery calls of a persisting host (bounded timeout handling, a fence floor, cancelling
//! every wait), whose meaning is one process's table.

use std::fmt;

use std::collections::VecDeque;

use lock_core::{
    AcquireOutcome, Call, Event, EventKind, Instant, KeyEvent, Limits, LockBackend, LockError,
    Reply, Request, Response, Stats,
};

use crate::decider::{Decider, Native};
use crate::engine::Engine;
use crate::store::{Store, StoreError};
use lock_protocol::decided::{Decided, TimeSource};

/// Why a [`StoreTable`] call failed (not a lock refusal: those are replies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableFault {
    /// The store failed.
    Store(StoreError),
    /// A table-wide operation a store does not have (`snapshot`, `restore`, and a persisting
    /// host's recovery calls).
    Unsupported(&'static str),
}

impl fmt::Display for TableFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableFault::Store(e) => e.fmt(f),
            TableFault::Unsupported(op) => write!(f, "a shared store has no table-wide {op}"),
        }
    }
}

impl std::error::Error for TableFault {}

impl From<StoreError> for TableFault {
    fn from(e: StoreError) -> Self {
        TableFault::Store(e)
    }
}

/// A store's namespace as one lock table with the caller's clock, decided by `D` (the native
/// core by default).
pub struct StoreTable<S, D: Decider = Native> {
    engine: Engine<S, D>,
    clock: Instant,
    events: VecDeque<Event>,
    counters: Stats,
}

impl<S: Store> StoreTable<S> {
    /// A table over `store`'s namespace, checking requests against `limits`, with the
    /// caller's clock, decided by the native core.
    ///
    /// # Errors
    /// [`LockError`] if a limit is out of range.
    pub fn new(store: S, limits: Limits) -> Result<Self, LockError> {
        StoreTable::with_decider(store, Native, limits)
    }
}

impl<S: Store, D: Decider> StoreTable<S, D> {
    /// As [`StoreTable::new`], decided by `decider`.
    ///
    /// # Errors
    /// [`LockError`] if a limit is out of range.
    pub fn with_decider(store: S, decider: D, limits: Limits) -> Result<Self, LockError> {
        Ok(StoreTable {
            engine: Engine::with_decider(store, decider, limits, TimeSource::Caller)?,
            clock: Instant::ZERO,
            events: VecDeque::new(),
            counters: Stats::default(),
        })
    }

    /// The engine (to reach the store, or set stale mode).
    pub fn engine_mut(&mut self) -> &mut Engine<S, D> {
        &mut self.engine
    }

    /// Queues a call's events and counts them.
    fn absorb<R>(&mut self, key: &str, decided: Decided<R>) -> R {
        for KeyEvent { at, kind } in decided.events {
            self.push_event(Event {
                key: key.to_owned(),
                at,
                kind,
            });
        }
        decided.reply
    }

    /// Queues one event (bounded as a table bounds them) and counts it.
    fn push_event(&mut self, event: Event) {
        let c = &mut self.counters;
        match event.kind {
            EventKind::Expired { .. } => c.expired += 1,
            EventKind::Granted { .. } => c.handed_off += 1,
            EventKind::WaitTimedOut { .. } => c.wait_timed_out += 1,
            EventKind::Stolen { .. } => c.stolen += 1,
        }
        if self.events.len() >= self.engine.limits().max_pending_events {
            self.events.pop_front();
            self.counters.events_dropped += 1;
        }
        self.events.push_back(event);
    }

    /// Counts an answer as a table counts it.
    fn count(&mut self, response: &Response) {
        let c = &mut self.counters;
        match response {
            Response::Acquire(Ok(AcquireOutcome::Acquired(_))) => c.acquired += 1,
            Response::Acquire(Ok(AcquireOutcome::Queued { .. })) => c.queued += 1,
            Response::Acquire(Ok(_)) | Response::Timeout | Response::Malformed => {}
            Response::Acquire(Err(_))
            | Response::Done(Err(_))
            | Response::Extend(Err(_))
            | Response::Release(Err(_)) => {
                c.rejected += 1;
            }
            Response::Extend(Ok(_)) => c.extended += 1,
            Response::Release(Ok(_)) => c.released += 1,
            Response::Done(Ok(())) => {}
        }
    }

    /// Gauges from a scan of the namespace at the table's clock, and the counters.
    fn stats(&mut self, now: Instant) -> Result<Stats, StoreError> {
        let now = self.advance(now)?;
        let limits = self.engine.limits().clone();
        let mut stats = Stats {
            pending_events: self.events.len(),
            clock: now,
            last_fence: self.engine.store_mut().last_fence()?,
            ..self.counters
        };
        for key in self.engine.store_mut().keys()? {
            let record = self.engine.peek(&key)?;
            stats.live_leases += usize::from(record.state().lease().is_some());
            stats.waiters += record.state().waiter_count();
            stats.expired_records += record.remembered_expiries(now, &limits);
        }
        Ok(stats)
    }

    /// The namespace's key wake-ups, each `(instant, lease fence, key)`: the harness's timer,
    /// read with the native core whoever decides (it only finds which key is due; the sweep's
    /// transitions go through the decider).
    fn wakeups(&mut self) -> Result<Vec<(Instant, Option<lock_core::Fence>, String)>, StoreError> {
        let keys = self.engine.store_mut().keys()?;
        let mut due = Vec::new();
        for key in keys {
            let record = self.engine.peek(&key)?;
            if let Some(at) = record.next_deadline() {
                due.push((at, record.state().lease().map(|l| l.fence()), key));
            }
        }
        Ok(due)
    }

    /// Applies every key's due changes up to `now`, in the table's order.
    fn sweep(&mut self, now: Instant) -> Result<(), StoreError> {
        loop {
            let next = self.wakeups()?.into_iter().filter(|w| w.0 <= now).min();
            let Some((at, _, key)) = next else {
                return Ok(());
            };
            let decided = self
                .engine
                .request(&key, at, |at| Request::HandleTimeout { now: at })?;
            self.absorb(&key, decided);
        }
    }

    fn advance(&mut self, now: Instant) -> Result<Instant, StoreError> {
        self.clock = self.clock.max(now);
        let now = self.clock;
        self.sweep(now)?;
        Ok(now)
    }

    fn request(&mut self, request: Request<'_>) -> Result<Response, StoreError> {
        let Some(key) = request.key() else {
            self.advance(request.now())?;
            return Ok(Response::Timeout);
        };
        // A refused request changes nothing, not even the clock (as in a table).
        if request.validate(self.engine.limits()).is_ok() {
            self.advance(request.now())?;
        }
        let now = self.clock;
        // Releasing again a lease that keeps its place (a minimum hold) ends nothing, so a
        // table does not count it: the record before the call says whether it is a repeat.
        let repeat = match request {
            Request::Release { owner, fence, .. } => (self.engine.peek(key)?.state())
                .released_early(owner, fence)
                .is_some(),
            _ => false,
        };
        let decided = self.engine.request(key, now, |now| request.at(now))?;
        let response = self.absorb(key, decided);
        if !repeat {
            self.count(&response);
        }
        if let (Request::CancelWait { .. }, Response::Done(Ok(()))) = (request, &response) {
            self.counters.cancelled += 1;
        }
        Ok(response)
    }
}

impl<S: Store, D: Decider> LockBackend for StoreTable<S, D> {
    type Fault = TableFault;

    fn call(&mut self, call: Call<'_>) -> Result<Reply, TableFault> {
        match call {
            Call::Request(request) => Ok(Reply::Response(self.request(request)?)),
            Call::Inspect { key, now } => {
                if self.engine.limits().check_key(key).is_ok() {
                    self.advance(now)?;
                } else {
                    self.counters.rejected += 1;
                }
                let decided = self.engine.inspect(key, self.clock)?;
                Ok(Reply::Inspect(self.absorb(key, decided)))
            }
            Call::NextWakeup => {
                let next = self.wakeups()?.into_iter().map(|w| w.0).min();
                Ok(Reply::Wakeup(next))
            }
            Call::Stats { now } => Ok(Reply::Stats(self.stats(now)?)),
            Call::Snapshot { .. } => Err(TableFault::Unsupported("snapshot")),
            Call::Restore { .. } => Err(TableFault::Unsupported("restore")),
            Call::Query {
                prefix,
                after,
                limit,
                now,
            } => {
                let checked = self.engine.limits().check_query(prefix, after, limit);
                if checked.is_ok() {
                    self.advance(now)?;
                } else {
                    self.counters.rejected += 1;
                }
                let (page, events) = self.engine.query(prefix, after, limit, self.clock)?;
                for event in events {
                    self.push_event(event);
                }
                Ok(Reply::Query(page))
            }
            Call::HandleTimeoutBounded { .. } => {
                Err(TableFault::Unsupported("handle-timeout-bounded"))
            }
            Call::RaiseFenceFloor { .. } => Err(TableFault::Unsupported("raise-fence-floor")),
            Call::CancelAllWaits { .. } => Err(TableFault::Unsupported("cancel-all-waits")),
        }
    }

    fn drain_events(&mut self) -> Result<Vec<Event>, TableFault> {
        Ok(self.events.drain(..).collect())
    }
}
