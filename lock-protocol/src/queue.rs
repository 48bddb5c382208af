//! An `acquire` with a wait, sans IO: [`Acquiring`] says what to do next (ask for the key,
//! renew the place in its queue, look whether the key was handed over, or nap) and is handed
//! the answers. `lock-store`'s blocking `Locks` and async
//! `aio::Locks` drive the same machine, so that they wait, renew, time out
//! and give up on a lost connection alike; neither decides anything of the lock (the core does,
//! through the engines).
//!
//! The rules it keeps (see `Locks::acquire`):
//! - A waiter whose wait is longer than [`WAIT_ALIVE`] queues with the end of its whole wait and
//!   [`AcquireOptions::wait_alive`](lock_core::AcquireOptions::wait_alive) set to
//!   [`WAIT_ALIVE`]: the core keeps its place only [`WAIT_ALIVE`] past its last renewal
//!   (`renew-wait`), and inspection shows the wait it asked for. It renews when less than two
//!   thirds of that remain, so a waiter that dies leaves the queue within [`WAIT_ALIVE`].
//! - It looks at its key at the key's next deadline, at least every [`WATCHED_POLL`] when the
//!   store tells it of hand-offs, and every `poll` when it cannot.
//! - A store that fails while it waits does not end the wait: it tries again every `poll` until
//!   the wait is over on this machine's clock.
//! - A hand-off that ended before it looked, or a place lost to a late renewal, queues it again
//!   (at the back) while time remains.
//! - **Giving up** ([`Acquiring::give_up`], or an error that ends the wait while queued) is a
//!   phase of its own with one end: this attempt leaves the key neither queued nor held. It
//!   cancels its wait first; only if the store answers that it no longer waits does it look, and
//!   a lease the key was handed meanwhile is released (its fence is spent; the next waiter is
//!   handed the key at once). Cancelling first is what makes it sound: once the cancel is
//!   answered, no hand-off to this attempt can land any more, so the look that follows sees the
//!   last word. (Looking first, then cancelling, strands the key when the hand-off lands between
//!   the two.) A grant the caller never took is released the same way.

use std::sync::Arc;
use std::time::Duration;

use crate::kinds::OwnedOptions;
use crate::local::LocalInstant;

use lock_core::{AcquireOutcome, Fence, Grant, Instant, KeyInfo, LockError, Request, Response};

use crate::clock::{millis, StoreClock};
use crate::decided::Decided;
use crate::error::Error;
use crate::error::StoreError;
use crate::holding::release_took_effect;

/// How far ahead a waiter keeps its place alive: it queues with a wait deadline at most this far
/// ahead and renews it (`renew-wait`) while it waits, so a waiter whose process dies leaves the
/// queue within this time and is never handed the key.
pub const WAIT_ALIVE: Duration = Duration::from_secs(2);

/// With a store that announces hand-offs, a waiter still looks by itself at least this often
/// (a notice can be lost).
pub const WATCHED_POLL: Duration = Duration::from_secs(1);

/// A waiter renews when less than this remains of its kept-alive wait.
const RENEW_WHEN_LEFT: u64 = WAIT_ALIVE.as_millis() as u64 * 2 / 3;

/// Where the core keeps a queued wait alive to when it was queued or renewed at the store's
/// `now`: [`WAIT_ALIVE`] ahead, never past `until` (the end of the whole wait). The core decides
/// it (see [`wait_alive`]); the waiter computes it only to know when to renew.
fn kept_alive(until: Instant, now: Instant) -> Instant {
    until.min(now.saturating_add(millis(WAIT_ALIVE)))
}

/// The [`AcquireOptions::wait_alive`](lock_core::AcquireOptions::wait_alive) of a wait that ends
/// at `until`, queued at the store's `now`: [`WAIT_ALIVE`] when the wait is longer (the place is
/// then kept by renewals), else none (the place is kept for the whole wait, and a plain request
/// stays plain).
fn wait_alive(until: Instant, now: Instant) -> lock_core::Duration {
    match until.0.saturating_sub(now.0) > millis(WAIT_ALIVE).0 {
        true => millis(WAIT_ALIVE),
        false => lock_core::Duration::ZERO,
    }
}

/// The `renew-wait` of [`Want::Renew`] for `owner`, whose whole wait ends at `until` (see
/// [`Acquiring::until`]), at the store's `now`: it names the end of the whole wait, and the core
/// keeps the place [`WAIT_ALIVE`] ahead (the waiter's `wait_alive`). A driver may send it as it
/// is, or with the renewals of other callers on the same key (one write for all).
pub fn renew_wait<'a>(key: &'a str, owner: &'a str, until: Instant, now: Instant) -> Request<'a> {
    Request::RenewWait {
        key,
        owner,
        wait_deadline: until,
        now,
    }
}

/// What the driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Send [`Acquiring::request`] (an acquire, or a try-acquire when no wait remains) and hand
    /// the answer to [`Acquiring::asked`].
    Ask,
    /// Send [`Acquiring::request`] (a `renew-wait`) and hand the answer to
    /// [`Acquiring::renewed`].
    Renew,
    /// Inspect the key and hand the answer to [`Acquiring::looked`].
    Look,
    /// Wait this long, or until the notice of this caller's hand-off, then ask again
    /// ([`Acquiring::want`]).
    Nap(Duration),
    /// Wait this long (a store call failed), then ask again.
    Pause(Duration),
    /// Giving up: send [`Acquiring::request`] (a `cancel-wait`, or the `release` of a lease the
    /// key was handed meanwhile) and hand the answer to [`Acquiring::left`].
    Leave,
}

/// A grant this caller holds: what its lease is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Granted {
    /// The lease's fence and deadline.
    pub grant: Grant,
    /// What the client knew of the store's clock when it was decided.
    pub clock: Option<StoreClock>,
}

/// The request of a steal of `key` for `owner` (see `Locks::steal`), at the store's `now`.
pub fn steal_request<'a>(
    key: &'a str,
    owner: &'a str,
    ttl: Duration,
    options: lock_core::AcquireOptions<'a>,
) -> impl Fn(Instant) -> Request<'a> + Send + Sync + 'a {
    let ttl = millis(ttl);
    move |now| Request::Steal {
        key,
        owner,
        ttl,
        options,
        now,
    }
}

