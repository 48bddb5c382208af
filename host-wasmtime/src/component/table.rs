//! [`ComponentTable`]: one lock table in its own component instance, speaking `lock-core`'s types.

use std::fmt;
use std::time::Duration as WallDuration;

use lock_core::wire::Response;
use lock_core::{
    AcquireOptions, AcquireOutcome, Call, Duration, Event, Fence, Grant, Instant, KeyInfo,
    LockBackend, LockError, QueryPage, ReleaseOutcome, Reply, Request, Stats,
};
use wasmtime::component::ResourceAny;
use wasmtime::Store;

use super::sandbox::{ticks_for, EPOCH_TICK, RESTORE_TIME_PER_BYTE, SNAPSHOT_TIME_PER_ENTRY};
use super::wit::{self, Lock};
use super::{Batch, HostError, StoreState};

/// One lock table in its own component instance. Every answer is in `lock-core`'s types: the WIT
/// values are translated once, inside this module. Not `Sync`: wrap it in a mutex to share it
/// (see [`LockHost`](crate::LockHost)).
pub struct ComponentTable {
    pub(super) store: Store<StoreState>,
    pub(super) bindings: Lock,
    pub(super) table: ResourceAny,
    pub(super) ticks: u64,
    pub(super) poisoned: Option<String>,
}

impl fmt::Debug for ComponentTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComponentTable")
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

