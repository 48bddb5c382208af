//! What a held lease is, on either face: its fence and deadline, its end on this holder's
//! clock, its loss, and what the answers of its extensions and releases mean (decided by
//! lock-protocol's `holding`; kept here in atomics the lease's threads and tasks share). The blocking [`Lease`](crate::Lease) and the async [`aio::Lease`](crate::aio::Lease)
//! both keep one; neither face knows the other.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::local::{LocalInstant, ProcessClock};

use lock_core::{Fence, Grant, Instant, LockError, Request, Response};

use crate::store::StoreError;
use lock_protocol::clock::{millis, StoreClock};
use lock_protocol::decided::Decided;
use lock_protocol::holding::{self, Extension, Released};
use lock_protocol::Error;

/// What an `on_lost` callback is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostLease {
    /// The key.
    pub key: String,
    /// The owner that lost it.
    pub owner: String,
    /// The lost lease's fencing token.
    pub fence: Fence,
    /// Why: the store's refusal (`expired`, `stolen`, `not-held`, `not-owner`), or `None` when this
    /// holder's own clock reached the lease's end without a successful extension (the store
    /// could not be reached, or nobody extended it).
    pub refusal: Option<LockError>,
}

pub(crate) type LostCallback = Box<dyn FnOnce(&LostLease) + Send>;

#[derive(Default)]
pub(crate) struct Guard {
    /// The guard thread runs.
    pub(crate) running: bool,
    /// It also extends the lease (keep-alive).
    pub(crate) extend: bool,
    /// Stop it (released or dropped).
    pub(crate) stop: bool,
    /// How the extension the guard thread started last ended (taken by the guard thread).
    pub(crate) extended: Option<Extended>,
}

/// How one keep-alive extension ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Extended {
    /// The deadline moved.
    Done,
    /// The store refused it: the lease is lost (and known lost).
    Refused,
    /// The store did not answer (or failed): try again soon, until the lease's end.
    Failed,
}

/// A held lease's state, shared by the lease of either face (`crate::Lease`, `crate::aio::Lease`)
/// and what keeps it (a guard thread, a keep-alive task).
pub(crate) struct LeaseState {
    pub(crate) key: String,
    pub(crate) owner: String,
    pub(crate) fence: Fence,
    pub(crate) ttl: Duration,
    /// The lease's deadline in the store's time.
    pub(crate) deadline: AtomicU64,
    /// The holder's own, earlier end of the lease: when the request that granted or last
    /// extended it left this machine, plus the time that remained.
    pub(crate) local_end: Mutex<LocalInstant>,
    pub(crate) released: AtomicBool,
    /// A release was sent whose outcome is unknown (its call failed after sending it).
    pub(crate) release_unsure: AtomicBool,
    /// The store's time at which the release took effect (0 until then).
    pub(crate) released_at: AtomicU64,
    pub(crate) lost: AtomicBool,
    /// Why it was lost (set before `lost`).
    pub(crate) refusal: Mutex<Option<LockError>>,
    pub(crate) on_lost: Mutex<Option<LostCallback>>,
    pub(crate) guard: Mutex<Guard>,
    pub(crate) wake: Condvar,
    /// Wakes the async tasks that watch this lease (`aio::Lease::lost`).
    #[cfg(feature = "tokio")]
    pub(crate) signal: tokio::sync::Notify,
}

impl LeaseState {
    pub(crate) fn new(
        key: &str,
        owner: &str,
        grant: Grant,
        ttl: Duration,
        local_end: LocalInstant,
    ) -> Self {
        LeaseState {
            key: key.to_owned(),
            owner: owner.to_owned(),
            fence: grant.fence,
            ttl,
            deadline: AtomicU64::new(grant.deadline.0),
            local_end: Mutex::new(local_end),
            released: AtomicBool::new(false),
            release_unsure: AtomicBool::new(false),
            released_at: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            refusal: Mutex::new(None),
            on_lost: Mutex::new(None),
            guard: Mutex::new(Guard::default()),
            wake: Condvar::new(),
            #[cfg(feature = "tokio")]
            signal: tokio::sync::Notify::new(),
        }
    }

    /// The key.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The owner.
    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token.
    pub(crate) fn fence(&self) -> Fence {
        self.fence
    }

    /// The TTL it was taken (and is kept alive) with.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The deadline in the store's time.
    pub(crate) fn deadline(&self) -> Instant {
        Instant(self.deadline.load(Ordering::SeqCst))
    }