/// What a steal's answer gives its caller: the grant (a steal never queues), or the refusal.
///
/// # Errors
/// [`Error::Lock`], or the decider's unexpected answer.
pub fn stolen(
    decided: Decided<Response>,
    unexpected: impl FnOnce(&Response) -> Error,
) -> Result<Granted, Error> {
    match decided.reply {
        Response::Acquire(Ok(AcquireOutcome::Acquired(grant))) => Ok(Granted {
            grant,
            clock: decided.clock,
        }),
        Response::Acquire(Err(e)) => Err(Error::Lock(e)),
        other => Err(unexpected(&other)),
    }
}

/// What a waiting caller asks next (an ask or a renewal of its place), apart from its key, its
/// owner and the store's time, which it is decided at: an acquire queued with a short wait
/// deadline, a try-acquire once no wait remains, or a renewal of its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asking {
    ttl: lock_core::Duration,
    wait: lock_core::Duration,
    until: Option<Instant>,
    in_line: bool,
    options: Arc<OwnedOptions>,
}

impl Asking {
    /// The request for `key` and `owner` at the store's `now`.
    pub fn request<'a>(&'a self, key: &'a str, owner: &'a str, now: Instant) -> Request<'a> {
        ask(
            key,
            owner,
            self.ttl,
            self.wait,
            self.until,
            self.in_line,
            &self.options,
            now,
        )
    }
}

/// The request of an ask or a renewal (see [`Asking`]). A plain exclusive acquire is sent as
/// the plain requests, which every client version knows; any option makes it `acquire-with`.
#[allow(clippy::too_many_arguments)] // the fields of `Asking`, borrowed from where they live
fn ask<'a>(
    key: &'a str,
    owner: &'a str,
    ttl: lock_core::Duration,
    wait: lock_core::Duration,
    until: Option<Instant>,
    in_line: bool,
    options: &'a OwnedOptions,
    now: Instant,
) -> Request<'a> {
    let until = until.unwrap_or_else(|| now.saturating_add(wait));
    if in_line {
        return renew_wait(key, owner, until, now);
    }
    // Queued with the whole wait, its place kept alive by renewals while this caller lives
    // (`wait_alive`); `now` itself when no wait remains (a try-acquire).
    let wait_deadline = until.max(now);
    let options = lock_core::AcquireOptions {
        wait_alive: wait_alive(until, now),
        ..options.core()
    };
    if !options.is_plain() {
        return Request::AcquireWith {
            key,
            owner,
            ttl,
            wait_deadline,
            options,
            now,
        };
    }
    if until <= now {
        return Request::TryAcquire {
            key,
            owner,
            ttl,
            now,
        };
    }
    Request::Acquire {
        key,
        owner,
        ttl,
        wait_deadline,
        now,
    }
}

/// Where the call is.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Asking for the key (first, or again after its place was lost).
    Ask,
    /// Queued: renewing, napping and looking.
    InLine(Line),
    /// A store call failed in line: pause, then go on.
    Pause(Line),
    /// Handed the key: the grant was given to the driver (a give-up now releases it).
    Granted(Fence),
    /// This owner holds the key under another attempt (not adopted): nap this long, then ask
    /// again.
    Held(Duration),
    /// Giving up: leaving nothing behind (see the module's documentation).
    Leaving(Leaving),
}

/// Where a give-up is.
#[derive(Clone, Copy, Debug)]
struct Leaving {
    step: LeaveStep,
    /// A failed call is tried again after a pause until this local instant; `None`: once only
    /// (the wait ended on a store failure: the store is not expected to answer).
    retry_until: Option<LocalInstant>,
    /// The last call failed: pause before the next.
    paused: bool,
}

/// The next call of a give-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeaveStep {
    /// `cancel-wait`: answered, no hand-off to this attempt can land any more.
    Cancel,
    /// The cancel found no wait: was the key handed to this attempt?
    Look,
    /// It was: release that lease.
    Release(Fence),
}

/// A queued caller's view of its key.
#[derive(Clone, Copy, Debug)]
struct Line {
    /// The store's time of the last answer.
    now: Instant,
    /// The key's next change by time alone, if any.
    next: Option<Instant>,
    /// Where this caller's kept-alive wait ends (store's time).
    alive: Instant,
    /// Look at once (a notice may have been missed) instead of napping.
    look_first: bool,
    /// The last nap is over: look.
    napped: bool,
    /// The last nap lasts to the renewal: renew after it rather than look.
    renew_after_nap: bool,
    /// Past this local instant a failing store ends the wait.
    give_up: LocalInstant,
}

/// One `acquire` of `key` for `owner` (see the module's documentation).
pub struct Acquiring {
    key: String,
    owner: String,
    ttl: lock_core::Duration,
    wait: lock_core::Duration,
    /// The longest a waiter without notices naps, and the pause after a failed call.
    poll: Duration,
    /// When the whole wait is over, in the store's time (set by the first answer).
    until: Option<Instant>,
    /// The driver hears this caller's hand-off notices.
    watched: bool,
    phase: Phase,
    /// What it asks for beyond a plain exclusive lease.
    options: Arc<OwnedOptions>,
    /// What a give-up under way ends with.
    ending: Option<Error>,
    /// The fence of a lease this attempt was handed and released while giving up.
    released: Option<Fence>,
    /// Whether a lease its owner already holds (`already-held` at its ask) is taken as this
    /// attempt's (see [`Acquiring::adopt_held`]).
    adopt: bool,
}

impl Acquiring {
    /// An acquire of `key` for `owner` for `ttl`, waiting up to `wait`; `poll` is the longest
    /// nap without notices.
    #[cfg(test)]
    pub fn new(key: &str, owner: &str, ttl: Duration, wait: Duration, poll: Duration) -> Self {
        Acquiring::with_options(key, owner, ttl, wait, poll, OwnedOptions::default())
    }

    /// An acquire of `key` for `owner` for `ttl`, waiting up to `wait`, with `options`; `poll` is
    /// the longest nap without notices.
    pub fn with_options(
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        poll: Duration,
        options: OwnedOptions,
    ) -> Self {
        Acquiring {
            key: key.to_owned(),
            owner: owner.to_owned(),
            ttl: millis(ttl),
            wait: millis(wait),
            poll,
            until: None,
            watched: false,
            phase: Phase::Ask,
            options: Arc::new(options),
            ending: None,
            released: None,
            adopt: true,
        }
    }

