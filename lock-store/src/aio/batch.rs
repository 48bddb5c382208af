//! Calls on one key queued behind the key's turn and decided together by whoever takes it:
//! waiters' renewals (`renewals.rs`: one compare-and-set for all that are due) and waiters'
//! looks (`AsyncEngine::look`: one read for all that are asked at once). A caller that leaves
//! takes its own call out; a call left out of a batch (the deciding task was dropped, or the
//! batch ended early) is asked again: every batched call is idempotent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use crate::aio::engine::{AsyncEngine, Slot};
use crate::decider::Decider;

/// One queued call: what it asks (`T`) and where its answer (`A`) goes.
pub(crate) struct Entry<T, A> {
    id: u64,
    pub(crate) call: T,
    pub(crate) answer: oneshot::Sender<A>,
}

/// The calls of one kind queued on one key.
pub(crate) struct Batch<T, A> {
    queued: Mutex<Vec<Entry<T, A>>>,
}

impl<T, A> Default for Batch<T, A> {
    fn default() -> Self {
        Batch {
            queued: Mutex::new(Vec::new()),
        }
    }
}

impl<T, A> Batch<T, A> {
    fn queued(&self) -> MutexGuard<'_, Vec<Entry<T, A>>> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Tells queued calls apart (a caller that leaves takes its own out).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A queued call whose caller left takes no part in a later batch.
struct Queued<'b, T, A> {
    batch: &'b Batch<T, A>,
    id: u64,
}

impl<T, A> Drop for Queued<'_, T, A> {
    fn drop(&mut self) {
        self.batch.queued().retain(|e| e.id != self.id);
    }
}

impl<D: Decider> AsyncEngine<D> {
    /// Queues `call` on `key`'s batch (`which` of its slot) and waits for its answer: another
    /// task's batch may answer it; else this task takes the key's turn and runs `decide` on
    /// every call queued by then (its own among them), which answers each.
    pub(crate) async fn in_batch<T, A, F>(
        &self,
        key: &str,
        which: fn(&Slot) -> &Batch<T, A>,
        call: impl Fn() -> T,
        decide: impl Fn(Vec<Entry<T, A>>) -> F,
    ) -> A
    where
        F: std::future::Future<Output = ()>,
    {
        loop {
            // Held until this call is answered or left: the key's slot stays.
            let slot = self.slot(key);
            let batch = which(&slot);
            let (answer, mut heard) = oneshot::channel();
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            batch.queued().push(Entry {
                id,
                call: call(),
                answer,
            });
            let _queued = Queued { batch, id };
            let turn = tokio::select! {
                biased;
                answer = &mut heard => match answer {
                    Ok(answer) => return answer,
                    Err(_) => continue,
                },
                turn = self.turn(key) => turn,
            };
            let taken = std::mem::take(&mut *batch.queued());
            if !taken.is_empty() {
                decide(taken).await;
            }
            drop(turn);
            // Answered by now, or left out: then asked again.
            if let Ok(answer) = heard.await {
                return answer;
            }
        }
    }
}
