//! Drivers over anything that implements [`LockBackend`] (the native [`LockTable`], the
//! component's table in `host-wasmtime`, a shared store), and the translation between the core's
//! calls and answers and the vector terms: one dispatch for every Rust runtime.

use std::fmt;

use lock_core::{
    AcquireOptions, AcquireOutcome, Call, Duration, Event, EventKind, Fence, HolderInfo, Instant,
    KeyInfo, Limits, LockBackend, LockError, LockTable, Mode, QueryPage, ReleaseOutcome, Reply,
    Request, Response, WaiterInfo,
};

use crate::format::WaiterView;
use crate::{
    Answer, Driver, ErrorCase, EventCase, HolderView, KeyView, ModeName, Op, OptionsSpec, Outcome,
    QueryKey, QueryView, StatsView,
};

/// Makes a fresh backend with these limits.
type MakeBackend<B> = Box<dyn FnMut(&Limits) -> Result<B, String>>;

/// A vector [`Driver`] over any [`LockBackend`]: `start` makes a fresh backend for each scenario
/// with `make`, every operation is one [`LockBackend::call`].
pub struct BackendDriver<B> {
    make: MakeBackend<B>,
    table: Option<B>,
}

impl<B> fmt::Debug for BackendDriver<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendDriver")
            .field("started", &self.table.is_some())
            .finish_non_exhaustive()
    }
}

impl<B: LockBackend> BackendDriver<B>
where
    B::Fault: fmt::Display,
{
    /// A driver that starts every scenario on `make(limits)`.
    pub fn new(make: impl FnMut(&Limits) -> Result<B, String> + 'static) -> Self {
        BackendDriver {
            make: Box::new(make),
            table: None,
        }
    }

    fn table(&mut self) -> Result<&mut B, String> {
        self.table.as_mut().ok_or_else(|| "no table started".into())
    }
}

impl<B: LockBackend> Driver for BackendDriver<B>
where
    B::Fault: fmt::Display,
{
    fn start(&mut self, limits: &Limits) -> Result<(), String> {
        self.table = Some((self.make)(limits)?);
        Ok(())
    }

    fn run(&mut self, op: &Op) -> Result<Answer, String> {
        let reply = self.table()?.call(call(op)).map_err(|e| e.to_string())?;
        Ok(answer(op, reply))
    }

    fn drain_events(&mut self) -> Result<Vec<EventCase>, String> {
        let events = self.table()?.drain_events().map_err(|e| e.to_string())?;
        Ok(events.into_iter().map(event).collect())
    }
}

/// Runs vectors against an in-process [`LockTable`].
pub type NativeDriver = BackendDriver<LockTable>;

impl Default for NativeDriver {
    fn default() -> Self {
        BackendDriver::new(|limits| LockTable::new(limits.clone()).map_err(|e| e.to_string()))
    }
}

/// Runs one operation on `t` and answers in vector terms (for hosts that own their table, like
/// the browser playground).
pub fn run_on(t: &mut LockTable, op: &Op) -> Answer {
    answer(op, t.call(call(op)))
}

