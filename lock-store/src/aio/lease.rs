//! [`Lease`]: a held lock in async code, its keep-alive task and its loss signal.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::local::{LocalInstant, ProcessClock};

use lock_core::{Fence, Instant};
use tokio::task::JoinHandle;

use crate::aio::Locks;
use crate::held::{LeaseState, LostLease};
use lock_protocol::Error;

/// A held lock, from [`aio::Locks`](Locks). Dropping it releases it (on the runtime, errors
/// ignored); [`release`](Self::release) reports them.
///
/// It tells of its loss as a future, [`lost`](Self::lost), which completes before the store can
/// hand the key to anyone else (on this holder's own clock, with the documented margin): race
/// the critical section against it (`tokio::select!`), or let
/// [`Locks::with_lock`](Locks::with_lock) do so.
pub struct Lease {
    locks: Locks,
    state: Arc<LeaseState>,
    /// The keep-alive task, if started.
    keeper: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key())
            .field("owner", &self.owner())
            .field("fence", &self.fence())
            .field("deadline", &self.deadline())
            .finish()
    }
}

impl Lease {
    pub(crate) fn new(locks: Locks, state: LeaseState) -> Self {
        Lease {
            locks,
            state: Arc::new(state),
            keeper: Mutex::new(None),
        }
    }

    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        self.state.key()
    }

    /// The owner.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.state.owner()
    }

    /// The fencing token: pass it with every write to the protected resource.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.state.fence()
    }

    /// The deadline in the store's time (milliseconds since the Unix epoch).
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.state.deadline()
    }

    /// When [`release`](Self::release) took effect, in the store's time.
    #[must_use]
    pub fn released_at(&self) -> Option<Instant> {
        self.state.released_at()
    }

    /// True once the lease is known lost, or this holder's own clock passed its end (see
    /// [`crate::Lease::is_lost`]).
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }

    /// Completes when the lease is lost: an extension or a release was refused, or this
    /// holder's own clock reached the lease's end without a successful extension (the store
    /// could not be reached, or nobody extended it). That end comes before the store's clock can
    /// reach the deadline, so the future completes before anyone else can be handed the key.
    /// Never completes after a successful release. Cancel-safe, and any number of tasks may
    /// await it.
    pub async fn lost(&self) -> LostLease {
        loop {
            let changed = self.state.signal.notified();
            tokio::pin!(changed);
            // Registered before the state is looked at, so that no change is missed.
            changed.as_mut().enable();
            if let Some(lost) = self.state.lost_lease() {
                return lost;
            }
            if self.state.released_at().is_some() {
                std::future::pending::<()>().await;
            }
            let end = self.state.local_end();
            if LocalInstant::now() >= end {
                self.state.lose(None);
                continue;
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(end.to_std().into()) => {}
            }
        }
    }

    /// Moves the deadline to the store's now + `ttl` (same fence).
    ///
    /// # Errors
    /// [`Error::Lock`] (`expired`, `not-held`, `not-owner`: the lease is lost, and
    /// [`lost`](Self::lost) completes), [`Error::Store`].
    pub async fn extend(&self, ttl: Duration) -> Result<(), Error> {
        extend(&self.locks, &self.state, ttl).await
    }

    /// The lease's end on this holder's clock.
    pub(crate) fn local_end(&self) -> LocalInstant {
        self.state.local_end()
    }

    /// An extension by `ttl` as a future of its own (it borrows nothing from the lease); it
    /// answers the lease's end on this holder's clock after it.
    pub(crate) fn extension(
        &self,
        ttl: Duration,
    ) -> impl Future<Output = Result<LocalInstant, Error>> + Send + 'static {
        let (locks, state) = (self.locks.clone(), Arc::clone(&self.state));
        async move {
            extend(&locks, &state, ttl).await?;
            Ok(state.local_end())
        }
    }

    /// Keeps the lease alive: a task extends it by its TTL every third of it, and retries a
    /// failed call every 100 ms. If an extension is refused, or this holder's clock reaches the
    /// lease's end without one, the lease is lost ([`lost`](Self::lost) completes on its own
    /// timer, whatever an extension in flight is doing). Stops at release or drop.
    pub fn keep_alive(&self) {
        let mut keeper = self.keeper.lock().unwrap_or_else(PoisonError::into_inner);
        if keeper.is_some() || self.state.is_released() {
            return;
        }
        let (locks, state) = (self.locks.clone(), Arc::clone(&self.state));
        *keeper = Some(self.locks.runtime().spawn(async move {
            let period = lock_protocol::keep_alive::extend_every(state.ttl());
            let retry = lock_protocol::keep_alive::retry_after(state.ttl());
            let mut next = period;
            loop {
                tokio::time::sleep(next).await;
                if state.is_lost() || state.is_released() {
                    return;
                }
                next = match extend(&locks, &state, state.ttl()).await {
                    Ok(()) => period,
                    Err(Error::Lock(_)) => return,
                    Err(_) => retry,
                };
            }
        }));
    }

    fn stop_keeping(&self) {
        if let Some(keeper) = self
            .keeper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            keeper.abort();
        }
    }

    /// Ends the lease (idempotent); the first waiter, if any, is handed the key. The same
    /// answers as [`crate::Lease::release`].
    ///
    /// # Errors
    /// [`Error::Lock`] with `expired` if the lease ran out first, or another lock refusal;
    /// [`Error::Store`] (the lease then ends at its deadline).
    pub async fn release(&self) -> Result<(), Error> {
        self.stop_keeping();
        release(&self.locks, &self.state).await
    }
}

async fn release(locks: &Locks, state: &LeaseState) -> Result<(), Error> {
    if !state.begin_release() {
        return Ok(());
    }
    let lost = state.loss_answer();
    let decided = locks
        .engine()
        .request(state.key(), state.release_request())
        .await;
    state.released_as(decided, lost, |r| locks.unexpected(r))
}

async fn extend(locks: &Locks, state: &LeaseState, ttl: Duration) -> Result<(), Error> {
    let decided = locks
        .engine()
        .request(state.key(), state.extension(ttl))
        .await;
    state.extended_as(decided, |r| locks.unexpected(r))
}

impl Drop for Lease {
    /// Releases the lease in a task on the runtime of its `Locks` (the drop does not wait).
    fn drop(&mut self) {
        self.stop_keeping();
        if self.state.is_released() {
            return;
        }
        let (locks, state) = (self.locks.clone(), Arc::clone(&self.state));
        // Until the release is done, a new acquire by this owner waits rather than being handed
        // this lease as "already held" and losing it to the release.
        let id = locks.releasing_dropped(state.key(), state.owner());
        self.locks.runtime().spawn(async move {
            let _ = release(&locks, &state).await;
            locks.released_dropped(state.key(), id);
        });
    }
}
