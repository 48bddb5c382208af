//! The driver for `lock-core` itself, and the translation of the core's types into vector terms
//! (also used by drivers of other runtimes once they have mapped their values to the core's).

use lock_core::{AcquireOutcome, Event, EventKind, KeyInfo, LockError, LockTable, Stats};

use crate::format::WaiterView;
use crate::{Answer, Driver, ErrorCase, EventCase, KeyView, Op, Outcome, StatsView};

/// Runs vectors against an in-process [`LockTable`].
#[derive(Debug, Default)]
pub struct NativeDriver {
    table: Option<LockTable>,
}

impl Driver for NativeDriver {
    fn start(&mut self, limits: &lock_core::Limits) -> Result<(), String> {
        self.table = Some(LockTable::new(limits.clone()).map_err(|e| e.to_string())?);
        Ok(())
    }

    fn run(&mut self, op: &Op) -> Result<Answer, String> {
        let t = self.table.as_mut().ok_or("no table started")?;
        Ok(run_on(t, op))
    }

    fn drain_events(&mut self) -> Result<Vec<EventCase>, String> {
        let t = self.table.as_mut().ok_or("no table started")?;
        Ok(t.drain_events().map(event).collect())
    }
}

/// Runs one operation on `t` and answers in vector terms (the native driver's step, for hosts
/// that own their table, like the browser playground).
pub fn run_on(t: &mut LockTable, op: &Op) -> Answer {
    match op {
        Op::TryAcquire {
            now,
            key,
            owner,
            ttl,
        } => Answer::Result(
            t.try_acquire(key, owner, *ttl, *now)
                .map(outcome)
                .map_err(error),
        ),
        Op::Acquire {
            now,
            key,
            owner,
            ttl,
            wait_deadline,
        } => Answer::Result(
            t.acquire(key, owner, *ttl, *wait_deadline, *now)
                .map(outcome)
                .map_err(error),
        ),
        Op::Release {
            now,
            key,
            owner,
            fence,
        } => Answer::Result(
            t.release(key, owner, *fence, *now)
                .map(|()| Outcome::Released)
                .map_err(error),
        ),
        Op::Extend {
            now,
            key,
            owner,
            fence,
            ttl,
        } => Answer::Result(
            t.extend(key, owner, *fence, *ttl, *now)
                .map(|g| Outcome::Extended {
                    fence: g.fence,
                    deadline: g.deadline,
                })
                .map_err(error),
        ),
        Op::CancelWait { now, key, owner } => Answer::Result(
            t.cancel_wait(key, owner, *now)
                .map(|()| Outcome::Cancelled)
                .map_err(error),
        ),
        Op::HandleTimeout { now } => {
            t.handle_timeout(*now);
            Answer::Nothing
        }
        Op::Inspect { now, key } => {
            Answer::Inspect(t.inspect(key, *now).map(|i| i.map(key_view)).map_err(error))
        }
        Op::Stats { now } => Answer::Stats(stats_view(&t.stats(*now))),
        Op::NextWakeup => Answer::Wakeup(t.next_wakeup()),
        Op::Snapshot { now } => Answer::Snapshot(t.snapshot(*now)),
        Op::Restore { bytes } => Answer::Result(
            t.restore(bytes.as_deref().unwrap_or_default())
                .map(|()| Outcome::Restored)
                .map_err(error),
        ),
    }
}

/// The vector form of an acquire outcome.
#[must_use]
pub fn outcome(o: AcquireOutcome) -> Outcome {
    match o {
        AcquireOutcome::Acquired(g) => Outcome::Acquired {
            fence: g.fence,
            deadline: g.deadline,
        },
        AcquireOutcome::AlreadyHeld(g) => Outcome::AlreadyHeld {
            fence: g.fence,
            deadline: g.deadline,
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
        LockError::TtlTooLong { ttl, max } => ErrorCase::TtlTooLong { ttl, max },
        LockError::DeadlineOverflow { now, ttl } => ErrorCase::DeadlineOverflow { now, ttl },
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
        LockError::Held { deadline } => ErrorCase::Held { deadline },
        LockError::NotOwner => ErrorCase::NotOwner,
        LockError::NotHeld => ErrorCase::NotHeld,
        LockError::Expired { deadline } => ErrorCase::Expired { deadline },
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
            ttl: *ttl,
            max: *max,
        },
        ErrorCase::DeadlineOverflow { now, ttl } => LockError::DeadlineOverflow {
            now: *now,
            ttl: *ttl,
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
            deadline: *deadline,
        },
        ErrorCase::NotOwner => LockError::NotOwner,
        ErrorCase::NotHeld => LockError::NotHeld,
        ErrorCase::Expired { deadline } => LockError::Expired {
            deadline: *deadline,
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
    })
}

/// The vector form of an event.
#[must_use]
pub fn event(e: Event) -> EventCase {
    let Event { key, at, kind } = e;
    match kind {
        EventKind::Expired { owner, fence } => EventCase::Expired {
            key,
            owner,
            fence,
            at,
        },
        EventKind::Granted {
            owner,
            fence,
            deadline,
        } => EventCase::Granted {
            key,
            owner,
            fence,
            deadline,
            at,
        },
        EventKind::WaitTimedOut { owner } => EventCase::WaitTimedOut { key, owner, at },
    }
}

/// The vector form of a held key.
#[must_use]
pub fn key_view(i: KeyInfo) -> KeyView {
    KeyView {
        owner: i.holder.owner,
        fence: i.holder.fence,
        deadline: i.holder.deadline,
        waiters: i
            .waiters
            .into_iter()
            .map(|w| WaiterView {
                owner: w.owner,
                ttl: w.ttl,
                wait_deadline: w.wait_deadline,
            })
            .collect(),
    }
}

/// The vector form of stats, every field filled in.
#[must_use]
pub fn stats_view(s: &Stats) -> StatsView {
    StatsView {
        live_leases: Some(s.live_leases as u64),
        waiters: Some(s.waiters as u64),
        expired_records: Some(s.expired_records as u64),
        pending_events: Some(s.pending_events as u64),
        clock: Some(s.clock),
        last_fence: Some(s.last_fence),
        acquired: Some(s.acquired),
        handed_off: Some(s.handed_off),
        released: Some(s.released),
        extended: Some(s.extended),
        expired: Some(s.expired),
        queued: Some(s.queued),
        wait_timed_out: Some(s.wait_timed_out),
        cancelled: Some(s.cancelled),
        rejected: Some(s.rejected),
        events_dropped: Some(s.events_dropped),
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
