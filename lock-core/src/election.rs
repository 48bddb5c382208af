//! Leader election, a recipe over the lock: [`Campaign`] is one candidate's state machine, sans
//! IO, like the lock itself. It adds no rule to the lock (the key's transitions are the ones of
//! `docs/semantics.md`): a term is a lease of the election's key, its fencing token is the term's
//! fence, and the FIFO queue of the key is the line of candidates. What the recipe decides is
//! the candidate's side, which every face (a plugin host, a store's replicas, Node, the CLI)
//! drives the same way (`docs/election.md`):
//!
//! - it campaigns (asks for the key, waiting in line) until it is shut down, and again after
//!   each term unless it campaigns for [`once`](CampaignOptions::once);
//! - an ask that ends without the key ([`Refusal`]) is asked again: at once after a wait that
//!   ran out, after the retry pause when the lock was unreachable, the candidate id already
//!   waits in line, or a capacity limit was reached; a refusal that would come again (a bad
//!   name, say) ends the campaign;
//! - a term starts when it is granted the key; the leader's body is started with the term's
//!   fence ([`Action::Start`]);
//! - the lease is extended every third of its TTL; the **stop signal** ([`Action::Stop`]) fires
//!   when the lease is lost, when the process resigns or shuts down, when the body returns, and
//!   at the latest [`margin`](CampaignOptions::margin) before the lease's end on the leader's own
//!   clock if no extension succeeded by then, so the body hears it before the lease can have
//!   ended;
//! - a body that does not return within [`grace`](CampaignOptions::grace) of its stop signal is
//!   abandoned ([`Action::Abandon`]: a process gets `SIGKILL`);
//! - the lease is released when the body has returned (or was abandoned), unless it was lost;
//! - a stop signal fires only for a term that began, exactly once per term.
//!
//! Time is an argument (an [`Instant`] on the candidate's own monotonic clock); the driver asks
//! [`Campaign::poll_action`] what to do, reports answers with the `handle_*` calls, and wakes at
//! [`Campaign::poll_timeout`].
//!
//! ```
//! use lock_core::election::{Action, Campaign, CampaignOptions, StopReason};
//! use lock_core::{Duration, Fence, Instant};
//!
//! let mut c = Campaign::new(CampaignOptions::new(Duration(15_000)))?;
//! assert_eq!(c.poll_action(Instant(0)), Some(Action::Campaign));
//! // Granted fence 7 at 100 ms; the lease ends at 15 100 ms on this clock at the latest.
//! c.handle_granted(Fence(7), Instant(15_100), Instant(100));
//! assert_eq!(c.poll_action(Instant(100)), Some(Action::Start { fence: Fence(7) }));
//! // Nothing extends it (the store is unreachable): the stop signal fires 3 s (a fifth of the
//! // TTL) before the lease's end, retried extensions aside.
//! let stop = loop {
//!     let at = c.poll_timeout().unwrap();
//!     match c.poll_action(at) {
//!         Some(Action::Extend { .. }) => c.handle_extend_failed(at),
//!         Some(Action::Stop { reason, .. }) => break (at, reason),
//!         other => panic!("{other:?}"),
//!     }
//! };
//! assert_eq!(stop, (Instant(12_100), StopReason::Unrenewed));
//! # Ok::<(), lock_core::election::BadCampaign>(())
//! ```

use alloc::collections::VecDeque;
use core::fmt;

use crate::{Duration, ErrorCode, Fence, Instant, LockError};

/// Why a term's stop signal fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The body returned by itself.
    Returned,
    /// The store refused an extension: the lease ended (expired, stolen or gone).
    Lost,
    /// No extension succeeded, and the lease's end on the leader's own clock is within the
    /// margin (the store is unreachable, or this process was paused).
    Unrenewed,
    /// The process resigned the term (it stays a candidate).
    Resigned,
    /// The process shut the campaign down (it leaves the election).
    ShutDown,
}

