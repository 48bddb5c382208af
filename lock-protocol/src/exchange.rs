//! The decision loop of one call on one key, sans IO: [`Exchange`] asks for a read or a
//! compare-and-set ([`Io`]) and is handed its result; it decides (through a [`Decider`]),
//! settles fencing tokens, re-reads after a conflict or a lost answer, and finishes with the
//! reply and the record to remember. It never touches a store, a socket or a clock: the driver
//! does the IO and passes local time in. `lock-store`'s blocking `Engine` drives it
//! today; an async driver (or a Node one, through the npm engine) drives the same loop and
//! re-decides nothing.
//!
//! The rules it keeps (`docs/stores.md`, "The protocol" and "Ambiguous results"):
//! - A refusal or a read decided on a remembered record is confirmed on a fresh read first (it
//!   writes nothing, so no compare-and-set would catch an outdated record).
//! - With the store's time, `now` is the lower bound of the store's clock ([`StoreClock`]) and
//!   the write carries it as `not_before`; an emptied record is a tombstone until
//!   [`TOMBSTONE_LIFE`] later, never deleted (a version that went back to 0 could let a stale
//!   writer through).
//! - The first conflict decides again at once on the record it returned; a later one pauses
//!   a short random while, then reads the record afresh (the one it returned is as old as the
//!   pause: against a writer in a tight loop, decisions on it would conflict every time).
//! - A write whose answer was lost is resolved by reading: our version there means done;
//!   the version we replaced (or nothing, for a deletion) means not done, decide again; anything
//!   else means ours may have taken effect before other writes (`ambiguous`).
//! - At most [`MAX_ATTEMPTS`] compare-and-sets.

use std::collections::HashMap;
use std::time::Duration as StdDuration;

use crate::local::LocalInstant;

use lock_core::{Fence, Instant, Limits, Step};

use crate::clock::{StoreClock, READ_LIFE};
use crate::decided::{Decided, TimeSource, MAX_ATTEMPTS, TOMBSTONE_LIFE};
use crate::decider::{DecideError, Decider, Decision};
use crate::error::StoreError;
use crate::records::{Read, Write, Written, TOMBSTONE};

/// A record as last seen: its version, as the decider keeps it, and what the read that
/// fetched it (and the writes since) tell of the store's clock.
#[derive(Clone, Debug)]
pub struct Seen<R> {
    /// The record's version (0: none).
    pub version: u64,
    /// The record's bytes as stored (a [`TOMBSTONE`]'s; empty for none): a write replaces
    /// exactly these or nothing.
    pub bytes: Vec<u8>,
    /// The record as the decider keeps it.
    pub record: R,
    /// What the read (and the writes since) tell of the store's clock.
    pub clock: StoreClock,
}

/// The call's transition: runs on a record at an instant, through the decider.
pub type Decide<'f, D, R> = dyn FnMut(
        &mut D,
        &<D as Decider>::Record,
        Instant,
    ) -> Result<Decision<<D as Decider>::Record, R>, DecideError>
    + 'f;

/// The records a client last saw, one per key, which its next call on the key starts from
/// (an uncontended call is then one compare-and-set): what every driver keeps between calls.
pub struct Memory<Rec> {
    seen: HashMap<String, Seen<Rec>>,
    /// Test mode: every call starts from an outdated record (the one seen before the last).
    pub stale: bool,
    previous: HashMap<String, Seen<Rec>>,
    /// How long a remembered record's read is trusted (see [`READ_LIFE`]).
    pub read_life: StdDuration,
}

impl<Rec> Default for Memory<Rec> {
    fn default() -> Self {
        Memory {
            seen: HashMap::new(),
            stale: false,
            previous: HashMap::new(),
            read_life: READ_LIFE,
        }
    }
}

impl<Rec: Clone> Memory<Rec> {
    /// The record a call on `key` at local instant `t` starts from: the one last seen (an
    /// outdated one in stale mode), or none (a read first).
    pub fn start<D: Decider<Record = Rec>>(
        &self,
        key: &str,
        t: LocalInstant,
        decider: &mut D,
    ) -> Option<Seen<Rec>> {
        if self.stale {
            return Some(match self.previous.get(key) {
                Some(old) => old.clone(),
                None => Seen {
                    version: 0,
                    bytes: Vec::new(),
                    record: decider.empty(),
                    clock: StoreClock::from_read(Instant::ZERO, t, t),
                },
            });
        }
        // A remembered record whose read is too old to bound the store's clock closely enough
        // is read again.
        self.seen
            .get(key)
            .filter(|seen| seen.clock.read_age(t) <= self.read_life)
            .cloned()
    }

