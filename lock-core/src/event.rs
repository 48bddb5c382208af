//! Time-driven and hand-off notifications.

use alloc::string::String;

use crate::{Fence, Instant, Mode};

/// What happened to one key, without the key (the per-key layer does not know its key).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The lease reached its deadline without being released or extended: its holder lost the
    /// lock (a lost-lock notification). `at` is the lease's deadline.
    Expired {
        /// The owner that lost the lock.
        owner: String,
        /// Fencing token of the lost lease.
        fence: Fence,
        /// The lost lease's metadata ("" if none).
        metadata: String,
    },
    /// The head waiter was granted the lock by hand-off when the previous lease ended. `at` is the
    /// hand-off instant.
    Granted {
        /// The new holder.
        owner: String,
        /// Fencing token of the new lease.
        fence: Fence,
        /// Deadline of the new lease: hand-off instant + the TTL the waiter asked for.
        deadline: Instant,
        /// The mode the waiter asked for.
        mode: Mode,
        /// The new lease's metadata ("" if none).
        metadata: String,
    },
    /// A waiter left the queue because its wait deadline passed. `at` is its wait deadline.
    WaitTimedOut {
        /// The owner that stopped waiting.
        owner: String,
    },
    /// The lease was ended by a steal (another caller took the key regardless of its holders):
    /// its holder lost the lock. `at` is the instant of the steal.
    Stolen {
        /// The owner that lost the lock.
        owner: String,
        /// Fencing token of the lost lease.
        fence: Fence,
        /// The lost lease's metadata ("" if none).
        metadata: String,
    },
}

impl EventKind {
    /// The stable kebab-case name of this kind of event, shared by the WIT contract, the JS
    /// package and the conformance vectors.
    ///
    /// ```
    /// let kind = lock_core::EventKind::WaitTimedOut { owner: "b".into() };
    /// assert_eq!(kind.name(), "wait-timed-out");
    /// ```
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            EventKind::Expired { .. } => "expired",
            EventKind::Granted { .. } => "granted",
            EventKind::WaitTimedOut { .. } => "wait-timed-out",
            EventKind::Stolen { .. } => "stolen",
        }
    }
}

/// An event of one key, as emitted by [`KeyState`](crate::KeyState).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyEvent {
    /// The instant at which it happened (not when it was reported).
    pub at: Instant,
    /// What happened.
    pub kind: EventKind,
}

/// An event of the table, drained with [`LockTable::poll_event`](crate::LockTable::poll_event).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// The key it happened to.
    pub key: String,
    /// The instant at which it happened (not when it was reported).
    pub at: Instant,
    /// What happened.
    pub kind: EventKind,
}