    /// When the release took effect, in the store's time.
    pub(crate) fn released_at(&self) -> Option<Instant> {
        let at = self.released_at.load(Ordering::SeqCst);
        (self.released.load(Ordering::SeqCst) && at > 0).then_some(Instant(at))
    }

    /// Released (or known lost at a release): nothing more to send.
    pub(crate) fn is_released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }

    /// Known lost, or this holder's own clock passed its end.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst) || LocalInstant::now() >= self.local_end()
    }

    /// The answer of a release called once the lease is lost (known lost, or past its end on
    /// this holder's clock): the refusal that ended it, or `expired` at its deadline. `None`
    /// while it is held. The release is still sent (the store may still hold the lease, which
    /// this holder stops believing in early: freeing it hands the key on sooner), and every
    /// face answers the loss whatever the store says (see "Answers per face" in
    /// docs/lock-store.md).
    pub(crate) fn loss_answer(&self) -> Option<LockError> {
        if !self.is_lost() {
            return None;
        }
        let refusal = self.refusal.lock().unwrap_or_else(PoisonError::into_inner);
        Some(holding::loss_answer(refusal.clone(), self.deadline()))
    }

    /// What the loss was, once it is known (`None` before).
    pub(crate) fn lost_lease(&self) -> Option<LostLease> {
        let refusal = self.refusal.lock().unwrap_or_else(PoisonError::into_inner);
        self.lost.load(Ordering::SeqCst).then(|| LostLease {
            key: self.key.clone(),
            owner: self.owner.clone(),
            fence: self.fence,
            refusal: refusal.clone(),
        })
    }

    pub(crate) fn local_end(&self) -> LocalInstant {
        *self
            .local_end
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn guard(&self) -> std::sync::MutexGuard<'_, Guard> {
        self.guard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the lease lost (the first call only) and runs the callback if it is set.
    pub(crate) fn lose(&self, refusal: Option<LockError>) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        {
            let mut why = self.refusal.lock().unwrap_or_else(PoisonError::into_inner);
            if self.lost.load(Ordering::SeqCst) {
                return;
            }
            *why = refusal;
            self.lost.store(true, Ordering::SeqCst);
        }
        self.changed();
        self.fire();
    }

    /// Runs the callback if the lease is lost and the callback is set: whoever takes it out of
    /// its slot runs it, so it runs exactly once.
    pub(crate) fn fire(&self) {
        if !self.lost.load(Ordering::SeqCst) {
            return;
        }
        let callback = self
            .on_lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let (Some(callback), Some(lost)) = (callback, self.lost_lease()) {
            callback(&lost);
        }
    }

    pub(crate) fn stop(&self) {
        let mut guard = self.guard();
        guard.stop = true;
        let running = guard.running;
        drop(guard);
        // Only a guard thread waits on `wake` (a notification is a system call: skipped for
        // the common lease that has none).
        if running {
            self.wake.notify_all();
        }
    }
}

impl LeaseState {
    /// Stops the guard; `false` if the lease is already released (nothing to send).
    pub(crate) fn begin_release(&self) -> bool {
        self.stop();
        !self.released.load(Ordering::SeqCst)
    }

    /// What a release's answer means for this lease (see [`Lease::release`]): lock-protocol's
    /// [`holding::released`]. `lost`: the lease was lost before the release was sent
    /// ([`LeaseState::loss_answer`]), which is then the answer once the store answered.
    pub(crate) fn released_as(
        &self,
        decided: Result<Decided<Response>, StoreError>,
        lost: Option<LockError>,
        unexpected: impl FnOnce(&Response) -> Error,
    ) -> Result<(), Error> {
        let decided = decided.inspect_err(|_| self.release_unsure.store(true, Ordering::SeqCst))?;
        let unsure = decided.ambiguous || self.release_unsure.load(Ordering::SeqCst);
        let end = holding::released(&decided.reply, unsure, decided.now, self.deadline(), lost);
        let answer = match end {
            Some(Released::Released { at }) => {
                self.released_at.store(at.0, Ordering::SeqCst);
                Ok(())
            }
            Some(Released::Lost { refusal, freed_at }) => {
                if let Some(at) = freed_at {
                    self.released_at.store(at.0, Ordering::SeqCst);
                }
                self.lose(Some(refusal.clone()));
                Err(Error::Lock(refusal))
            }
            None => return Err(unexpected(&decided.reply)),
        };
        self.released.store(true, Ordering::SeqCst);
        self.changed();
        answer
    }

