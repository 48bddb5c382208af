//! Calls on one key queued behind the key's turn and decided together by whoever takes it
//! (`AsyncEngine::in_batch`): waiters' renewals (`renewals.rs`: one compare-and-set for all that
//! are due) and waiters' looks (`AsyncEngine::look`: one read for all that are asked at once). A caller that leaves
//! takes its own call out; a call left out of a batch (the deciding task was dropped, or the
//! batch ended early) is asked again: every batched call is idempotent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

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

    /// Queues `call`: its answer comes on the receiver; it leaves the batch when the guard is
    /// dropped (its caller left).
    pub(crate) fn queue(&self, call: T) -> (Queued<'_, T, A>, oneshot::Receiver<A>) {
        let (answer, heard) = oneshot::channel();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.queued().push(Entry { id, call, answer });
        (Queued { batch: self, id }, heard)
    }

    /// Takes every call queued by now, to be decided together.
    pub(crate) fn take(&self) -> Vec<Entry<T, A>> {
        std::mem::take(&mut *self.queued())
    }
}

/// Tells queued calls apart (a caller that leaves takes its own out).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A queued call whose caller left takes no part in a later batch.
pub(crate) struct Queued<'b, T, A> {
    batch: &'b Batch<T, A>,
    id: u64,
}

impl<T, A> Drop for Queued<'_, T, A> {
    fn drop(&mut self) {
        self.batch.queued().retain(|e| e.id != self.id);
    }
}
