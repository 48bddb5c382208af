//! The async driver of the decision loop: the same [`Exchange`] and [`Memory`] as the blocking
//! [`Engine`](crate::store::Engine), with the IO awaited on an [`AsyncStore`]. The records it
//! remembers and the decider are locked only while a decision is made, so the calls of many
//! tasks on different keys are in flight at once. Calls on one key take turns (first come,
//! first served): they would otherwise only meet each other's compare-and-sets, and each starts
//! from the record the one before it wrote, so an uncontended call stays one round trip.
//! Waiters' renewals due at once take one turn together (`renewals.rs`); a key's turn and
//! its queued renewals live in one [`Slot`], dropped when idle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration as StdDuration;

use crate::local::{LocalInstant, ProcessClock};

use lock_core::{Fence, Instant, KeyInfo, Limits, LockError, Request, Response, Step};

use tokio::sync::oneshot;

use crate::aio::batch::{Batch, Entry};
use crate::aio::renewals::{self, Renewal};
use crate::async_store::AsyncStore;
use crate::decider::{DecideError, Decider, Decision};
use crate::store::{new_version, no_answer, StoreError};
use lock_protocol::decided::{refuse_invalid, settle_each, Decided, TimeSource};
use lock_protocol::exchange::{decide_error, stopped};
use lock_protocol::exchange::{Exchange, Io, Memory, Stop};

/// Decides calls on one async store with the store's clock.
pub(crate) struct AsyncEngine<D: Decider> {
    store: Arc<dyn AsyncStore>,
    decider: Mutex<D>,
    limits: Limits,
    memory: Mutex<Memory<D::Record>>,
    /// A slot per key with calls in flight or renewals queued (see [`Slot`]).
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

/// What an inspection answers: the holder and waiters (or a refusal), as decided.
pub(crate) type Inspected = Result<Decided<Result<Option<KeyInfo>, LockError>>, StoreError>;

/// What the calls of one engine on one key share while any is in flight: their turn and the
/// waiters' renewals queued for a batch. The engine drops it when nobody holds it.
#[derive(Default)]
pub(crate) struct Slot {
    /// The calls on the key run one at a time, in the order they asked (tokio's mutex is fair).
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Renewals due, decided together by a turn's holder (`renewals.rs`).
    pub(crate) renewals: Batch<Renewal, renewals::Answer>,
    /// Waiters' looks, answered together by one read (see [`AsyncEngine::look`]).
    pub(crate) looks: Batch<(), Inspected>,
}

/// A key's [`Slot`] as one caller holds it: dropping the last holder removes it from the
/// engine.
pub(crate) struct Held<'e> {
    slots: &'e Mutex<HashMap<String, Arc<Slot>>>,
    key: &'e str,
    /// Always `Some` until dropped.
    slot: Option<Arc<Slot>>,
}

impl std::ops::Deref for Held<'_> {
    type Target = Slot;
    fn deref(&self) -> &Slot {
        match &self.slot {
            Some(slot) => slot,
            None => unreachable!("the slot is only taken when dropped"),
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // The map's and this one: nobody else holds or waits.
        if Arc::strong_count(&slot) == 2 {
            slots.remove(self.key);
        }
    }
}

/// A call's turn on its key: the calls of one engine on one key run one at a time.
pub(crate) struct Turn<'e> {
    // Declared first: released before the slot is let go.
    _guard: tokio::sync::OwnedMutexGuard<()>,
    _slot: Held<'e>,
}

