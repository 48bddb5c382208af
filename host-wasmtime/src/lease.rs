//! [`Lease`]: the guard a caller holds, and what the host shares with it to report its loss.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::inner::{run_callbacks, schedule_keepalive, span, Callbacks};
use crate::{Error, LockHost};
use lock_core::{Fence, Instant, LockError};

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
    lost: AtomicBool,
    pub(crate) released: AtomicBool,
    on_lost: Mutex<Option<LostCallback>>,
    /// How it ended, once lost.
    end: Mutex<Option<End>>,
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
    pub(crate) fn lose(&self, end: End, callbacks: &mut Callbacks) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.end.lock().unwrap_or_else(PoisonError::into_inner) = Some(end);
        let callback = self.on_lost.lock().ok().and_then(|mut c| c.take());
        if let Some(callback) = callback {
            callbacks.push((callback, self.lost_lease(end)));
        }
    }

    fn lost_lease(&self, end: End) -> LostLease {
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

/// How a lost lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct End {
    /// When (table clock).
    pub(crate) at: Instant,
    /// Stolen rather than expired.
    pub(crate) stolen: bool,
}

/// If a release or extend was refused because the lease is over, how it ended (at its
/// deadline if the table no longer remembers it).
pub(crate) fn ended_by(error: &LockError, deadline: Instant) -> Option<End> {
    let (at, stolen) = match error {
        LockError::Expired { deadline: at } => (*at, false),
        LockError::Stolen { at } => (*at, true),
        LockError::NotHeld | LockError::NotOwner => (deadline, false),
        _ => return None,
    };
    Some(End { at, stolen })
}

/// A held lock. Released when dropped (or by [`release`](Lease::release), which is idempotent).
///
/// A lease ends in exactly one of two ways: its holder releases it (`release` answers `Ok`), or
/// it is lost (its deadline passed first): then `is_lost()` becomes true and the `on_lost`
/// callback runs exactly once, whichever call notices first (the timer, a refused `release` or
/// `extend`, any request that finds the lease expired).
pub struct Lease {
    pub(crate) host: LockHost,
    pub(crate) shared: Arc<LeaseShared>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.shared.key)
            .field("owner", &self.shared.owner)
            .field("fence", &self.shared.fence)
            .field("deadline", &self.deadline())
            .finish()
    }
}

impl Lease {
    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.shared.key
    }
    /// The owner.
    #[must_use]
    pub fn owner(&self) -> &str {
        &self.shared.owner
    }
    /// The fencing token: pass it with every write to the protected resource.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.shared.fence
    }
    /// The current deadline (host clock, ms); moves with `extend` and keep-alive.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        Instant(self.shared.deadline.load(Ordering::SeqCst))
    }
    /// Whether the lease was lost (it expired before its holder released it).
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.shared.is_lost()
    }

    /// Moves the deadline to now + `ttl`.
    ///
    /// # Errors
    /// [`Error::Lock`] with `expired` if the lease was lost (then `on_lost` has fired), or
    /// another lock/host error.
    pub fn extend(&self, ttl: Duration) -> Result<(), Error> {
        let shared = &self.shared;
        let inner = &self.host.inner;
        inner.request(|st, now, callbacks| {
            let ttl = span(ttl);
            match inner.call(
                st.table
                    .extend(&shared.key, &shared.owner, shared.fence, ttl, now),
            )? {
                Ok(g) => {
                    shared.deadline.store(g.deadline.0, Ordering::SeqCst);
                    inner.arm(st, g.deadline);
                    if st.keepalive_of.contains_key(&shared.fence) {
                        schedule_keepalive(st, shared);
                    }
                    Ok(())
                }
                Err(e) => Err(inner.refused(st, shared, e, callbacks)),
            }
        })
    }

    /// Keeps the lease alive: the timer thread extends it by its TTL whenever two thirds of the
    /// TTL have passed, until it is released or lost.
    pub fn keep_alive(&self) {
        if let Ok(mut st) = self.host.inner.lock() {
            if !self.is_lost() && !self.shared.released.load(Ordering::SeqCst) {
                schedule_keepalive(&mut st, &self.shared);
                let due = st
                    .keepalive_of
                    .get(&self.shared.fence)
                    .copied()
                    .unwrap_or(Instant::ZERO);
                self.host.inner.arm_keepalive(&mut st, due);
            }
        }
    }

    /// Calls `callback` once if the lease is lost (at once if it already was). A panicking
    /// callback is caught. Registering again replaces a callback that has not run.
    pub fn on_lost(&self, callback: impl FnOnce(&LostLease) + Send + 'static) {
        // Under the host's lock, so a loss being reported right now cannot slip between the
        // check and the registration.
        let Ok(_st) = self.host.inner.lock() else {
            return;
        };
        if !self.is_lost() {
            if let Ok(mut slot) = self.shared.on_lost.lock() {
                *slot = Some(Box::new(callback));
            }
            return;
        }
        drop(_st);
        let end = *self
            .shared
            .end
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let info = self.shared.lost_lease(end.unwrap_or(End {
            at: self.deadline(),
            stolen: false,
        }));
        run_callbacks(vec![(Box::new(callback), info)]);
    }

    /// Releases the lock. Only the first call that reaches the table does work; later calls
    /// return `Ok(())`.
    ///
    /// # Errors
    /// [`Error::Lock`] with `expired` if the lease was lost before the release (the critical
    /// section may have overlapped another holder's; `on_lost` has fired), or a host error
    /// (then the lease is not released and a later call may try again).
    pub fn release(&self) -> Result<(), Error> {
        if self.shared.released.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let (shared, inner) = (&self.shared, &self.host.inner);
        let result = inner.request(|st, now, callbacks| {
            let r = inner.call(
                st.table
                    .release(&shared.key, &shared.owner, shared.fence, now),
            )?;
            inner.forget(st, shared.fence);
            inner.drain_after_release(st, callbacks);
            // A lease of this host has no minimum hold, so a release always ends it now.
            r.map(|_| ())
                .map_err(|e| inner.refused(st, shared, e, callbacks))
        });
        if matches!(result, Err(Error::Host(_) | Error::Persist(_))) {
            // The table was not reached: the lease is still held and may be released again.
            self.shared.released.store(false, Ordering::SeqCst);
        }
        result
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = self.release();
    }
}
