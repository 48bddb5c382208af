//! [`Lease`]: what a holder keeps, its guard thread (keep-alive and the lost-lock watch) and
//! the lost-lock callback, run exactly once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::local::LocalInstant;

use lock_core::{Fence, Grant, Instant, LockError, ReleaseOutcome, Request, Response};

use crate::clock::{millis, StoreClock};
use crate::engine::Decided;
use crate::locks::{Error, Locks};
use crate::store::StoreError;

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

type LostCallback = Box<dyn FnOnce(&LostLease) + Send>;

#[derive(Default)]
struct Guard {
    /// The guard thread runs.
    running: bool,
    /// It also extends the lease (keep-alive).
    extend: bool,
    /// Stop it (released or dropped).
    stop: bool,
    /// How the extension the guard thread started last ended (taken by the guard thread).
    extended: Option<Extended>,
}

/// How one keep-alive extension ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Extended {
    /// The deadline moved.
    Done,
    /// The store refused it: the lease is lost (and known lost).
    Refused,
    /// The store did not answer (or failed): try again soon, until the lease's end.
    Failed,
}

/// State shared by a [`Lease`] and its guard thread.
pub(crate) struct LeaseState {
    key: String,
    owner: String,
    fence: Fence,
    ttl: Duration,
    /// The lease's deadline in the store's time.
    deadline: AtomicU64,
    /// The holder's own, earlier end of the lease: when the request that granted or last
    /// extended it left this machine, plus the time that remained.
    local_end: Mutex<LocalInstant>,
    released: AtomicBool,
    /// A release was sent whose outcome is unknown (its call failed after sending it).
    release_unsure: AtomicBool,
    /// The store's time at which the release took effect (0 until then).
    released_at: AtomicU64,
    lost: AtomicBool,
    /// Why it was lost (set before `lost`).
    refusal: Mutex<Option<LockError>>,
    on_lost: Mutex<Option<LostCallback>>,
    guard: Mutex<Guard>,
    wake: Condvar,
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
        Some(refusal.clone().unwrap_or(LockError::Expired {
            deadline: Instant(self.deadline.load(Ordering::SeqCst)),
        }))
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