/// The core call of a vector operation.
#[must_use]
pub fn call(op: &Op) -> Call<'_> {
    match op {
        Op::TryAcquire {
            now,
            key,
            owner,
            ttl,
            options,
        } if options.is_plain() => Call::Request(Request::TryAcquire {
            key,
            owner,
            ttl: Duration(*ttl),
            now: Instant(*now),
        }),
        Op::Acquire {
            now,
            key,
            owner,
            ttl,
            wait_deadline,
            options,
        } if options.is_plain() => Call::Request(Request::Acquire {
            key,
            owner,
            ttl: Duration(*ttl),
            wait_deadline: Instant(*wait_deadline),
            now: Instant(*now),
        }),
        Op::TryAcquire {
            now,
            key,
            owner,
            ttl,
            options,
        } => Call::Request(Request::AcquireWith {
            key,
            owner,
            ttl: Duration(*ttl),
            wait_deadline: Instant::ZERO,
            options: core_options(options),
            now: Instant(*now),
        }),
        Op::Acquire {
            now,
            key,
            owner,
            ttl,
            wait_deadline,
            options,
        } => Call::Request(Request::AcquireWith {
            key,
            owner,
            ttl: Duration(*ttl),
            wait_deadline: Instant(*wait_deadline),
            options: core_options(options),
            now: Instant(*now),
        }),
        Op::Steal {
            now,
            key,
            owner,
            ttl,
            options,
        } => Call::Request(Request::Steal {
            key,
            owner,
            ttl: Duration(*ttl),
            options: core_options(options),
            now: Instant(*now),
        }),
        Op::Query {
            now,
            prefix,
            after,
            limit,
        } => Call::Query {
            prefix,
            after,
            limit: usize::try_from(*limit).unwrap_or(usize::MAX),
            now: Instant(*now),
        },
        Op::HandleTimeoutBounded { now, max_changes } => Call::HandleTimeoutBounded {
            now: Instant(*now),
            max_changes: *max_changes,
        },
        Op::RaiseFenceFloor { floor } => Call::RaiseFenceFloor {
            floor: Fence(*floor),
        },
        Op::CancelAllWaits { now } => Call::CancelAllWaits { now: Instant(*now) },
        Op::Release {
            now,
            key,
            owner,
            fence,
        } => Call::Request(Request::Release {
            key,
            owner,
            fence: Fence(*fence),
            now: Instant(*now),
        }),
        Op::Extend {
            now,
            key,
            owner,
            fence,
            ttl,
        } => Call::Request(Request::Extend {
            key,
            owner,
            fence: Fence(*fence),
            ttl: Duration(*ttl),
            now: Instant(*now),
        }),
        Op::CancelWait { now, key, owner } => Call::Request(Request::CancelWait {
            key,
            owner,
            now: Instant(*now),
        }),
        Op::RenewWait {
            now,
            key,
            owner,
            wait_deadline,
        } => Call::Request(Request::RenewWait {
            key,
            owner,
            wait_deadline: Instant(*wait_deadline),
            now: Instant(*now),
        }),
        Op::HandleTimeout { now } => Call::Request(Request::HandleTimeout { now: Instant(*now) }),
        Op::Inspect { now, key } => Call::Inspect {
            key,
            now: Instant(*now),
        },
        Op::Stats { now } => Call::Stats { now: Instant(*now) },
        Op::NextWakeup => Call::NextWakeup,
        Op::Snapshot { now } => Call::Snapshot { now: Instant(*now) },
        Op::Restore { bytes } => Call::Restore {
            bytes: bytes.as_deref().unwrap_or_default(),
        },
    }
}

/// The vector form of the core's reply to `op` ([`Answer::Unexpected`] if it cannot be the
/// answer to `op`: a backend that answered the wrong kind of value, or a batch-only `malformed`).
#[must_use]
pub fn answer(op: &Op, reply: Reply) -> Answer {
    match reply {
        Reply::Response(Response::Acquire(r)) => Answer::Result(r.map(outcome).map_err(error)),
        Reply::Response(Response::Done(r)) | Reply::Restore(r) => {
            let done = match op {
                Op::CancelWait { .. } => Outcome::Cancelled,
                Op::Restore { .. } => Outcome::Restored,
                _ => return Answer::Unexpected(format!("a cancel's answer to {op:?}")),
            };
            Answer::Result(r.map(|()| done).map_err(error))
        }
        Reply::Response(Response::Release(r)) => {
            Answer::Result(r.map(release_outcome).map_err(error))
        }
        Reply::Query(r) => Answer::Query(r.map(query_view).map_err(error)),
        Reply::More(more) => Answer::More(more),
        Reply::Raised => Answer::Nothing,
        Reply::Cancelled(n) => Answer::Count(n as u64),
        Reply::Response(Response::Extend(r)) => Answer::Result(
            r.map(|g| Outcome::Extended {
                fence: g.fence.0,
                deadline: g.deadline.0,
            })
            .map_err(error),
        ),
        Reply::Response(Response::Timeout) => Answer::Nothing,
        Reply::Response(Response::Malformed) => {
            Answer::Unexpected(format!("`malformed` to {op:?}"))
        }
        Reply::Inspect(r) => Answer::Inspect(r.map(|i| i.map(key_view)).map_err(error)),
        Reply::Stats(s) => Answer::Stats(StatsView::of(&s)),
        Reply::Wakeup(w) => Answer::Wakeup(w.map(|t| t.0)),
        Reply::Snapshot(bytes) => Answer::Snapshot(bytes),
    }
}