impl StopReason {
    /// Every reason's name, in declaration order.
    pub const NAMES: [&'static str; 5] = ["returned", "lost", "unrenewed", "resigned", "shut-down"];

    /// The stable name shared by every face (logs, JSON, JS).
    #[must_use]
    pub const fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether the lease is still the leader's after this stop (kept alive until the body
    /// returns, then released).
    #[must_use]
    pub const fn keeps_lease(self) -> bool {
        matches!(
            self,
            StopReason::Returned | StopReason::Resigned | StopReason::ShutDown
        )
    }
}

/// How a campaign's ask for the key ended without it, in the lock's own names: every face
/// translates its answer into one of these once, and the recipe alone decides what follows
/// ([`Campaign::handle_refused`], [`Refusal::ends_campaign`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The wait in line ran out (`wait-timed-out`; a driver waits in chunks, to hear a
    /// shut-down between them, and one that is shut down cuts its wait short): the campaign
    /// asks again at once, so that the line is not left empty when the leader resigns.
    WaitTimedOut,
    /// The lock could not be reached or failed on its side (`unreachable`: a store, a plugin
    /// host or its persistence): the campaign asks again after the retry pause.
    Unreachable,
    /// The candidate id already waits in line (`already-waiting`): a place left by a wait a
    /// store cut short, by a process killed in line and restarted under the same id, or taken
    /// by another caller as this id. Such a place lapses (a store's waiter keep-alive) or ends
    /// with its wait: the campaign asks again after the retry pause.
    AlreadyWaiting,
    /// The lock refused with this error. The capacity limits ([`ErrorCode::is_capacity`]:
    /// `table-full`, `queue-full`, `too-many-waiters`) pass: the campaign asks again after the retry pause.
    /// Any other (a bad name, candidate id, TTL or metadata; the key used as another kind of
    /// lock) would be refused again: it ends the campaign.
    Lock(ErrorCode),
}

impl Refusal {
    /// The names of the refusals that are not a lock error's code.
    pub const NAMES: [&'static str; 3] = ["wait-timed-out", "unreachable", "already-waiting"];

    /// The refusal of a lock error.
    #[must_use]
    pub fn lock(error: &LockError) -> Self {
        Refusal::Lock(error.error_code())
    }

    /// The refusal of this name: one of [`Refusal::NAMES`] or a [`LockError::CODES`] entry
    /// (`None` for any other).
    ///
    /// ```
    /// use lock_core::election::Refusal;
    /// assert_eq!(Refusal::parse("already-waiting"), Some(Refusal::AlreadyWaiting));
    /// use lock_core::{ErrorCode, LockError};
    /// let full = LockError::QueueFull { max_waiters_per_key: 1 };
    /// assert_eq!(Refusal::parse("queue-full"), Some(Refusal::lock(&full)));
    /// assert_eq!(Refusal::parse("queue-full"), ErrorCode::parse("queue-full").map(Refusal::Lock));
    /// assert_eq!(Refusal::parse("no-such-refusal"), None);
    /// ```
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "wait-timed-out" => Some(Refusal::WaitTimedOut),
            "unreachable" => Some(Refusal::Unreachable),
            "already-waiting" => Some(Refusal::AlreadyWaiting),
            code => ErrorCode::parse(code).map(Refusal::Lock),
        }
    }

    /// Its stable name, shared by every face and the campaign vectors.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Refusal::WaitTimedOut => Self::NAMES[0],
            Refusal::Unreachable => Self::NAMES[1],
            Refusal::AlreadyWaiting => Self::NAMES[2],
            Refusal::Lock(code) => code.name(),
        }
    }

    /// Whether it ends the campaign (see the variants).
    #[must_use]
    pub fn ends_campaign(self) -> bool {
        match self {
            Refusal::WaitTimedOut | Refusal::Unreachable | Refusal::AlreadyWaiting => false,
            Refusal::Lock(code) => !code.is_capacity(),
        }
    }

    /// The pause before the campaign asks again (for one that goes on).
    const fn pause(self, retry: Duration) -> Duration {
        match self {
            Refusal::WaitTimedOut => Duration::ZERO,
            _ => retry,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Ask for the election's key, waiting in line; answer with
    /// [`handle_granted`](Campaign::handle_granted) or
    /// [`handle_refused`](Campaign::handle_refused).
    Campaign,
    /// Start the leader's body for the term with this fence.
    Start {
        /// The term's fencing token.
        fence: Fence,
    },
    /// Extend the term's lease by the TTL; answer with
    /// [`handle_extended`](Campaign::handle_extended),
    /// [`handle_extend_failed`](Campaign::handle_extend_failed) or
    /// [`handle_lost`](Campaign::handle_lost).
    Extend {
        /// The term's fencing token.
        fence: Fence,
    },
    /// Fire the term's stop signal (once per term).
    Stop {
        /// The term's fencing token.
        fence: Fence,
        /// Why.
        reason: StopReason,
    },
    /// The body did not return within the grace period after its stop signal: stop waiting
    /// for it (a process gets `SIGKILL`); the lease is released next. A body that returned
    /// since this was decided needs nothing more.
    Abandon {
        /// The term's fencing token.
        fence: Fence,
    },
    /// Release the term's lease; answer with [`handle_released`](Campaign::handle_released).
    Release {
        /// The term's fencing token.
        fence: Fence,
    },
    /// The campaign is over (shut down, its one term ended, or a refusal ended it).
    Done,
}

/// A campaign's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CampaignOptions {
    /// The term's lease TTL (extended every third of it).
    pub ttl: Duration,
    /// The stop signal fires at the latest this long before the lease's end on the leader's
    /// clock. Default: a fifth of the TTL; more than 0, at most half the TTL.
    pub margin: Duration,
    /// How long a body may take to return after its stop signal before it is abandoned.
    /// Default: the margin (a body that stops within it never overlaps the next term).
    pub grace: Duration,
    /// The pause before an extension is tried again after it failed, and before the next
    /// campaign after a refused one. Default: a tenth of the TTL, at most 1 s, at least 1 ms.
    pub retry: Duration,
    /// Campaign for one term only (default: campaign again after each term until shut down).
    pub once: bool,
}

