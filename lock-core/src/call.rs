//! Every operation of a lock table as a value, its answer as a value, and [`LockBackend`]: one
//! way to drive anything that behaves like a lock table.
//!
//! The native [`LockTable`] answers a [`Call`] with [`LockTable::call`]; a table behind a boundary
//! (the WebAssembly component in `host-wasmtime`, a store shared by several processes) implements
//! [`LockBackend`] by translating each call. Whatever drives tables generically (the conformance
//! vectors, the benchmarks, the playground's recorder) dispatches once, here, instead of once per
//! runtime.
//!
//! ```
//! use lock_core::{
//!     AcquireOutcome, Call, Duration, Instant, LockBackend, LockTable, Reply, Request, Response,
//! };
//!
//! /// Whether `owner` took `key` at `now`, on any backend.
//! fn took<B: LockBackend>(table: &mut B, key: &str, owner: &str, now: Instant) -> Result<bool, B::Fault> {
//!     let call = Call::Request(Request::TryAcquire { key, owner, ttl: Duration(100), now });
//!     Ok(matches!(
//!         table.call(call)?,
//!         Reply::Response(Response::Acquire(Ok(AcquireOutcome::Acquired(_))))
//!     ))
//! }
//! let mut table = LockTable::default();
//! assert_eq!(took(&mut table, "job", "a", Instant(0)), Ok(true));
//! assert_eq!(took(&mut table, "job", "b", Instant(10)), Ok(false));
//! ```

use alloc::vec::Vec;
use core::convert::Infallible;

use crate::{
    AcquireOptions, AcquireOutcome, Duration, Event, Fence, Grant, Instant, KeyInfo, Limits,
    LockError, LockTable, QueryPage, ReleaseOutcome, Stats,
};

/// A request that changes the table (the operations a [`wire`](crate::wire) batch may hold),
/// borrowing its key and owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// [`LockTable::try_acquire`](crate::LockTable::try_acquire).
    TryAcquire {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The TTL.
        ttl: Duration,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::acquire`](crate::LockTable::acquire).
    Acquire {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The TTL.
        ttl: Duration,
        /// Until when to wait.
        wait_deadline: Instant,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::acquire_with`](crate::LockTable::acquire_with): an acquire with options.
    AcquireWith {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The TTL.
        ttl: Duration,
        /// Until when to wait (not after `now`: a try-acquire).
        wait_deadline: Instant,
        /// Mode, permits, minimum hold, lock-delay, metadata.
        options: AcquireOptions<'a>,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::steal`](crate::LockTable::steal).
    Steal {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The TTL.
        ttl: Duration,
        /// Permits, minimum hold, lock-delay, metadata (a steal is exclusive).
        options: AcquireOptions<'a>,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::release`](crate::LockTable::release).
    Release {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The lease's fence.
        fence: Fence,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::extend`](crate::LockTable::extend).
    Extend {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The lease's fence.
        fence: Fence,
        /// The new TTL from `now`.
        ttl: Duration,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::cancel_wait`](crate::LockTable::cancel_wait).
    CancelWait {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::renew_wait`](crate::LockTable::renew_wait).
    RenewWait {
        /// The key.
        key: &'a str,
        /// The owner.
        owner: &'a str,
        /// The new wait deadline (kept only if later than the current one).
        wait_deadline: Instant,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::handle_timeout`](crate::LockTable::handle_timeout).
    HandleTimeout {
        /// The instant.
        now: Instant,
    },
}

impl Request<'_> {
    /// Checks the request's key, owner and TTL against `limits`, in the order the table does,
    /// before anything changes: the first error is the request's answer.
    ///
    /// # Errors
    /// The key, owner or TTL validation error.
    pub fn validate(&self, limits: &Limits) -> Result<(), LockError> {
        match *self {
            Request::TryAcquire {
                key, owner, ttl, ..
            }
            | Request::Acquire {
                key, owner, ttl, ..
            }
            | Request::Extend {
                key, owner, ttl, ..
            } => {
                limits.check_key(key)?;
                limits.check_owner(owner)?;
                limits.check_ttl(ttl)
            }
            Request::AcquireWith {
                key,
                owner,
                ttl,
                options,
                ..
            }
            | Request::Steal {
                key,
                owner,
                ttl,
                options,
                ..
            } => {
                limits.check_key(key)?;
                limits.check_owner(owner)?;
                limits.check_ttl(ttl)?;
                options.validate(ttl, limits)
            }
            Request::Release { key, owner, .. }
            | Request::CancelWait { key, owner, .. }
            | Request::RenewWait { key, owner, .. } => {
                limits.check_key(key)?;
                limits.check_owner(owner)
            }
            Request::HandleTimeout { .. } => Ok(()),
        }
    }

    /// The request's `now`.
    #[must_use]
    pub fn now(&self) -> Instant {
        match *self {
            Request::TryAcquire { now, .. }
            | Request::Acquire { now, .. }
            | Request::AcquireWith { now, .. }
            | Request::Steal { now, .. }
            | Request::Release { now, .. }
            | Request::Extend { now, .. }
            | Request::CancelWait { now, .. }
            | Request::RenewWait { now, .. }
            | Request::HandleTimeout { now } => now,
        }
    }

    /// The same request at another instant.
    #[must_use]
    pub fn at(self, instant: Instant) -> Self {
        let mut r = self;
        match &mut r {
            Request::TryAcquire { now, .. }
            | Request::Acquire { now, .. }
            | Request::AcquireWith { now, .. }
            | Request::Steal { now, .. }
            | Request::Release { now, .. }
            | Request::Extend { now, .. }
            | Request::CancelWait { now, .. }
            | Request::RenewWait { now, .. }
            | Request::HandleTimeout { now } => *now = instant,
        }
        r
    }

    /// The key it changes (`None` for [`Request::HandleTimeout`], which concerns every key).
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        match *self {
            Request::TryAcquire { key, .. }
            | Request::Acquire { key, .. }
            | Request::AcquireWith { key, .. }
            | Request::Steal { key, .. }
            | Request::Release { key, .. }
            | Request::Extend { key, .. }
            | Request::CancelWait { key, .. }
            | Request::RenewWait { key, .. } => Some(key),
            Request::HandleTimeout { .. } => None,
        }
    }
}