/// The core's options for a vector step's options.
#[must_use]
pub fn core_options(o: &OptionsSpec) -> AcquireOptions<'_> {
    AcquireOptions {
        mode: match o.mode {
            ModeName::Exclusive => Mode::Exclusive,
            ModeName::Shared => Mode::Shared,
        },
        permits: o.permits,
        min_hold: Duration(o.min_hold),
        lock_delay: Duration(o.lock_delay),
        metadata: &o.metadata,
        wait_alive: Duration(o.wait_alive),
    }
}

fn mode_name(mode: Mode) -> ModeName {
    match mode {
        Mode::Exclusive => ModeName::Exclusive,
        Mode::Shared => ModeName::Shared,
    }
}

/// The vector form of a release outcome.
#[must_use]
pub fn release_outcome(o: ReleaseOutcome) -> Outcome {
    match o {
        ReleaseOutcome::Released => Outcome::Released,
        ReleaseOutcome::HeldUntil { until } => Outcome::HeldUntil { until: until.0 },
    }
}

/// The vector form of a query's page.
#[must_use]
pub fn query_view(page: QueryPage) -> QueryView {
    QueryView {
        keys: (page.keys.into_iter())
            .map(|(key, info)| {
                let view = key_view(info);
                QueryKey {
                    key,
                    holders: view.holders,
                    waiters: view.waiters,
                    permits: view.permits,
                }
            })
            .collect(),
        next: page.next,
    }
}

/// The vector form of an acquire outcome.
#[must_use]
pub fn outcome(o: AcquireOutcome) -> Outcome {
    match o {
        AcquireOutcome::Acquired(g) => Outcome::Acquired {
            fence: g.fence.0,
            deadline: g.deadline.0,
        },
        AcquireOutcome::AlreadyHeld(g) => Outcome::AlreadyHeld {
            fence: g.fence.0,
            deadline: g.deadline.0,
        },
        AcquireOutcome::Queued { position } => Outcome::Queued {
            position: position as u64,
        },
        AcquireOutcome::AlreadyWaiting { position } => Outcome::AlreadyWaiting {
            position: position as u64,
        },
    }
}

/// The vector form of a core error (exhaustive: a new variant does not compile until mapped).
#[must_use]
pub fn error(e: LockError) -> ErrorCase {
    match e {
        LockError::KeyEmpty => ErrorCase::KeyEmpty,
        LockError::KeyTooLong { len, max } => ErrorCase::KeyTooLong {
            len: len as u64,
            max: max as u64,
        },
        LockError::KeyInvalid => ErrorCase::KeyInvalid,
        LockError::OwnerEmpty => ErrorCase::OwnerEmpty,
        LockError::OwnerTooLong { len, max } => ErrorCase::OwnerTooLong {
            len: len as u64,
            max: max as u64,
        },
        LockError::OwnerInvalid => ErrorCase::OwnerInvalid,
        LockError::TtlZero => ErrorCase::TtlZero,
        LockError::TtlTooLong { ttl, max } => ErrorCase::TtlTooLong {
            ttl: ttl.0,
            max: max.0,
        },
        LockError::DeadlineOverflow { now, ttl } => ErrorCase::DeadlineOverflow {
            now: now.0,
            ttl: ttl.0,
        },
        LockError::TableFull { max_keys } => ErrorCase::TableFull {
            max_keys: max_keys as u64,
        },
        LockError::QueueFull {
            max_waiters_per_key,
        } => ErrorCase::QueueFull {
            max_waiters_per_key: max_waiters_per_key as u64,
        },
        LockError::TooManyWaiters { max_waiters } => ErrorCase::TooManyWaiters {
            max_waiters: max_waiters as u64,
        },
        LockError::Held { deadline } => ErrorCase::Held {
            deadline: deadline.0,
        },
        LockError::NotOwner => ErrorCase::NotOwner,
        LockError::NotHeld => ErrorCase::NotHeld,
        LockError::Expired { deadline } => ErrorCase::Expired {
            deadline: deadline.0,
        },
        LockError::NotWaiting => ErrorCase::NotWaiting,
        LockError::InvalidLimits { limit } => ErrorCase::InvalidLimits {
            limit: limit.as_str().into(),
        },
        LockError::SnapshotTruncated => ErrorCase::SnapshotTruncated,
        LockError::SnapshotBadMagic => ErrorCase::SnapshotBadMagic,
        LockError::SnapshotVersion { found, supported } => ErrorCase::SnapshotVersion {
            found: found.into(),
            supported: supported.into(),
        },
        LockError::SnapshotChecksum => ErrorCase::SnapshotChecksum,
        LockError::SnapshotCorrupt { reason } => ErrorCase::SnapshotCorrupt {
            reason: reason.as_str().into(),
        },
        LockError::SnapshotExceedsLimits { limit } => ErrorCase::SnapshotExceedsLimits {
            limit: limit.as_str().into(),
        },
        LockError::MetadataTooLong { len, max } => ErrorCase::MetadataTooLong {
            len: len as u64,
            max: max as u64,
        },
        LockError::MetadataInvalid => ErrorCase::MetadataInvalid,
        LockError::TooManyPermits { permits, max } => ErrorCase::TooManyPermits {
            permits: permits.into(),
            max: max as u64,
        },
        LockError::PermitsMismatch { permits } => ErrorCase::PermitsMismatch {
            permits: permits.into(),
        },
        LockError::ModeMismatch => ErrorCase::ModeMismatch,
        LockError::MinHoldTooLong { min_hold, ttl } => ErrorCase::MinHoldTooLong {
            min_hold: min_hold.0,
            ttl: ttl.0,
        },
        LockError::LockDelayTooLong { lock_delay, max } => ErrorCase::LockDelayTooLong {
            lock_delay: lock_delay.0,
            max: max.0,
        },
        LockError::Stolen { at } => ErrorCase::Stolen { at: at.0 },
        LockError::QueryLimit { max } => ErrorCase::QueryLimit { max: max as u64 },
    }
}