    /// Keeps what a call on `key` ended with.
    pub fn keep(&mut self, key: &str, seen: Seen<Rec>) {
        if let Some(old) = self.seen.insert(key.to_owned(), seen) {
            if self.stale {
                self.previous.insert(key.to_owned(), old);
            }
        }
    }

    /// Forgets every record (the next call on each key reads it).
    pub fn forget(&mut self) {
        self.seen.clear();
        self.previous.clear();
    }
}

/// What the exchange needs done next.
#[derive(Debug)]
pub enum Io<'a> {
    /// Read the key (the driver notes when the request left and when the answer came).
    Read,
    /// Send this compare-and-set.
    Write(Write<'a>),
    /// Wait this long, then poll again (the pause after a conflict).
    Pause(StdDuration),
}

/// Why an exchange stopped without an answer.
#[derive(Debug)]
pub enum Stop {
    /// A store call failed.
    Store(StoreError),
    /// The decider could not decide (a record that does not decode, a component that failed).
    Decide(DecideError),
    /// The store answered another number of fencing tokens than the write asked for.
    Fences {
        /// How many the write asked for.
        asked: usize,
        /// How many the store answered.
        got: usize,
    },
    /// [`MAX_ATTEMPTS`] compare-and-sets met a conflict.
    Contention,
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Store(e)
    }
}

/// How an exchange ended: the answer, the record to remember, and whether a write of it took
/// effect (whose hand-offs the driver announces).
pub struct Finished<Rec, R> {
    /// The answer.
    pub decided: Decided<R>,
    /// The record to remember for the next call on the key.
    pub remember: Seen<Rec>,
    /// A write of this exchange took effect.
    pub wrote: bool,
}

impl<Rec, R> Finished<Rec, R> {
    /// The owners this call's write handed the key to (whose waiters the driver tells).
    pub fn handed_to(&self) -> impl Iterator<Item = &str> {
        let events = if self.wrote {
            &self.decided.events[..]
        } else {
            &[]
        };
        events.iter().filter_map(|event| match &event.kind {
            lock_core::EventKind::Granted { owner, .. } => Some(owner.as_str()),
            _ => None,
        })
    }
}

/// A decision waiting for its write's answer.
struct InFlight<Rec, R> {
    step: Step<R>,
    after: Rec,
    /// The bytes written (`None`: deleted).
    bytes: Option<Vec<u8>>,
    version: u64,
    not_before: Option<Instant>,
    forget_at: Option<Instant>,
    holds_for: lock_core::Duration,
    clock: Instant,
    next_deadline: Option<Instant>,
    /// The local instant the decision was dated from (a conflict's read was sent after it).
    t: LocalInstant,
    /// The write's answer was lost: the read that resolves it is out, and this is the error
    /// the caller hears if it fails too.
    lost: Option<StoreError>,
}

enum Phase<Rec, R> {
    /// A read is due before anything can be decided.
    Read,
    /// The record in `seen` is to be decided on.
    Decide,
    /// A conflict's pause is due, then a decision.
    Pause(StdDuration),
    /// A compare-and-set is out.
    Write(InFlight<Rec, R>),
    /// Over (a result was handed out).
    Done,
}

/// One call on one key (see the module's documentation).
pub struct Exchange<D: Decider, R> {
    time: TimeSource,
    at: Instant,
    limits: Limits,
    settle: fn(&mut Step<R>, &[Fence]),
    seen: Option<Seen<D::Record>>,
    from_memory: bool,
    ambiguous: bool,
    /// Compare-and-sets decided so far.
    attempt: u32,
    /// Random bits for the versions written and the pauses (see [`next_random`]).
    random: u64,
    phase: Phase<D::Record, R>,
    finished: Option<Finished<D::Record, R>>,
}