/// The answer to one [`Request`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Of `try-acquire`, `acquire`, `acquire-with`, `steal` and `renew-wait`.
    Acquire(Result<AcquireOutcome, LockError>),
    /// Of `release`.
    Release(Result<ReleaseOutcome, LockError>),
    /// Of `cancel-wait`.
    Done(Result<(), LockError>),
    /// Of `extend`.
    Extend(Result<Grant, LockError>),
    /// Of `handle-timeout`.
    Timeout,
    /// Only in a [`wire`](crate::wire) batch: the request could not be decoded (truncated,
    /// unknown operation, a name past the end of the names or ending inside a character); neither
    /// it nor the rest of the batch was run.
    Malformed,
}

/// Any operation of a [`LockTable`]: a change ([`Request`]) or a read, a snapshot or a restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call<'a> {
    /// A change: acquire, release, extend, cancel or renew a wait, handle the timer.
    Request(Request<'a>),
    /// [`LockTable::inspect`].
    Inspect {
        /// The key.
        key: &'a str,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::query`].
    Query {
        /// Only keys that start with this ("" for all).
        prefix: &'a str,
        /// Only keys after this one in byte order ("" for the first page).
        after: &'a str,
        /// At most this many keys.
        limit: usize,
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::stats`].
    Stats {
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::next_wakeup`].
    NextWakeup,
    /// [`LockTable::snapshot`].
    Snapshot {
        /// The instant.
        now: Instant,
    },
    /// [`LockTable::restore`].
    Restore {
        /// The snapshot's bytes.
        bytes: &'a [u8],
    },
    /// [`LockTable::handle_timeout_bounded`].
    HandleTimeoutBounded {
        /// The instant.
        now: Instant,
        /// At most this many key wake-ups.
        max_changes: u32,
    },
    /// [`LockTable::raise_fence_floor`].
    RaiseFenceFloor {
        /// Every later token is above this.
        floor: Fence,
    },
    /// [`LockTable::cancel_all_waits`].
    CancelAllWaits {
        /// The instant.
        now: Instant,
    },
}

/// The answer to one [`Call`], variant for variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Of [`Call::Request`].
    Response(Response),
    /// Of [`Call::Inspect`]: the key's holder and waiters, `None` if it is free.
    Inspect(Result<Option<KeyInfo>, LockError>),
    /// Of [`Call::Query`].
    Query(Result<QueryPage, LockError>),
    /// Of [`Call::Stats`].
    Stats(Stats),
    /// Of [`Call::NextWakeup`].
    Wakeup(Option<Instant>),
    /// Of [`Call::Snapshot`].
    Snapshot(Vec<u8>),
    /// Of [`Call::Restore`].
    Restore(Result<(), LockError>),
    /// Of [`Call::HandleTimeoutBounded`]: whether more changes are due.
    More(bool),
    /// Of [`Call::RaiseFenceFloor`].
    Raised,
    /// Of [`Call::CancelAllWaits`]: how many waiters left.
    Cancelled(usize),
}

