//! The decision loop: read (or reuse) a key's record, run one `lock-core` transition, write back
//! with compare-and-set, and on a conflict decide again from the record the conflict returned
//! (read afresh after a pause, from the second conflict on).

use std::time::Duration as StdDuration;

use crate::local::{LocalInstant, ProcessClock};

use lock_core::{
    Event, Fence, Instant, KeyEvent, KeyInfo, Limits, LockError, QueryPage, Request, Response, Step,
};

use crate::decider::{DecideError, Decider, Decision, Native};
use crate::store::{new_version, Store, StoreError, TOMBSTONE};
use lock_protocol::decided::{refuse_invalid, Decided, TimeSource};
use lock_protocol::exchange::{decide_error, stopped};
use lock_protocol::exchange::{Exchange, Io, Memory, Stop};

/// Decides calls on one store, keeping the records it last saw so that an uncontended call is
/// one compare-and-set (one round trip). `D` decides: the native core by default, or the lock
/// component (`Component`, feature `component`).
pub struct Engine<S, D: Decider = Native> {
    store: S,
    decider: D,
    limits: Limits,
    time: TimeSource,
    /// The records last seen.
    memory: Memory<D::Record>,
}

impl<S: Store> Engine<S> {
    /// An engine over `store` decided by the native core, checking requests against `limits`.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] if a limit is out of range.
    pub fn new(store: S, limits: Limits, time: TimeSource) -> Result<Self, LockError> {
        Engine::with_decider(store, Native, limits, time)
    }
}

impl<S: Store, D: Decider> Engine<S, D> {
    /// An engine over `store` decided by `decider`.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] if a limit is out of range.
    pub fn with_decider(
        store: S,
        decider: D,
        limits: Limits,
        time: TimeSource,
    ) -> Result<Self, LockError> {
        limits.validate()?;
        Ok(Engine {
            store,
            decider,
            limits,
            time,
            memory: Memory::default(),
        })
    }

    /// Where time comes from.
    pub fn time(&self) -> TimeSource {
        self.time
    }

    /// The limits requests are checked against.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The store.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Test mode: start every call from the record seen *before* the last one (or from no
    /// record), so that every write meets a conflict and every refusal a re-read: the conflict
    /// path then runs the whole contract.
    pub fn set_stale(&mut self, stale: bool) {
        self.memory.stale = stale;
    }

    /// How long a remembered record's read is trusted before the next decision on the key
    /// reads it again (30 s unless set): the bound on the store's clock a holder's view rests
    /// on loosens by 0.1 % of the read's age (twice the most NTP slews a clock).
    pub fn set_read_life(&mut self, life: StdDuration) {
        self.memory.read_life = life;
    }

    /// Forgets every record seen (the next call on each key reads it).
    pub fn forget_seen(&mut self) {
        self.memory.forget();
    }

