//! `RawRecord`: one key's record of a shared store, decided by `lock-core`'s `KeyRecord`, for
//! the npm package's store clients (the component's `records` interface, shaped for JS). A
//! client loads the stored bytes and the tokens the store allocated for them, runs one
//! operation, writes `bytes()` back with compare-and-set allocating `fresh_fences()` tokens
//! when `changed()`, then calls `answer` with those tokens: the reply and the events are final
//! only then (their new fences are provisional until the store has numbered them). Translation
//! only: nothing is decided here.

use lock_core::{Fence, KeyInfo, KeyRecord, Limits, LockError, Request, Response, Step};
use wasm_bindgen::prelude::*;

use super::answer::Answer;
use super::json::Obj;
use super::{at, code_of, details_of, limits_from, message_of, ms, span, DONE};

/// What the last operation left to answer.
enum Pending {
    None,
    Request(Step<Response>),
    Inspect(Step<Result<Option<KeyInfo>, LockError>>),
}

/// One key's record (not part of the package's public API: `KeyRecord` wraps it).
#[wasm_bindgen]
pub struct RawRecord {
    record: KeyRecord,
    limits: Limits,
    /// The key of the last operation (its events name it).
    key: String,
    pending: Pending,
    answer: Answer,
}

fn fences(fresh: &[f64]) -> Vec<Fence> {
    fresh.iter().map(|&f| Fence(ms(f))).collect()
}

#[wasm_bindgen]
impl RawRecord {
    /// A free record with `limits` (in `defaultLimitsJson()`'s order). On invalid limits the
    /// record is unusable and `error_code()` says why: check `failed()` first.
    #[wasm_bindgen(constructor)]
    pub fn new(limits: &[f64]) -> RawRecord {
        let limits = limits_from(limits);
        let error = limits.validate().err();
        RawRecord {
            record: KeyRecord::new(),
            limits,
            key: String::new(),
            pending: Pending::None,
            answer: Answer::new(error),
        }
    }

    /// Whether the constructor or the last `load` failed (see `error_code()`).
    pub fn failed(&self) -> bool {
        self.answer.error.is_some()
    }

    /// Address of the `out` buffer (four `f64`) in the module's memory.
    pub fn out_ptr(&self) -> *const f64 {
        self.answer.out.as_ptr()
    }

    /// Loads the stored record (none: a key nobody used) and the tokens the store allocated at
    /// its write: status 1, or 0 if it does not decode (`snapshot-*`, the record unchanged).
    pub fn load(&mut self, stored: Option<Vec<u8>>, fresh: &[f64]) -> u32 {
        let loaded = match stored {
            None => Ok(KeyRecord::new()),
            Some(bytes) => KeyRecord::decode(&bytes, &fences(fresh), &self.limits),
        };
        self.pending = Pending::None;
        match loaded {
            Ok(record) => {
                self.record = record;
                self.answer.error = None;
                DONE
            }
            Err(e) => self.answer.fail(e),
        }
    }

    fn run(&mut self, key: &str, request: Request<'_>) {
        self.key = key.to_owned();
        self.pending = Pending::Request(self.record.handle(request, &self.limits));
    }

    /// Runs `try_acquire` (answer with `answer`).
    pub fn try_acquire(&mut self, key: &str, owner: &str, ttl: f64, now: f64) {
        let (ttl, now) = (span(ttl), at(now));
        self.run(
            key,
            Request::TryAcquire {
                key,
                owner,
                ttl,
                now,
            },
        );
    }

    /// Runs `acquire` with an absolute wait deadline.
    pub fn acquire(&mut self, key: &str, owner: &str, ttl: f64, wait_deadline: f64, now: f64) {
        let (ttl, wait_deadline, now) = (span(ttl), at(wait_deadline), at(now));
        let request = Request::Acquire {
            key,
            owner,
            ttl,
            wait_deadline,
            now,
        };
        self.run(key, request);
    }

    /// Runs `release`.
    pub fn release(&mut self, key: &str, owner: &str, fence: f64, now: f64) {
        let (fence, now) = (Fence(ms(fence)), at(now));
        self.run(
            key,
            Request::Release {
                key,
                owner,
                fence,
                now,
            },
        );
    }

    /// Runs `extend`.
    pub fn extend(&mut self, key: &str, owner: &str, fence: f64, ttl: f64, now: f64) {
        let (fence, ttl, now) = (Fence(ms(fence)), span(ttl), at(now));
        let request = Request::Extend {
            key,
            owner,
            fence,
            ttl,
            now,
        };
        self.run(key, request);
    }

    /// Runs `cancel_wait`.
    pub fn cancel_wait(&mut self, key: &str, owner: &str, now: f64) {
        self.run(
            key,
            Request::CancelWait {
                key,
                owner,
                now: at(now),
            },
        );
    }

