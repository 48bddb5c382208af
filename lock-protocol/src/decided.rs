//! A decided call ([`Decided`]) and the rules around deciding that every driver shares: where
//! time comes from, the ambiguous-release rule, the bad-input check before any IO, and how an
//! exchange that stopped is reported.

use lock_core::{Fence, Instant, KeyEvent, Limits, Request, Response, Step};

use crate::clock::StoreClock;
use crate::decider::{DecideError, Decider};

/// Where `now` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// The store's clock (Redis `TIME`, PostgreSQL `clock_timestamp()`, MariaDB `SYSDATE(6)`,
    /// this machine's clock for SQLite and memory): what replicas use.
    Store,
    /// The caller passes `now` with every call (tests and the conformance vectors).
    Caller,
}

/// The answer to one call, with the key's events and the instant it was decided at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided<R> {
    /// The answer.
    pub reply: R,
    /// The key's events, oldest first (expiries, hand-offs, wait time-outs this call applied).
    pub events: Vec<KeyEvent>,
    /// The instant the transition ran at (the store's time, or the caller's).
    pub now: Instant,
    /// The key's next change by time alone after this call (to arm a waiter's timer).
    pub next_deadline: Option<Instant>,
    /// What this client knew of the store's clock when it decided (with the store's time;
    /// `None` with the caller's, or when no store was touched): a holder's lease ends on its
    /// own clock at the earliest local instant the store's clock can reach the deadline.
    pub clock: Option<StoreClock>,
    /// A write of this call was sent and its answer lost, and the record read afterwards was
    /// neither the one it wrote nor the one it replaced: the write may have taken effect before
    /// other writes. The reply is decided on that later record (a release there may answer
    /// `not-held`; see `Lease::release`).
    pub ambiguous: bool,
}

/// How long an emptied record stays as a tombstone (store's time) before the store may collect
/// it: far longer than any one decision takes from its read to its write.
pub const TOMBSTONE_LIFE: lock_core::Duration = lock_core::Duration(60_000);

/// Most compare-and-set attempts per call before [`StoreError::Contention`](crate::StoreError::Contention).
pub const MAX_ATTEMPTS: u32 = 32;

/// Puts the store's fresh tokens in every answer of requests decided together (only the
/// last step can have asked for any: [`Decider::handle_each`] stops after it).
pub fn settle_each(step: &mut Step<Vec<Step<Response>>>, fresh: &[Fence]) {
    for step in &mut step.reply {
        step.settle(fresh);
    }
}

impl Decided<Vec<Step<Response>>> {
    /// Each request's own answer out of those decided together, in order.
    pub fn split(self) -> impl Iterator<Item = Decided<Response>> {
        let Decided {
            reply,
            now,
            next_deadline,
            clock,
            ambiguous,
            ..
        } = self;
        reply.into_iter().map(move |step| Decided {
            reply: step.reply,
            events: step.events,
            now,
            next_deadline,
            clock,
            ambiguous,
        })
    }
}

impl<R> Decided<R> {
    /// The same decision with its reply mapped by `f`.
    pub fn map<T>(self, f: impl FnOnce(R) -> T) -> Decided<T> {
        Decided {
            reply: f(self.reply),
            events: self.events,
            now: self.now,
            next_deadline: self.next_deadline,
            clock: self.clock,
            ambiguous: self.ambiguous,
        }
    }

    /// An answer given without touching the store (bad input).
    pub fn unchanged(reply: R, at: Instant) -> Self {
        Decided {
            reply,
            events: Vec::new(),
            now: at,
            next_deadline: None,
            clock: None,
            ambiguous: false,
        }
    }
}

/// Bad input is refused before the store is touched (a key the store could not even hold,
/// such as one with a NUL, never reaches it): `Some` answer if `make(at)` is invalid. The core's
/// check is a few comparisons, so valid requests (the hot path) pay nothing more; an invalid one
/// is answered by the decider itself, on an empty record.
pub fn refuse_invalid<'r, D: Decider>(
    decider: &mut D,
    limits: &Limits,
    at: Instant,
    make: &impl Fn(Instant) -> Request<'r>,
) -> Result<Option<Decided<Response>>, DecideError> {
    if make(at).validate(limits).is_ok() {
        return Ok(None);
    }
    let empty = decider.empty();
    let probe = decider.handle(&empty, make(at), limits)?;
    if let Response::Acquire(Err(e))
    | Response::Done(Err(e))
    | Response::Extend(Err(e))
    | Response::Release(Err(e)) = &probe.step.reply
    {
        if e.is_invalid_request() && !probe.step.changed {
            return Ok(Some(Decided::unchanged(probe.step.reply, at)));
        }
    }
    Ok(None)
}
