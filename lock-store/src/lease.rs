//! [`Lease`]: what a holder keeps, its guard thread (keep-alive and the lost-lock watch) and
//! the lost-lock callback, run exactly once.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crate::local::{LocalInstant, ProcessClock};

use lock_core::{Fence, Instant};

use crate::client::Client;
use crate::held::{Extended, LeaseState, LostLease};
use lock_protocol::Error;

/// A held lock. Dropping it releases it (errors ignored); [`release`](Self::release) reports
/// them.
pub struct Lease {
    locks: Client,
    state: Arc<LeaseState>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.state.key)
            .field("owner", &self.state.owner)
            .field("fence", &self.state.fence)
            .field("deadline", &self.deadline())
            .finish()
    }
}

impl Lease {
    pub(crate) fn new(locks: Client, state: LeaseState) -> Self {
        Lease {
            locks,
            state: Arc::new(state),
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

    /// When [`release`](Self::release) took effect, in the store's time (for audit logs). For a
    /// lease with a minimum hold released before it: the instant the lease stops holding its
    /// place (the core's `held-until`), when waiters are handed the key.
    #[must_use]
    pub fn released_at(&self) -> Option<Instant> {
        self.state.released_at()
    }

    /// True once the lease is known lost, or this holder's own clock passed its end: stop
    /// working on the resource. Conservative: it turns true before the store frees the key.
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }

    /// How long this holder may still believe it holds the lease, on its own clock: the time
    /// until [`is_lost`](Self::is_lost) turns true by itself unless the lease is extended
    /// (zero once that time has come, or once it is known lost). A supervisor that must stop the
    /// work in time on a clock of its own (another process, which may go on while this one is
    /// paused) is told this after each extension.
    #[must_use]
    pub fn time_left(&self) -> Duration {
        if self.state.lost.load(Ordering::SeqCst) {
            return Duration::ZERO;
        }
        self.local_end()
            .saturating_duration_since(LocalInstant::now())
    }

    /// Moves the deadline to the store's now + `ttl` (same fence).
    ///
    /// # Errors
    /// [`Error::Lock`] (`expired`, `not-held`, `not-owner`: the lease is lost, and `on_lost`
    /// runs), [`Error::Store`].
    pub fn extend(&self, ttl: Duration) -> Result<(), Error> {
        extend(&self.locks, &self.state, ttl)
    }

    /// Keeps the lease alive: a guard thread extends it by its TTL every third of it. If an
    /// extension is refused, or this holder's clock reaches the lease's end without one (the
    /// store cannot be reached), the lease is lost and `on_lost` runs.
    pub fn keep_alive(&self) {
        self.start_guard(true);
    }

    /// The lease's end on this holder's clock at the latest: when the request that granted or
    /// last extended it left this machine, plus the time that remained.
    pub(crate) fn local_end(&self) -> LocalInstant {
        self.state.local_end()
    }

    /// An extension by `ttl` to run on another thread (a store call can hang up to its bound,
    /// and the caller must keep its own time meanwhile); it answers the lease's end on this
    /// holder's clock after it.
    pub(crate) fn extension(
        &self,
        ttl: Duration,
    ) -> impl FnOnce() -> Result<LocalInstant, Error> + Send + 'static {
        let (locks, state) = (self.locks.clone(), Arc::clone(&self.state));
        move || extend(&locks, &state, ttl).map(|()| state.local_end())
    }

    /// Runs `callback` once if the lease is lost (an extension refused, or its end reached on
    /// this holder's clock without a successful extension), in the thread that found out. Not
    /// after a release. Set at once if already lost.
    pub fn on_lost(&self, callback: impl FnOnce(&LostLease) + Send + 'static) {
        *self
            .state
            .on_lost
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(callback));
        if self.state.lost.load(Ordering::SeqCst) {
            self.state.fire();
            return;
        }
        self.start_guard(false);
    }

    fn start_guard(&self, keep_alive: bool) {
        let mut guard = self.state.guard();
        guard.extend |= keep_alive;
        if guard.running || guard.stop {
            drop(guard);
            self.state.wake.notify_all();
            return;
        }
        guard.running = true;
        drop(guard);
        let locks = self.locks.clone();
        let state = Arc::clone(&self.state);
        std::thread::spawn(move || guard_thread(&locks, &state));
    }

    /// Ends the lease (idempotent: a second call answers `Ok`); the first waiter, if any, is
    /// handed the key.
    ///
    /// # Errors
    /// [`Error::Lock`] with `expired` if the lease ran out first (`on_lost` runs), or another
    /// lock refusal; [`Error::Store`] (the lease then ends at its deadline).
    ///
    /// A release whose answer was lost (the connection failed after the request was sent) is
    /// found out by reading the record again. If others wrote to it meanwhile (the next waiter
    /// was handed the key, say), the record no longer shows whether this release took effect;
    /// then it is known done if the store's clock is still before the lease's deadline (before
    /// it, only its owner's release ends a lease), and otherwise answered as the core decides
    /// on the record as it is (`expired`, `not-held` or `not-owner`: lost). The same holds for
    /// a release called again after one that failed with [`Error::Store`].
    pub fn release(&self) -> Result<(), Error> {
        release(&self.locks, &self.state)
    }
}

fn release(locks: &Client, state: &LeaseState) -> Result<(), Error> {
    if !state.begin_release() {
        return Ok(());
    }
    let lost = state.loss_answer();
    let decided = locks.request(&state.key, state.release_request());
    state.released_as(decided, lost, |r| locks.unexpected(r))
}

