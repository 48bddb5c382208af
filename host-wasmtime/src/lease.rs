//! [`Lease`]: the guard a caller holds.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crate::inner::{schedule_keepalive, span, Inner};
use crate::lease_shared::{run_callbacks, LeaseShared, LostLease};
use crate::timer::Shutdown;
use crate::Error;
use lock_core::{Fence, Instant, LeaseLoss};

/// A held lock. Released when dropped (or by [`release`](Lease::release), which is idempotent).
///
/// A lease ends in exactly one of two ways: its holder releases it (`release` answers `Ok`), or
/// it is lost (its deadline passed first): then `is_lost()` becomes true and the `on_lost`
/// callback runs exactly once, whichever call notices first (the timer, a refused `release` or
/// `extend`, any request that finds the lease expired).
pub struct Lease {
    pub(crate) inner: Arc<Inner>,
    /// Keeps the host's timer thread running while the lease lives.
    pub(crate) _shutdown: Arc<Shutdown>,
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
        let inner = &self.inner;
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
        if let Ok(mut st) = self.inner.lock() {
            if !self.is_lost() && !self.shared.released.load(Ordering::SeqCst) {
                schedule_keepalive(&mut st, &self.shared);
                let due = st
                    .keepalive_of
                    .get(&self.shared.fence)
                    .copied()
                    .unwrap_or(Instant::ZERO);
                self.inner.arm_keepalive(&mut st, due);
            }
        }
    }

    /// Calls `callback` once if the lease is lost (at once if it already was). A panicking
    /// callback is caught. Registering again replaces a callback that has not run.
    pub fn on_lost(&self, callback: impl FnOnce(&LostLease) + Send + 'static) {
        // Under the host's lock, so a loss being reported right now cannot slip between the
        // check and the registration.
        let Ok(_st) = self.inner.lock() else {
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
        let info = self.shared.lost_lease(end.unwrap_or(LeaseLoss {
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
        let (shared, inner) = (&self.shared, &self.inner);
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
