//! Who decides a key's transitions: a [`Decider`] runs `lock-core`'s `KeyRecord` transitions,
//! holds records between calls and reports what a transition did. [`Native`] is the core itself;
//! `lock-store` adds the lock component in wasmtime (the same WebAssembly bytes that decide in the
//! browser, in Node and in a plugin host).

use lock_core::{
    Fence, Instant, KeyEvent, KeyInfo, KeyRecord, Limits, LockError, Request, Response, Step,
};

use crate::records::Stored;

/// What one transition did, and the record it leaves (provisional fences until settled).
#[derive(Clone, Debug)]
pub struct Decision<Rec, R> {
    /// The answer, events, whether to write and how many tokens to allocate.
    pub step: Step<R>,
    /// The record after the transition, as the decider keeps it.
    pub after: Rec,
    /// The bytes to write (`None`: delete); only used when `step.changed`.
    pub bytes: Option<Vec<u8>>,
    /// The key's clock after the transition.
    pub clock: Instant,
    /// The key's next change by time alone.
    pub next_deadline: Option<Instant>,
    /// When a free record may be collected.
    pub forget_at: Option<Instant>,
    /// The latest instant a lease of the record holds or keeps its place (`KeyRecord::holds_until`):
    /// with the decision's clock, how long a store that lost this write must wait before it
    /// grants the key again.
    pub holds_until: Option<Instant>,
}

/// Why a decider could not decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecideError {
    /// The stored record does not decode.
    Corrupt(LockError),
    /// The decider itself failed (a component that trapped, or answered something unknown).
    Failed(String),
}

/// The answer of an inspect.
pub type InspectReply = Result<Option<KeyInfo>, LockError>;

/// Runs transitions on key records.
pub trait Decider: Send {
    /// A key's record as this decider keeps it between calls.
    type Record: Clone + Send;

    /// The record of a key nobody used.
    fn empty(&mut self) -> Self::Record;

    /// A stored record.
    ///
    /// # Errors
    /// [`DecideError::Corrupt`] if the decider decodes at once and the bytes are bad.
    fn load(&mut self, stored: &Stored, limits: &Limits) -> Result<Self::Record, DecideError>;

    /// Runs `request` on `record`.
    ///
    /// # Errors
    /// [`DecideError`].
    fn handle(
        &mut self,
        record: &Self::Record,
        request: Request<'_>,
        limits: &Limits,
    ) -> Result<Decision<Self::Record, Response>, DecideError>;

    /// Inspects `key`'s `record` at `now`.
    ///
    /// # Errors
    /// [`DecideError`].
    fn inspect(
        &mut self,
        record: &Self::Record,
        key: &str,
        now: Instant,
        limits: &Limits,
    ) -> Result<Decision<Self::Record, InspectReply>, DecideError>;

    /// Runs `first`, then each of `rest`, as one transition, each on the record the one before
    /// it left, and stops after the first that allocates fresh fencing tokens (the next would
    /// number its own from the same provisional base): the steps of those run, in order, and
    /// the record after the last. Written once, they all hold or none does.
    ///
    /// The default runs [`handle`](Self::handle) for each; a decider that can change a record
    /// in place does it without a copy and an encoding per request.
    ///
    /// # Errors
    /// [`DecideError`].
    fn handle_each<'r>(
        &mut self,
        record: &Self::Record,
        first: Request<'r>,
        rest: &mut dyn Iterator<Item = Request<'r>>,
        limits: &Limits,
    ) -> Result<Decision<Self::Record, Vec<Step<Response>>>, DecideError> {
        let mut together = Together::default();
        let mut bytes = None;
        let mut decided = self.handle(record, first, limits)?;
        loop {
            let Decision {
                step,
                after,
                bytes: written,
                clock,
                next_deadline,
                forget_at,
                holds_until,
            } = decided;
            if step.changed {
                bytes = Some(written);
            }
            let next = if together.push(step) {
                rest.next()
            } else {
                None
            };
            match next {
                Some(request) => decided = self.handle(&after, request, limits)?,
                None => {
                    return Ok(Decision {
                        step: together.step(),
                        after,
                        bytes: bytes.flatten(),
                        clock,
                        next_deadline,
                        forget_at,
                        holds_until,
                    })
                }
            }
        }
    }

    /// Puts the tokens the store allocated in place of the provisional ones, after the write.
    fn settle(&mut self, record: &mut Self::Record, fresh: &[Fence]);
}

