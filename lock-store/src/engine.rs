//! The decision loop: read (or reuse) a key's record, run one `lock-core` transition, write back
//! with compare-and-set, and on a conflict decide again from the record the conflict returned.

use std::collections::HashMap;
use std::time::{Duration as StdDuration, Instant as LocalInstant};

use lock_core::{
    EventKind, Fence, Instant, KeyEvent, KeyInfo, Limits, LockError, Request, Response, Step,
};

use crate::clock::{StoreClock, READ_LIFE};
use crate::decider::{DecideError, Decider, Decision, Native};
use crate::store::{new_version, Read, Store, StoreError, Write, Written, TOMBSTONE};

/// Where `now` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// The store's clock (Redis `TIME`, PostgreSQL `clock_timestamp()`, MariaDB `SYSDATE(6)`,
    /// this machine's clock for SQLite and memory): what replicas use.
    Store,
    /// The caller passes `now` with every call (tests and the conformance vectors).
    Caller,
}

/// The answer to one call, with the key's events and the instant it was decided at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided<R> {
    /// The answer.
    pub reply: R,
    /// The key's events, oldest first (expiries, hand-offs, wait time-outs this call applied).
    pub events: Vec<KeyEvent>,
    /// The instant the transition ran at (the store's time, or the caller's).
    pub now: Instant,
    /// The key's next change by time alone after this call (to arm a waiter's timer).
    pub next_deadline: Option<Instant>,
    /// What this client knew of the store's clock when it decided (with the store's time;
    /// `None` with the caller's, or when no store was touched): a holder's lease ends on its
    /// own clock at the earliest local instant the store's clock can reach the deadline.
    pub(crate) clock: Option<StoreClock>,
    /// A write of this call was sent and its answer lost, and the record read afterwards was
    /// neither the one it wrote nor the one it replaced: the write may have taken effect before
    /// other writes. The reply is decided on that later record (a release there may answer
    /// `not-held`; see `Lease::release`).
    pub ambiguous: bool,
}

/// A record as last seen: its version, as the decider keeps it, and what the read that
/// fetched it (and the writes since) tell of the store's clock.
#[derive(Clone, Debug)]
struct Seen<R> {
    version: u64,
    /// The record's bytes as stored (a [`TOMBSTONE`]'s; empty for none): a write replaces
    /// exactly these or nothing.
    bytes: Vec<u8>,
    record: R,
    clock: StoreClock,
}

/// How long an emptied record stays as a tombstone (store's time) before the store may collect
/// it: far longer than any one decision takes from its read to its write.
pub const TOMBSTONE_LIFE: lock_core::Duration = lock_core::Duration(60_000);

/// Most compare-and-set attempts per call before [`StoreError::Contention`].
pub const MAX_ATTEMPTS: u32 = 32;