impl<D: Decider> AsyncEngine<D> {
    /// An engine over `store` decided by `decider`.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] if a limit is out of range.
    pub(crate) fn new(
        store: Arc<dyn AsyncStore>,
        decider: D,
        limits: Limits,
    ) -> Result<Self, LockError> {
        limits.validate()?;
        Ok(AsyncEngine {
            store,
            decider: Mutex::new(decider),
            limits,
            memory: Mutex::new(Memory::default()),
            slots: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn store(&self) -> &Arc<dyn AsyncStore> {
        &self.store
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    // Neither lock is held across an await (their guards are not `Send`), and no invariant
    // spans a panic: at worst a remembered record is stale and the next compare-and-set
    // corrects it.
    fn decider(&self) -> MutexGuard<'_, D> {
        self.decider.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn memory(&self) -> MutexGuard<'_, Memory<D::Record>> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `key`'s slot, made if the key has none.
    pub(crate) fn slot<'e>(&'e self, key: &'e str) -> Held<'e> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = Arc::clone(slots.entry(key.to_owned()).or_default());
        Held {
            slots: &self.slots,
            key,
            slot: Some(slot),
        }
    }

    /// Waits for this call's turn on `key`.
    pub(crate) async fn turn<'e>(&'e self, key: &'e str) -> Turn<'e> {
        let slot = self.slot(key);
        let turn = Arc::clone(&slot.turn);
        Turn {
            _guard: turn.lock_owned().await,
            _slot: slot,
        }
    }

    /// Runs `make(now)` on `key` at the store's time (see
    /// [`Engine::request`](crate::store::Engine::request)).
    pub(crate) async fn request<'r>(
        &self,
        key: &str,
        make: impl Fn(Instant) -> Request<'r> + Send + Sync,
    ) -> Result<Decided<Response>, StoreError> {
        let limits = &self.limits;
        let refused = refuse_invalid(&mut *self.decider(), limits, Instant::ZERO, &make);
        if let Some(refused) = refused.map_err(|e| decide_error(&self.store.describe(), key, e))? {
            return Ok(refused);
        }
        let decide = |d: &mut D, record: &D::Record, now| d.handle(record, make(now), limits);
        let decided = self.run(key, decide, Step::<Response>::settle).await;
        // A namespace that does not exist yet is created by its first write, and only then.
        if let Err(StoreError::NoNamespace { .. }) = decided {
            self.bounded(self.store.install(), LocalInstant::now(), true)
                .await?;
            return self.run(key, decide, Step::<Response>::settle).await;
        }
        decided
    }

    /// The key's holder and waiters at the store's time.
    pub(crate) async fn inspect(
        &self,
        key: &str,
    ) -> Result<Decided<Result<Option<KeyInfo>, LockError>>, StoreError> {
        let limits = &self.limits;
        if let Err(e) = limits.check_key(key) {
            return Ok(Decided::unchanged(Err(e), Instant::ZERO));
        }
        let decide = |d: &mut D, record: &D::Record, now| d.inspect(record, key, now, limits);
        self.run(
            key,
            decide,
            Step::<Result<Option<KeyInfo>, LockError>>::settle,
        )
        .await
    }

    /// [`inspect`](Self::inspect) for a waiter's look: the looks at `key` asked while another
    /// call has the key's turn are answered by one read, by whichever of them takes the turn
    /// next (so each is answered by a read sent after it was asked).
    pub(crate) async fn look(&self, key: &str) -> Inspected {
        let limits = &self.limits;
        if let Err(e) = limits.check_key(key) {
            return Ok(Decided::unchanged(Err(e), Instant::ZERO));
        }
        let decide = move |batch: Vec<Entry<(), _>>| async move {
            let decide = |d: &mut D, record: &D::Record, now| d.inspect(record, key, now, limits);
            let settle = Step::<Result<Option<KeyInfo>, LockError>>::settle;
            let answer = self.run_in_turn(key, decide, settle).await;
            for entry in batch {
                let _ = entry.answer.send(answer.clone());
            }
        };
        self.in_batch(key, |slot| &slot.looks, || (), decide).await
    }

    /// Renews `owner`'s place on `key` (its whole wait ending at `until`), with whatever other
    /// renewals of this engine on the key are due (`renewals.rs`): the answer is this
    /// renewal's own.
    pub(crate) async fn renew_wait(
        &self,
        key: &str,
        owner: &str,
        until: Instant,
    ) -> renewals::Answer {
        let decide = move |batch: Vec<Entry<Renewal, renewals::Answer>>| async move {
            let limits = &self.limits;
            let decide = |d: &mut D, record: &D::Record, now| {
                renewals::decide_together(d, record, now, key, &batch, limits)
            };
            let decided = self.run_in_turn(key, decide, settle_each).await;
            renewals::answer_each(batch, decided);
        };
        let call = || Renewal::new(owner, until);
        self.in_batch(key, |slot| &slot.renewals, call, decide)
            .await
    }

    /// Queues `call` on `key`'s batch (`which` of its slot) and waits for its answer: another
    /// task's batch may answer it; else this task takes the key's turn and runs `decide` on
    /// every call queued by then (its own among them), which answers each.
    async fn in_batch<T, A, F>(
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
            let (_queued, mut heard): (_, oneshot::Receiver<A>) = batch.queue(call());
            let turn = tokio::select! {
                biased;
                answer = &mut heard => match answer {
                    Ok(answer) => return answer,
                    Err(_) => continue,
                },
                turn = self.turn(key) => turn,
            };
            let taken = batch.take();
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

    /// One store call held to what remains of the request's bound (the whole bound for its
    /// first call): past it, [`StoreError::Lost`].
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, StoreError>>,
        start: LocalInstant,
        first: bool,
    ) -> Result<T, StoreError> {
        let Some(bound) = self.store.bound() else {
            return call.await;
        };
        let left = if first {
            bound
        } else {
            bound.saturating_sub(start.elapsed())
        };
        match tokio::time::timeout(left, call).await {
            Ok(result) => result,
            Err(_) => Err(no_answer(self.store.describe(), bound)),
        }
    }

    /// One call on `key`, in its turn.
    async fn run<R>(
        &self,
        key: &str,
        decide: impl FnMut(&mut D, &D::Record, Instant) -> Result<Decision<D::Record, R>, DecideError>
            + Send,
        settle: fn(&mut Step<R>, &[Fence]),
    ) -> Result<Decided<R>, StoreError> {
        let _turn = self.turn(key).await;
        self.run_in_turn(key, decide, settle).await
    }

    /// One call on `key` by a caller that holds the key's [`Turn`].
    pub(crate) async fn run_in_turn<R>(
        &self,
        key: &str,
        mut decide: impl FnMut(&mut D, &D::Record, Instant) -> Result<Decision<D::Record, R>, DecideError>
            + Send,
        settle: fn(&mut Step<R>, &[Fence]),
    ) -> Result<Decided<R>, StoreError> {
        let start = LocalInstant::now();
        let remembered = self.memory().start(key, start, &mut *self.decider());
        let limits = &self.limits;
        let mut exchange = Exchange::<D, R>::new(
            TimeSource::Store,
            Instant::ZERO,
            limits.clone(),
            remembered,
            new_version(),
            settle,
        );
        let describe = || self.store.describe();
        let mut t = start;
        let mut first = true;
        loop {
            let mut pause = StdDuration::ZERO;
            let polled = exchange.poll(&mut *self.decider(), t, &mut decide);
            let (done, sent) = match polled {
                Err(stop) => return Err(stopped(&describe(), key, stop)),
                Ok(None) => break,
                Ok(Some(Io::Pause(p))) => {
                    pause = p;
                    (None, t)
                }
                Ok(Some(Io::Read)) => {
                    let sent = LocalInstant::now();
                    let read = self.bounded(self.store.read(key), start, first).await;
                    (Some(Err(read)), sent)
                }
                Ok(Some(Io::Write(write))) => {
                    let written = self
                        .bounded(self.store.write(key, &write), start, first)
                        .await;
                    (Some(Ok(written)), t)
                }
            };
            if done.is_none() {
                tokio::time::sleep(pause).await;
                t = LocalInstant::now();
                continue;
            }
            first = false;
            let arrived = LocalInstant::now();
            let handled = match done {
                Some(Err(read)) => exchange.handle_read(&mut *self.decider(), read, sent, arrived),
                Some(Ok(written)) => {
                    exchange.handle_written(&mut *self.decider(), written, arrived)
                }
                None => Ok(()),
            };
            handled.map_err(|stop| stopped(&describe(), key, stop))?;
            t = arrived;
        }
        let Some(finished) = exchange.finished() else {
            return Err(stopped(&describe(), key, Stop::Contention));
        };
        // Wake whoever was just handed the key (best effort: waiters also look by themselves).
        for owner in finished.handed_to() {
            let _ = self
                .bounded(self.store.announce(key, owner), LocalInstant::now(), true)
                .await;
        }
        self.memory().keep(key, finished.remember);
        Ok(finished.decided)
    }
}
