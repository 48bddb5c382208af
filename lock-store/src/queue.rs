//! An `acquire` with a wait, sans IO: [`Acquiring`] says what to do next (ask for the key,
//! renew the place in its queue, look whether the key was handed over, or nap) and is handed
//! the answers. The blocking [`Locks`](crate::Locks) and the async
//! [`aio::Locks`](crate::aio::Locks) drive the same machine, so that they wait, renew, time out
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

use std::sync::Arc;
use std::time::Duration;

use crate::kinds::OwnedOptions;
use crate::local::LocalInstant;

use lock_core::{AcquireOutcome, Grant, Instant, KeyInfo, LockError, Request, Response};

use crate::clock::{millis, StoreClock};
use crate::engine::Decided;
use crate::locks::{Error, WAIT_ALIVE};
use crate::store::StoreError;

/// With a store that announces hand-offs, a waiter still looks by itself at least this often
/// (a notice can be lost).
pub(crate) const WATCHED_POLL: Duration = Duration::from_secs(1);

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
pub(crate) fn renew_wait<'a>(
    key: &'a str,
    owner: &'a str,
    until: Instant,
    now: Instant,
) -> Request<'a> {
    Request::RenewWait {
        key,
        owner,
        wait_deadline: until,
        now,
    }
}

/// What the driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
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
}

/// A grant this caller holds: what its lease is made of.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Granted {
    pub(crate) grant: Grant,
    pub(crate) clock: Option<StoreClock>,
}

/// The request of a steal of `key` for `owner` (see `Locks::steal`), at the store's `now`.
pub(crate) fn steal_request<'a>(
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
pub(crate) fn stolen(
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
    pub(crate) fn request<'a>(&'a self, key: &'a str, owner: &'a str, now: Instant) -> Request<'a> {
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
pub(crate) struct Acquiring {
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
}

impl Acquiring {
    /// An acquire of `key` for `owner` for `ttl`, waiting up to `wait`; `poll` is the longest
    /// nap without notices.
    #[cfg(test)]
    pub(crate) fn new(
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        poll: Duration,
    ) -> Self {
        Acquiring::with_options(key, owner, ttl, wait, poll, OwnedOptions::default())
    }