    /// Whether a lease its owner already holds, found by this attempt's ask (`already-held`),
    /// is taken as this attempt's (`true`, the default) or treated as another holder's: the
    /// attempt then asks again when that lease can have ended (its deadline), while its wait
    /// lasts, and answers `held` when the wait is over. For owners whose id a restarted or
    /// duplicated process reuses: no fence then serves two runs or terms. A lease handed to
    /// this attempt while it waited in line, or granted by an ask whose answer was lost, is
    /// its own either way.
    pub fn adopt_held(&mut self, adopt: bool) {
        self.adopt = adopt;
    }

    /// When the whole wait is over, in the store's time (once the first answer came).
    pub fn until(&self) -> Instant {
        self.until.unwrap_or(Instant::ZERO)
    }

    /// The waiter.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The caller is queued: it renews, naps and looks (not while asking, once handed the key,
    /// or while giving up).
    pub fn in_line(&self) -> bool {
        matches!(self.phase, Phase::InLine(_) | Phase::Pause(_))
    }

    /// The fence of a lease this attempt was handed and released while giving up (its fence is
    /// spent), if any.
    pub fn released(&self) -> Option<Fence> {
        self.released
    }

    /// The caller gives up at local instant `t` (it stopped waiting: a dropped future, an
    /// aborted signal, a signal to a command), and the attempt is to end with `reason`. Asking,
    /// with no call in flight, nothing is left of it: `Err(reason)` at once. Queued, or handed
    /// a grant the caller did not take, it goes on with the give-up's calls ([`Want::Leave`],
    /// [`Want::Look`], [`Want::Pause`]) until a step answers `Err(reason)`: then the key holds
    /// nothing of this attempt (its wait cancelled, the lease it was handed released), unless
    /// the store could not be reached for [`WAIT_ALIVE`] (its place then lapses by itself, and a
    /// lease it was handed ends at its TTL). Giving up twice keeps the first give-up.
    ///
    /// # Errors
    /// `reason`, when nothing is left to do.
    pub fn give_up(&mut self, reason: Error, t: LocalInstant) -> Result<(), Error> {
        let step = match self.phase {
            Phase::Ask | Phase::Held(_) => return Err(reason),
            Phase::Leaving(_) => return Ok(()),
            Phase::InLine(_) | Phase::Pause(_) => LeaveStep::Cancel,
            Phase::Granted(fence) => LeaveStep::Release(fence),
        };
        self.leave(reason, step, Some(t + WAIT_ALIVE));
        Ok(())
    }

    /// Starts leaving at `step`, to end with `reason`.
    fn leave(&mut self, reason: Error, step: LeaveStep, retry_until: Option<LocalInstant>) {
        self.ending = Some(reason);
        self.phase = Phase::Leaving(Leaving {
            step,
            retry_until,
            paused: false,
        });
    }

    /// A step's result: an error that ends the wait while this caller may still be queued
    /// leaves first (trying each call once); a grant is noted, so that a give-up releases it.
    fn settle(&mut self, result: Result<Option<Granted>, Error>) -> Result<Option<Granted>, Error> {
        match result {
            Ok(Some(granted)) => {
                self.phase = Phase::Granted(granted.grant.fence);
                Ok(Some(granted))
            }
            // The core said this caller waits no more: nothing to leave.
            Err(Error::WaitTimedOut) => Err(Error::WaitTimedOut),
            Err(e) if self.in_line() => {
                self.leave(e, LeaveStep::Cancel, None);
                Ok(None)
            }
            other => other,
        }
    }

    /// The give-up is over: its reason.
    fn left_now(&mut self) -> Result<Option<Granted>, Error> {
        self.phase = Phase::Ask;
        Err(self.ending.take().unwrap_or(Error::WaitTimedOut))
    }

    /// A call of the give-up failed at local instant `t`: pause and try it again while it may
    /// (see [`Acquiring::give_up`]), else the give-up is over.
    fn leave_failed(&mut self, t: LocalInstant) -> Result<Option<Granted>, Error> {
        if let Phase::Leaving(leaving) = &mut self.phase {
            if leaving.retry_until.is_some_and(|until| t < until) {
                leaving.paused = true;
                return Ok(None);
            }
        }
        self.left_now()
    }

    /// The answer to [`Want::Leave`] at local instant `t`. `Ok(None)` while the give-up goes
    /// on.
    ///
    /// # Errors
    /// The give-up's reason, once it is over.
    pub fn left(
        &mut self,
        decided: Result<Decided<Response>, StoreError>,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let Phase::Leaving(leaving) = &mut self.phase else {
            return Ok(None);
        };
        let decided = match decided {
            Ok(decided) => decided,
            Err(_) => return self.leave_failed(t),
        };
        match (leaving.step, &decided.reply) {
            // No wait to cancel: the key may have been handed to it before the cancel (or by
            // the cancel's own advance of time). Look: from now on nothing can hand it over.
            (LeaveStep::Cancel, Response::Done(Err(LockError::NotWaiting))) => {
                leaving.step = LeaveStep::Look;
                Ok(None)
            }
            (LeaveStep::Release(fence), Response::Release(reply)) => {
                // An ambiguous release that took effect counts as released.
                let unsure = decided.ambiguous;
                let took = reply.is_ok()
                    || release_took_effect(&decided.reply, unsure, decided.now, Instant::MAX);
                if took {
                    self.released = Some(fence);
                }
                self.left_now()
            }
            // Cancelled (or refused for good): nothing of this attempt is left.
            _ => self.left_now(),
        }
    }

    /// The driver now hears (`true`) or no longer hears (`false`) this caller's hand-off
    /// notices. A hand-off before it listened was not heard: it looks once at once.
    pub fn watching(&mut self, watched: bool) {
        if watched && !self.watched {
            if let Phase::InLine(line) = &mut self.phase {
                line.look_first = true;
            }
        }
        self.watched = watched;
    }

