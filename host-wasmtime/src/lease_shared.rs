//! What a [`Lease`](crate::Lease) and the host share: the lease's state, how it ended, and the
//! lost-lock callbacks that report it (collected under the host's lock, run after it).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use lock_core::{Fence, Instant, LeaseLoss};

/// What an `on_lost` callback is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostLease {
    /// The key.
    pub key: String,
    /// The owner that lost it.
    pub owner: String,
    /// The lost lease's fencing token.
    pub fence: Fence,
    /// When it ended (table clock, ms): its deadline, or the instant it was stolen.
    pub at: Instant,
    /// It was stolen (another owner took the key by force), rather than expired.
    pub stolen: bool,
}

/// A lost-lock callback.
pub(crate) type LostCallback = Box<dyn FnOnce(&LostLease) + Send>;

/// State shared by a guard and the host.
pub(crate) struct LeaseShared {
    pub(crate) key: String,
    pub(crate) owner: String,
    pub(crate) fence: Fence,
    pub(crate) ttl: lock_core::Duration,
    pub(crate) deadline: AtomicU64,
    /// Set once, by [`LeaseShared::lose`]: the lease ended other than by its holder's release.
    pub(crate) lost: AtomicBool,
    pub(crate) released: AtomicBool,
    pub(crate) on_lost: Mutex<Option<LostCallback>>,
    /// How it ended, once lost.
    pub(crate) end: Mutex<Option<LeaseLoss>>,
}

impl LeaseShared {
    pub(crate) fn new(
        key: &str,
        owner: &str,
        fence: Fence,
        ttl: lock_core::Duration,
        deadline: Instant,
    ) -> Self {
        LeaseShared {
            key: key.to_owned(),
            owner: owner.to_owned(),
            fence,
            ttl,
            deadline: AtomicU64::new(deadline.0),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
            on_lost: Mutex::new(None),
            end: Mutex::new(None),
        }
    }

    /// Marks the lease lost at `at`. Only the first call does anything: it returns the
    /// callback to run (outside the host's lock), so `on_lost` fires exactly once whichever
    /// path (expiry event, a refused release or extend) learns of the loss first. Called with
    /// the host's state locked, like [`Lease::on_lost`], so the two never miss each other.
    pub(crate) fn lose(&self, end: LeaseLoss, callbacks: &mut Callbacks) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.end.lock().unwrap_or_else(PoisonError::into_inner) = Some(end);
        let callback = self.on_lost.lock().ok().and_then(|mut c| c.take());
        if let Some(callback) = callback {
            callbacks.push((callback, self.lost_lease(end)));
        }
    }

    pub(crate) fn lost_lease(&self, end: LeaseLoss) -> LostLease {
        LostLease {
            key: self.key.clone(),
            owner: self.owner.clone(),
            fence: self.fence,
            at: end.at,
            stolen: end.stolen,
        }
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

/// Callbacks collected under the lock, run after it is released.
pub(crate) type Callbacks = Vec<(LostCallback, LostLease)>;

/// Runs lost-lock callbacks, each caught if it panics.
pub(crate) fn run_callbacks(callbacks: Callbacks) {
    for (callback, lost) in callbacks {
        // A panicking callback must not take the timer thread (or a caller) down.
        let _ = catch_unwind(AssertUnwindSafe(|| callback(&lost)));
    }
}
