//! [`ComponentRecords`]: the component's per-key `records` interface, speaking `lock-core`'s
//! types: what a host runs on the records of a shared store, so that the same WebAssembly bytes
//! decide there as in a table.

use std::fmt;

use lock_core::wire::{self, Response};
use lock_core::{Fence, Instant, KeyEvent, KeyInfo, Limits, LockError, Request, Step};
use wasmtime::Store;

use super::wit::{self, Lock};
use super::{HostError, StoreState};

/// One instance of the component, used for its pure `records` interface (no state between
/// calls). Not `Sync`: one per thread, or behind a mutex.
pub struct ComponentRecords {
    pub(super) store: Store<StoreState>,
    pub(super) bindings: Lock,
    pub(super) ticks: u64,
    pub(super) poisoned: Option<String>,
}

impl fmt::Debug for ComponentRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComponentRecords")
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

/// One transition of a key record, decided by the component: [`lock_core::Step`] (settle its
/// provisional fences with [`Step::settle`] after the write) and the record it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordStep<R> {
    /// The answer, the events, whether to write, how many tokens to allocate.
    pub step: Step<R>,
    /// The new record's bytes (`None`: it holds nothing; delete it). Only meaningful when
    /// `step.changed`.
    pub record: Option<Vec<u8>>,
    /// The key's clock after the transition.
    pub clock: Instant,
    /// The key's next change by time alone.
    pub next_deadline: Option<Instant>,
    /// When a free record may be collected.
    pub forget_at: Option<Instant>,
}

type WitStep = wit::exports::expiring::lock::records::Step;

fn record_step<R>(reply: R, s: WitStep) -> RecordStep<R> {
    RecordStep {
        step: Step {
            reply,
            events: (s.events.into_iter())
                .map(wit::event)
                .map(|e| KeyEvent {
                    at: e.at,
                    kind: e.kind,
                })
                .collect(),
            changed: s.changed,
            fresh_fences: s.fresh_fences as usize,
        },
        record: s.bytes,
        clock: Instant(s.clock),
        next_deadline: s.next_deadline.map(Instant),
        forget_at: s.forget_at.map(Instant),
    }
}

/// A record that does not decode, in the core's terms.
fn decode_error(
    e: &wit::exports::expiring::lock::types::LockError,
) -> Result<LockError, HostError> {
    wit::error(e).ok_or_else(|| {
        HostError::Mismatch(format!("the component answered an unknown error {e:?}"))
    })
}

impl ComponentRecords {
    fn enter(&mut self) -> Result<(), HostError> {
        if let Some(why) = &self.poisoned {
            return Err(HostError::Poisoned(why.clone()));
        }
        self.store.set_epoch_deadline(self.ticks);
        Ok(())
    }

    fn leave<T>(&mut self, result: wasmtime::Result<T>) -> Result<T, HostError> {
        result.map_err(|e| {
            let why = format!("{e:?}");
            self.poisoned = Some(why.clone());
            HostError::Trap(why)
        })
    }

    /// Runs `request` on a key's stored record (`None`: a key nobody used) whose provisional
    /// fences are `fresh`. The outer `Err` is a record that does not decode.
    ///
    /// # Errors
    /// [`HostError`] if the component traps or answers something this build does not know.
    pub fn handle(
        &mut self,
        limits: &Limits,
        record: Option<&[u8]>,
        fresh: &[Fence],
        request: Request<'_>,
    ) -> Result<Result<RecordStep<Response>, LockError>, HostError> {
        let mut bytes = Vec::with_capacity(32);
        let mut names = String::new();
        wire::encode_request(&mut bytes, &mut names, &request);
        let fresh: Vec<u64> = fresh.iter().map(|f| f.0).collect();
        self.enter()?;
        let result = self.bindings.expiring_lock_records().call_handle(
            &mut self.store,
            wit::limits(limits),
            record,
            &fresh,
            &bytes,
            &names,
        );
        match self.leave(result)? {
            Ok((response, step)) => {
                let mut responses = wire::decode_responses(&response).map_err(|e| {
                    HostError::Mismatch(format!(
                        "the component answered a malformed response: {e:?}"
                    ))
                })?;
                let reply = match (responses.pop(), responses.is_empty()) {
                    (Some(reply), true) => reply,
                    _ => {
                        return Err(HostError::Mismatch(
                            "the component answered other than one response".into(),
                        ))
                    }
                };
                Ok(Ok(record_step(reply, step)))
            }
            Err(e) => Ok(Err(decode_error(&e)?)),
        }
    }

    /// `key`'s holder and waiters at `now`, applying time first (which may change the record).
    /// The outer `Err` is a record that does not decode.
    ///
    /// # Errors
    /// [`HostError`] if the component traps or answers something this build does not know.
    #[allow(clippy::type_complexity)]
    pub fn inspect(
        &mut self,
        limits: &Limits,
        key: &str,
        record: Option<&[u8]>,
        fresh: &[Fence],
        now: Instant,
    ) -> Result<Result<RecordStep<Result<Option<KeyInfo>, LockError>>, LockError>, HostError> {
        let fresh: Vec<u64> = fresh.iter().map(|f| f.0).collect();
        self.enter()?;
        let result = self.bindings.expiring_lock_records().call_inspect(
            &mut self.store,
            wit::limits(limits),
            key,
            record,
            &fresh,
            now.0,
        );
        match self.leave(result)? {
            Ok((info, step)) => {
                let info = match info {
                    Ok(info) => Ok(info.map(wit::key_info)),
                    Err(e) => Err(decode_error(&e)?),
                };
                Ok(Ok(record_step(info, step)))
            }
            Err(e) => Ok(Err(decode_error(&e)?)),
        }
    }
}