    /// What to do next.
    pub fn want(&mut self) -> Want {
        let until = self.until.unwrap_or(Instant::ZERO);
        let line = match &mut self.phase {
            Phase::Ask | Phase::Granted(_) => return Want::Ask,
            Phase::Held(nap) => {
                let nap = *nap;
                self.phase = Phase::Ask;
                return Want::Nap(nap);
            }
            Phase::Leaving(leaving) => {
                if std::mem::take(&mut leaving.paused) {
                    return Want::Pause(self.poll);
                }
                return match leaving.step {
                    LeaveStep::Look => Want::Look,
                    LeaveStep::Cancel | LeaveStep::Release(_) => Want::Leave,
                };
            }
            Phase::Pause(line) => {
                let line = *line;
                self.phase = Phase::InLine(line);
                return Want::Pause(self.poll);
            }
            Phase::InLine(line) => line,
        };
        if line.alive < until && line.alive.0.saturating_sub(line.now.0) < RENEW_WHEN_LEFT {
            return Want::Renew;
        }
        if line.napped {
            line.napped = false;
            // A nap that lasted to the renewal renews: its answer says all a look would.
            if std::mem::take(&mut line.renew_after_nap) {
                return Want::Renew;
            }
            return Want::Look;
        }
        if line.look_first {
            line.look_first = false;
            return Want::Look;
        }
        line.napped = true;
        // Nap to the key's next change (a deadline) or the next renewal, and at most `poll`;
        // with notices, until the store says the key was handed to this owner, at most
        // WATCHED_POLL (a notice can be lost).
        let to_next = line
            .next
            .map_or(u64::MAX, |t| t.0.saturating_sub(line.now.0));
        let to_renew = if line.alive < until {
            line.alive
                .0
                .saturating_sub(line.now.0)
                .saturating_sub(RENEW_WHEN_LEFT)
        } else {
            u64::MAX
        };
        let most = if self.watched {
            WATCHED_POLL
        } else {
            self.poll
        };
        let most_ms = u64::try_from(most.as_millis()).unwrap_or(u64::MAX);
        line.renew_after_nap = to_renew <= to_next.min(most_ms);
        Want::Nap(most.min(Duration::from_millis(to_next.min(to_renew).max(1))))
    }