impl CampaignOptions {
    /// The defaults for a term of `ttl`.
    #[must_use]
    pub const fn new(ttl: Duration) -> Self {
        let margin = Duration(ttl.0 / 5);
        let retry = ttl.0 / 10;
        CampaignOptions {
            ttl,
            margin,
            grace: margin,
            retry: Duration(if retry > 1000 {
                1000
            } else if retry == 0 {
                1
            } else {
                retry
            }),
            once: false,
        }
    }

    /// Checks the options.
    ///
    /// # Errors
    /// The first bad option.
    pub fn validate(&self) -> Result<(), BadCampaign> {
        if self.ttl.is_zero() {
            return Err(BadCampaign::TtlZero);
        }
        if self.margin.is_zero() {
            return Err(BadCampaign::MarginZero);
        }
        let max = Duration(self.ttl.0 / 2);
        if self.margin > max {
            return Err(BadCampaign::MarginTooLong {
                margin: self.margin,
                max,
            });
        }
        if self.retry.is_zero() {
            return Err(BadCampaign::RetryZero);
        }
        Ok(())
    }
}

/// Options a campaign cannot run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BadCampaign {
    /// The TTL is 0.
    TtlZero,
    /// The margin is 0: the stop signal could come after the lease's end.
    MarginZero,
    /// The margin is more than half the TTL: the stop signal would fire before the first
    /// extension is due.
    MarginTooLong {
        /// The margin asked for.
        margin: Duration,
        /// Half the TTL.
        max: Duration,
    },
    /// The retry pause is 0.
    RetryZero,
}

impl fmt::Display for BadCampaign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadCampaign::TtlZero => write!(f, "the term's ttl is 0"),
            BadCampaign::MarginZero => write!(f, "the stop margin is 0"),
            BadCampaign::MarginTooLong { margin, max } => write!(
                f,
                "the stop margin of {margin} ms is more than half the ttl ({max} ms)"
            ),
            BadCampaign::RetryZero => write!(f, "the retry pause is 0"),
        }
    }
}

/// A term in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Term {
    fence: Fence,
    /// The lease's end on this candidate's clock (at the latest).
    local_end: Instant,
    /// When the next extension is due.
    next_extend: Instant,
    /// An extension is out.
    extending: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Campaign at this instant.
    Idle(Instant),
    /// A campaign (an acquire, waiting in line) is out.
    Asking,
    /// Leading: the body runs.
    Leading(Term),
    /// The stop signal fired; the body runs until it returns or is abandoned at `abandon_at`.
    Stopping {
        term: Term,
        reason: StopReason,
        abandon_at: Instant,
    },
    /// The release is out.
    Releasing,
    /// Over.
    Done,
}