impl<D: Decider, R> Exchange<D, R> {
    /// A call at `at` (the caller's `now`, used with [`TimeSource::Caller`]) that starts from
    /// `remembered` (a record seen by an earlier call, decided on from memory) or from a read.
    /// `random` seeds the versions written and the pauses; `settle` puts the store's tokens in
    /// the reply.
    pub fn new(
        time: TimeSource,
        at: Instant,
        limits: Limits,
        remembered: Option<Seen<D::Record>>,
        random: u64,
        settle: fn(&mut Step<R>, &[Fence]),
    ) -> Self {
        let from_memory = remembered.is_some();
        Exchange {
            time,
            at,
            limits,
            settle,
            phase: if from_memory {
                Phase::Decide
            } else {
                Phase::Read
            },
            seen: remembered,
            from_memory,
            ambiguous: false,
            attempt: 0,
            random,
            finished: None,
        }
    }

    /// Decides what is next at local instant `t`: an [`Io`] to do, or the end. `decide` runs
    /// the call's transition on a record at an instant.
    pub fn poll(
        &mut self,
        decider: &mut D,
        t: LocalInstant,
        decide: &mut Decide<'_, D, R>,
    ) -> Result<Option<Io<'_>>, Stop> {
        loop {
            match &self.phase {
                Phase::Read => return Ok(Some(Io::Read)),
                Phase::Pause(pause) => {
                    let pause = *pause;
                    self.phase = Phase::Decide;
                    if !pause.is_zero() {
                        // The record the conflict answered is as old as the pause: a writer
                        // that wrote meanwhile (one in a tight loop, say) would make a decision
                        // on it conflict again, attempt after attempt. Read it afresh.
                        self.phase = Phase::Read;
                        self.from_memory = false;
                        return Ok(Some(Io::Pause(pause)));
                    }
                }
                Phase::Write(_) => return Ok(Some(self.write_order())),
                Phase::Done => return Ok(None),
                Phase::Decide => {
                    if self.attempt >= MAX_ATTEMPTS {
                        self.phase = Phase::Done;
                        return Err(Stop::Contention);
                    }
                    self.decide(decider, t, decide)?;
                    if matches!(self.phase, Phase::Done) {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// The compare-and-set of the decision in flight.
    fn write_order(&self) -> Io<'_> {
        let (Phase::Write(w), Some(seen)) = (&self.phase, &self.seen) else {
            return Io::Read;
        };
        if w.lost.is_some() {
            return Io::Read;
        }
        Io::Write(Write {
            expected: seen.version,
            replaces: &seen.bytes,
            version: w.version,
            bytes: w.bytes.as_deref(),
            fresh_fences: w.step.fresh_fences,
            not_before: w.not_before,
            forget_at: w.forget_at,
            holds_for: w.holds_for,
        })
    }

    /// One decision on the record seen, at local instant `t`.
    fn decide(
        &mut self,
        decider: &mut D,
        t: LocalInstant,
        decide: &mut Decide<'_, D, R>,
    ) -> Result<(), Stop> {
        let Some(seen) = &self.seen else {
            self.phase = Phase::Read;
            return Ok(());
        };
        let store_time = self.time == TimeSource::Store;
        let now = if store_time {
            seen.clock.at_least_at(t)
        } else {
            self.at
        };
        let decision = decide(decider, &seen.record, now).map_err(Stop::Decide)?;
        let Decision {
            step,
            after,
            bytes,
            clock,
            next_deadline,
            forget_at,
            holds_until,
        } = decision;
        if !step.changed {
            if self.from_memory {
                // A refusal or a read from memory may be outdated: confirm it on a fresh read.
                self.phase = Phase::Read;
                return Ok(());
            }
            let seen = self.seen.take().map(|seen| Seen {
                record: after,
                ..seen
            });
            self.finish(step, seen, clock, next_deadline, false);
            return Ok(());
        }
        // With the store's time, an emptied record is not deleted but left as a tombstone
        // (TOMBSTONE bytes, a version) until TOMBSTONE_LIFE later: a writer that decided on the
        // record as it was before (absent, say) must not succeed after the key went through a
        // whole lease meanwhile, which a deleted record could not tell (version 0 again).
        let tombstone = store_time && bytes.is_none();
        self.attempt += 1;
        self.phase = Phase::Write(InFlight {
            step,
            after,
            bytes: if tombstone {
                Some(TOMBSTONE.to_vec())
            } else {
                bytes
            },
            version: self.next_version(),
            not_before: store_time.then_some(clock),
            forget_at: match (store_time, tombstone) {
                (false, _) => None,
                (true, true) => Some(clock.saturating_add(TOMBSTONE_LIFE)),
                (true, false) => forget_at,
            },
            holds_for: lock_core::Duration(holds_until.map_or(0, |h| h.0.saturating_sub(clock.0))),
            clock,
            next_deadline,
            t,
            lost: None,
        });
        Ok(())
    }

    /// The answer to [`Io::Read`]: `sent` when the request left, `arrived` when the answer
    /// came (local time).
    pub fn handle_read(
        &mut self,
        decider: &mut D,
        read: Result<Read, StoreError>,
        sent: LocalInstant,
        arrived: LocalInstant,
    ) -> Result<(), Stop> {
        if let Phase::Write(w) = &mut self.phase {
            if let Some(lost) = w.lost.take() {
                // The read that resolves a lost answer: its failure is the lost connection.
                let read = read.map_err(|_| lost)?;
                return self.resolve_lost(decider, read, sent, arrived);
            }
        }
        let read = read?;
        self.seen = Some(self.seen_from(decider, read, sent, arrived)?);
        self.from_memory = false;
        self.phase = Phase::Decide;
        Ok(())
    }

    /// The answer to [`Io::Write`], which arrived at local instant `arrived`.
    pub fn handle_written(
        &mut self,
        decider: &mut D,
        written: Result<Written, StoreError>,
        arrived: LocalInstant,
    ) -> Result<(), Stop> {
        let Phase::Write(w) = &mut self.phase else {
            return Ok(());
        };
        match written {
            Ok(Written::Done { fences }) => self.done(decider, fences, arrived),
            Ok(Written::Conflict(read)) => {
                let t = w.t;
                self.seen = Some(self.seen_from(decider, read, t, arrived)?);
                self.from_memory = false;
                self.phase = Phase::Pause(self.backoff());
                Ok(())
            }
            Err(StoreError::Lost { store, reason }) => {
                // Ambiguous: find out by reading whether our version is the stored one (the
                // driver gives up with the lost connection if its bound is spent).
                w.lost = Some(StoreError::Lost { store, reason });
                Ok(())
            }
            Err(e) => {
                self.phase = Phase::Done;
                Err(Stop::Store(e))
            }
        }
    }

    /// How the exchange ended, once [`poll`](Self::poll) answered no more IO (taken once).
    pub fn finished(&mut self) -> Option<Finished<D::Record, R>> {
        self.finished.take()
    }

    fn resolve_lost(
        &mut self,
        decider: &mut D,
        read: Read,
        sent: LocalInstant,
        arrived: LocalInstant,
    ) -> Result<(), Stop> {
        let (Phase::Write(w), Some(seen)) = (&self.phase, &self.seen) else {
            return Ok(());
        };
        let found = read.record.as_ref().map_or(0, |stored| stored.version);
        match &read.record {
            Some(stored) if stored.version == w.version => {
                let fences = stored.fences.clone();
                self.done(decider, fences, arrived)
            }
            None if w.bytes.is_none() && seen.version != 0 => {
                self.done(decider, Vec::new(), arrived)
            }
            _ => {
                // Neither ours nor the one ours replaced: ours may have taken effect before
                // the writes that followed it.
                self.ambiguous |= found != seen.version;
                self.seen = Some(self.seen_from(decider, read, sent, arrived)?);
                self.from_memory = false;
                self.phase = Phase::Decide;
                Ok(())
            }
        }
    }

    /// The write took effect with `fences`: settle them and finish.
    fn done(
        &mut self,
        decider: &mut D,
        fences: Vec<Fence>,
        arrived: LocalInstant,
    ) -> Result<(), Stop> {
        let Phase::Write(mut w) = std::mem::replace(&mut self.phase, Phase::Done) else {
            return Ok(());
        };
        if fences.len() != w.step.fresh_fences {
            return Err(Stop::Fences {
                asked: w.step.fresh_fences,
                got: fences.len(),
            });
        }
        (self.settle)(&mut w.step, &fences);
        decider.settle(&mut w.after, &fences);
        let Some(seen) = self.seen.take() else {
            return Ok(());
        };
        // The write was refused unless the store's clock had reached the decision's instant.
        let mut clock = seen.clock;
        if self.time == TimeSource::Store {
            clock.reached(w.clock, arrived);
        }
        let (version, bytes) = match w.bytes {
            Some(bytes) => (w.version, bytes),
            None => (0, Vec::new()),
        };
        let remember = Seen {
            version,
            bytes,
            record: w.after,
            clock,
        };
        self.finish(w.step, Some(remember), w.clock, w.next_deadline, true);
        Ok(())
    }

    fn finish(
        &mut self,
        step: Step<R>,
        seen: Option<Seen<D::Record>>,
        clock: Instant,
        next_deadline: Option<Instant>,
        wrote: bool,
    ) {
        self.phase = Phase::Done;
        let Some(seen) = seen else {
            return;
        };
        let store_time = self.time == TimeSource::Store;
        self.finished = Some(Finished {
            decided: Decided {
                reply: step.reply,
                events: step.events,
                now: clock,
                next_deadline,
                clock: store_time.then_some(seen.clock),
                ambiguous: self.ambiguous,
            },
            remember: seen,
            wrote,
        });
    }

    /// The record `read` answered, for a request sent at `sent` whose answer came at
    /// `arrived` (the store read its clock in between).
    fn seen_from(
        &self,
        decider: &mut D,
        read: Read,
        sent: LocalInstant,
        arrived: LocalInstant,
    ) -> Result<Seen<D::Record>, Stop> {
        let (version, bytes, record) = match read.record {
            None => (0, Vec::new(), decider.empty()),
            // A tombstone: an empty key, with the version a compare-and-set checks.
            Some(stored) if stored.bytes == TOMBSTONE => {
                (stored.version, stored.bytes, decider.empty())
            }
            Some(stored) => {
                let record = decider.load(&stored, &self.limits).map_err(Stop::Decide)?;
                (stored.version, stored.bytes, record)
            }
        };
        Ok(Seen {
            version,
            bytes,
            record,
            clock: StoreClock::from_read(read.now, sent, arrived),
        })
    }

    fn next_random(&mut self) -> u64 {
        // splitmix64: well spread from any seed.
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A version never written before (non-zero).
    fn next_version(&mut self) -> u64 {
        self.next_random().max(1)
    }

    /// After the first conflict, a short random pause that doubles (up to 16 ms) so that
    /// writers racing on one key spread out.
    fn backoff(&mut self) -> StdDuration {
        let attempt = self.attempt.saturating_sub(1);
        if attempt == 0 {
            return StdDuration::ZERO;
        }
        let cap_us = 250u64 << attempt.min(6);
        StdDuration::from_micros(self.next_random() % cap_us)
    }
}

/// A decider's failure as the store error a caller hears.
pub fn decide_error(store: &str, key: &str, e: DecideError) -> StoreError {
    match e {
        DecideError::Corrupt(error) => StoreError::Corrupt {
            key: key.to_owned(),
            error,
        },
        DecideError::Failed(reason) => StoreError::Decider {
            store: store.to_owned(),
            reason,
        },
    }
}

/// The error of an exchange on `key` of `store` that stopped.
pub fn stopped(store: &str, key: &str, stop: Stop) -> StoreError {
    match stop {
        Stop::Store(e) => e,
        Stop::Decide(e) => decide_error(store, key, e),
        Stop::Fences { asked, got } => StoreError::Server {
            store: store.to_owned(),
            reason: format!("asked for {asked} fencing tokens, got {got}"),
        },
        Stop::Contention => StoreError::Contention {
            key: key.to_owned(),
            attempts: MAX_ATTEMPTS,
        },
    }
}

/// The exchange driven by hand: every store answer is scripted and local time is a value, so
/// each rule of the loop is checked without a store, a socket or a clock.
#[cfg(test)]
mod tests {
    use lock_core::{AcquireOutcome, Duration, KeyRecord, LockError, Request, Response};

    use super::*;
    use crate::decider::Native;
    use crate::records::Stored;

    type Ex = Exchange<Native, Response>;

    fn acquire(
        d: &mut Native,
        r: &KeyRecord,
        now: Instant,
    ) -> Result<Decision<KeyRecord, Response>, DecideError> {
        let limits = Limits::default();
        d.handle(
            r,
            Request::TryAcquire {
                key: "k",
                owner: "a",
                ttl: Duration(1000),
                now,
            },
            &limits,
        )
    }

    fn release(
        fence: u64,
    ) -> impl FnMut(&mut Native, &KeyRecord, Instant) -> Result<Decision<KeyRecord, Response>, DecideError>
    {
        move |d, r, now| {
            d.handle(
                r,
                Request::Release {
                    key: "k",
                    owner: "a",
                    fence: Fence(fence),
                    now,
                },
                &Limits::default(),
            )
        }
    }

    /// Polls once: the IO asked for, owned (a write as its version, bytes and `not_before`).
    #[derive(Debug, PartialEq)]
    enum Asked {
        Read,
        Write {
            expected: u64,
            version: u64,
            bytes: Option<Vec<u8>>,
            fresh: usize,
            not_before: Option<Instant>,
            forget_at: Option<Instant>,
        },
        Pause,
        Nothing,
    }

    fn poll(
        ex: &mut Ex,
        t: LocalInstant,
        decide: &mut Decide<'_, Native, Response>,
    ) -> Result<Asked, Stop> {
        Ok(match ex.poll(&mut Native, t, decide)? {
            Some(Io::Read) => Asked::Read,
            Some(Io::Pause(_)) => Asked::Pause,
            Some(Io::Write(w)) => Asked::Write {
                expected: w.expected,
                version: w.version,
                bytes: w.bytes.map(<[u8]>::to_vec),
                fresh: w.fresh_fences,
                not_before: w.not_before,
                forget_at: w.forget_at,
            },
            None => Asked::Nothing,
        })
    }

    fn read(record: Option<(u64, Vec<u8>, Vec<Fence>)>, now: u64) -> Result<Read, StoreError> {
        Ok(Read {
            record: record.map(|(version, bytes, fences)| Stored {
                version,
                bytes,
                fences,
            }),
            now: Instant(now),
        })
    }

    fn limits() -> Limits {
        Limits::default()
    }

    /// A call with the store's time, from no remembered record.
    fn fresh(limits: &Limits) -> Ex {
        Ex::new(
            TimeSource::Store,
            Instant(0),
            limits.clone(),
            None,
            7,
            Step::<Response>::settle,
        )
    }

    /// Polls the acquire's first read and answers it: no record, the store's time 5 000.
    fn read_nothing(ex: &mut Ex, t: LocalInstant) {
        assert_eq!(poll(ex, t, &mut acquire).unwrap(), Asked::Read);
        ex.handle_read(&mut Native, read(None, 5_000), t, t)
            .unwrap();
    }

    #[test]
    fn a_fresh_call_reads_decides_at_the_stores_time_and_writes_once() {
        let limits = limits();
        let t = LocalInstant::from_nanos(1_000_000_000);
        let mut ex = fresh(&limits);
        assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Read);
        ex.handle_read(&mut Native, read(None, 5_000), t, t)
            .unwrap();
        let Asked::Write {
            expected,
            fresh,
            not_before,
            bytes,
            ..
        } = poll(&mut ex, t, &mut acquire).unwrap()
        else {
            panic!("a write");
        };
        assert_eq!((expected, fresh, not_before), (0, 1, Some(Instant(5_000))));
        assert!(bytes.is_some());
        ex.handle_written(
            &mut Native,
            Ok(Written::Done {
                fences: vec![Fence(42)],
            }),
            t,
        )
        .unwrap();
        assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Nothing);
        let done = ex.finished().unwrap();
        assert!(done.wrote);
        assert_eq!(
            done.decided.reply,
            Response::Acquire(Ok(AcquireOutcome::Acquired(lock_core::Grant {
                fence: Fence(42),
                deadline: Instant(6_000)
            })))
        );
        assert!(!done.decided.ambiguous);
        assert_eq!(
            done.remember.record.state().lease().map(|l| l.fence()),
            Some(Fence(42))
        );
    }

    /// The record as stored after a grant to `owner` at `now` with fence 42.
    fn held(owner: &str, now: u64) -> Vec<u8> {
        let mut record = KeyRecord::new();
        let mut step = record.handle(
            Request::TryAcquire {
                key: "k",
                owner,
                ttl: Duration(1000),
                now: Instant(now),
            },
            &limits(),
        );
        step.settle(&[Fence(42)]);
        record.settle(&[Fence(42)]);
        record.encode()
    }

    #[test]
    fn a_conflict_decides_again_on_the_record_it_returned_and_pauses_from_the_second() {
        let limits = limits();
        let t = LocalInstant::from_nanos(1_000_000_000);
        let mut ex = fresh(&limits);
        read_nothing(&mut ex, t);
        let Asked::Write { .. } = poll(&mut ex, t, &mut acquire).unwrap() else {
            panic!()
        };
        // Another client created the key meanwhile, for itself: the answer is `held`, decided
        // on that record, without a write.
        let theirs = held("b", 5_000);
        ex.handle_written(
            &mut Native,
            Ok(Written::Conflict(
                read(Some((9, theirs, vec![Fence(42)])), 5_001).unwrap(),
            )),
            t,
        )
        .unwrap();
        assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Nothing);
        let done = ex.finished().unwrap();
        assert!(!done.wrote);
        assert!(matches!(
            done.decided.reply,
            Response::Acquire(Err(LockError::Held { .. }))
        ));
        assert_eq!(done.remember.version, 9);
        // A second conflict in one call pauses first, then reads again; each write has a version
        // of its own.
        let mut ex = fresh(&limits);
        read_nothing(&mut ex, t);
        let mut versions = Vec::new();
        for round in 0..3 {
            match poll(&mut ex, t, &mut acquire).unwrap() {
                Asked::Write {
                    version, expected, ..
                } => {
                    versions.push(version);
                    assert_eq!(expected, if round == 0 { 0 } else { 3 });
                }
                other => panic!("{other:?}"),
            }
            // A tombstone of version 3: still empty, but a version to compare.
            ex.handle_written(
                &mut Native,
                Ok(Written::Conflict(
                    read(Some((3, TOMBSTONE.to_vec(), vec![])), 5_000).unwrap(),
                )),
                t,
            )
            .unwrap();
            if round > 0 {
                assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Pause);
                // After a pause the record the conflict answered is stale: read it afresh.
                assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Read);
                let tombstone = read(Some((3, TOMBSTONE.to_vec(), vec![])), 5_000);
                ex.handle_read(&mut Native, tombstone, t, t).unwrap();
            }
        }
        versions.sort_unstable();
        versions.dedup();
        assert_eq!(versions.len(), 3, "a version is never written twice");
    }

    #[test]
    fn a_lost_answer_is_resolved_by_reading_ours_back_or_is_ambiguous() {
        let limits = limits();
        let t = LocalInstant::from_nanos(1_000_000_000);
        let lost = || StoreError::Lost {
            store: "test".into(),
            reason: "reset".into(),
        };
        // Our version was stored: done, with the tokens the store kept next to it.
        let mut ex = fresh(&limits);
        read_nothing(&mut ex, t);
        let Asked::Write { version, bytes, .. } = poll(&mut ex, t, &mut acquire).unwrap() else {
            panic!()
        };
        ex.handle_written(&mut Native, Err(lost()), t).unwrap();
        assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Read);
        ex.handle_read(
            &mut Native,
            read(Some((version, bytes.unwrap(), vec![Fence(77)])), 5_002),
            t,
            t,
        )
        .unwrap();
        assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Nothing);
        let done = ex.finished().unwrap();
        assert!(done.wrote && !done.decided.ambiguous);
        assert!(matches!(
            done.decided.reply,
            Response::Acquire(Ok(AcquireOutcome::Acquired(g))) if g.fence == Fence(77)
        ));
        // The read that would resolve it fails: the caller hears the lost connection.
        let mut ex = fresh(&limits);
        read_nothing(&mut ex, t);
        poll(&mut ex, t, &mut acquire).unwrap();
        ex.handle_written(&mut Native, Err(lost()), t).unwrap();
        poll(&mut ex, t, &mut acquire).unwrap();
        let refused = StoreError::Connect {
            store: "test".into(),
            reason: "down".into(),
        };
        assert!(matches!(
            ex.handle_read(&mut Native, Err(refused), t, t),
            Err(Stop::Store(StoreError::Lost { .. }))
        ));
        // Neither ours nor the one ours replaced: ambiguous, decided again on what is there.
        let mut ex = fresh(&limits);
        read_nothing(&mut ex, t);
        poll(&mut ex, t, &mut acquire).unwrap();
        ex.handle_written(&mut Native, Err(lost()), t).unwrap();
        poll(&mut ex, t, &mut acquire).unwrap();
        ex.handle_read(
            &mut Native,
            read(Some((11, held("b", 5_001), vec![Fence(43)])), 5_002),
            t,
            t,
        )
        .unwrap();
        assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Nothing);
        let done = ex.finished().unwrap();
        assert!(done.decided.ambiguous);
    }

    #[test]
    fn a_refusal_from_memory_is_confirmed_on_a_fresh_read() {
        let limits = limits();
        let t = LocalInstant::from_nanos(1_000_000_000);
        let mut native = Native;
        let stored = Stored {
            version: 5,
            bytes: held("b", 5_000),
            fences: vec![Fence(42)],
        };
        let remembered = Seen {
            version: 5,
            record: native.load(&stored, &limits).unwrap(),
            bytes: stored.bytes,
            clock: StoreClock::from_read(Instant(5_000), t, t),
        };
        let mut ex = Ex::new(
            TimeSource::Store,
            Instant(0),
            limits.clone(),
            Some(remembered),
            7,
            Step::<Response>::settle,
        );
        // Held, from memory: read again before answering. The key was released meanwhile.
        assert_eq!(poll(&mut ex, t, &mut acquire).unwrap(), Asked::Read);
        ex.handle_read(
            &mut Native,
            read(Some((6, TOMBSTONE.to_vec(), vec![])), 5_010),
            t,
            t,
        )
        .unwrap();
        assert!(matches!(
            poll(&mut ex, t, &mut acquire).unwrap(),
            Asked::Write { expected: 6, .. }
        ));
    }

    #[test]
    fn an_emptied_record_is_written_as_a_tombstone_with_the_stores_time() {
        let limits = limits();
        let t = LocalInstant::from_nanos(1_000_000_000);
        let mut ex = fresh(&limits);
        let mut release = release(42);
        poll(&mut ex, t, &mut release).unwrap();
        ex.handle_read(
            &mut Native,
            read(Some((5, held("a", 5_000), vec![Fence(42)])), 5_100),
            t,
            t,
        )
        .unwrap();
        let Asked::Write {
            bytes,
            forget_at,
            not_before,
            fresh,
            ..
        } = poll(&mut ex, t, &mut release).unwrap()
        else {
            panic!()
        };
        assert_eq!(bytes.as_deref(), Some(TOMBSTONE));
        assert_eq!(not_before, Some(Instant(5_100)));
        assert_eq!(
            forget_at,
            Some(Instant(5_100).saturating_add(TOMBSTONE_LIFE))
        );
        assert_eq!(fresh, 0);
        // With the caller's time, it is deleted, and nothing bounds the store's clock.
        let mut ex = Ex::new(
            TimeSource::Caller,
            Instant(5_100),
            limits.clone(),
            None,
            7,
            Step::<Response>::settle,
        );
        poll(&mut ex, t, &mut release).unwrap();
        ex.handle_read(
            &mut Native,
            read(Some((5, held("a", 5_000), vec![Fence(42)])), 0),
            t,
            t,
        )
        .unwrap();
        assert!(matches!(
            poll(&mut ex, t, &mut release).unwrap(),
            Asked::Write {
                bytes: None,
                not_before: None,
                forget_at: None,
                ..
            }
        ));
    }

    #[test]
    fn conflicts_without_end_stop_at_the_most_attempts() {
        let limits = limits();
        let t = LocalInstant::from_nanos(1_000_000_000);
        let mut ex = fresh(&limits);
        read_nothing(&mut ex, t);
        let mut writes = 0;
        loop {
            match poll(&mut ex, t, &mut acquire) {
                Ok(Asked::Write { .. }) => {
                    writes += 1;
                    ex.handle_written(
                        &mut Native,
                        Ok(Written::Conflict(
                            read(Some((writes, TOMBSTONE.to_vec(), vec![])), 5_000).unwrap(),
                        )),
                        t,
                    )
                    .unwrap();
                }
                Ok(Asked::Pause) => {}
                Ok(Asked::Read) => {
                    let tombstone = read(Some((writes, TOMBSTONE.to_vec(), vec![])), 5_000);
                    ex.handle_read(&mut Native, tombstone, t, t).unwrap();
                }
                Err(Stop::Contention) => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(writes, u64::from(MAX_ATTEMPTS));
    }
}