    /// What an extension's answer means for this lease (see [`Lease::extend`]): lock-protocol's
    /// [`holding::extended`].
    pub(crate) fn extended_as(
        &self,
        decided: Result<Decided<Response>, StoreError>,
        unexpected: impl FnOnce(&Response) -> Error,
    ) -> Result<(), Error> {
        let decided = decided?;
        match holding::extended(&decided.reply) {
            Some(Extension::Extended(grant)) => {
                self.deadline.store(grant.deadline.0, Ordering::SeqCst);
                *self
                    .local_end
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    local_end(decided.clock, grant.deadline);
                self.changed();
                Ok(())
            }
            Some(Extension::Lost(e)) => {
                self.lose(Some(e.clone()));
                Err(Error::Lock(e))
            }
            Some(Extension::Refused(e)) => Err(Error::Lock(e)),
            None => Err(unexpected(&decided.reply)),
        }
    }

    /// The request of an extension by `ttl`.
    pub(crate) fn extension<'s>(
        &'s self,
        ttl: Duration,
    ) -> impl Fn(Instant) -> Request<'s> + Send + Sync + 's {
        let (key, owner, fence) = (&self.key, &self.owner, self.fence);
        let ttl = millis(ttl);
        move |now| Request::Extend {
            key,
            owner,
            fence,
            ttl,
            now,
        }
    }

    /// The request of this lease's release.
    pub(crate) fn release_request<'s>(
        &'s self,
    ) -> impl Fn(Instant) -> Request<'s> + Send + Sync + 's {
        let (key, owner, fence) = (&self.key, &self.owner, self.fence);
        move |now| Request::Release {
            key,
            owner,
            fence,
            now,
        }
    }

    /// Wakes the async tasks that watch this lease (its end moved, or it is lost or released).
    pub(crate) fn changed(&self) {
        #[cfg(feature = "tokio")]
        self.signal.notify_waiters();
    }
}

/// Where a holder stops believing in its lease ending at `deadline` (store's time), on this
/// process's clock (see [`lock_protocol::clock::local_end`]).
pub(crate) fn local_end(clock: Option<StoreClock>, deadline: Instant) -> LocalInstant {
    lock_protocol::clock::local_end(clock, deadline, LocalInstant::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::ReleaseOutcome;

    fn state(local_end: LocalInstant) -> LeaseState {
        let grant = Grant {
            fence: Fence(9),
            deadline: Instant(50_000),
        };
        LeaseState::new("k", "a", grant, Duration::from_secs(5), local_end)
    }

    fn released(outcome: ReleaseOutcome, now: u64) -> Result<Decided<Response>, StoreError> {
        Ok(Decided {
            reply: Response::Release(Ok(outcome)),
            events: Vec::new(),
            now: Instant(now),
            next_deadline: None,
            clock: None,
            ambiguous: false,
        })
    }

    fn unexpected(r: &Response) -> Error {
        panic!("unexpected {r:?}")
    }

    #[test]
    fn a_release_after_the_loss_answers_the_loss_even_if_the_store_still_held_the_lease() {
        // Past its end on this holder's clock, while the store (its clock a little behind this
        // holder's bound) still holds it: the release frees it, and answers `expired`.
        let lease = state(LocalInstant::from_nanos(0));
        assert!(lease.begin_release());
        let lost = lease.loss_answer();
        let deadline = Instant(50_000);
        assert_eq!(lost, Some(LockError::Expired { deadline }));
        let answer =
            lease.released_as(released(ReleaseOutcome::Released, 49_990), lost, unexpected);
        assert_eq!(answer, Err(Error::Lock(LockError::Expired { deadline })));
        assert!(lease.is_released() && lease.lost_lease().is_some());
        assert_eq!(lease.released_at(), Some(Instant(49_990)));
        // A lease still held answers as before; a minimum hold ends at its end.
        let held = state(LocalInstant::now() + Duration::from_secs(60));
        assert_eq!(held.loss_answer(), None);
        let until = Instant(52_000);
        let answer = held.released_as(
            released(ReleaseOutcome::HeldUntil { until }, 49_000),
            None,
            unexpected,
        );
        assert_eq!(answer, Ok(()));
        assert_eq!(held.released_at(), Some(until));
    }
}
