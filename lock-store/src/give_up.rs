//! [`GiveUp`]: how another thread gives up a blocking acquire (the blocking face's counterpart
//! of dropping an async acquire's future, or aborting a JS acquire's signal).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// A handle that gives up a blocking [`Locks::acquire_or_give_up`](crate::Locks::acquire_or_give_up)
/// from another thread: a signal handler's thread, a supervisor's, a UI's. Cheap to clone
/// (clones are one handle).
///
/// Giving up is the store client protocol's transition, the same on every face: the acquire
/// cancels its wait, and if the key was handed to it before the cancel landed, releases that
/// lease (its fence is spent; the next waiter is handed the key at once); then it answers
/// [`Error::GaveUp`](crate::Error::GaveUp). Nothing of it is left on the key.
///
/// ```
/// use std::time::Duration;
/// use lock_store::{AcquireOptions, Error, GiveUp, Locks};
///
/// let locks = Locks::open("memory:", "give_up_doc")?;
/// let held = locks.try_acquire("job", "a", Duration::from_secs(30))?;
/// let give_up = GiveUp::new();
/// let later = give_up.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_millis(50));
///     later.give_up(); // SIGTERM, say
/// });
/// let waited = locks.acquire_or_give_up("job", "b", Duration::from_secs(30), Duration::from_secs(60),
///     &AcquireOptions::EXCLUSIVE, &give_up);
/// assert_eq!(waited.unwrap_err(), Error::GaveUp);
/// assert!(locks.inspect("job")?.unwrap().waiters.is_empty());
/// # drop(held);
/// # Ok::<(), lock_store::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct GiveUp(Arc<(Mutex<bool>, Condvar)>);

impl GiveUp {
    /// A handle nobody has given up yet.
    #[must_use]
    pub fn new() -> Self {
        GiveUp::default()
    }

    /// Gives up: the acquire watching this handle stops waiting at its next step (at once if it
    /// naps; after the store call in flight otherwise). Idempotent.
    pub fn give_up(&self) {
        let (given_up, wake) = &*self.0;
        *given_up.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
    }

    /// Whether [`GiveUp::give_up`] was called.
    #[must_use]
    pub fn is_given_up(&self) -> bool {
        *self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps `d`, or less if given up meanwhile; answers whether it was given up.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let (given_up, wake) = &*self.0;
        let guard = given_up.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = wake
            .wait_timeout_while(guard, d, |given_up| !*given_up)
            .unwrap_or_else(PoisonError::into_inner);
        *guard
    }
}