    /// Runs `make(now)` on `key`. In [`TimeSource::Caller`] mode `at` is the caller's `now`;
    /// in store mode it is ignored and `now` is the store's time.
    ///
    /// # Errors
    /// A [`StoreError`]; the lock's refusals are in the reply.
    pub fn request<'r>(
        &mut self,
        key: &str,
        at: Instant,
        make: impl Fn(Instant) -> Request<'r>,
    ) -> Result<Decided<Response>, StoreError> {
        let limits = self.limits.clone();
        if let Some(refused) = refuse_invalid(&mut self.decider, &limits, at, &make)
            .map_err(|e| decide_error(&self.store.describe(), key, e))?
        {
            return Ok(refused);
        }
        let decided = self.run(
            key,
            at,
            |decider, record, now| decider.handle(record, make(now), &limits),
            Step::<Response>::settle,
        );
        // A namespace that does not exist yet is created by its first write, and only then
        // (reads create nothing).
        if let Err(StoreError::NoNamespace { .. }) = decided {
            self.store.install()?;
            return self.run(
                key,
                at,
                |decider, record, now| decider.handle(record, make(now), &limits),
                Step::<Response>::settle,
            );
        }
        decided
    }

    /// The key's holder and waiters (applying time first, which may write an expiry).
    ///
    /// # Errors
    /// A [`StoreError`].
    pub fn inspect(
        &mut self,
        key: &str,
        at: Instant,
    ) -> Result<Decided<Result<Option<KeyInfo>, LockError>>, StoreError> {
        let limits = self.limits.clone();
        if let Err(e) = limits.check_key(key) {
            return Ok(Decided::unchanged(Err(e), at));
        }
        self.run(
            key,
            at,
            |decider, record, now| decider.inspect(record, key, now, &limits),
            Step::<Result<Option<KeyInfo>, LockError>>::settle,
        )
    }

    /// The keys in use whose name starts with `prefix` and comes after `after`, at most
    /// `limit`, with the cursor of the next page (`lock_core::LockTable::query` over the
    /// namespace). Each candidate key is inspected in byte order (applying time first, which
    /// may write an expiry) until one more than a page is in use; the events those inspections
    /// applied are returned beside the page, each with its key.
    ///
    /// # Errors
    /// A [`StoreError`]; a refused query ([`LockError::QueryLimit`], a bad prefix or cursor)
    /// is the inner `Err` and reads nothing.
    pub fn query(
        &mut self,
        prefix: &str,
        after: &str,
        limit: usize,
        at: Instant,
    ) -> Result<(Result<QueryPage, LockError>, Vec<Event>), StoreError> {
        if let Err(e) = self.limits.check_query(prefix, after, limit) {
            return Ok((Err(e), Vec::new()));
        }
        let names = lock_protocol::driver::query_order(prefix, after, self.store.keys()?);
        let mut in_use = Vec::new();
        let mut events = Vec::new();
        for key in names {
            if in_use.len() > limit {
                break;
            }
            let decided = self.inspect(&key, at)?;
            events.extend(
                decided
                    .events
                    .into_iter()
                    .map(|KeyEvent { at, kind }| Event {
                        key: key.clone(),
                        at,
                        kind,
                    }),
            );
            // A key this client's limits refuse (written by a client with larger ones) is
            // named in the error rather than left out of the page.
            match decided.reply {
                Ok(Some(info)) => in_use.push((key, info)),
                Ok(None) => {}
                Err(e) => return Ok((Err(e), events)),
            }
        }
        Ok((Ok(QueryPage::from_ordered(in_use, limit)), events))
    }

    /// The key's record as stored now (a fresh read, not remembered), decoded by the native
    /// core.
    ///
    /// # Errors
    /// A [`StoreError`], including [`StoreError::Corrupt`].
    pub fn peek(&mut self, key: &str) -> Result<lock_core::KeyRecord, StoreError> {
        match self.store.read(key)?.record {
            None => Ok(lock_core::KeyRecord::new()),
            Some(stored) if stored.bytes == TOMBSTONE => Ok(lock_core::KeyRecord::new()),
            Some(stored) => {
                lock_core::KeyRecord::decode(&stored.bytes, &stored.fences, &self.limits).map_err(
                    |error| StoreError::Corrupt {
                        key: key.to_owned(),
                        error,
                    },
                )
            }
        }
    }

    fn run<R>(
        &mut self,
        key: &str,
        at: Instant,
        decide: impl Fn(&mut D, &D::Record, Instant) -> Result<Decision<D::Record, R>, DecideError>,
        settle: fn(&mut Step<R>, &[Fence]),
    ) -> Result<Decided<R>, StoreError> {
        // One reading of this machine's clock per attempt: it dates the decision (the lower
        // bound) and, being before the write is sent, the read a conflict answers.
        let first = LocalInstant::now();
        let mut budget = Budget {
            start: first,
            bound: self.store.bound(),
            calls: 0,
            limited: false,
        };
        let result = self.attempts(key, at, first, &mut budget, decide, settle);
        if budget.limited {
            self.store.limit_calls(None);
        }
        result
    }

    fn attempts<R>(
        &mut self,
        key: &str,
        at: Instant,
        first: LocalInstant,
        budget: &mut Budget,
        mut decide: impl FnMut(
            &mut D,
            &D::Record,
            Instant,
        ) -> Result<Decision<D::Record, R>, DecideError>,
        settle: fn(&mut Step<R>, &[Fence]),
    ) -> Result<Decided<R>, StoreError> {
        let remembered = self.memory.start(key, first, &mut self.decider);
        let mut exchange = Exchange::<D, R>::new(
            self.time,
            at,
            self.limits.clone(),
            remembered,
            new_version(),
            settle,
        );
        // One reading of this machine's clock per decision: it dates the decision (the lower
        // bound) and, being before the write is sent, the read a conflict answers.
        let mut t = first;
        loop {
            let polled = exchange.poll(&mut self.decider, t, &mut decide);
            let done = match polled {
                Err(stop) => return Err(self.stopped(key, stop)),
                Ok(None) => break,
                Ok(Some(Io::Pause(pause))) => {
                    std::thread::sleep(pause);
                    t = LocalInstant::now();
                    continue;
                }
                Ok(Some(Io::Read)) => {
                    let sent = LocalInstant::now();
                    let read = budget
                        .before_call(&mut self.store)
                        .and_then(|()| self.store.read(key));
                    Err((read, sent))
                }
                Ok(Some(Io::Write(write))) => {
                    budget.before_call(&mut self.store)?;
                    Ok(self.store.write(key, &write))
                }
            };
            let arrived = LocalInstant::now();
            let handled = match done {
                Err((read, sent)) => exchange.handle_read(&mut self.decider, read, sent, arrived),
                Ok(written) => exchange.handle_written(&mut self.decider, written, arrived),
            };
            handled.map_err(|stop| self.stopped(key, stop))?;
            // The next decision, if any, is dated when the answer arrived: before any write
            // it sends.
            t = arrived;
        }
        let Some(finished) = exchange.finished() else {
            return Err(self.stopped(key, Stop::Contention));
        };
        // Wake whoever was just handed the key (best effort: waiters also look by themselves).
        for owner in finished.handed_to() {
            let _ = self.store.announce(key, owner);
        }
        self.memory.keep(key, finished.remember);
        Ok(finished.decided)
    }

    /// The error of an exchange that stopped.
    fn stopped(&self, key: &str, stop: Stop) -> StoreError {
        stopped(&self.store.describe(), key, stop)
    }
}