/// The core's error for a vector error term (the inverse of [`error`]), so a runtime that only
/// has the vector term can still show the core's message; `None` for a limit or corruption name
/// the core does not know, or a payload that does not fit.
#[must_use]
pub fn core_error(e: &ErrorCase) -> Option<LockError> {
    use lock_core::{Corruption, LimitName};
    let size = |v: u64| usize::try_from(v).ok();
    Some(match e {
        ErrorCase::KeyEmpty => LockError::KeyEmpty,
        ErrorCase::KeyTooLong { len, max } => LockError::KeyTooLong {
            len: size(*len)?,
            max: size(*max)?,
        },
        ErrorCase::KeyInvalid => LockError::KeyInvalid,
        ErrorCase::OwnerEmpty => LockError::OwnerEmpty,
        ErrorCase::OwnerTooLong { len, max } => LockError::OwnerTooLong {
            len: size(*len)?,
            max: size(*max)?,
        },
        ErrorCase::OwnerInvalid => LockError::OwnerInvalid,
        ErrorCase::TtlZero => LockError::TtlZero,
        ErrorCase::TtlTooLong { ttl, max } => LockError::TtlTooLong {
            ttl: Duration(*ttl),
            max: Duration(*max),
        },
        ErrorCase::DeadlineOverflow { now, ttl } => LockError::DeadlineOverflow {
            now: Instant(*now),
            ttl: Duration(*ttl),
        },
        ErrorCase::TableFull { max_keys } => LockError::TableFull {
            max_keys: size(*max_keys)?,
        },
        ErrorCase::QueueFull {
            max_waiters_per_key,
        } => LockError::QueueFull {
            max_waiters_per_key: size(*max_waiters_per_key)?,
        },
        ErrorCase::TooManyWaiters { max_waiters } => LockError::TooManyWaiters {
            max_waiters: size(*max_waiters)?,
        },
        ErrorCase::Held { deadline } => LockError::Held {
            deadline: Instant(*deadline),
        },
        ErrorCase::NotOwner => LockError::NotOwner,
        ErrorCase::NotHeld => LockError::NotHeld,
        ErrorCase::Expired { deadline } => LockError::Expired {
            deadline: Instant(*deadline),
        },
        ErrorCase::NotWaiting => LockError::NotWaiting,
        ErrorCase::InvalidLimits { limit } => LockError::InvalidLimits {
            limit: LimitName::from_name(limit)?,
        },
        ErrorCase::SnapshotTruncated => LockError::SnapshotTruncated,
        ErrorCase::SnapshotBadMagic => LockError::SnapshotBadMagic,
        ErrorCase::SnapshotVersion { found, supported } => LockError::SnapshotVersion {
            found: u16::try_from(*found).ok()?,
            supported: u16::try_from(*supported).ok()?,
        },
        ErrorCase::SnapshotChecksum => LockError::SnapshotChecksum,
        ErrorCase::SnapshotCorrupt { reason } => LockError::SnapshotCorrupt {
            reason: Corruption::from_name(reason)?,
        },
        ErrorCase::SnapshotExceedsLimits { limit } => LockError::SnapshotExceedsLimits {
            limit: LimitName::from_name(limit)?,
        },
        ErrorCase::MetadataTooLong { len, max } => LockError::MetadataTooLong {
            len: size(*len)?,
            max: size(*max)?,
        },
        ErrorCase::MetadataInvalid => LockError::MetadataInvalid,
        ErrorCase::TooManyPermits { permits, max } => LockError::TooManyPermits {
            permits: u32::try_from(*permits).ok()?,
            max: size(*max)?,
        },
        ErrorCase::PermitsMismatch { permits } => LockError::PermitsMismatch {
            permits: u32::try_from(*permits).ok()?,
        },
        ErrorCase::ModeMismatch => LockError::ModeMismatch,
        ErrorCase::MinHoldTooLong { min_hold, ttl } => LockError::MinHoldTooLong {
            min_hold: Duration(*min_hold),
            ttl: Duration(*ttl),
        },
        ErrorCase::LockDelayTooLong { lock_delay, max } => LockError::LockDelayTooLong {
            lock_delay: Duration(*lock_delay),
            max: Duration(*max),
        },
        ErrorCase::Stolen { at } => LockError::Stolen { at: Instant(*at) },
        ErrorCase::QueryLimit { max } => LockError::QueryLimit { max: size(*max)? },
    })
}