/// Something that behaves like a lock table: the native [`LockTable`], a table inside a
/// WebAssembly component, a table kept in a shared store. Lock errors are part of the [`Reply`];
/// `Fault` is what can go wrong around the table itself (a trap, a lost connection), and is
/// [`Infallible`] for the native table.
pub trait LockBackend {
    /// A failure of the runtime around the table, not a lock error.
    type Fault;

    /// Runs one call.
    ///
    /// # Errors
    /// `Self::Fault` if the runtime failed; the table's own refusals are in the [`Reply`].
    fn call(&mut self, call: Call<'_>) -> Result<Reply, Self::Fault>;

    /// Drains the pending events, oldest first.
    ///
    /// # Errors
    /// `Self::Fault` if the runtime failed.
    fn drain_events(&mut self) -> Result<Vec<Event>, Self::Fault>;
}

impl LockTable {
    /// Runs one change request: the one dispatch from a [`Request`] to the table's methods (a
    /// [`wire`](crate::wire) batch runs each of its requests through it).
    pub fn handle(&mut self, request: Request<'_>) -> Response {
        match request {
            Request::TryAcquire {
                key,
                owner,
                ttl,
                now,
            } => Response::Acquire(self.try_acquire(key, owner, ttl, now)),
            Request::Acquire {
                key,
                owner,
                ttl,
                wait_deadline,
                now,
            } => Response::Acquire(self.acquire(key, owner, ttl, wait_deadline, now)),
            Request::AcquireWith {
                key,
                owner,
                ttl,
                wait_deadline,
                options,
                now,
            } => {
                Response::Acquire(self.acquire_with(key, owner, ttl, wait_deadline, &options, now))
            }
            Request::Steal {
                key,
                owner,
                ttl,
                options,
                now,
            } => Response::Acquire(self.steal(key, owner, ttl, &options, now)),
            Request::Release {
                key,
                owner,
                fence,
                now,
            } => Response::Release(self.release(key, owner, fence, now)),
            Request::Extend {
                key,
                owner,
                fence,
                ttl,
                now,
            } => Response::Extend(self.extend(key, owner, fence, ttl, now)),
            Request::CancelWait { key, owner, now } => {
                Response::Done(self.cancel_wait(key, owner, now))
            }
            Request::RenewWait {
                key,
                owner,
                wait_deadline,
                now,
            } => Response::Acquire(self.renew_wait(key, owner, wait_deadline, now)),
            Request::HandleTimeout { now } => {
                self.handle_timeout(now);
                Response::Timeout
            }
        }
    }

    /// Runs any [`Call`].
    pub fn call(&mut self, call: Call<'_>) -> Reply {
        match call {
            Call::Request(request) => Reply::Response(self.handle(request)),
            Call::Inspect { key, now } => Reply::Inspect(self.inspect(key, now)),
            Call::Query {
                prefix,
                after,
                limit,
                now,
            } => Reply::Query(self.query(prefix, after, limit, now)),
            Call::Stats { now } => Reply::Stats(self.stats(now)),
            Call::NextWakeup => Reply::Wakeup(self.next_wakeup()),
            Call::Snapshot { now } => Reply::Snapshot(self.snapshot(now)),
            Call::Restore { bytes } => Reply::Restore(self.restore(bytes)),
            Call::HandleTimeoutBounded { now, max_changes } => {
                Reply::More(self.handle_timeout_bounded(now, max_changes))
            }
            Call::RaiseFenceFloor { floor } => {
                self.raise_fence_floor(floor);
                Reply::Raised
            }
            Call::CancelAllWaits { now } => Reply::Cancelled(self.cancel_all_waits(now)),
        }
    }
}

impl LockBackend for LockTable {
    type Fault = Infallible;

    fn call(&mut self, call: Call<'_>) -> Result<Reply, Infallible> {
        Ok(LockTable::call(self, call))
    }

    fn drain_events(&mut self) -> Result<Vec<Event>, Infallible> {
        Ok(LockTable::drain_events(self).collect())
    }
}
