//! The decision loop: read (or reuse) a key's record, run one `lock-core` transition, write back
//! with compare-and-set, and on a conflict decide again from the record the conflict returned.

use std::collections::HashMap;
use std::time::Duration as StdDuration;

use lock_core::{
    Fence, Instant, KeyEvent, KeyInfo, KeyRecord, Limits, LockError, Request, Response, Step,
};

use crate::store::{new_version, Read, Store, StoreError, Write, Written};

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
}

/// A record as last seen: its version, decoded, and when (store time, local clock).
#[derive(Clone, Debug)]
struct Seen {
    version: u64,
    record: KeyRecord,
    store_now: Instant,
    at: std::time::Instant,
}

impl Seen {
    /// The store's time now, never ahead of it: the store's time at the read plus what this
    /// machine's monotonic clock measured since the answer arrived.
    fn store_now(&self) -> Instant {
        let elapsed = u64::try_from(self.at.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.store_now.saturating_add(lock_core::Duration(elapsed))
    }
}

/// Most compare-and-set attempts per call before [`StoreError::Contention`].
pub const MAX_ATTEMPTS: u32 = 32;

/// Decides calls on one store, keeping the records it last saw so that an uncontended call is
/// one compare-and-set (one round trip).
pub struct Engine<S> {
    store: S,
    limits: Limits,
    time: TimeSource,
    seen: HashMap<String, Seen>,
    /// Test mode: every call starts from an outdated record (see [`Engine::set_stale`]).
    stale: bool,
    previous: HashMap<String, Seen>,
}

impl<S: Store> Engine<S> {
    /// An engine over `store`, checking requests against `limits`.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] if a limit is out of range.
    pub fn new(store: S, limits: Limits, time: TimeSource) -> Result<Self, LockError> {
        limits.validate()?;
        Ok(Engine {
            store,
            limits,
            time,
            seen: HashMap::new(),
            stale: false,
            previous: HashMap::new(),
        })
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
        // hold, such as one with a NUL, never reaches it).
        let probe = make(at);
        if probe.validate(&limits).is_err() {
            let step = KeyRecord::new().handle(probe, &limits);
            return Ok(Decided {
                reply: step.reply,
                events: Vec::new(),
                now: at,
                next_deadline: None,
            });
        }
        self.run(
            key,
            at,
            |record, now| record.handle(make(now), &limits),
            Step::<Response>::settle,
        )
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
            });
        }
        self.run(
            key,
            at,
            |record, now| record.inspect(key, now, &limits),
            Step::<Result<Option<KeyInfo>, LockError>>::settle,
        )
    }

    /// The key's record as stored now (a fresh read, not remembered).
    ///
    /// # Errors
    /// A [`StoreError`], including [`StoreError::Corrupt`].
    pub fn peek(&mut self, key: &str) -> Result<KeyRecord, StoreError> {
        Ok(self.read(key)?.record)
    }

    fn read(&mut self, key: &str) -> Result<Seen, StoreError> {
        let read = self.store.read(key)?;
        self.seen_from(key, read)
    }

    fn seen_from(&self, key: &str, read: Read) -> Result<Seen, StoreError> {
        let (version, record) = match read.record {
            None => (0, KeyRecord::new()),
            Some(stored) => {
                let record = KeyRecord::decode(&stored.bytes, &stored.fences, &self.limits)
                    .map_err(|error| StoreError::Corrupt {
                        key: key.to_owned(),
                        error,
                    })?;
                (stored.version, record)
            }
        };
        Ok(Seen {
            version,
            record,
            store_now: read.now,
            at: std::time::Instant::now(),
        })
    }

    /// The record to start from: the one last seen (an outdated one in stale mode), else a read.
    fn start(&mut self, key: &str) -> Result<(Seen, bool), StoreError> {
        if self.stale {
            let old = self.previous.get(key).cloned().unwrap_or_else(|| Seen {
                version: 0,
                record: KeyRecord::new(),
                store_now: Instant::ZERO,
                at: std::time::Instant::now(),
            });
            return Ok((old, true));
        }
        match self.seen.get(key) {
            Some(seen) => Ok((seen.clone(), true)),
            None => Ok((self.read(key)?, false)),
        }
    }

    fn remember(&mut self, key: &str, seen: Seen) {
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
        decide: impl Fn(&mut KeyRecord, Instant) -> Step<R>,
        settle: fn(&mut Step<R>, &[Fence]),
    ) -> Result<Decided<R>, StoreError> {
        let (mut seen, mut from_memory) = self.start(key)?;
        for attempt in 0..MAX_ATTEMPTS {
            let now = match self.time {
                TimeSource::Caller => at,
                TimeSource::Store => seen.store_now(),
            };
            let mut record = seen.record.clone();
            let mut step = decide(&mut record, now);
            if !step.changed {
                if from_memory {
                    // A refusal or a read from memory may be outdated: confirm it on a fresh read.
                    seen = self.read(key)?;
                    from_memory = false;
                    continue;
                }
                let decided_at = record.clock();
                let next_deadline = record.next_deadline();
                self.remember(key, Seen { record, ..seen });
                return Ok(Decided {
                    reply: step.reply,
                    events: step.events,
                    now: decided_at,
                    next_deadline,
                });
            }
            let bytes = (!record.is_empty()).then(|| record.encode());
            let store_time = self.time == TimeSource::Store;
            let write = Write {
                expected: seen.version,
                version: new_version(),
                bytes: bytes.as_deref(),
                fresh_fences: step.fresh_fences,
                not_before: store_time.then_some(record.clock()),
                forget_at: if store_time {
                    record.forget_at(&self.limits)
                } else {
                    None
                },
            };
            let fences = match self.store.write(key, &write) {
                Ok(Written::Done { fences }) => fences,
                Ok(Written::Conflict(read)) => {
                    seen = self.seen_from(key, read)?;
                    from_memory = false;
                    backoff(attempt);
                    continue;
                }
                Err(StoreError::Lost { store, reason }) => {
                    // Ambiguous: find out by reading whether our version is the stored one.
                    let read = self.store.read(key).map_err(|_| StoreError::Lost {
                        store: store.clone(),
                        reason: reason.clone(),
                    })?;
                    match &read.record {
                        Some(stored) if stored.version == write.version => stored.fences.clone(),
                        None if write.bytes.is_none() && write.expected != 0 => Vec::new(),
                        _ => {
                            seen = self.seen_from(key, read)?;
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
            record.settle(&fences);
            let decided_at = record.clock();
            let next_deadline = record.next_deadline();
            let version = if write.bytes.is_some() {
                write.version
            } else {
                0
            };
            self.remember(
                key,
                Seen {
                    version,
                    record,
                    store_now: seen.store_now(),
                    at: std::time::Instant::now(),
                },
            );
            return Ok(Decided {
                reply: step.reply,
                events: step.events,
                now: decided_at,
                next_deadline,
            });
        }
        Err(StoreError::Contention {
            key: key.to_owned(),
            attempts: MAX_ATTEMPTS,
        })
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