/// One candidate's campaign (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Campaign {
    options: CampaignOptions,
    phase: Phase,
    actions: VecDeque<Action>,
    /// Leave after the current term (or at once when not leading).
    leaving: bool,
    /// Terms started so far.
    terms: u64,
    /// The fence of the last term started: a grant that is not above it is that term's lease,
    /// still on the lock (its release failed), not a new term.
    last_term: Option<Fence>,
}

impl Campaign {
    /// A campaign that starts campaigning at once.
    ///
    /// # Errors
    /// The options' [`BadCampaign`].
    pub fn new(options: CampaignOptions) -> Result<Self, BadCampaign> {
        options.validate()?;
        Ok(Campaign {
            options,
            phase: Phase::Idle(Instant::ZERO),
            actions: VecDeque::new(),
            leaving: false,
            terms: 0,
            last_term: None,
        })
    }

    /// Its options.
    #[must_use]
    pub fn options(&self) -> &CampaignOptions {
        &self.options
    }

    /// The fence of the term in progress (leading or stopping), if any.
    #[must_use]
    pub fn term(&self) -> Option<Fence> {
        match self.phase {
            Phase::Leading(t) | Phase::Stopping { term: t, .. } => Some(t.fence),
            _ => None,
        }
    }

    /// How many terms have started.
    #[must_use]
    pub fn terms(&self) -> u64 {
        self.terms
    }

    /// Whether the campaign is over.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The next action at `now`, after the time-driven ones due by then.
    pub fn poll_action(&mut self, now: Instant) -> Option<Action> {
        self.advance(now);
        self.actions.pop_front()
    }

