//! Resign or shut down a running campaign, from any thread, and the driver's wake-up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Asks a running campaign to resign its term or to shut down, from any thread.
#[derive(Clone, Debug, Default)]
pub struct Control {
    resign: Arc<AtomicBool>,
    shut_down: Arc<AtomicBool>,
    pub(crate) kick: Kick,
}

impl Control {
    /// Ends the current term (its stop signal fires; once the body returns the lease is
    /// released and the next candidate in line leads at once); the campaign goes on.
    pub fn resign(&self) {
        self.resign.store(true, Ordering::SeqCst);
        self.kick.kick();
    }

    /// Leaves the election: the current term ends as by [`resign`](Self::resign), and the
    /// campaign returns after it (within its wait in line when not leading).
    pub fn shut_down(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        self.kick.kick();
    }

    /// Whether [`shut_down`](Self::shut_down) was asked.
    #[must_use]
    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::SeqCst)
    }

    /// Takes a pending [`resign`](Self::resign).
    pub(crate) fn take_resign(&self) -> bool {
        self.resign.swap(false, Ordering::SeqCst)
    }
}

/// Wakes the driver's loop at once (a control asked, a body returned, an extension answered)
/// instead of at its next look.
#[derive(Clone, Debug, Default)]
pub(crate) struct Kick(Arc<(Mutex<bool>, Condvar)>);

impl Kick {
    pub(crate) fn kick(&self) {
        let (kicked, wake) = &*self.0;
        *kicked.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
    }

    /// Waits up to `timeout` for a kick (and takes it).
    pub(crate) fn wait(&self, timeout: Duration) {
        let (kicked, wake) = &*self.0;
        let guard = kicked.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, _) = wake
            .wait_timeout_while(guard, timeout, |k| !*k)
            .unwrap_or_else(PoisonError::into_inner);
        *guard = false;
    }
}