    /// The request of [`Want::Ask`], [`Want::Renew`] or [`Want::Leave`] at the store's `now`.
    pub fn request(&self, now: Instant) -> Request<'_> {
        let (key, owner) = (self.key.as_str(), self.owner.as_str());
        if let Phase::Leaving(leaving) = &self.phase {
            return match leaving.step {
                LeaveStep::Release(fence) => Request::Release {
                    key,
                    owner,
                    fence,
                    now,
                },
                LeaveStep::Cancel | LeaveStep::Look => Request::CancelWait { key, owner, now },
            };
        }
        let in_line = self.in_line();
        ask(
            &self.key,
            &self.owner,
            self.ttl,
            self.wait,
            self.until,
            in_line,
            &self.options,
            now,
        )
    }

    /// What [`Acquiring::request`] asks, apart from the key, the owner and the store's time.
    pub fn asking(&self) -> Asking {
        Asking {
            ttl: self.ttl,
            wait: self.wait,
            until: self.until,
            in_line: self.in_line(),
            options: Arc::clone(&self.options),
        }
    }

    /// What [`Want::Leave`] sends, apart from the key, the owner and the store's time: the
    /// `release` of the lease with this fence, or (`None`) a `cancel-wait`.
    pub fn leave_fence(&self) -> Option<Fence> {
        match self.phase {
            Phase::Leaving(Leaving {
                step: LeaveStep::Release(fence),
                ..
            }) => Some(fence),
            _ => None,
        }
    }

    /// The answer to [`Want::Ask`]: the grant, or `None` when queued.
    ///
    /// # Errors
    /// [`Error::AlreadyWaiting`], [`Error::Lock`], or the decider's unexpected answer.
    pub fn asked(
        &mut self,
        decided: Decided<Response>,
        unexpected: impl FnOnce(&Response) -> Error,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let result = self.asked_inner(decided, unexpected, t);
        self.settle(result)
    }

    fn asked_inner(
        &mut self,
        decided: Decided<Response>,
        unexpected: impl FnOnce(&Response) -> Error,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let until = *self
            .until
            .get_or_insert(decided.now.saturating_add(self.wait));
        match decided.reply {
            // This owner holds the key under another attempt (an earlier process with the same
            // id, say), and this one does not adopt it: as another holder's lease.
            Response::Acquire(Ok(AcquireOutcome::AlreadyHeld(grant)))
                if !self.adopt && !decided.ambiguous =>
            {
                let now = decided.now;
                if now >= until {
                    return Err(Error::Lock(LockError::Held {
                        deadline: grant.deadline,
                    }));
                }
                let nap = grant.deadline.min(until).0.saturating_sub(now.0).max(1);
                self.phase = Phase::Held(Duration::from_millis(nap));
                Ok(None)
            }
            Response::Acquire(Ok(
                AcquireOutcome::Acquired(grant) | AcquireOutcome::AlreadyHeld(grant),
            )) => Ok(Some(Granted {
                grant,
                clock: decided.clock,
            })),
            // Decided again after this ask's own write lost its answer (and the record changed
            // since): the wait found is the one this ask queued.
            Response::Acquire(Ok(AcquireOutcome::AlreadyWaiting { .. })) if !decided.ambiguous => {
                Err(Error::AlreadyWaiting)
            }
            Response::Acquire(Ok(
                AcquireOutcome::Queued { .. } | AcquireOutcome::AlreadyWaiting { .. },
            )) => {
                let now = decided.now;
                self.phase = Phase::InLine(Line {
                    now,
                    next: decided.next_deadline,
                    alive: kept_alive(until, now),
                    look_first: false,
                    napped: false,
                    renew_after_nap: false,
                    give_up: t + Duration::from_millis(until.0.saturating_sub(now.0)),
                });
                Ok(None)
            }
            Response::Acquire(Err(e)) => Err(Error::Lock(e)),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Want::Ask`] failed. A lost answer ([`StoreError::Lost`]: the
    /// request may have landed, queueing this caller or handing it the key) or a write that the
    /// replicas did not acknowledge ([`StoreError::Unreplicated`]: it landed, and a failover may
    /// lose it) leaves the key first (a grant found there is released), trying each call once,
    /// then ends with the failure. A store that recovers after a change
    /// of authority ([`StoreError::Recovering`]: it wrote nothing) is waited out while the wait
    /// lasts: the ask is sent again when the recovery ends, or when the wait does. Any other
    /// failure ends at once (the request never reached the store).
    ///
    /// # Errors
    /// [`Error::Store`] with `e`, when nothing is left to do.
    pub fn ask_failed(&mut self, e: StoreError) -> Result<Option<Granted>, Error> {
        let landed = matches!(e, StoreError::Lost { .. } | StoreError::Unreplicated { .. });
        if landed && matches!(self.phase, Phase::Ask) {
            self.leave(Error::Store(e), LeaveStep::Cancel, None);
            return Ok(None);
        }
        if let (StoreError::Recovering { until, at, .. }, Phase::Ask) = (&e, self.phase) {
            let wait_over = *self.until.get_or_insert(at.saturating_add(self.wait));
            if *at < wait_over {
                let nap = (*until).min(wait_over).0.saturating_sub(at.0).max(1);
                self.phase = Phase::Held(Duration::from_millis(nap));
                return Ok(None);
            }
        }
        Err(Error::Store(e))
    }

    /// The answer to [`Want::Renew`]: the grant if this caller was handed the key meanwhile.
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`], [`Error::Lock`], [`Error::Store`] (a failure past the wait), or
    /// the decider's unexpected answer.
    pub fn renewed(
        &mut self,
        decided: Result<Decided<Response>, StoreError>,
        unexpected: impl FnOnce(&Response) -> Error,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let result = self.renewed_inner(decided, unexpected, t);
        self.settle(result)
    }

    fn renewed_inner(
        &mut self,
        decided: Result<Decided<Response>, StoreError>,
        unexpected: impl FnOnce(&Response) -> Error,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let until = self.until.unwrap_or(Instant::ZERO);
        let decided = match decided {
            Ok(decided) => decided,
            Err(e) => return self.ride_out(e, t).map(|()| None),
        };
        let Phase::InLine(line) = &mut self.phase else {
            return Ok(None);
        };
        line.now = decided.now;
        line.next = decided.next_deadline;
        match decided.reply {
            Response::Acquire(Ok(AcquireOutcome::AlreadyHeld(grant))) => Ok(Some(Granted {
                grant,
                clock: decided.clock,
            })),
            Response::Acquire(Ok(AcquireOutcome::AlreadyWaiting { .. })) => {
                line.alive = kept_alive(until, decided.now);
                Ok(None)
            }
            Response::Acquire(Err(LockError::NotWaiting)) => self.not_queued(decided.now),
            Response::Acquire(Err(e)) => Err(Error::Lock(e)),
            other => Err(unexpected(&other)),
        }
    }

    /// The answer to [`Want::Look`]: the grant if this caller holds the key.
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`], [`Error::Lock`], [`Error::Store`] (a failure past the wait).
    pub fn looked(
        &mut self,
        decided: Result<Decided<Result<Option<KeyInfo>, LockError>>, StoreError>,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        if matches!(self.phase, Phase::Leaving(_)) {
            return self.looked_leaving(decided, t);
        }
        let result = self.looked_inner(decided, t);
        self.settle(result)
    }

    /// The look of a give-up (its cancel found no wait): a live lease of this owner there was
    /// handed to this attempt (nothing else could hand this owner the key while it waited, and
    /// nothing can now), so it is released; anything else, and the give-up is over.
    fn looked_leaving(
        &mut self,
        decided: Result<Decided<Result<Option<KeyInfo>, LockError>>, StoreError>,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let decided = match decided {
            Ok(decided) => decided,
            Err(_) => return self.leave_failed(t),
        };
        let owner = self.owner.as_str();
        let held = (decided.reply.ok().flatten())
            .and_then(|info| {
                (info.holders.into_iter()).find(|h| h.owner == owner && h.ended.is_none())
            })
            .map(|h| h.fence);
        match (held, &mut self.phase) {
            (Some(fence), Phase::Leaving(leaving)) => {
                leaving.step = LeaveStep::Release(fence);
                Ok(None)
            }
            _ => self.left_now(),
        }
    }

    fn looked_inner(
        &mut self,
        decided: Result<Decided<Result<Option<KeyInfo>, LockError>>, StoreError>,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let decided = match decided {
            Ok(decided) => decided,
            Err(e) => {
                self.ride_out(e, t)?;
                // Look again after the pause, not at the next notice: the one that woke this
                // look (a hand-off with a short TTL, say) is spent.
                if let Phase::Pause(line) = &mut self.phase {
                    line.look_first = true;
                }
                return Ok(None);
            }
        };
        let owner = self.owner.as_str();
        let Phase::InLine(line) = &mut self.phase else {
            return Ok(None);
        };
        line.now = decided.now;
        line.next = decided.next_deadline;
        let info = decided.reply.map_err(Error::Lock)?;
        if let Some(holder) = info
            .as_ref()
            .and_then(|i| (i.holders.iter()).find(|h| h.owner == owner && h.ended.is_none()))
        {
            let grant = Grant {
                fence: holder.fence,
                deadline: holder.deadline,
            };
            return Ok(Some(Granted {
                grant,
                clock: decided.clock,
            }));
        }
        let waiting = info
            .as_ref()
            .is_some_and(|i| i.waiters.iter().any(|w| w.owner == owner));
        if waiting {
            return Ok(None);
        }
        self.not_queued(decided.now)
    }

    /// Not queued any more: the whole wait is over, or only its kept-alive part (a late
    /// renewal) or a hand-off that ended unseen: then queue again.
    fn not_queued(&mut self, now: Instant) -> Result<Option<Granted>, Error> {
        if now >= self.until.unwrap_or(Instant::ZERO) {
            return Err(Error::WaitTimedOut);
        }
        self.phase = Phase::Ask;
        Ok(None)
    }

    /// A store call failed in line: pause and go on while the wait lasts on this machine's
    /// clock; a lost connection, a store that recovers (nothing can be handed on until it
    /// has) and a renewal the replicas did not acknowledge are retried, anything else ends the
    /// wait.
    fn ride_out(&mut self, e: StoreError, t: LocalInstant) -> Result<(), Error> {
        match (e, self.phase) {
            (
                StoreError::Lost { .. }
                | StoreError::Connect { .. }
                | StoreError::Recovering { .. }
                | StoreError::Unreplicated { .. },
                Phase::InLine(line),
            ) if t < line.give_up => {
                self.phase = Phase::Pause(line);
                Ok(())
            }
            (e, _) => Err(Error::Store(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::{Fence, HolderInfo, WaiterInfo};

    const KEY: &str = "job";
    const ME: &str = "b";

    fn decided<R>(reply: R, now: u64, next: Option<u64>) -> Decided<R> {
        Decided {
            reply,
            events: Vec::new(),
            now: Instant(now),
            next_deadline: next.map(Instant),
            clock: None,
            ambiguous: false,
        }
    }

    fn unexpected(r: &Response) -> Error {
        panic!("unexpected {r:?}")
    }

    fn queued(now: u64, next: u64) -> Decided<Response> {
        decided(
            Response::Acquire(Ok(AcquireOutcome::Queued { position: 1 })),
            now,
            Some(next),
        )
    }

    /// A caller that waits up to 10 s for a 5 s lease and pauses 50 ms after a lost connection.
    fn acquiring() -> Acquiring {
        Acquiring::new(
            KEY,
            ME,
            Duration::from_secs(5),
            Duration::from_secs(10),
            Duration::from_millis(50),
        )
    }

    /// [`acquiring`], queued by its first call at 10 000 ms; the key changes next at `next`.
    fn waiting(next: u64) -> Acquiring {
        let mut a = acquiring();
        assert!(a
            .asked(
                queued(10_000, next),
                unexpected,
                LocalInstant::from_nanos(1_000_000_000)
            )
            .unwrap()
            .is_none());
        a
    }

    fn info(holder: &str, waiters: &[&str]) -> Option<KeyInfo> {
        Some(KeyInfo {
            holders: vec![HolderInfo {
                owner: holder.into(),
                fence: Fence(7),
                deadline: Instant(50_000),
                mode: lock_core::Mode::Exclusive,
                metadata: String::new(),
                min_until: None,
                ended: None,
                granted_at: Some(Instant(0)),
            }],
            waiters: waiters
                .iter()
                .map(|w| WaiterInfo {
                    owner: (*w).into(),
                    wait_deadline: Instant(12_000),
                    wait_end: Instant(20_000),
                    ttl: lock_core::Duration(5_000),
                    mode: lock_core::Mode::Exclusive,
                    metadata: String::new(),
                })
                .collect(),
            permits: 0,
        })
    }

    #[test]
    fn a_queued_caller_naps_to_the_next_deadline_looks_and_is_handed_the_key() {
        let mut a = acquiring();
        assert_eq!(a.want(), Want::Ask);
        // It asks for its whole wait (10 s), its place kept alive by renewals every WAIT_ALIVE.
        let Request::AcquireWith {
            wait_deadline,
            options,
            ..
        } = a.request(Instant(10_000))
        else {
            panic!("an acquire-with");
        };
        assert_eq!(wait_deadline, Instant(20_000));
        assert_eq!(options.wait_alive, millis(WAIT_ALIVE));
        assert_eq!(
            lock_core::AcquireOptions {
                wait_alive: lock_core::Duration::ZERO,
                ..options
            },
            lock_core::AcquireOptions::default()
        );
        // A wait within WAIT_ALIVE is kept whole: a plain acquire, with no renewals to send.
        let short = Acquiring::new(
            KEY,
            ME,
            Duration::from_secs(5),
            WAIT_ALIVE,
            Duration::from_millis(50),
        );
        assert!(matches!(
            short.request(Instant(10_000)),
            Request::Acquire {
                wait_deadline: Instant(12_000),
                ..
            }
        ));
        assert!(a
            .asked(
                queued(10_000, 10_020),
                unexpected,
                LocalInstant::from_nanos(1_000_000_000)
            )
            .unwrap()
            .is_none());
        assert!(a.in_line());
        // No notices: at most `poll`, and here the key changes in 20 ms.
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(20)));
        assert_eq!(a.want(), Want::Look);
        assert!(a
            .looked(
                Ok(decided(Ok(info("a", &[ME])), 10_020, None)),
                LocalInstant::from_nanos(1_000_000_000)
            )
            .unwrap()
            .is_none());
        a.watching(true);
        // Listening now: a notice sent before was not heard, so it looks at once.
        assert_eq!(a.want(), Want::Look);
        let got = a
            .looked(
                Ok(decided(Ok(info(ME, &[])), 10_030, None)),
                LocalInstant::from_nanos(1_000_000_000),
            )
            .unwrap();
        assert_eq!(got.unwrap().grant.fence, Fence(7));
    }

    #[test]
    fn it_renews_its_place_before_two_thirds_of_the_kept_alive_wait_are_gone() {
        let mut a = waiting(60_000);
        a.watching(true);
        assert_eq!(a.want(), Want::Look);
        a.looked(
            Ok(decided(Ok(info("a", &[ME])), 10_700, Some(60_000))),
            LocalInstant::from_nanos(1_000_000_000),
        )
        .unwrap();
        // 1 300 ms of the kept-alive 2 s remain: renew.
        assert_eq!(a.want(), Want::Renew);
        // It names the end of its whole wait; the core keeps its place WAIT_ALIVE ahead.
        assert!(matches!(
            a.request(Instant(10_700)),
            Request::RenewWait {
                wait_deadline: Instant(20_000),
                ..
            }
        ));
        let renewed = decided(
            Response::Acquire(Ok(AcquireOutcome::AlreadyWaiting { position: 1 })),
            10_700,
            Some(60_000),
        );
        assert!(a
            .renewed(
                Ok(renewed),
                unexpected,
                LocalInstant::from_nanos(1_000_000_000)
            )
            .unwrap()
            .is_none());
        // Watched: at most WATCHED_POLL, and the next renewal is due in 2 000 - 1 333 ms.
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(667)));
        // That nap ends in the renewal, not in a look first: a renewal's answer says whether
        // the key was handed over, so a waiter sends one call per renewal period, not two.
        assert_eq!(a.want(), Want::Renew);
        let renewed = decided(
            Response::Acquire(Ok(AcquireOutcome::AlreadyWaiting { position: 1 })),
            11_400,
            Some(60_000),
        );
        assert!(a
            .renewed(
                Ok(renewed),
                unexpected,
                LocalInstant::from_nanos(1_000_000_000)
            )
            .unwrap()
            .is_none());
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(667)));
        // A nap cut short by the key's next deadline looks.
        let mut b = waiting(10_100);
        b.watching(true);
        assert_eq!(b.want(), Want::Look);
        b.looked(
            Ok(decided(Ok(info("a", &[ME])), 10_000, Some(10_100))),
            LocalInstant::from_nanos(1_000_000_000),
        )
        .unwrap();
        assert_eq!(b.want(), Want::Nap(Duration::from_millis(100)));
        assert_eq!(b.want(), Want::Look);
    }

    #[test]
    fn a_place_lost_while_time_remains_queues_again_and_the_end_of_the_wait_times_out() {
        let mut a = waiting(60_000);
        a.want();
        assert_eq!(a.want(), Want::Look);
        assert!(a
            .looked(
                Ok(decided(Ok(info("c", &[])), 10_050, None)),
                LocalInstant::from_nanos(1_000_000_000)
            )
            .unwrap()
            .is_none());
        assert!(!a.in_line());
        assert_eq!(a.want(), Want::Ask);
        // The wait deadline is kept from the first answer, not restarted.
        assert!(matches!(
            a.request(Instant(10_050)),
            Request::AcquireWith {
                wait_deadline: Instant(20_000),
                ..
            }
        ));
        a.asked(
            queued(19_990, 60_000),
            unexpected,
            LocalInstant::from_nanos(1_000_000_000),
        )
        .unwrap();
        a.want();
        a.want();
        let over = a.looked(
            Ok(decided(Ok(info("c", &[])), 20_000, None)),
            LocalInstant::from_nanos(1_000_000_000),
        );
        assert_eq!(over.unwrap_err(), Error::WaitTimedOut);
    }

    /// A caller that may not wait (a try) for a 5 s lease.
    fn trying() -> Acquiring {
        Acquiring::new(
            KEY,
            ME,
            Duration::from_secs(5),
            Duration::ZERO,
            Duration::from_millis(50),
        )
    }

    fn recovering(until: u64, at: u64) -> StoreError {
        StoreError::Recovering {
            store: "s".into(),
            until: Instant(until),
            at: Instant(at),
        }
    }

    #[test]
    fn a_recovering_store_is_waited_out_by_an_ask_that_may_wait_and_ends_a_try() {
        // 10 s of wait: the recovery ends 4 s into it; the ask naps until then and asks again.
        let mut a = acquiring();
        assert_eq!(a.want(), Want::Ask);
        assert!(a.ask_failed(recovering(14_000, 10_000)).unwrap().is_none());
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(4_000)));
        assert_eq!(a.want(), Want::Ask);
        // Still recovering (the clock of the store moved less than the nap): again, to the end.
        assert!(a.ask_failed(recovering(14_000, 13_500)).unwrap().is_none());
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(500)));
        // A recovery that outlasts the wait: the nap ends with the wait, then the failure.
        assert!(a.ask_failed(recovering(90_000, 14_000)).unwrap().is_none());
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(6_000)));
        assert_eq!(a.want(), Want::Ask);
        assert!(matches!(
            a.ask_failed(recovering(90_000, 20_000)),
            Err(Error::Store(StoreError::Recovering { .. }))
        ));
        // A try (no wait) answers the failure at once.
        let mut b = trying();
        assert!(matches!(
            b.ask_failed(recovering(14_000, 10_000)),
            Err(Error::Store(StoreError::Recovering { .. }))
        ));
    }

    #[test]
    fn an_ask_the_replicas_did_not_acknowledge_gives_its_grant_back_and_fails() {
        let unreplicated = || StoreError::Unreplicated {
            store: "s".into(),
            reason: "0 of 1".into(),
        };
        let t = LocalInstant::from_nanos(1_000_000_000);
        for mut a in [acquiring(), trying()] {
            assert_eq!(a.want(), Want::Ask);
            assert!(a.ask_failed(unreplicated()).unwrap().is_none());
            // Leaving: a cancel (this caller does not wait), then a look, which finds the
            // grant the write made on the primary: released.
            assert_eq!(a.want(), Want::Leave);
            assert!(matches!(
                a.request(Instant(10_000)),
                Request::CancelWait { .. }
            ));
            let not_waiting = decided(Response::Done(Err(LockError::NotWaiting)), 10_000, None);
            assert_eq!(a.left(Ok(not_waiting), t), Ok(None));
            assert_eq!(a.want(), Want::Look);
            let looked = decided(Ok(info(ME, &[])), 10_000, None);
            assert_eq!(a.looked(Ok(looked), t), Ok(None));
            assert_eq!((a.want(), a.leave_fence()), (Want::Leave, Some(Fence(7))));
            assert!(matches!(
                a.left(released(10_100), t),
                Err(Error::Store(StoreError::Unreplicated { .. }))
            ));
            assert_eq!(a.released(), Some(Fence(7)));
        }
    }

    #[test]
    fn a_recovering_store_in_line_pauses_and_looks_again_while_the_wait_lasts() {
        let mut a = waiting(60_000);
        a.want();
        a.want();
        let t = LocalInstant::from_nanos(1_000_000_000);
        assert!(a
            .looked(Err(recovering(40_000, 10_100)), t)
            .unwrap()
            .is_none());
        assert_eq!(a.want(), Want::Pause(Duration::from_millis(50)));
        assert_eq!(a.want(), Want::Look);
    }

    #[test]
    fn a_lost_connection_in_line_pauses_and_looks_again_but_other_errors_end_the_wait() {
        let lost = || StoreError::Lost {
            store: "s".into(),
            reason: "r".into(),
        };
        let mut a = waiting(60_000);
        a.want();
        a.want();
        assert!(a
            .looked(Err(lost()), LocalInstant::from_nanos(1_000_000_000))
            .unwrap()
            .is_none());
        assert_eq!(a.want(), Want::Pause(Duration::from_millis(50)));
        assert_eq!(a.want(), Want::Look);
        let schema = StoreError::Schema {
            store: "s".into(),
            reason: "r".into(),
        };
        // It ends the wait, but the caller is queued: it leaves the key first (trying once).
        assert!(a
            .looked(Err(schema), LocalInstant::from_nanos(1_000_000_000))
            .unwrap()
            .is_none());
        assert_eq!(a.want(), Want::Leave);
        assert!(matches!(
            a.request(Instant(10_100)),
            Request::CancelWait { .. }
        ));
        assert!(matches!(
            a.left(Err(lost()), LocalInstant::from_nanos(1_000_000_000)),
            Err(Error::Store(StoreError::Schema { .. }))
        ));
        // With no time left on this machine's clock, a lost connection ends it too.
        let mut b = trying();
        assert!(matches!(
            b.request(Instant(10_000)),
            Request::TryAcquire { .. }
        ));
        b.asked(
            queued(10_000, 60_000),
            unexpected,
            LocalInstant::from_nanos(1_000_000_000),
        )
        .unwrap();
        assert!(b
            .renewed(
                Err(lost()),
                unexpected,
                LocalInstant::from_nanos(1_000_000_000)
            )
            .unwrap()
            .is_none());
        assert_eq!(b.want(), Want::Leave);
        let cancelled = decided(Response::Done(Ok(())), 10_010, None);
        assert!(matches!(
            b.left(Ok(cancelled), LocalInstant::from_nanos(1_000_000_000)),
            Err(Error::Store(StoreError::Lost { .. }))
        ));
    }

    fn done(reply: Result<(), LockError>, now: u64) -> Result<Decided<Response>, StoreError> {
        Ok(decided(Response::Done(reply), now, None))
    }

    fn released(now: u64) -> Result<Decided<Response>, StoreError> {
        let reply = Response::Release(Ok(lock_core::ReleaseOutcome::Released));
        Ok(decided(reply, now, None))
    }

    #[test]
    fn an_attempt_that_does_not_adopt_waits_for_its_owners_other_lease_to_end() {
        let t = LocalInstant::from_nanos(0);
        let held = |now: u64, deadline: u64| {
            let grant = Grant {
                fence: Fence(7),
                deadline: Instant(deadline),
            };
            decided(
                Response::Acquire(Ok(AcquireOutcome::AlreadyHeld(grant))),
                now,
                None,
            )
        };
        let mut a = acquiring();
        a.adopt_held(false);
        assert_eq!(a.want(), Want::Ask);
        // Held by this owner until 13 000 (an earlier process): ask again then, not adopted.
        assert_eq!(a.asked(held(10_000, 13_000), unexpected, t), Ok(None));
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(3_000)));
        assert_eq!(a.want(), Want::Ask);
        assert_eq!(a.give_up(Error::GaveUp, t), Err(Error::GaveUp));
        // Extended meanwhile: past the whole wait (20 000) it is `held`.
        let mut b = acquiring();
        b.adopt_held(false);
        b.asked(held(10_000, 30_000), unexpected, t).unwrap();
        assert_eq!(b.want(), Want::Nap(Duration::from_millis(10_000)));
        let over = b.asked(held(20_000, 40_000), unexpected, t);
        assert_eq!(
            over,
            Err(Error::Lock(LockError::Held {
                deadline: Instant(40_000)
            }))
        );
        // The default adopts it; an ask whose answer was lost takes it as its own grant too.
        let mut c = acquiring();
        assert!(c
            .asked(held(10_000, 13_000), unexpected, t)
            .unwrap()
            .is_some());
        let mut d = acquiring();
        d.adopt_held(false);
        let lost_answer = Decided {
            ambiguous: true,
            ..held(10_000, 13_000)
        };
        assert!(d.asked(lost_answer, unexpected, t).unwrap().is_some());
    }

    #[test]
    fn a_give_up_in_line_cancels_first_and_ends_with_its_reason() {
        let t = LocalInstant::from_nanos(0);
        let mut a = waiting(60_000);
        assert_eq!(a.give_up(Error::WaitTimedOut, t), Ok(()));
        assert!(!a.in_line());
        assert_eq!(a.want(), Want::Leave);
        assert_eq!(a.leave_fence(), None);
        assert!(matches!(
            a.request(Instant(10_100)),
            Request::CancelWait {
                key: KEY,
                owner: ME,
                ..
            }
        ));
        assert_eq!(a.left(done(Ok(()), 10_100), t), Err(Error::WaitTimedOut));
        assert_eq!(a.released(), None);
        // Not queued yet (no call in flight), nothing is left to do.
        let mut b = acquiring();
        assert_eq!(b.want(), Want::Ask);
        assert_eq!(
            b.give_up(Error::AlreadyWaiting, t),
            Err(Error::AlreadyWaiting)
        );
    }

    #[test]
    fn a_give_up_that_finds_no_wait_looks_and_releases_the_lease_it_was_handed() {
        let t = LocalInstant::from_nanos(0);
        let mut a = waiting(60_000);
        a.give_up(Error::WaitTimedOut, t).unwrap();
        assert_eq!(a.want(), Want::Leave);
        // The hand-off landed before the cancel: the store says it waits no more.
        assert_eq!(
            a.left(done(Err(LockError::NotWaiting), 10_100), t),
            Ok(None)
        );
        assert_eq!(a.want(), Want::Look);
        assert_eq!(
            a.looked(Ok(decided(Ok(info(ME, &["c"])), 10_100, None)), t),
            Ok(None)
        );
        assert_eq!(a.want(), Want::Leave);
        assert_eq!(a.leave_fence(), Some(Fence(7)));
        assert!(matches!(
            a.request(Instant(10_100)),
            Request::Release {
                fence: Fence(7),
                ..
            }
        ));
        assert_eq!(a.left(released(10_100), t), Err(Error::WaitTimedOut));
        assert_eq!(a.released(), Some(Fence(7)));
        // Not handed the key (the wait had timed out, say): nothing to release.
        let mut b = waiting(60_000);
        b.give_up(Error::WaitTimedOut, t).unwrap();
        b.want();
        b.left(done(Err(LockError::NotWaiting), 10_100), t).unwrap();
        assert_eq!(b.want(), Want::Look);
        let over = b.looked(Ok(decided(Ok(info("c", &[])), 10_100, None)), t);
        assert_eq!(over, Err(Error::WaitTimedOut));
        assert_eq!(b.released(), None);
    }

    #[test]
    fn a_grant_its_caller_never_took_is_released_by_the_give_up() {
        let t = LocalInstant::from_nanos(0);
        let mut a = waiting(60_000);
        a.want();
        let got = a.looked(Ok(decided(Ok(info(ME, &[])), 10_100, None)), t);
        assert_eq!(got.unwrap().unwrap().grant.fence, Fence(7));
        a.give_up(Error::WaitTimedOut, t).unwrap();
        assert_eq!((a.want(), a.leave_fence()), (Want::Leave, Some(Fence(7))));
        assert_eq!(a.left(released(10_100), t), Err(Error::WaitTimedOut));
        assert_eq!(a.released(), Some(Fence(7)));
    }

    #[test]
    fn a_give_up_rides_out_a_failing_store_for_as_long_as_its_place_can_live() {
        let lost = || StoreError::Lost {
            store: "s".into(),
            reason: "r".into(),
        };
        let t = LocalInstant::from_nanos(1_000);
        let mut a = waiting(60_000);
        a.give_up(Error::WaitTimedOut, t).unwrap();
        // Giving up twice keeps the first give-up.
        assert_eq!(a.give_up(Error::AlreadyWaiting, t), Ok(()));
        assert_eq!(a.want(), Want::Leave);
        assert_eq!(a.left(Err(lost()), t + WAIT_ALIVE / 2), Ok(None));
        assert_eq!(a.want(), Want::Pause(Duration::from_millis(50)));
        assert_eq!(a.want(), Want::Leave);
        // Past WAIT_ALIVE the place has lapsed by itself: the give-up is over.
        assert_eq!(
            a.left(Err(lost()), t + WAIT_ALIVE),
            Err(Error::WaitTimedOut)
        );
    }
}