    /// When the campaign next needs [`poll_action`](Self::poll_action) without an answer
    /// coming (`None`: only an answer moves it on).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.actions.is_empty() {
            return Some(Instant::ZERO);
        }
        match self.phase {
            Phase::Idle(at) => Some(at),
            Phase::Leading(t) => Some(self.stop_at(t).min(self.extend_due(t))),
            Phase::Stopping {
                term, abandon_at, ..
            } => Some(match self.stop_keeps(term) {
                Some(due) => due.min(abandon_at),
                None => abandon_at,
            }),
            Phase::Asking | Phase::Releasing | Phase::Done => None,
        }
    }

    /// The campaign was granted the key with `fence`; its lease ends at `local_end` on this
    /// candidate's clock at the latest. A grant heard within the margin of its end starts no
    /// term: it is released, and the candidate campaigns again; so is one whose
    /// [`Action::Start`] is polled only within that margin (the process paused in between),
    /// and one whose fence is not above the last term's: the lock answered the candidate's own
    /// lease of that term, which outlived it (its release failed while the lock could not be
    /// reached), and a term never reuses a fence.
    pub fn handle_granted(&mut self, fence: Fence, local_end: Instant, now: Instant) {
        if self.phase != Phase::Asking {
            return;
        }
        let old_lease = self.last_term.is_some_and(|last| fence <= last);
        if old_lease || self.leaving || now >= local_end.saturating_sub(self.options.margin) {
            // Shut down while it asked, heard of its grant too late to lead (the stop would be
            // due at once: this process was paused, say), or handed back its last term's
            // lease: no term starts, and the key goes to the next in line.
            self.actions.push_back(Action::Release { fence });
            self.phase = Phase::Releasing;
            return;
        }
        self.terms += 1;
        self.last_term = Some(fence);
        self.phase = Phase::Leading(Term {
            fence,
            local_end,
            next_extend: now.saturating_add(self.third()),
            extending: false,
        });
        self.actions.push_back(Action::Start { fence });
        self.advance(now);
    }

    /// The campaign's ask ended without the key, for `refusal`: it asks again, at once after
    /// a wait that ran out, after the retry pause otherwise; a refusal that would come again
    /// ends the campaign ([`Refusal::ends_campaign`]; [`Action::Done`] follows).
    ///
    /// # Errors
    /// `refusal` back when it ended the campaign (the driver reports its own error for it).
    pub fn handle_refused(&mut self, refusal: Refusal, now: Instant) -> Result<(), Refusal> {
        if self.phase != Phase::Asking {
            return Ok(());
        }
        if refusal.ends_campaign() {
            self.finish();
            return Err(refusal);
        }
        self.after_term(now, refusal.pause(self.options.retry));
        Ok(())
    }

    /// The extension of the term's lease succeeded: the lease now ends at `local_end` on this
    /// candidate's clock at the latest.
    pub fn handle_extended(&mut self, local_end: Instant, now: Instant) {
        self.stop_if_due(now);
        let third = self.third();
        if let Some(term) = self.term_mut() {
            term.extending = false;
            term.local_end = term.local_end.max(local_end);
            term.next_extend = now.saturating_add(third);
        }
        self.advance(now);
    }

    /// The extension did not get an answer, or the store failed: it is tried again after the
    /// retry pause, until the stop signal.
    pub fn handle_extend_failed(&mut self, now: Instant) {
        let retry = self.options.retry;
        if let Some(term) = self.term_mut() {
            term.extending = false;
            term.next_extend = now.saturating_add(retry);
        }
        self.advance(now);
    }

    /// The store refused an extension (or told of a steal): the lease is lost.
    pub fn handle_lost(&mut self, now: Instant) {
        match self.phase {
            Phase::Leading(term) => self.stop(term, StopReason::Lost, now),
            Phase::Stopping {
                term, abandon_at, ..
            } => {
                // Not released: it is no longer ours.
                self.phase = Phase::Stopping {
                    term,
                    reason: StopReason::Lost,
                    abandon_at,
                };
            }
            _ => {}
        }
        self.advance(now);
    }

    /// The body returned.
    pub fn handle_body_returned(&mut self, now: Instant) {
        self.stop_if_due(now);
        match self.phase {
            Phase::Leading(term) => {
                self.stop(term, StopReason::Returned, now);
                self.end_term(term, StopReason::Returned, now);
            }
            Phase::Stopping { term, reason, .. } => self.end_term(term, reason, now),
            _ => {}
        }
        self.advance(now);
    }

    /// The release was answered (whatever the answer: a failed release leaves a lease that
    /// ends at its deadline).
    pub fn handle_released(&mut self, now: Instant) {
        if self.phase == Phase::Releasing {
            self.after_term(now, Duration::ZERO);
        }
    }

    /// Ends the current term on purpose (its stop signal fires; the lease is released once the
    /// body returns, so the next candidate in line is handed the key at once); the candidate
    /// campaigns again afterwards (at the back of the line). Nothing happens when not leading.
    pub fn resign(&mut self, now: Instant) {
        if let Phase::Leading(term) = self.phase {
            self.stop(term, StopReason::Resigned, now);
        }
        self.advance(now);
    }

    /// Leaves the election: the current term, if any, ends as by [`resign`](Self::resign), and
    /// the campaign is over after it. A campaign that is asking is over when its answer comes
    /// (a grant is released at once, without starting a term).
    pub fn shut_down(&mut self, now: Instant) {
        self.leaving = true;
        match self.phase {
            Phase::Leading(term) => self.stop(term, StopReason::ShutDown, now),
            Phase::Idle(_) => self.finish(),
            _ => {}
        }
        self.advance(now);
    }

    fn third(&self) -> Duration {
        Duration((self.options.ttl.0 / 3).max(1))
    }

    fn stop_at(&self, term: Term) -> Instant {
        term.local_end.saturating_sub(self.options.margin)
    }

    fn extend_due(&self, term: Term) -> Instant {
        if term.extending {
            Instant(u64::MAX)
        } else {
            term.next_extend
        }
    }

    /// While stopping with the lease still ours: when the next extension is due.
    fn stop_keeps(&self, term: Term) -> Option<Instant> {
        match self.phase {
            Phase::Stopping { reason, .. } if reason.keeps_lease() => Some(self.extend_due(term)),
            _ => None,
        }
    }

    fn term_mut(&mut self) -> Option<&mut Term> {
        match &mut self.phase {
            Phase::Leading(t) | Phase::Stopping { term: t, .. } => Some(t),
            _ => None,
        }
    }

    /// The term's start is queued, not yet polled: its body has not begun.
    fn start_pending(&self, fence: Fence) -> bool {
        self.actions.contains(&Action::Start { fence })
    }

    /// Takes back the start of `term` (and its extension) before it was polled: the term
    /// never began.
    fn unstart(&mut self, term: Term) {
        self.actions.retain(|a| {
            !matches!(a, Action::Start { fence } | Action::Extend { fence }
                if *fence == term.fence)
        });
        self.terms -= 1;
    }

    fn stop(&mut self, term: Term, reason: StopReason, now: Instant) {
        if self.start_pending(term.fence) {
            // Its start was never polled: no body runs, so no term begins (it would begin
            // after the stop was decided, possibly past the lease's end, beside the next
            // leader's). The key goes to the next in line, unless it is gone already.
            self.unstart(term);
            self.end_term(term, reason, now);
            return;
        }
        self.actions.push_back(Action::Stop {
            fence: term.fence,
            reason,
        });
        self.phase = Phase::Stopping {
            term,
            reason,
            abandon_at: now.saturating_add(self.options.grace),
        };
    }

    /// The body is done (returned or abandoned): release unless the lease was lost.
    fn end_term(&mut self, term: Term, reason: StopReason, now: Instant) {
        if reason == StopReason::Lost {
            self.after_term(now, Duration::ZERO);
        } else {
            self.actions
                .push_back(Action::Release { fence: term.fence });
            self.phase = Phase::Releasing;
        }
    }

    /// After a term or a refused campaign: over, or campaign again after `pause`.
    fn after_term(&mut self, now: Instant, pause: Duration) {
        if self.leaving || (self.options.once && self.terms > 0) {
            self.finish();
        } else {
            self.phase = Phase::Idle(now.saturating_add(pause));
        }
    }

    fn finish(&mut self) {
        self.phase = Phase::Done;
        self.actions.push_back(Action::Done);
    }

    /// Stops the term in progress if its stop instant passed by `now` (`Unrenewed`), before
    /// what time brought is applied: an extension's answer or the body's return heard after
    /// the stop instant (the process was paused past it; a supervisor watching
    /// [`stop_by`](Self::stop_by) stopped the body at that instant) find the term already over
    /// on this candidate's clock, and a late extension does not revive it. A resignation or a
    /// shut-down keeps its own reason: it is the process's request, whenever it is heard.
    /// Answers whether it did.
    fn stop_if_due(&mut self, now: Instant) -> bool {
        let Phase::Leading(term) = self.phase else {
            return false;
        };
        if now < self.stop_at(term) {
            return false;
        }
        if self.start_pending(term.fence) {
            // Heard of its grant in time, but asked for its start too late to lead (this
            // process was paused in between): as for a grant heard too late, no term begins,
            // and the key goes to the next in line.
            self.unstart(term);
            self.actions
                .push_back(Action::Release { fence: term.fence });
            self.phase = Phase::Releasing;
        } else {
            self.stop(term, StopReason::Unrenewed, now);
        }
        true
    }

    /// Applies what is due by `now`.
    fn advance(&mut self, now: Instant) {
        if self.stop_if_due(now) {
            return;
        }
        match self.phase {
            Phase::Idle(at) if now >= at => {
                self.phase = Phase::Asking;
                self.actions.push_back(Action::Campaign);
            }
            Phase::Leading(mut term) if !term.extending && now >= term.next_extend => {
                term.extending = true;
                self.phase = Phase::Leading(term);
                self.actions.push_back(Action::Extend { fence: term.fence });
            }
            Phase::Stopping {
                mut term,
                reason,
                abandon_at,
            } => {
                if now >= abandon_at {
                    self.actions
                        .push_back(Action::Abandon { fence: term.fence });
                    self.end_term(term, reason, now);
                } else if reason.keeps_lease() && !term.extending && now >= term.next_extend {
                    term.extending = true;
                    self.phase = Phase::Stopping {
                        term,
                        reason,
                        abandon_at,
                    };
                    self.actions.push_back(Action::Extend { fence: term.fence });
                }
            }
            _ => {}
        }
    }
}

impl Campaign {
    /// While a term is in progress (leading or stopping): when its stop is due at the latest if
    /// nothing more is heard, on this candidate's clock: its lease's end less the margin,
    /// moved by each extension. A supervisor in another process that must not trust this one
    /// to run (it may be paused) stops the term's work at that instant by itself.
    #[must_use]
    pub fn stop_by(&self) -> Option<Instant> {
        match self.phase {
            Phase::Leading(t) | Phase::Stopping { term: t, .. } => Some(self.stop_at(t)),
            _ => None,
        }
    }
}
