//! The host API's error type.

use std::fmt;

use lock_core::LockError;

use crate::HostError;

/// Why a host call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The lock table refused the request (held, not owner, expired, bad input...): the core's
    /// own error.
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
            Error::Lock(e) => e.fmt(f),
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
