//! The host API's error type.

use std::fmt;

use crate::types::LockError;
use crate::HostError;

/// Why a host call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The lock table refused the request (held, not owner, expired, bad input...). The WIT error,
    /// case for case the core's `LockError`.
    Lock(LockError),
    /// A blocking acquire was not granted before its wait timeout.
    WaitTimedOut,
    /// This owner is already waiting for this key in another call: owners must be unique per
    /// concurrent caller.
    AlreadyWaiting,
    /// The component trapped, or trapped earlier (see [`HostError`]).
    Host(HostError),
    /// Saving or loading the persisted table failed.
    Persist(String),
}

impl From<HostError> for Error {
    fn from(e: HostError) -> Self {
        Error::Host(e)
    }
}

impl From<LockError> for Error {
    fn from(e: LockError) -> Self {
        Error::Lock(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Lock(e) => f.write_str(&describe(e)),
            Error::WaitTimedOut => {
                f.write_str("gave up waiting: the lock was not handed over before the wait timeout")
            }
            Error::AlreadyWaiting => {
                f.write_str("this owner is already waiting for this key in another call")
            }
            Error::Host(e) => e.fmt(f),
            Error::Persist(e) => write!(f, "persistence: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// The lock error in plain words.
#[must_use]
pub fn describe(e: &LockError) -> String {
    match e {
        LockError::KeyEmpty => "key is empty".into(),
        LockError::KeyTooLong(l) => format!(
            "key is {} bytes, longer than max_key_bytes ({})",
            l.len, l.max
        ),
        LockError::KeyInvalid => "key contains a control character".into(),
        LockError::OwnerEmpty => "owner is empty".into(),
        LockError::OwnerTooLong(l) => format!(
            "owner is {} bytes, longer than max_owner_bytes ({})",
            l.len, l.max
        ),
        LockError::OwnerInvalid => "owner contains a control character".into(),
        LockError::TtlZero => "ttl is 0 ms; a lease must last at least 1 ms".into(),
        LockError::TtlTooLong(l) => {
            format!("ttl of {} ms is longer than max_ttl ({} ms)", l.ttl, l.max)
        }
        LockError::DeadlineOverflow(d) => format!(
            "now ({} ms) + ttl ({} ms) is past the end of the clock",
            d.now, d.ttl
        ),
        LockError::TableFull(n) => format!("table already holds max_keys ({n}) live leases"),
        LockError::QueueFull(n) => {
            format!("wait queue of this key is full (max_waiters_per_key = {n})")
        }
        LockError::TooManyWaiters(n) => format!("table already holds max_waiters ({n}) waiters"),
        LockError::Held(d) => format!("key is held by another owner until {d} ms"),
        LockError::NotOwner => "key is held by another owner".into(),
        LockError::NotHeld => "owner holds no lease on this key with this fence".into(),
        LockError::Expired(d) => {
            format!("lease expired at {d} ms; the lock was lost before this call")
        }
        LockError::NotWaiting => "owner is not waiting on this key".into(),
        LockError::InvalidLimits(l) => format!("limit {l} is out of range"),
        LockError::SnapshotTruncated => "snapshot is truncated".into(),
        LockError::SnapshotBadMagic => "bytes are not a lock-table snapshot".into(),
        LockError::SnapshotVersion(v) => format!(
            "snapshot format version {} is not supported (this build reads {})",
            v.found, v.supported
        ),
        LockError::SnapshotChecksum => "snapshot checksum mismatch".into(),
        LockError::SnapshotCorrupt(r) => format!("snapshot is corrupt: {r}"),
        LockError::SnapshotExceedsLimits(l) => format!("snapshot exceeds this table's {l}"),
    }
}