/// How far past its bound a request may go rather than limit its later calls (see
/// [`Budget::before_call`]).
const SLACK: StdDuration = StdDuration::from_millis(1);

/// What remains of one request's bound: its first store call has the store's whole
/// [`Store::bound`], each later one (a re-read, a retried write) what is left of it, so that a
/// request never waits longer than the bound in all.
struct Budget {
    start: LocalInstant,
    bound: Option<StdDuration>,
    calls: u32,
    /// Whether the store's calls were limited (and must be given their whole bound again).
    limited: bool,
}

impl Budget {
    /// Before each store call: limits it to what is left, or fails if nothing is.
    fn before_call<S: Store>(&mut self, store: &mut S) -> Result<(), StoreError> {
        self.calls += 1;
        let Some(bound) = self.bound else {
            return Ok(());
        };
        if self.calls == 1 {
            return Ok(());
        }
        let left = bound.saturating_sub(self.start.elapsed());
        if left.is_zero() {
            return Err(crate::store::no_answer(store.describe(), bound));
        }
        // Within a millisecond of the whole bound (the earlier calls were answered at once, as
        // on every healthy path): not worth a change of the store's timeouts.
        if left + SLACK < bound {
            store.limit_calls(Some(left));
            self.limited = true;
        }
        Ok(())
    }
}