    fn guard(&self) -> std::sync::MutexGuard<'_, Guard> {
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
    fn fire(&self) {
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

    fn stop(&self) {
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

/// A held lock. Dropping it releases it (errors ignored); [`release`](Self::release) reports
/// them.
pub struct Lease {
    locks: Locks,
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
    pub(crate) fn new(locks: Locks, state: LeaseState) -> Self {
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

fn release(locks: &Locks, state: &LeaseState) -> Result<(), Error> {
    if !state.begin_release() {
        return Ok(());
    }
    let lost = state.loss_answer();
    let decided = locks.request(&state.key, state.release_request());
    state.released_as(decided, lost, |r| locks.unexpected(r))
}

impl LeaseState {
    /// Stops the guard; `false` if the lease is already released (nothing to send).
    pub(crate) fn begin_release(&self) -> bool {
        self.stop();
        !self.released.load(Ordering::SeqCst)
    }

    /// What a release's answer means for this lease (see [`Lease::release`]).
    /// `lost`: the lease was lost before the release was sent ([`LeaseState::loss_answer`]),
    /// which is then the answer once the store answered.
    pub(crate) fn released_as(
        &self,
        decided: Result<Decided<Response>, StoreError>,
        lost: Option<LockError>,
        unexpected: impl FnOnce(&Response) -> Error,
    ) -> Result<(), Error> {
        let decided = decided.inspect_err(|_| self.release_unsure.store(true, Ordering::SeqCst))?;
        if let Some(loss) = lost {
            // Whatever the store did with it, this holder had stopped holding the lease.
            let refusal = match &decided.reply {
                Response::Release(Err(e)) => e.clone(),
                _ => loss,
            };
            if let Response::Release(Ok(outcome)) = &decided.reply {
                self.released_at
                    .store(outcome_end(*outcome, decided.now).0, Ordering::SeqCst);
            }
            self.lose(Some(refusal.clone()));
            self.released.store(true, Ordering::SeqCst);
            self.changed();
            return Err(Error::Lock(refusal));
        }
        let unsure = decided.ambiguous || self.release_unsure.load(Ordering::SeqCst);
        let deadline = Instant(self.deadline.load(Ordering::SeqCst));
        // This release's own write took effect before the writes the re-read found: nothing
        // else ends a lease before its deadline.
        let done =
            crate::engine::release_took_effect(&decided.reply, unsure, decided.now, deadline);
        match decided.reply {
            Response::Release(Ok(outcome)) => {
                let at = outcome_end(outcome, decided.now);
                self.released_at.store(at.0, Ordering::SeqCst);
                self.released.store(true, Ordering::SeqCst);
                self.changed();
                Ok(())
            }
            Response::Release(Err(_)) if done => {
                self.released_at.store(decided.now.0, Ordering::SeqCst);
                self.released.store(true, Ordering::SeqCst);
                self.changed();
                Ok(())
            }
            Response::Release(Err(e)) => {
                self.lose(Some(e.clone()));
                self.released.store(true, Ordering::SeqCst);
                self.changed();
                Err(Error::Lock(e))
            }
            other => Err(unexpected(&other)),
        }
    }

    /// What an extension's answer means for this lease (see [`Lease::extend`]).
    pub(crate) fn extended_as(
        &self,
        decided: Result<Decided<Response>, StoreError>,
        unexpected: impl FnOnce(&Response) -> Error,
    ) -> Result<(), Error> {
        let decided = decided?;
        match decided.reply {
            Response::Extend(Ok(grant)) => {
                self.deadline.store(grant.deadline.0, Ordering::SeqCst);
                *self
                    .local_end
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    local_end(decided.clock, grant.deadline);
                self.changed();
                Ok(())
            }
            Response::Extend(Err(e)) => {
                if matches!(
                    e,
                    LockError::Expired { .. }
                        | LockError::Stolen { .. }
                        | LockError::NotHeld
                        | LockError::NotOwner
                ) {
                    self.lose(Some(e.clone()));
                }
                Err(Error::Lock(e))
            }
            other => Err(unexpected(&other)),
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
    fn changed(&self) {
        #[cfg(feature = "tokio")]
        self.signal.notify_waiters();
    }
}

/// When a released lease ends at the store's `now`: then, or at the end of its minimum hold
/// (it keeps its place until then).
fn outcome_end(outcome: ReleaseOutcome, now: Instant) -> Instant {
    match outcome {
        ReleaseOutcome::Released => now,
        ReleaseOutcome::HeldUntil { until } => until,
    }
}

/// How long a `Lease` dropped inside an async runtime waits for its release before it lets the
/// release finish on its own thread (a healthy store answers within a few milliseconds).
const DROP_WAIT: Duration = Duration::from_millis(200);

impl Drop for Lease {
    /// Releases the lease. Inside an async runtime (a `Lease` dropped in async code), the
    /// release runs on a thread of its own and the drop waits for it at most 200 ms, so
    /// that the executor's thread is never held for a store that stopped answering (up to its
    /// bound), while a healthy release is done when the drop returns.
    fn drop(&mut self) {
        if self.state.is_released() {
            self.state.stop();
            return;
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            self.state.stop();
            let (locks, state) = (self.locks.clone(), Arc::clone(&self.state));
            let (done_tx, done) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("lock-store-release".into())
                .spawn(move || {
                    let _ = release(&locks, &state);
                    let _ = done_tx.send(());
                });
            if spawned.is_ok() {
                let _ = done.recv_timeout(DROP_WAIT);
                return;
            }
        }
        let _ = release(&self.locks, &self.state);
    }
}

fn extend(locks: &Locks, state: &LeaseState, ttl: Duration) -> Result<(), Error> {
    let decided = locks.request(&state.key, state.extension(ttl));
    state.extended_as(decided, |r| locks.unexpected(r))
}

/// Where a holder stops believing in its lease ending at `deadline` (store's time), on its own
/// clock: the first instant at which the store's clock may have reached it (see
/// [`StoreClock::earliest_local`]), so before any other client can be handed the key. At once
/// if the decision carried no clock (never with the store's time, which `Locks` always uses).
pub(crate) fn local_end(clock: Option<StoreClock>, deadline: Instant) -> LocalInstant {
    clock.map_or_else(LocalInstant::now, |c| c.earliest_local(deadline))
}

/// Extends (with keep-alive) every third of the TTL, retries a failed store call sooner, and
/// declares the lease lost when this holder's clock reaches its end. The extensions run on a
/// thread of their own: a store call that hangs (up to its bound) never delays the lease's end,
/// which this thread's timer alone decides.
fn guard_thread(locks: &Locks, state: &Arc<LeaseState>) {
    let period = crate::keep_alive::extend_every(state.ttl());
    let retry = crate::keep_alive::retry_after(state.ttl());
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
    use super::*;

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