/// A method that forwards to the component and translates its answer with `$map`.
macro_rules! forward {
    ($(#[$doc:meta])* $name:ident => $call:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty, $map:expr) => {
        $(#[$doc])*
        ///
        /// # Errors
        /// [`HostError`] if the component traps or trapped before, or answers a value this build
        /// does not know.
        pub fn $name(&mut self, $($arg: $ty),*) -> Result<$ret, HostError> {
            self.enter()?;
            let table = self.table;
            let result = self.bindings.expiring_lock_table().lock_table().$call(&mut self.store, table, $(wit::Plain::plain($arg)),*);
            let answer = self.leave(result)?;
            #[allow(clippy::redundant_closure_call)]
            ($map)(answer)
        }
    };
}

/// A WIT result in the core's terms: an error this build cannot name is a [`HostError::Mismatch`],
/// never a lock error.
fn lock_result<T, U>(
    result: Result<T, wit::exports::expiring::lock::types::LockError>,
    ok: impl FnOnce(T) -> U,
) -> Result<Result<U, LockError>, HostError> {
    match result {
        Ok(value) => Ok(Ok(ok(value))),
        Err(e) => wit::error(&e).map(Err).ok_or_else(|| {
            HostError::Mismatch(format!("the component answered an unknown error {e:?}"))
        }),
    }
}

fn same<T>(value: T) -> Result<T, HostError> {
    Ok(value)
}

impl ComponentTable {
    fn enter(&mut self) -> Result<(), HostError> {
        if let Some(why) = &self.poisoned {
            return Err(HostError::Poisoned(why.clone()));
        }
        self.store.set_epoch_deadline(self.ticks);
        Ok(())
    }

    /// Changes how long each later call may run (see
    /// [`SandboxLimits::call_timeout`](super::SandboxLimits::call_timeout)).
    pub fn set_call_timeout(&mut self, timeout: WallDuration) {
        self.ticks = ticks_for(timeout);
    }

    /// A call whose work grows with the table: allowed the usual bound plus `extra`.
    fn call_with_allowance<T>(
        &mut self,
        extra: WallDuration,
        call: impl FnOnce(&Lock, &mut Store<StoreState>, ResourceAny) -> wasmtime::Result<T>,
    ) -> Result<T, HostError> {
        self.enter()?;
        let extra =
            u64::try_from(extra.as_nanos().div_ceil(EPOCH_TICK.as_nanos())).unwrap_or(u64::MAX);
        self.store
            .set_epoch_deadline(self.ticks.saturating_add(extra));
        let result = call(&self.bindings, &mut self.store, self.table);
        self.leave(result)
    }

    fn leave<T>(&mut self, result: wasmtime::Result<T>) -> Result<T, HostError> {
        result.map_err(|e| {
            let why = format!("{e:?}");
            self.poisoned = Some(why.clone());
            HostError::Trap(why)
        })
    }

    /// Whether an earlier call trapped.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    forward!(/// [`LockTable::try_acquire`](lock_core::LockTable::try_acquire).
        try_acquire => call_try_acquire(key: &str, owner: &str, ttl: Duration, now: Instant) -> Result<AcquireOutcome, LockError>,
        |r| lock_result(r, |o| wit::outcome(&o)));
    forward!(/// [`LockTable::acquire`](lock_core::LockTable::acquire).
        acquire => call_acquire(key: &str, owner: &str, ttl: Duration, wait_deadline: Instant, now: Instant) -> Result<AcquireOutcome, LockError>,
        |r| lock_result(r, |o| wit::outcome(&o)));
    forward!(/// [`LockTable::release`](lock_core::LockTable::release).
        release => call_release(key: &str, owner: &str, fence: Fence, now: Instant) -> Result<ReleaseOutcome, LockError>,
        |r| lock_result(r, |o| wit::release(&o)));
    /// [`LockTable::acquire_with`](lock_core::LockTable::acquire_with).
    ///
    /// # Errors
    /// [`HostError`] if the component traps or trapped before, or answers a value this build
    /// does not know.
    pub fn acquire_with(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        options: &AcquireOptions<'_>,
        now: Instant,
    ) -> Result<Result<AcquireOutcome, LockError>, HostError> {
        self.enter()?;
        let (table, options) = (self.table, wit::options(options));
        let result = (self.bindings.expiring_lock_table().lock_table()).call_acquire_with(
            &mut self.store,
            table,
            key,
            owner,
            ttl.0,
            wait_deadline.0,
            &options,
            now.0,
        );
        lock_result(self.leave(result)?, |o| wit::outcome(&o))
    }

    /// [`LockTable::steal`](lock_core::LockTable::steal).
    ///
    /// # Errors
    /// As [`acquire_with`](Self::acquire_with).
    pub fn steal(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
        now: Instant,
    ) -> Result<Result<AcquireOutcome, LockError>, HostError> {
        self.enter()?;
        let (table, options) = (self.table, wit::options(options));
        let result = (self.bindings.expiring_lock_table().lock_table()).call_steal(
            &mut self.store,
            table,
            key,
            owner,
            ttl.0,
            &options,
            now.0,
        );
        lock_result(self.leave(result)?, |o| wit::outcome(&o))
    }

    forward!(/// [`LockTable::extend`](lock_core::LockTable::extend).
        extend => call_extend(key: &str, owner: &str, fence: Fence, ttl: Duration, now: Instant) -> Result<Grant, LockError>,
        |r| lock_result(r, |g| wit::grant(&g)));
    forward!(/// [`LockTable::cancel_wait`](lock_core::LockTable::cancel_wait).
        cancel_wait => call_cancel_wait(key: &str, owner: &str, now: Instant) -> Result<(), LockError>,
        |r| lock_result(r, |()| ()));
    forward!(/// [`LockTable::renew_wait`](lock_core::LockTable::renew_wait).
        renew_wait => call_renew_wait(key: &str, owner: &str, wait_deadline: Instant, now: Instant) -> Result<AcquireOutcome, LockError>,
        |r| lock_result(r, |o| wit::outcome(&o)));
    forward!(/// [`LockTable::handle_timeout`](lock_core::LockTable::handle_timeout).
        handle_timeout => call_handle_timeout(now: Instant) -> (), same);
    forward!(/// [`LockTable::handle_timeout_bounded`](lock_core::LockTable::handle_timeout_bounded):
        /// at most `max_changes` due changes; true if more are due.
        handle_timeout_bounded => call_handle_timeout_bounded(now: Instant, max_changes: u32) -> bool, same);
    forward!(/// [`LockTable::raise_fence_floor`](lock_core::LockTable::raise_fence_floor): every
        /// later fence is greater than `floor`.
        raise_fence_floor => call_raise_fence_floor(floor: Fence) -> (), same);
    forward!(/// [`LockTable::cancel_all_waits`](lock_core::LockTable::cancel_all_waits): drops
        /// every waiter; answers how many.
        cancel_all_waits => call_cancel_all_waits(now: Instant) -> u32, same);
    forward!(/// [`LockTable::next_wakeup`](lock_core::LockTable::next_wakeup).
        next_wakeup => call_next_wakeup() -> Option<Instant>,
        |w: Option<u64>| Ok(w.map(Instant)));
    forward!(/// Drains every pending event ([`LockTable::drain_events`](lock_core::LockTable::drain_events)).
        poll_events => call_poll_events() -> Vec<Event>,
        |events: Vec<_>| Ok(events.into_iter().map(wit::event).collect()));
    forward!(/// [`LockTable::inspect`](lock_core::LockTable::inspect).
        inspect => call_inspect(key: &str, now: Instant) -> Result<Option<KeyInfo>, LockError>,
        |r| lock_result(r, |i: Option<_>| i.map(wit::key_info)));
    forward!(/// [`LockTable::query`](lock_core::LockTable::query) (a limit past `u32::MAX` is
        /// refused as any limit past [`QUERY_MAX`](lock_core::QUERY_MAX) is).
        query => call_query(prefix: &str, after: &str, limit: u32, now: Instant) -> Result<QueryPage, LockError>,
        |r| lock_result(r, wit::query_page));
    forward!(/// [`LockTable::stats`](lock_core::LockTable::stats).
        stats => call_stats(now: Instant) -> Stats, |s| Ok(wit::stats(&s)));

    /// [`LockTable::snapshot`](lock_core::LockTable::snapshot), allowed
    /// [`SNAPSHOT_TIME_PER_ENTRY`] per lease, waiter and remembered expiry beyond the call bound
    /// (read with a `stats` call first).
    ///
    /// # Errors
    /// [`HostError`] if the component traps or trapped before.
    pub fn snapshot(&mut self, now: Instant) -> Result<Vec<u8>, HostError> {
        let stats = self.stats(now)?;
        let entries = stats.live_leases + stats.waiters + stats.expired_records;
        let extra =
            SNAPSHOT_TIME_PER_ENTRY.saturating_mul(u32::try_from(entries).unwrap_or(u32::MAX));
        self.call_with_allowance(extra, |lock, store, table| {
            lock.expiring_lock_table()
                .lock_table()
                .call_snapshot(store, table, now.0)
        })
    }

    /// [`LockTable::restore`](lock_core::LockTable::restore), allowed [`RESTORE_TIME_PER_BYTE`]
    /// per byte beyond the call bound.
    ///
    /// # Errors
    /// [`HostError`] if the component traps (for example when the restored table does not fit
    /// the memory cap) or trapped before.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<Result<(), LockError>, HostError> {
        let extra =
            RESTORE_TIME_PER_BYTE.saturating_mul(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
        let result = self.call_with_allowance(extra, |lock, store, table| {
            lock.expiring_lock_table()
                .lock_table()
                .call_restore(store, table, bytes)
        })?;
        lock_result(result, |()| ())
    }

    forward!(/// `batch` on encoded requests and names (see [`lock_core::wire`]); [`ComponentTable::batch`]
        /// is the typed way.
        batch_raw => call_batch(requests: &[u8], names: &str) -> Vec<u8>, same);

    /// Runs a [`Batch`] in one boundary crossing; one response per request, in order, with the
    /// core's own types.
    ///
    /// # Errors
    /// [`HostError`] if the component traps or trapped before, or answers bytes that are not
    /// responses (then it is poisoned like after a trap).
    pub fn batch(&mut self, batch: &Batch) -> Result<Vec<Response>, HostError> {
        let bytes = self.batch_raw(batch.bytes(), batch.names())?;
        lock_core::wire::decode_responses(&bytes).map_err(|e| {
            let why = format!("the component answered a batch with {e}");
            self.poisoned = Some(why.clone());
            HostError::Trap(why)
        })
    }

    /// Runs one change request (the component's counterpart of
    /// [`LockTable::handle`](lock_core::LockTable::handle)).
    ///
    /// # Errors
    /// [`HostError`] as for the single calls.
    pub fn handle(&mut self, request: Request<'_>) -> Result<Response, HostError> {
        Ok(match request {
            Request::TryAcquire {
                key,
                owner,
                ttl,
                now,
            } => Response::Acquire(self.try_acquire(key, owner, ttl, now)?),
            Request::Acquire {
                key,
                owner,
                ttl,
                wait_deadline,
                now,
            } => Response::Acquire(self.acquire(key, owner, ttl, wait_deadline, now)?),
            Request::AcquireWith {
                key,
                owner,
                ttl,
                wait_deadline,
                options,
                now,
            } => Response::Acquire(self.acquire_with(
                key,
                owner,
                ttl,
                wait_deadline,
                &options,
                now,
            )?),
            Request::Steal {
                key,
                owner,
                ttl,
                options,
                now,
            } => Response::Acquire(self.steal(key, owner, ttl, &options, now)?),
            Request::Release {
                key,
                owner,
                fence,
                now,
            } => Response::Release(self.release(key, owner, fence, now)?),
            Request::Extend {
                key,
                owner,
                fence,
                ttl,
                now,
            } => Response::Extend(self.extend(key, owner, fence, ttl, now)?),
            Request::CancelWait { key, owner, now } => {
                Response::Done(self.cancel_wait(key, owner, now)?)
            }
            Request::RenewWait {
                key,
                owner,
                wait_deadline,
                now,
            } => Response::Acquire(self.renew_wait(key, owner, wait_deadline, now)?),
            Request::HandleTimeout { now } => {
                self.handle_timeout(now)?;
                Response::Timeout
            }
        })
    }
}

impl LockBackend for ComponentTable {
    type Fault = HostError;

    fn call(&mut self, call: Call<'_>) -> Result<Reply, HostError> {
        Ok(match call {
            Call::Request(request) => Reply::Response(self.handle(request)?),
            Call::Inspect { key, now } => Reply::Inspect(self.inspect(key, now)?),
            Call::Stats { now } => Reply::Stats(self.stats(now)?),
            Call::NextWakeup => Reply::Wakeup(self.next_wakeup()?),
            Call::Snapshot { now } => Reply::Snapshot(self.snapshot(now)?),
            Call::Restore { bytes } => Reply::Restore(self.restore(bytes)?),
            Call::HandleTimeoutBounded { now, max_changes } => {
                Reply::More(self.handle_timeout_bounded(now, max_changes)?)
            }
            Call::RaiseFenceFloor { floor } => {
                self.raise_fence_floor(floor)?;
                Reply::Raised
            }
            Call::CancelAllWaits { now } => Reply::Cancelled(self.cancel_all_waits(now)? as usize),
            Call::Query {
                prefix,
                after,
                limit,
                now,
            } => {
                let limit = u32::try_from(limit).unwrap_or(u32::MAX);
                Reply::Query(self.query(prefix, after, limit, now)?)
            }
        })
    }

    fn drain_events(&mut self) -> Result<Vec<Event>, HostError> {
        self.poll_events()
    }
}