    /// Runs `renew_wait`.
    pub fn renew_wait(&mut self, key: &str, owner: &str, wait_deadline: f64, now: f64) {
        let (wait_deadline, now) = (at(wait_deadline), at(now));
        let request = Request::RenewWait {
            key,
            owner,
            wait_deadline,
            now,
        };
        self.run(key, request);
    }

    /// Applies time alone up to `now` (a table's timer for this key, `key`: its events name it).
    pub fn handle_timeout(&mut self, key: &str, now: f64) {
        let now = at(now);
        self.run(key, Request::HandleTimeout { now });
    }

    /// Inspects `key` at `now` (time applied first, which may change the record).
    pub fn inspect(&mut self, key: &str, now: f64) {
        self.key = key.to_owned();
        self.pending = Pending::Inspect(self.record.inspect(key, at(now), &self.limits));
    }

    /// Whether the last operation changed the record: its answer holds only once `bytes()` are
    /// written back with compare-and-set.
    pub fn changed(&self) -> bool {
        match &self.pending {
            Pending::None => false,
            Pending::Request(s) => s.changed,
            Pending::Inspect(s) => s.changed,
        }
    }

    /// How many fresh tokens that write must allocate, in order.
    pub fn fresh_fences(&self) -> u32 {
        let n = match &self.pending {
            Pending::None => 0,
            Pending::Request(s) => s.fresh_fences,
            Pending::Inspect(s) => s.fresh_fences,
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The record to write back (`None`: it holds nothing; delete it). Its new tokens are
    /// provisional until the store has numbered them.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        (!self.record.is_empty()).then(|| self.record.encode())
    }

    /// What the record holds at `now`, without changing it, as JSON: `{lease: {owner, fence,
    /// deadline} | null, waiters, nextDeadline, expiredRecords}` (`expiredRecords`: the expired
    /// leases still remembered at `now`).
    pub fn state_json(&self, now: f64) -> String {
        let state = self.record.state();
        let lease = state.lease().map_or_else(
            || String::from("null"),
            |l| {
                Obj::new()
                    .str("owner", l.owner())
                    .num("fence", l.fence().0)
                    .num("deadline", l.deadline().0)
                    .done()
            },
        );
        let next = self
            .record
            .next_deadline()
            .map_or_else(|| String::from("null"), |t| t.0.to_string());
        Obj::new()
            .raw("lease", &lease)
            .num("waiters", state.waiter_count() as u64)
            .raw("nextDeadline", &next)
            .num(
                "expiredRecords",
                self.record.remembered_expiries(at(now), &self.limits) as u64,
            )
            .done()
    }

    /// The latest instant applied to the key.
    pub fn clock(&self) -> f64 {
        self.record.clock().0 as f64
    }

    /// The key's next change by time alone, or -1 if none.
    pub fn next_deadline(&self) -> f64 {
        self.record.next_deadline().map_or(-1.0, |t| t.0 as f64)
    }

    /// When a free record holds nothing any more and may be collected, or -1.
    pub fn forget_at(&self) -> f64 {
        self.record
            .forget_at(&self.limits)
            .map_or(-1.0, |t| t.0 as f64)
    }

    /// The answer of the last operation, its provisional tokens replaced by `fresh` (the tokens
    /// the store allocated at the write; empty when none were asked for). Status as
    /// `RawTable`'s calls: 0 (an error), 1 (done; `out = [fence, deadline]` after `extend`),
    /// or 2 + an acquire outcome's index (`out = [fence or position, deadline]`). After
    /// `inspect`, 1 and `info_json()`. `events_json()` holds the key's events either way. The
    /// wrapper checks that every token is a safe integer.
    pub fn answer(&mut self, fresh: &[f64]) -> u32 {
        let fresh = fences(fresh);
        self.record.settle(&fresh);
        self.answer.error = None;
        let key = std::mem::take(&mut self.key);
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::None => DONE,
            Pending::Inspect(mut step) => {
                step.settle(&fresh);
                self.answer.events(&key, &step.events);
                self.answer.inspect(step.reply)
            }
            Pending::Request(mut step) => {
                step.settle(&fresh);
                self.answer.events(&key, &step.events);
                self.answer.request(step.reply)
            }
        }
    }

    /// The holder and waiters of the last answered `inspect` as JSON (`null`: free).
    pub fn info_json(&self) -> String {
        self.answer.info.clone()
    }

    /// The key's events of the last answer, oldest first, as a JSON array.
    pub fn events_json(&self) -> String {
        self.answer.events.clone()
    }

    /// The kebab-case code of the last error (`""` if none).
    pub fn error_code(&self) -> String {
        code_of(self.answer.error.as_ref())
    }

    /// The human-readable message of the last error.
    pub fn error_message(&self) -> String {
        message_of(self.answer.error.as_ref())
    }

    /// The payload of the last error as a JSON object.
    pub fn error_details(&self) -> String {
        details_of(self.answer.error.as_ref())
    }
}
