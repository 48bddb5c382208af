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
