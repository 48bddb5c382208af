//! The `renew-wait`s of one key's waiters, decided together: one read and one compare-and-set
//! for all the renewals of an async engine that are due at once (`AsyncEngine::renew_wait`), instead of one each.
//!
//! Every waiter renews its place about every `WAIT_ALIVE / 3` (`queue.rs`), and each renewal
//! rewrites the key's whole record, which holds every waiter. A thousand tasks waiting on one
//! key would need 1 500 writes a second of a record that grew with them; together, they need a
//! few. Nothing is decided differently: the core runs each renewal in turn on the record the
//! one before it left (exactly as if they had come one after the other), and the
//! compare-and-set of the last record makes them all hold or none.
//!
//! A batch ends after a decision that allocates fresh fencing tokens (a renewal at an instant
//! when an expired lease is handed to the next waiter): the next decision would number its own
//! from the same provisional base. The renewals left out are asked again, as are those of a
//! batch whose deciding task was dropped: a renewal is idempotent (`batch.rs`).

use lock_core::{Instant, Limits, Response, Step};

use crate::aio::batch::Entry;
use crate::decider::{DecideError, Decider, Decision};
use crate::store::StoreError;
use lock_protocol::decided::Decided;
use lock_protocol::queue::renew_wait;

/// What a renewal hears: the answer its own transition gave.
pub(crate) type Answer = Result<Decided<Response>, StoreError>;

/// One waiter's renewal: its owner and the end of its whole wait (see
/// [`Acquiring::until`](lock_protocol::queue::Acquiring)).
pub(crate) struct Renewal {
    owner: String,
    until: Instant,
}

impl Renewal {
    /// `owner`'s renewal, its whole wait ending at `until`.
    pub(crate) fn new(owner: &str, until: Instant) -> Self {
        Renewal {
            owner: owner.to_owned(),
            until,
        }
    }
}

/// Answers each renewal of `batch` with its own part of `decided` (renewals past the end of
/// what was decided are dropped unanswered: asked again).
pub(crate) fn answer_each(
    batch: Vec<Entry<Renewal, Answer>>,
    decided: Result<Decided<Vec<Step<Response>>>, StoreError>,
) {
    match decided {
        Ok(decided) => {
            for (renewal, answer) in batch.into_iter().zip(decided.split()) {
                let _ = renewal.answer.send(Ok(answer));
            }
        }
        Err(e) => {
            for renewal in batch {
                let _ = renewal.answer.send(Err(e.clone()));
            }
        }
    }
}

/// Runs the renewals of `batch` one after the other on `record` at `now`, as one transition
/// (see [`Decider::handle_each`]).
pub(crate) fn decide_together<D: Decider>(
    decider: &mut D,
    record: &D::Record,
    now: Instant,
    key: &str,
    batch: &[Entry<Renewal, Answer>],
    limits: &Limits,
) -> Result<Decision<D::Record, Vec<Step<Response>>>, DecideError> {
    let mut requests = batch
        .iter()
        .map(|e| renew_wait(key, &e.call.owner, e.call.until, now));
    let Some(first) = requests.next() else {
        return Err(DecideError::Failed("an empty batch of renewals".into()));
    };
    decider.handle_each(record, first, &mut requests, limits)
}