/// The vector form of an event.
#[must_use]
pub fn event(e: Event) -> EventCase {
    let Event { key, at, kind } = e;
    match kind {
        EventKind::Expired {
            owner,
            fence,
            metadata,
        } => EventCase::Expired {
            key,
            owner,
            fence: fence.0,
            at: at.0,
            metadata,
        },
        EventKind::Granted {
            owner,
            fence,
            deadline,
            mode,
            metadata,
        } => EventCase::Granted {
            key,
            owner,
            fence: fence.0,
            deadline: deadline.0,
            at: at.0,
            mode: mode_name(mode),
            metadata,
        },
        EventKind::WaitTimedOut { owner } => EventCase::WaitTimedOut {
            key,
            owner,
            at: at.0,
        },
        EventKind::Stolen {
            owner,
            fence,
            metadata,
        } => EventCase::Stolen {
            key,
            owner,
            fence: fence.0,
            at: at.0,
            metadata,
        },
    }
}

/// The vector form of a lease.
#[must_use]
pub fn holder_view(h: HolderInfo) -> HolderView {
    HolderView {
        owner: h.owner,
        fence: h.fence.0,
        deadline: h.deadline.0,
        mode: mode_name(h.mode),
        metadata: h.metadata,
        min_until: h.min_until.map(|t| t.0),
        ended: h.ended.map(|e| e.name().into()),
        granted_at: h.granted_at.map(|t| t.0),
    }
}

/// The vector form of a waiter.
#[must_use]
pub fn waiter_view(w: WaiterInfo) -> WaiterView {
    WaiterView {
        owner: w.owner,
        ttl: w.ttl.0,
        wait_deadline: w.wait_deadline.0,
        wait_end: (w.wait_end != w.wait_deadline).then_some(w.wait_end.0),
        mode: mode_name(w.mode),
        metadata: w.metadata,
    }
}

/// The vector form of a key in use.
#[must_use]
pub fn key_view(i: KeyInfo) -> KeyView {
    KeyView {
        holders: i.holders.into_iter().map(holder_view).collect(),
        waiters: i.waiters.into_iter().map(waiter_view).collect(),
        permits: i.permits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector names of errors are the core's `code()` names, and `core_error` inverts
    /// `error` (so a runtime holding only the vector term shows the core's own message).
    #[test]
    fn error_names_match_core_codes_and_core_error_inverts_error() {
        for e in LockError::examples() {
            assert_eq!(core_error(&error(e.clone())), Some(e.clone()));
            let code = e.code();
            let json = serde_json::to_value(error(e)).unwrap();
            let name = match &json {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Object(m) => m.keys().next().unwrap().clone(),
                other => panic!("unexpected {other}"),
            };
            assert_eq!(name, code);
        }
    }
}