/// How long a `Lease` dropped inside an async runtime waits for its release before it lets the
/// release finish on its own thread (a healthy store answers within a few milliseconds).
const DROP_WAIT: Duration = Duration::from_millis(200);

impl Drop for Lease {
    /// Releases the lease. Inside an async runtime (a `Lease` dropped in async code), the
    /// release runs on a thread of its own and the drop waits for it at most 200 ms, so
    /// that the executor's thread is never held for a store that stopped answering (up to its
    /// bound), while a healthy release is done when the drop returns. A release still under
    /// way then holds back the same owner's next acquire of the key on this `Locks` (and its
    /// clones) until it is over.
    fn drop(&mut self) {
        if self.state.is_released() {
            self.state.stop();
            return;
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            self.state.stop();
            let (locks, state) = (self.locks.clone(), Arc::clone(&self.state));
            // Past the drop, the same owner's next acquire of the key waits for this release.
            let id = locks.releasing_dropped(state.key(), state.owner());
            let (done_tx, done) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("lock-store-release".into())
                .spawn(move || {
                    let _ = release(&locks, &state);
                    locks.released_dropped(state.key(), id);
                    let _ = done_tx.send(());
                });
            match spawned {
                Ok(_) => {
                    let _ = done.recv_timeout(DROP_WAIT);
                    return;
                }
                Err(_) => self.locks.released_dropped(self.state.key(), id),
            }
        }
        let _ = release(&self.locks, &self.state);
    }
}

fn extend(locks: &Client, state: &LeaseState, ttl: Duration) -> Result<(), Error> {
    let decided = locks.request(&state.key, state.extension(ttl));
    state.extended_as(decided, |r| locks.unexpected(r))
}

/// Extends (with keep-alive) every third of the TTL, retries a failed store call sooner, and
/// declares the lease lost when this holder's clock reaches its end. The extensions run on a
/// thread of their own: a store call that hangs (up to its bound) never delays the lease's end,
/// which this thread's timer alone decides.
fn guard_thread(locks: &Client, state: &Arc<LeaseState>) {
    let period = lock_protocol::keep_alive::extend_every(state.ttl());
    let retry = lock_protocol::keep_alive::retry_after(state.ttl());
    let mut next_extend = LocalInstant::now() + period;
    let mut extending = false;
    let mut guard = state.guard();
    loop {
        if guard.stop {
            return;
        }
        let now = LocalInstant::now();
        if let Some(extended) = guard.extended.take() {
            extending = false;
            next_extend = match extended {
                Extended::Done => now + period,
                // Lost (and `on_lost` run) if the refusal says so; either way no more
                // extensions, and the lease's end is still timed.
                Extended::Refused => {
                    guard.extend = false;
                    now
                }
                Extended::Failed => now + retry,
            };
        }
        let end = state.local_end();
        if state.lost.load(Ordering::SeqCst) {
            return;
        }
        if now >= end {
            drop(guard);
            state.lose(None);
            return;
        }
        let keep_alive = guard.extend && !extending;
        if keep_alive && now >= next_extend {
            extending = true;
            let (locks, state) = (locks.clone(), Arc::clone(state));
            let started = std::thread::Builder::new()
                .name("lock-store-extend".into())
                .spawn(move || {
                    let extended = match extend(&locks, &state, state.ttl) {
                        Ok(()) => Extended::Done,
                        Err(Error::Lock(_)) => Extended::Refused,
                        Err(_) => Extended::Failed,
                    };
                    state.guard().extended = Some(extended);
                    state.wake.notify_all();
                });
            if started.is_err() {
                extending = false;
                next_extend = now + retry;
            }
            continue;
        }
        let wake_at = if keep_alive {
            next_extend.min(end)
        } else {
            end
        };
        guard = state
            .wake
            .wait_timeout(guard, wake_at - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::memory::MemoryStore;
    use crate::Locks;

    #[test]
    fn a_dropped_lease_still_being_released_holds_back_its_owner_on_the_key() {
        // As when a lease dropped in async code is released on a thread of its own past the
        // drop: the same owner's next acquire must not be handed, as already held, the lease
        // that release is about to end.
        let locks = Locks::new(MemoryStore::new("held_back").unwrap());
        let ttl = Duration::from_secs(30);
        let first = locks.try_acquire("k", "a", ttl).unwrap();
        let id = locks.client.releasing_dropped("k", "a");
        let next = std::thread::scope(|s| {
            let next = s.spawn(|| locks.try_acquire("k", "a", ttl));
            // Time for a next acquire that did not wait to adopt the first lease.
            std::thread::sleep(Duration::from_millis(100));
            first.release().unwrap();
            locks.client.released_dropped("k", id);
            next.join().unwrap()
        });
        let next = next.unwrap();
        assert_ne!(next.fence(), first.fence(), "the lease being released");
        let holders = locks.inspect("k").unwrap().unwrap().holders;
        assert_eq!(holders[0].fence, next.fence());
        // Another owner, or another key, never waits for it.
        let id = locks.client.releasing_dropped("k", "a");
        assert!(locks.try_acquire("other", "a", ttl).is_ok());
        assert!(locks.try_acquire("k", "b", ttl).is_err(), "held by a");
        locks.client.released_dropped("k", id);
    }
}