/// Decides calls on one store, keeping the records it last saw so that an uncontended call is
/// one compare-and-set (one round trip). `D` decides: the native core by default, or the lock
/// component (`Component`, feature `component`).
pub struct Engine<S, D: Decider = Native> {
    store: S,
    decider: D,
    limits: Limits,
    time: TimeSource,
    seen: HashMap<String, Seen<D::Record>>,
    /// Test mode: every call starts from an outdated record (see [`Engine::set_stale`]).
    stale: bool,
    previous: HashMap<String, Seen<D::Record>>,
    /// How long a remembered record's read is trusted (see [`READ_LIFE`]).
    read_life: StdDuration,
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
            seen: HashMap::new(),
            stale: false,
            previous: HashMap::new(),
            read_life: READ_LIFE,
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
        self.stale = stale;
    }

    /// How long a remembered record's read is trusted before the next decision on the key
    /// reads it again (30 s unless set): the bound on the store's clock a holder's view rests
    /// on loosens by 0.1 % of the read's age (twice the most NTP slews a clock).
    pub fn set_read_life(&mut self, life: StdDuration) {
        self.read_life = life;
    }

    /// Forgets every record seen (the next call on each key reads it).
    pub fn forget_seen(&mut self) {
        self.seen.clear();
        self.previous.clear();
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
        // Bad input is refused before the store is touched (a key the store could not even
        // hold, such as one with a NUL, never reaches it). The core's check is a few
        // comparisons, so valid requests (the hot path) pay nothing more; an invalid one is
        // answered by the decider itself, on an empty record.
        if make(at).validate(&limits).is_err() {
            let empty = self.decider.empty();
            let probe = (self.decider)
                .handle(&empty, make(at), &limits)
                .map_err(|e| self.decide_error(key, e))?;
            if let Response::Acquire(Err(e)) | Response::Done(Err(e)) | Response::Extend(Err(e)) =
                &probe.step.reply
            {
                if e.is_invalid_request() && !probe.step.changed {
                    return Ok(Decided {
                        reply: probe.step.reply,
                        events: Vec::new(),
                        now: at,
                        next_deadline: None,
                        clock: None,
                        ambiguous: false,
                    });
                }
            }
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
            return Ok(Decided {
                reply: Err(e),
                events: Vec::new(),
                now: at,
                next_deadline: None,
                clock: None,
                ambiguous: false,
            });
        }
        self.run(
            key,
            at,
            |decider, record, now| decider.inspect(record, key, now, &limits),
            Step::<Result<Option<KeyInfo>, LockError>>::settle,
        )
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

    fn decide_error(&self, key: &str, e: DecideError) -> StoreError {
        match e {
            DecideError::Corrupt(error) => StoreError::Corrupt {
                key: key.to_owned(),
                error,
            },
            DecideError::Failed(reason) => StoreError::Decider {
                store: self.store.describe(),
                reason,
            },
        }
    }

    fn read(&mut self, key: &str, budget: &mut Budget) -> Result<Seen<D::Record>, StoreError> {
        budget.before_call(&mut self.store)?;
        let sent = LocalInstant::now();
        let read = self.store.read(key)?;
        self.seen_from(key, read, sent)
    }

    /// The record `read` answered, for a request sent at `sent` (the store read its clock
    /// after that).
    fn seen_from(
        &mut self,
        key: &str,
        read: Read,
        sent: LocalInstant,
    ) -> Result<Seen<D::Record>, StoreError> {
        let (version, bytes, record) = match read.record {
            None => (0, Vec::new(), self.decider.empty()),
            // A tombstone: an empty key, with the version a compare-and-set checks.
            Some(stored) if stored.bytes == TOMBSTONE => {
                (stored.version, stored.bytes, self.decider.empty())
            }
            Some(stored) => {
                let record = (self.decider)
                    .load(&stored, &self.limits)
                    .map_err(|e| self.decide_error(key, e))?;
                (stored.version, stored.bytes, record)
            }
        };
        Ok(Seen {
            version,
            bytes,
            record,
            clock: StoreClock::from_read(read.now, sent, LocalInstant::now()),
        })
    }

    /// The record to start from at local instant `t`: the one last seen (an outdated one in
    /// stale mode), else a read.
    fn start(
        &mut self,
        key: &str,
        t: LocalInstant,
        budget: &mut Budget,
    ) -> Result<(Seen<D::Record>, bool), StoreError> {
        if self.stale {
            let old = match self.previous.get(key) {
                Some(old) => old.clone(),
                None => Seen {
                    version: 0,
                    bytes: Vec::new(),
                    record: self.decider.empty(),
                    clock: StoreClock::from_read(Instant::ZERO, t, t),
                },
            };
            return Ok((old, true));
        }
        match self.seen.get(key) {
            // A remembered record whose read is too old to bound the store's clock closely
            // enough is read again (see `set_read_life`).
            Some(seen) if seen.clock.read_age(t) <= self.read_life => Ok((seen.clone(), true)),
            _ => Ok((self.read(key, budget)?, false)),
        }
    }

    fn remember(&mut self, key: &str, seen: Seen<D::Record>) {
        if let Some(old) = self.seen.insert(key.to_owned(), seen) {
            if self.stale {
                self.previous.insert(key.to_owned(), old);
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
        decide: impl Fn(&mut D, &D::Record, Instant) -> Result<Decision<D::Record, R>, DecideError>,
        settle: fn(&mut Step<R>, &[Fence]),
    ) -> Result<Decided<R>, StoreError> {
        let (mut seen, mut from_memory) = self.start(key, first, budget)?;
        let mut ambiguous = false;
        for attempt in 0..MAX_ATTEMPTS {
            let t = if attempt == 0 {
                first
            } else {
                LocalInstant::now()
            };
            let now = match self.time {
                TimeSource::Caller => at,
                TimeSource::Store => seen.clock.at_least_at(t),
            };
            let store_time = self.time == TimeSource::Store;
            let decision = decide(&mut self.decider, &seen.record, now)
                .map_err(|e| self.decide_error(key, e))?;
            let Decision {
                mut step,
                mut after,
                bytes,
                clock,
                next_deadline,
                forget_at,
            } = decision;
            if !step.changed {
                if from_memory {
                    // A refusal or a read from memory may be outdated: confirm it on a fresh read.
                    seen = self.read(key, budget)?;
                    from_memory = false;
                    continue;
                }
                self.remember(
                    key,
                    Seen {
                        record: after,
                        ..seen
                    },
                );
                return Ok(Decided {
                    reply: step.reply,
                    events: step.events,
                    now: clock,
                    next_deadline,
                    clock: store_time.then_some(seen.clock),
                    ambiguous,
                });
            }
            // With the store's time, an emptied record is not deleted but left as a tombstone
            // (TOMBSTONE bytes, a version) until TOMBSTONE_LIFE later: a writer that decided on the
            // record as it was before (absent, say) must not succeed after the key went through
            // a whole lease meanwhile, which a deleted record could not tell (version 0 again).
            let tombstone = store_time && bytes.is_none();
            let write = Write {
                expected: seen.version,
                replaces: &seen.bytes,
                version: new_version(),
                bytes: if tombstone {
                    Some(TOMBSTONE)
                } else {
                    bytes.as_deref()
                },
                fresh_fences: step.fresh_fences,
                not_before: store_time.then_some(clock),
                forget_at: match (store_time, tombstone) {
                    (false, _) => None,
                    (true, true) => Some(clock.saturating_add(TOMBSTONE_LIFE)),
                    (true, false) => forget_at,
                },
            };
            budget.before_call(&mut self.store)?;
            let fences = match self.store.write(key, &write) {
                Ok(Written::Done { fences }) => fences,
                Ok(Written::Conflict(read)) => {
                    seen = self.seen_from(key, read, t)?;
                    from_memory = false;
                    backoff(attempt);
                    continue;
                }
                Err(StoreError::Lost { store, reason }) => {
                    // Ambiguous: find out by reading whether our version is the stored one,
                    // within what remains of the call's bound (none left: the write's outcome
                    // stays unknown, and the caller hears the lost connection).
                    let lost = || StoreError::Lost {
                        store: store.clone(),
                        reason: reason.clone(),
                    };
                    budget.before_call(&mut self.store).map_err(|_| lost())?;
                    let sent = LocalInstant::now();
                    let read = self.store.read(key).map_err(|_| lost())?;
                    let found = read.record.as_ref().map_or(0, |stored| stored.version);
                    match &read.record {
                        Some(stored) if stored.version == write.version => stored.fences.clone(),
                        None if write.bytes.is_none() && write.expected != 0 => Vec::new(),
                        _ => {
                            // Neither ours nor the one ours replaced: ours may have taken
                            // effect before the writes that followed it.
                            ambiguous |= found != write.expected;
                            seen = self.seen_from(key, read, sent)?;
                            from_memory = false;
                            continue;
                        }
                    }
                }
                Err(e) => return Err(e),
            };
            if fences.len() != step.fresh_fences {
                return Err(StoreError::Server {
                    store: self.store.describe(),
                    reason: format!(
                        "asked for {} fencing tokens, got {}",
                        step.fresh_fences,
                        fences.len()
                    ),
                });
            }
            settle(&mut step, &fences);
            self.decider.settle(&mut after, &fences);
            // Wake whoever was just handed the key (best effort: waiters also look by
            // themselves).
            for event in &step.events {
                if let EventKind::Granted { owner, .. } = &event.kind {
                    let _ = self.store.announce(key, owner);
                }
            }
            let (version, written) = match write.bytes {
                Some(bytes) => (write.version, bytes.to_vec()),
                None => (0, Vec::new()),
            };
            // The write was refused unless the store's clock had reached `clock`.
            let mut store_clock = seen.clock;
            if store_time {
                store_clock.reached(clock, LocalInstant::now());
            }
            self.remember(
                key,
                Seen {
                    version,
                    bytes: written,
                    record: after,
                    clock: store_clock,
                },
            );
            return Ok(Decided {
                reply: step.reply,
                events: step.events,
                now: clock,
                next_deadline,
                clock: store_time.then_some(store_clock),
                ambiguous,
            });
        }
        Err(StoreError::Contention {
            key: key.to_owned(),
            attempts: MAX_ATTEMPTS,
        })
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

/// After the first conflict, a short random pause that doubles (up to 16 ms) so that writers
/// racing on one key spread out.
fn backoff(attempt: u32) {
    if attempt == 0 {
        return;
    }
    let cap_us = 250u64 << attempt.min(6);
    let pause = new_version() % cap_us;
    std::thread::sleep(StdDuration::from_micros(pause));
}