/// The steps of requests run one after the other as one transition (see
/// [`Decider::handle_each`]).
#[derive(Default)]
struct Together {
    steps: Vec<Step<Response>>,
    events: Vec<KeyEvent>,
    changed: bool,
    fresh_fences: usize,
}

impl Together {
    /// Adds the next request's step: `false` when no more may follow (it allocates fresh
    /// fencing tokens).
    fn push(&mut self, step: Step<Response>) -> bool {
        self.changed |= step.changed;
        self.fresh_fences += step.fresh_fences;
        self.events.extend(step.events.iter().cloned());
        let more = step.fresh_fences == 0;
        self.steps.push(step);
        more
    }

    /// One step for all: each request's own in the reply; every event, for the hand-offs a
    /// driver announces (each reply's events are settled with the tokens, these are not).
    fn step(self) -> Step<Vec<Step<Response>>> {
        Step {
            reply: self.steps,
            events: self.events,
            changed: self.changed,
            fresh_fences: self.fresh_fences,
        }
    }
}

/// The native core decides.
#[derive(Clone, Copy, Debug, Default)]
pub struct Native;

fn native_decision<R>(step: Step<R>, after: KeyRecord, limits: &Limits) -> Decision<KeyRecord, R> {
    let bytes = (step.changed && !after.is_empty()).then(|| after.encode());
    Decision {
        clock: after.clock(),
        next_deadline: after.next_deadline(),
        forget_at: after.forget_at(limits),
        holds_until: after.holds_until(),
        step,
        after,
        bytes,
    }
}

impl Decider for Native {
    type Record = KeyRecord;

    fn empty(&mut self) -> KeyRecord {
        KeyRecord::new()
    }

    fn load(&mut self, stored: &Stored, limits: &Limits) -> Result<KeyRecord, DecideError> {
        KeyRecord::decode(&stored.bytes, &stored.fences, limits).map_err(DecideError::Corrupt)
    }

    fn handle(
        &mut self,
        record: &KeyRecord,
        request: Request<'_>,
        limits: &Limits,
    ) -> Result<Decision<KeyRecord, Response>, DecideError> {
        let mut after = record.clone();
        let step = after.handle(request, limits);
        Ok(native_decision(step, after, limits))
    }

    fn handle_each<'r>(
        &mut self,
        record: &KeyRecord,
        first: Request<'r>,
        rest: &mut dyn Iterator<Item = Request<'r>>,
        limits: &Limits,
    ) -> Result<Decision<KeyRecord, Vec<Step<Response>>>, DecideError> {
        // One copy and one encoding for the whole batch.
        let mut after = record.clone();
        let mut together = Together::default();
        let mut more = together.push(after.handle(first, limits));
        while more {
            let Some(request) = rest.next() else { break };
            more = together.push(after.handle(request, limits));
        }
        Ok(native_decision(together.step(), after, limits))
    }

    fn inspect(
        &mut self,
        record: &KeyRecord,
        key: &str,
        now: Instant,
        limits: &Limits,
    ) -> Result<Decision<KeyRecord, InspectReply>, DecideError> {
        let mut after = record.clone();
        let step = after.inspect(key, now, limits);
        Ok(native_decision(step, after, limits))
    }

    fn settle(&mut self, record: &mut KeyRecord, fresh: &[Fence]) {
        record.settle(fresh);
    }
}