    /// [`Acquiring::new`] with `options`.
    pub(crate) fn with_options(
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
        }
    }

    /// When the whole wait is over, in the store's time (once the first answer came).
    #[cfg(feature = "tokio")]
    pub(crate) fn until(&self) -> Instant {
        self.until.unwrap_or(Instant::ZERO)
    }

    /// The waiter.
    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// The caller is queued (a store call may fail from here on, and a failed call then
    /// cancels the wait: see [`CancelWait`](Request::CancelWait)).
    pub(crate) fn in_line(&self) -> bool {
        !matches!(self.phase, Phase::Ask)
    }

    /// The driver now hears (`true`) or no longer hears (`false`) this caller's hand-off
    /// notices. A hand-off before it listened was not heard: it looks once at once.
    pub(crate) fn watching(&mut self, watched: bool) {
        if watched && !self.watched {
            if let Phase::InLine(line) = &mut self.phase {
                line.look_first = true;
            }
        }
        self.watched = watched;
    }

    /// What to do next.
    pub(crate) fn want(&mut self) -> Want {
        let until = self.until.unwrap_or(Instant::ZERO);
        let line = match &mut self.phase {
            Phase::Ask => return Want::Ask,
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

    /// The request of [`Want::Ask`] or [`Want::Renew`] at the store's `now`.
    pub(crate) fn request(&self, now: Instant) -> Request<'_> {
        let in_line = !matches!(self.phase, Phase::Ask);
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
    pub(crate) fn asking(&self) -> Asking {
        Asking {
            ttl: self.ttl,
            wait: self.wait,
            until: self.until,
            in_line: !matches!(self.phase, Phase::Ask),
            options: Arc::clone(&self.options),
        }
    }

    /// The answer to [`Want::Ask`]: the grant, or `None` when queued.
    ///
    /// # Errors
    /// [`Error::AlreadyWaiting`], [`Error::Lock`], or the decider's unexpected answer.
    pub(crate) fn asked(
        &mut self,
        decided: Decided<Response>,
        unexpected: impl FnOnce(&Response) -> Error,
        t: LocalInstant,
    ) -> Result<Option<Granted>, Error> {
        let until = *self
            .until
            .get_or_insert(decided.now.saturating_add(self.wait));
        match decided.reply {
            Response::Acquire(Ok(
                AcquireOutcome::Acquired(grant) | AcquireOutcome::AlreadyHeld(grant),
            )) => Ok(Some(Granted {
                grant,
                clock: decided.clock,
            })),
            Response::Acquire(Ok(AcquireOutcome::AlreadyWaiting { .. })) => {
                Err(Error::AlreadyWaiting)
            }
            Response::Acquire(Ok(AcquireOutcome::Queued { .. })) => {
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

    /// The answer to [`Want::Renew`]: the grant if this caller was handed the key meanwhile.
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`], [`Error::Lock`], [`Error::Store`] (a failure past the wait), or
    /// the decider's unexpected answer.
    pub(crate) fn renewed(
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
    pub(crate) fn looked(
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
    /// clock; a lost connection is retried, anything else ends the wait.
    fn ride_out(&mut self, e: StoreError, t: LocalInstant) -> Result<(), Error> {
        match (e, self.phase) {
            (StoreError::Lost { .. } | StoreError::Connect { .. }, Phase::InLine(line))
                if t < line.give_up =>
            {
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
            .asked(queued(10_000, next), unexpected, LocalInstant::now())
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
            .asked(queued(10_000, 10_020), unexpected, LocalInstant::now())
            .unwrap()
            .is_none());
        assert!(a.in_line());
        // No notices: at most `poll`, and here the key changes in 20 ms.
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(20)));
        assert_eq!(a.want(), Want::Look);
        assert!(a
            .looked(
                Ok(decided(Ok(info("a", &[ME])), 10_020, None)),
                LocalInstant::now()
            )
            .unwrap()
            .is_none());
        a.watching(true);
        // Listening now: a notice sent before was not heard, so it looks at once.
        assert_eq!(a.want(), Want::Look);
        let got = a
            .looked(
                Ok(decided(Ok(info(ME, &[])), 10_030, None)),
                LocalInstant::now(),
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
            LocalInstant::now(),
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
            .renewed(Ok(renewed), unexpected, LocalInstant::now())
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
            .renewed(Ok(renewed), unexpected, LocalInstant::now())
            .unwrap()
            .is_none());
        assert_eq!(a.want(), Want::Nap(Duration::from_millis(667)));
        // A nap cut short by the key's next deadline looks.
        let mut b = waiting(10_100);
        b.watching(true);
        assert_eq!(b.want(), Want::Look);
        b.looked(
            Ok(decided(Ok(info("a", &[ME])), 10_000, Some(10_100))),
            LocalInstant::now(),
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
                LocalInstant::now()
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
        a.asked(queued(19_990, 60_000), unexpected, LocalInstant::now())
            .unwrap();
        a.want();
        a.want();
        let over = a.looked(
            Ok(decided(Ok(info("c", &[])), 20_000, None)),
            LocalInstant::now(),
        );
        assert_eq!(over.unwrap_err(), Error::WaitTimedOut);
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
            .looked(Err(lost()), LocalInstant::now())
            .unwrap()
            .is_none());
        assert_eq!(a.want(), Want::Pause(Duration::from_millis(50)));
        assert_eq!(a.want(), Want::Look);
        let schema = StoreError::Schema {
            store: "s".into(),
            reason: "r".into(),
        };
        assert!(matches!(
            a.looked(Err(schema), LocalInstant::now()),
            Err(Error::Store(StoreError::Schema { .. }))
        ));
        // With no time left on this machine's clock, a lost connection ends it too.
        let mut b = Acquiring::new(
            KEY,
            ME,
            Duration::from_secs(5),
            Duration::ZERO,
            Duration::from_millis(50),
        );
        assert!(matches!(
            b.request(Instant(10_000)),
            Request::TryAcquire { .. }
        ));
        b.asked(queued(10_000, 60_000), unexpected, LocalInstant::now())
            .unwrap();
        assert!(matches!(
            b.renewed(Err(lost()), unexpected, LocalInstant::now()),
            Err(Error::Store(StoreError::Lost { .. }))
        ));
    }
}
