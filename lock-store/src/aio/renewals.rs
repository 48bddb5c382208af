//! The `renew-wait`s of one key's waiters, decided together: one read and one compare-and-set
//! for all the renewals of an [`AsyncEngine`] that are due at once, instead of one each.
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
//! batch whose deciding task was dropped: a renewal is idempotent.

use std::sync::atomic::{AtomicU64, Ordering};

use lock_core::{Fence, Instant, Limits, Response, Step};
use tokio::sync::oneshot;

use crate::aio::engine::{AsyncEngine, Slot};
use crate::decider::{DecideError, Decider, Decision};
use crate::engine::Decided;
use crate::queue::renew_wait;
use crate::store::StoreError;

/// What a renewal hears: the answer its own transition gave.
type Answer = Result<Decided<Response>, StoreError>;

/// One waiter's renewal, waiting for a batch (in its key's [`Slot`]).
pub(crate) struct Renewal {
    id: u64,
    owner: String,
    /// The end of the owner's whole wait (see [`Acquiring::until`](crate::queue::Acquiring)).
    until: Instant,
    answer: oneshot::Sender<Answer>,
}

/// Tells queued renewals apart (a caller that leaves takes its own out).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A queued renewal whose caller left takes no part in a later batch.
struct Queued<'s> {
    slot: &'s Slot,
    id: u64,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.slot.renewals().retain(|r| r.id != self.id);
    }
}

impl<D: Decider> AsyncEngine<D> {
    /// Renews `owner`'s place on `key` (its whole wait ending at `until`), with whatever other
    /// renewals of this engine on the key are due: the answer is this renewal's own.
    pub(crate) async fn renew_wait(&self, key: &str, owner: &str, until: Instant) -> Answer {
        loop {
            // Held until this renewal is answered or left: its key's slot stays.
            let slot = self.slot(key);
            let (answer, mut heard) = oneshot::channel();
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            slot.renewals().push(Renewal {
                id,
                owner: owner.to_owned(),
                until,
                answer,
            });
            let _queued = Queued { slot: &slot, id };
            // Another task's batch may answer first; else this one decides the batch.
            let turn = tokio::select! {
                biased;
                answer = &mut heard => match answer {
                    Ok(answer) => return answer,
                    Err(_) => continue,
                },
                turn = self.turn(key) => turn,
            };
            let batch = std::mem::take(&mut *slot.renewals());
            if !batch.is_empty() {
                self.decide_renewals(key, batch).await;
            }
            drop(turn);
            // Answered by now, or left out (dropped): then asked again.
            if let Ok(answer) = heard.await {
                return answer;
            }
        }
    }

    /// Decides `batch` (in its order) in one exchange and answers each renewal decided.
    async fn decide_renewals(&self, key: &str, batch: Vec<Renewal>) {
        let limits = self.limits();
        let decide = |d: &mut D, record: &D::Record, now| {
            decide_together(d, record, now, key, &batch, limits)
        };
        match self.run_in_turn(key, decide, settle_together).await {
            Ok(decided) => {
                let answers = split(decided);
                // Renewals past the end of the batch are dropped unanswered: asked again.
                for (renewal, answer) in batch.into_iter().zip(answers) {
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
}

/// Runs the renewals of `batch` one after the other on `record` at `now`, as one transition
/// (see [`Decider::handle_each`]).
fn decide_together<D: Decider>(
    decider: &mut D,
    record: &D::Record,
    now: Instant,
    key: &str,
    batch: &[Renewal],
    limits: &Limits,
) -> Result<Decision<D::Record, Vec<Step<Response>>>, DecideError> {
    let mut requests = batch
        .iter()
        .map(|r| renew_wait(key, &r.owner, r.until, now));
    let Some(first) = requests.next() else {
        return Err(DecideError::Failed("an empty batch of renewals".into()));
    };
    decider.handle_each(record, first, &mut requests, limits)
}

/// Puts the store's fresh tokens in every answer (only the batch's last step can have asked
/// for any).
fn settle_together(step: &mut Step<Vec<Step<Response>>>, fresh: &[Fence]) {
    for step in &mut step.reply {
        step.settle(fresh);
    }
}

/// Each renewal's own answer out of the batch's.
fn split(decided: Decided<Vec<Step<Response>>>) -> impl Iterator<Item = Decided<Response>> {
    let Decided {
        reply,
        now,
        next_deadline,
        clock,
        ambiguous,
        ..
    } = decided;
    reply.into_iter().map(move |step| Decided {
        reply: step.reply,
        events: step.events,
        now,
        next_deadline,
        clock,
        ambiguous,
    })
}
