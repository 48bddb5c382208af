//! A term as the leader's body sees it: its fence and its stop signal.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use lock_core::election::StopReason;
use lock_core::Fence;

use crate::control::Kick;

/// A term, as the leader's body sees it: its fence and its stop signal.
#[derive(Clone, Debug)]
pub struct Term {
    fence: Fence,
    signal: Arc<Signal>,
    /// Told when the body returns.
    pub(crate) kick: Kick,
}

#[derive(Debug, Default)]
struct Signal {
    stopped: Mutex<Option<StopReason>>,
    wake: Condvar,
    /// When the stop is due at the latest unless the lease is extended (set by the driver).
    stop_by: Mutex<Option<std::time::Instant>>,
}

impl Term {
    pub(crate) fn new(fence: Fence, kick: Kick) -> Self {
        Term {
            fence,
            signal: Arc::default(),
            kick,
        }
    }

    /// The term's fencing token: pass it with every write, so that a resource that checks it
    /// refuses this leader once another has begun.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// Why the stop signal fired, once it has: stop working and return.
    #[must_use]
    pub fn stopped(&self) -> Option<StopReason> {
        *self
            .signal
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits up to `timeout` for the stop signal; answers why it fired, or `None` if it has
    /// not.
    #[must_use]
    pub fn wait_stop(&self, timeout: Duration) -> Option<StopReason> {
        let stopped = self
            .signal
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (stopped, _) = self
            .signal
            .wake
            .wait_timeout_while(stopped, timeout, |s| s.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        *stopped
    }

    /// When the stop signal fires at the latest unless the term's lease is extended first, on
    /// this process's monotonic clock (`None` until the driver has set it): the lease's end on
    /// this candidate's clock less the margin, moved by each extension. For a supervisor in
    /// another process that stops the term's work by itself if this process stops telling it
    /// (paused, never scheduled): `lockstore elect`'s guard.
    #[must_use]
    pub fn stop_by(&self) -> Option<std::time::Instant> {
        *self
            .signal
            .stop_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets [`Term::stop_by`].
    pub(crate) fn set_stop_by(&self, at: std::time::Instant) {
        *self
            .signal
            .stop_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(at);
    }

    /// Fires the stop signal (the first reason stays).
    pub(crate) fn fire(&self, reason: StopReason) {
        let mut stopped = self
            .signal
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        stopped.get_or_insert(reason);
        self.signal.wake.notify_all();
    }
}
