//! `RawClient`: the store client protocol (its [`driver`](lock_protocol::driver)) for the npm
//! package's store clients, which do the IO in JS (ioredis, pg, mysql2, better-sqlite3) and
//! hand every answer back here: the reads and compare-and-sets, the re-read of an ambiguous
//! write, the pauses after conflicts, the tombstones and the bounds on the store's clock are the
//! Rust clients' own, on the same records. Translation only: nothing is decided here.
//!
//! Local time comes in as the JS monotonic clock (`performance.now()`, milliseconds as a
//! float), turned into nanoseconds. Record versions cross as decimal strings (they are 64-bit).

use lock_core::{AcquireOutcome, Fence, Instant, Reply, Response};
use lock_protocol::decided::TimeSource;
use lock_protocol::driver::{
    Call, Client, LocalInstant, Next, Op, Outcome, OwnedOptions, Waiting, Wanted, Won,
};
use lock_protocol::holding;
use lock_protocol::records::{Read, Stored, Written};
use lock_protocol::{Error, StoreError};
use wasm_bindgen::prelude::*;

use super::answer::Answer;
use super::json::{self, Obj};
use super::{
    at, code_of, count, details_of, limits_from, message_of, ms, options, span, DONE, FAILED,
};

/// Status of `poll`: the call stopped on a store error (read `store_error_*`).
const STOPPED: u32 = 0;
/// Status of `poll`: read the key.
const READ: u32 = 1;
/// Status of `poll`: send the compare-and-set the call's `write_*` describe.
const WRITE: u32 = 2;
/// Status of `poll`: pause `pause_ms()`, then poll again.
const PAUSE: u32 = 3;
/// Status of `poll`: over; `finish` the call.
const OVER: u32 = 4;
/// Status of `finish`: the call failed on a store error (read `store_error_*`).
const STORE_FAILED: u32 = 100;

/// The operation named `op` with its arguments (`None`: no such operation); `acquire-with` and
/// `steal` take `options`.
fn op_of(
    op: &str,
    owner: &str,
    fence: f64,
    ttl: f64,
    wait_deadline: f64,
    options: &OwnedOptions,
) -> Option<Op> {
    let owner = owner.to_owned();
    let (fence, ttl, wait_deadline) = (Fence(ms(fence)), span(ttl), at(wait_deadline));
    Some(match op {
        "try-acquire" => Op::TryAcquire { owner, ttl },
        "acquire-with" => Op::AcquireWith {
            owner,
            ttl,
            wait_deadline,
            options: options.clone(),
        },
        "steal" => Op::Steal {
            owner,
            ttl,
            options: options.clone(),
        },
        "acquire" => Op::Acquire {
            owner,
            ttl,
            wait_deadline,
        },
        "release" => Op::Release { owner, fence },
        "extend" => Op::Extend { owner, fence, ttl },
        "cancel-wait" => Op::CancelWait { owner },
        "renew-wait" => Op::RenewWait {
            owner,
            wait_deadline,
        },
        "handle-timeout" => Op::HandleTimeout,
        "inspect" => Op::Inspect,
        _ => return None,
    })
}

/// A local instant from JS milliseconds of a monotonic clock.
fn local(t: f64) -> LocalInstant {
    // `as` saturates (negative or NaN: 0); the wrapper passes `performance.now()`.
    LocalInstant::from_nanos((t * 1e6) as u64)
}

fn fences(values: &[f64]) -> Vec<Fence> {
    values.iter().map(|&f| Fence(ms(f))).collect()
}

/// The compare-and-set of a call, copied out for the wrapper.
struct OwnedWrite {
    expected: u64,
    replaces: Vec<u8>,
    version: u64,
    /// `None`: delete.
    bytes: Option<Vec<u8>>,
    fresh_fences: u32,
    not_before: Option<Instant>,
    forget_at: Option<Instant>,
    holds_for: lock_core::Duration,
}

/// One call in progress (not part of the package's public API).
#[wasm_bindgen]
pub struct RawCall {
    call: Call,
    write: Option<OwnedWrite>,
    pause_ms: f64,
    /// A release's lease: its deadline, and whether an earlier attempt failed (see `of_lease`).
    lease: Option<(Instant, bool)>,
}

#[wasm_bindgen]
impl RawCall {
    /// Makes this release the release of a lease whose deadline is `deadline_ms` (store's time;
    /// `unsure`: an earlier attempt of it failed with a store error): a refusal that means the
    /// release took effect answers done, as the Rust `Lease` does (lock-protocol's
    /// `Outcome::settle_release`).
    pub fn of_lease(&mut self, deadline_ms: f64, unsure: bool) {
        self.lease = Some((at(deadline_ms), unsure));
    }

    /// The version the compare-and-set expects (decimal; "0": no record).
    pub fn write_expected(&self) -> String {
        self.write.as_ref().map_or(0, |w| w.expected).to_string()
    }

    /// The bytes of the record it replaces (compared with the version).
    pub fn write_replaces(&self) -> Vec<u8> {
        self.write
            .as_ref()
            .map(|w| w.replaces.clone())
            .unwrap_or_default()
    }

    /// The version it writes (decimal, never "0").
    pub fn write_version(&self) -> String {
        self.write.as_ref().map_or(0, |w| w.version).to_string()
    }

    /// The record it writes (`None`: delete the key's record).
    pub fn write_bytes(&self) -> Option<Vec<u8>> {
        self.write.as_ref().and_then(|w| w.bytes.clone())
    }

    /// How many fresh fencing tokens the store allocates with it.
    pub fn write_fresh_fences(&self) -> u32 {
        self.write.as_ref().map_or(0, |w| w.fresh_fences)
    }

    /// The store refuses it (as a conflict) while its clock is before this (ms; -1: none).
    pub fn write_not_before(&self) -> f64 {
        self.write
            .as_ref()
            .and_then(|w| w.not_before)
            .map_or(-1.0, |t| t.0 as f64)
    }

    /// When the store may drop the record by itself (ms; -1: keep it).
    pub fn write_forget_at(&self) -> f64 {
        self.write
            .as_ref()
            .and_then(|w| w.forget_at)
            .map_or(-1.0, |t| t.0 as f64)
    }

    /// How long a lease of the record it writes holds its place (ms; 0: none): the store keeps
    /// the longest as its recovery delay.
    pub fn write_holds_for(&self) -> f64 {
        self.write
            .as_ref()
            .map_or(0.0, |w| w.holds_for.as_millis() as f64)
    }

    /// How long to pause after a conflict (ms).
    pub fn pause_ms(&self) -> f64 {
        self.pause_ms
    }
}

/// Status of `RawWaiting::want`: run `call_waiting` (an acquire or a renewal of the place).
const WANT_CALL: u32 = 1;
/// Status of `RawWaiting::want`: run `call_waiting` (an inspection).
const WANT_LOOK: u32 = 3;
/// Status of `RawWaiting::want`: nap `nap_ms()` or until this owner's hand-off notice.
const WANT_NAP: u32 = 4;
/// Status of `RawWaiting::want`: pause `nap_ms()` (a store call failed).
const WANT_PAUSE: u32 = 5;

/// Status of `finish_waiting`: go on (`want` again).
const GO_ON: u32 = 0;
/// Status of `finish_waiting`: won (`fence()`, `deadline()`, `local_end()`).
const WON: u32 = 1;
/// Status of `finish_waiting`: a lock error (`error_*`).
const WAIT_LOCK_ERROR: u32 = 2;
/// Status of `finish_waiting`: the namespace does not exist: install it, then `call_waiting`
/// again (the same call).
const WAIT_INSTALL: u32 = 3;
/// Status of `finish_waiting`: a store error (`store_error_*`).
const WAIT_STORE_ERROR: u32 = 4;
/// Status of `finish_waiting`: the wait timed out.
const WAIT_TIMED_OUT: u32 = 5;
/// Status of `finish_waiting`: this owner already waits for this key.
const WAIT_ALREADY_WAITING: u32 = 6;
/// Status of `RawClient::finish_waiting`: the give-up (`RawWaiting::give_up`) is over.
const WAIT_GAVE_UP: u32 = 7;

/// An `acquire` with a wait (not part of the package's public API): the Rust `Locks`' waiting
/// rules, driven through a `RawClient`.
#[wasm_bindgen]
pub struct RawWaiting {
    waiting: Waiting,
    /// The operation of the last `want`, for `call_waiting`.
    op: Option<Op>,
    nap_ms: f64,
    won: Option<Won>,
}

#[wasm_bindgen]
impl RawWaiting {
    /// An acquire of `key` for `owner` for `ttl` ms, waiting up to `wait` ms; `poll` ms is the
    /// longest nap without hand-off notices.
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)] // flat numbers: no object crosses the boundary
    pub fn new(
        key: &str,
        owner: &str,
        ttl: f64,
        wait: f64,
        poll: f64,
        shared: bool,
        permits: f64,
        min_hold: f64,
        lock_delay: f64,
        metadata: &str,
    ) -> RawWaiting {
        let d = |v: f64| std::time::Duration::from_millis(ms(v));
        // A waiting call keeps its place by the loop's own renewals (`WAIT_ALIVE`).
        let options = options(shared, permits, min_hold, lock_delay, metadata, 0.0);
        RawWaiting {
            waiting: Waiting::with_options(key, owner, d(ttl), d(wait), d(poll), &options),
            op: None,
            nap_ms: 0.0,
            won: None,
        }
    }

    /// What to do next: 1 (an ask, or a call of a give-up), 2 (a renewal) or 3 (a look):
    /// `call_waiting`; 4: nap `nap_ms()` or until this owner's hand-off notice; 5: pause
    /// `nap_ms()`.
    pub fn want(&mut self) -> u32 {
        match self.waiting.want() {
            Wanted::Ask(op) => {
                self.op = Some(op);
                WANT_CALL
            }
            Wanted::Renew(op) => {
                self.op = Some(op);
                WANT_CALL + 1
            }
            Wanted::Look => {
                self.op = Some(Op::Inspect);
                WANT_LOOK
            }
            Wanted::Nap(nap) => {
                self.nap_ms = nap.as_secs_f64() * 1000.0;
                WANT_NAP
            }
            Wanted::Pause(pause) => {
                self.nap_ms = pause.as_secs_f64() * 1000.0;
                WANT_PAUSE
            }
            Wanted::Leave(op) => {
                self.op = Some(op);
                WANT_CALL
            }
        }
    }

    /// The caller gives up at local instant `t` ms (its signal aborted): `false` if nothing is
    /// left to do; `true` to go on with what `want` asks until `finish_waiting` ends the wait
    /// (its status is then to be ignored): the wait is cancelled, and a lease it was handed
    /// meanwhile (or won and not yet taken) released.
    pub fn give_up(&mut self, t: f64) -> bool {
        self.won = None;
        self.waiting.give_up(local(t))
    }

    /// How long to nap or pause (ms).
    pub fn nap_ms(&self) -> f64 {
        self.nap_ms
    }

    /// Whether the caller is queued (a failure must cancel its wait first).
    pub fn in_line(&self) -> bool {
        self.waiting.in_line()
    }

    /// The driver now hears (or no longer hears) this owner's hand-off notices.
    pub fn watching(&mut self, watched: bool) {
        self.waiting.watching(watched);
    }

    /// The won lease's fencing token.
    pub fn fence(&self) -> f64 {
        self.won.map_or(0.0, |w| w.fence.0 as f64)
    }

    /// The won lease's deadline (store's time, ms).
    pub fn deadline(&self) -> f64 {
        self.won.map_or(0.0, |w| w.deadline.0 as f64)
    }

    /// When the won lease's holder stops believing in it (local ms).
    pub fn local_end(&self) -> f64 {
        self.won
            .map_or(0.0, |w| w.local_end.as_nanos() as f64 / 1e6)
    }
}

/// A store's decision loop for one namespace (not part of the package's public API).
#[wasm_bindgen]
pub struct RawClient {
    client: Option<Client>,
    answer: Answer,
    store_error: Option<StoreError>,
    outcome: String,
    /// Renewals gathered for the next `call_batch`.
    batch: Vec<Op>,
    /// The options of the next `acquire-with` or `steal` (see `set_options`).
    options: OwnedOptions,
    /// How the last batch ended: each renewal's outcome, or the store error of all.
    batched: Result<Vec<Outcome>, StoreError>,
}

#[wasm_bindgen]
impl RawClient {
    /// A client of the store described as `store` (for errors), with `limits` (in
    /// `defaultLimitsJson()`'s order), the store's time (or the caller's with `caller_time`),
    /// and `seed` for its versions and pauses. On invalid limits it is unusable and
    /// `error_code()` says why: check `failed()` first.
    #[wasm_bindgen(constructor)]
    pub fn new(store: &str, limits: &[f64], caller_time: bool, seed: f64) -> RawClient {
        let time = if caller_time {
            TimeSource::Caller
        } else {
            TimeSource::Store
        };
        let made = Client::new(store, limits_from(limits), time, seed.to_bits());
        let (client, error) = match made {
            Ok(client) => (Some(client), None),
            Err(e) => (None, Some(e)),
        };
        RawClient {
            client,
            answer: Answer::new(error),
            store_error: None,
            outcome: String::from("{}"),
            batch: Vec::new(),
            batched: Ok(Vec::new()),
            options: OwnedOptions::default(),
        }
    }

    /// The options of the next `acquire-with` or `steal` call (and `valid` check).
    pub fn set_options(
        &mut self,
        shared: bool,
        permits: f64,
        min_hold: f64,
        lock_delay: f64,
        metadata: &str,
        wait_alive: f64,
    ) {
        let options = options(shared, permits, min_hold, lock_delay, metadata, wait_alive);
        self.options = OwnedOptions::of(&options);
    }

    /// Whether the constructor failed (see `error_code()`).
    pub fn failed(&self) -> bool {
        self.client.is_none()
    }

    /// Address of the answer's `out` buffer (four `f64`) in the module's memory.
    pub fn out_ptr(&self) -> *const f64 {
        self.answer.out.as_ptr()
    }

    /// Test mode: every call starts from an outdated record (see `Engine::set_stale`).
    pub fn set_stale(&mut self, stale: bool) {
        if let Some(c) = self.client.as_mut() {
            c.set_stale(stale);
        }
    }

    /// Forgets every record seen.
    pub fn forget_seen(&mut self) {
        if let Some(c) = self.client.as_mut() {
            c.forget_seen();
        }
    }

    /// Starts operation `op` (`try-acquire`, `acquire`, `release`, `extend`, `cancel-wait`,
    /// `renew-wait`, `handle-timeout`, `inspect`) on `key` at local instant `t`, with the
    /// numbers it takes (`fence`, `ttl`, `wait_deadline`; the others ignored) and, with the
    /// caller's time, `at`. `None` for an unknown operation or an unusable client.
    #[allow(clippy::too_many_arguments)]
    pub fn call(
        &mut self,
        op: &str,
        key: &str,
        owner: &str,
        fence: f64,
        ttl: f64,
        wait_deadline: f64,
        at_ms: f64,
        t: f64,
    ) -> Option<RawCall> {
        let op = op_of(op, owner, fence, ttl, wait_deadline, &self.options)?;
        let call = self.client.as_mut()?.call(key, op, at(at_ms), local(t));
        Some(RawCall {
            call,
            write: None,
            pause_ms: 0.0,
            lease: None,
        })
    }

    /// Whether `call` with these arguments is valid input at `at_ms` (an invalid one changes
    /// nothing, as in a table: not even the clock of a table view).
    #[allow(clippy::too_many_arguments)]
    pub fn valid(
        &self,
        op: &str,
        key: &str,
        owner: &str,
        fence: f64,
        ttl: f64,
        wait_deadline: f64,
        at_ms: f64,
    ) -> bool {
        match (
            op_of(op, owner, fence, ttl, wait_deadline, &self.options),
            &self.client,
        ) {
            (Some(op), Some(client)) => client.is_valid(key, &op, at(at_ms)),
            _ => false,
        }
    }

    /// The call `waiting`'s last `want` asked for, on `key`, at local instant `t`.
    pub fn call_waiting(&mut self, waiting: &RawWaiting, key: &str, t: f64) -> Option<RawCall> {
        let op = waiting.op.clone()?;
        let call = self.client.as_mut()?.call(key, op, Instant::ZERO, local(t));
        Some(RawCall {
            call,
            write: None,
            pause_ms: 0.0,
            lease: None,
        })
    }

    /// Ends `call` (a `call_waiting`) and hands its end to `waiting`, at local instant `t`:
    /// 0 go on, 1 won, 2 a lock error, 3 install the namespace and call again, 4 a store
    /// error, 5 the wait timed out, 6 this owner already waits for the key, 7 the give-up is
    /// over.
    pub fn finish_waiting(&mut self, waiting: &mut RawWaiting, call: RawCall, t: f64) -> u32 {
        let Some(client) = self.client.as_mut() else {
            return FAILED;
        };
        let ended = client.finish(call.call);
        self.waited(waiting, ended, t)
    }

    /// Adds the renewal `waiting`'s last `want` asked for (2) to the next `call_batch`.
    pub fn batch_add(&mut self, waiting: &RawWaiting) {
        if let Some(op) = waiting.op.clone() {
            self.batch.push(op);
        }
    }

    /// The renewals gathered by `batch_add`, on `key`, decided together in one call at local
    /// instant `t` (lock-protocol's `Client::call_together`: one compare-and-set for all); `None`
    /// if none were gathered.
    pub fn call_batch(&mut self, key: &str, t: f64) -> Option<RawCall> {
        let ops = std::mem::take(&mut self.batch);
        let call = self.client.as_mut()?.call_together(key, ops, local(t))?;
        Some(RawCall {
            call,
            write: None,
            pause_ms: 0.0,
            lease: None,
        })
    }

    /// Ends `call` (a `call_batch`, or the `call_waiting` of a look that answers every waiter
    /// looking at once); `answer_batch` then hands each its end. Answers how many operations
    /// were decided (a batch's others are asked again).
    pub fn finish_batch(&mut self, call: RawCall) -> u32 {
        let Some(client) = self.client.as_mut() else {
            return 0;
        };
        self.batched = client.finish_each(call.call);
        self.batched
            .as_ref()
            .map_or(0, |each| u32::try_from(each.len()).unwrap_or(u32::MAX))
    }

    /// Hands the end of the last batch's operation number `i` (in `batch_add` order; 0 for a
    /// look) to `waiting`, at local instant `t`: a status as `finish_waiting`'s; 0 (go on: it
    /// asks again) for a renewal the batch left undecided.
    pub fn answer_batch(&mut self, waiting: &mut RawWaiting, i: u32, t: f64) -> u32 {
        let ended = match &self.batched {
            Ok(each) => match each.get(i as usize) {
                Some(outcome) => Ok(outcome.clone()),
                None => return GO_ON,
            },
            Err(e) => Err(e.clone()),
        };
        self.waited(waiting, ended, t)
    }

    /// Hands `ended` to `waiting`: the status `finish_waiting` answers.
    fn waited(
        &mut self,
        waiting: &mut RawWaiting,
        ended: Result<Outcome, StoreError>,
        t: f64,
    ) -> u32 {
        if let Err(StoreError::NoNamespace { .. }) = &ended {
            return WAIT_INSTALL;
        }
        match waiting.waiting.answered(ended, local(t)) {
            Ok(None) => GO_ON,
            Ok(Some(won)) => {
                waiting.won = Some(won);
                WON
            }
            Err(Error::Lock(e)) => {
                self.answer.fail(e);
                WAIT_LOCK_ERROR
            }
            Err(Error::Store(e)) => {
                self.store_error = Some(e);
                WAIT_STORE_ERROR
            }
            Err(Error::WaitTimedOut) => WAIT_TIMED_OUT,
            Err(Error::AlreadyWaiting) => WAIT_ALREADY_WAITING,
            Err(Error::GaveUp) => WAIT_GAVE_UP,
        }
    }

    /// What `call` needs next at local instant `t`: 1 read, 2 write (see the call's `write_*`),
    /// 3 pause (`pause_ms()`), 4 over (`finish`), 0 stopped on a store error.
    pub fn poll(&mut self, call: &mut RawCall, t: f64) -> u32 {
        let Some(client) = self.client.as_mut() else {
            return OVER;
        };
        call.write = None;
        match client.poll(&mut call.call, local(t)) {
            Ok(Next::Read) => READ,
            Ok(Next::Write(w)) => {
                call.write = Some(OwnedWrite {
                    expected: w.expected,
                    replaces: w.replaces.to_vec(),
                    version: w.version,
                    bytes: w.bytes.map(<[u8]>::to_vec),
                    fresh_fences: u32::try_from(w.fresh_fences).unwrap_or(u32::MAX),
                    not_before: w.not_before,
                    forget_at: w.forget_at,
                    holds_for: w.holds_for,
                });
                WRITE
            }
            Ok(Next::Pause(pause)) => {
                call.pause_ms = pause.as_secs_f64() * 1000.0;
                PAUSE
            }
            Ok(Next::Done) => OVER,
            Err(e) => self.stop(e),
        }
    }

    fn stop(&mut self, e: StoreError) -> u32 {
        self.store_error = Some(e);
        STOPPED
    }

    /// The answer to a read, sent at local instant `sent` and answered at `arrived`: the
    /// store's time `now` (ms) and the record, if `found` (its `version` as stored, its bytes
    /// and the tokens allocated at its write). `false`: the call stopped (see `poll`).
    #[allow(clippy::too_many_arguments)]
    pub fn read(
        &mut self,
        call: &mut RawCall,
        found: bool,
        version: &str,
        bytes: Vec<u8>,
        tokens: &[f64],
        now: f64,
        sent: f64,
        arrived: f64,
    ) -> bool {
        let read = self.read_of(call, found, version, bytes, tokens, now);
        let Some(client) = self.client.as_mut() else {
            return false;
        };
        let handled = client.handle_read(&mut call.call, read, local(sent), local(arrived));
        self.handled(handled)
    }

    /// A read that failed with the store error `code` (`lost`, `connect`, `server`, ...).
    pub fn read_failed(
        &mut self,
        call: &mut RawCall,
        code: &str,
        reason: &str,
        sent: f64,
        arrived: f64,
    ) -> bool {
        let failed = Err(self.error_of(code, reason, call.call.key()));
        let Some(client) = self.client.as_mut() else {
            return false;
        };
        let handled = client.handle_read(&mut call.call, failed, local(sent), local(arrived));
        self.handled(handled)
    }

    /// The compare-and-set was done; the store allocated `tokens` with it.
    pub fn written(&mut self, call: &mut RawCall, tokens: &[f64], arrived: f64) -> bool {
        let done = Ok(Written::Done {
            fences: fences(tokens),
        });
        self.answered_write(call, done, arrived)
    }

    /// The compare-and-set met a conflict; this is the record then, read in the same step at
    /// the store's time `now` (as `read`).
    #[allow(clippy::too_many_arguments)]
    pub fn conflict(
        &mut self,
        call: &mut RawCall,
        found: bool,
        version: &str,
        bytes: Vec<u8>,
        tokens: &[f64],
        now: f64,
        arrived: f64,
    ) -> bool {
        match self.read_of(call, found, version, bytes, tokens, now) {
            Ok(read) => self.answered_write(call, Ok(Written::Conflict(read)), arrived),
            Err(e) => self.answered_write(call, Err(e), arrived),
        }
    }

    /// The compare-and-set failed with the store error `code`: `lost` when the request may
    /// have reached the server (the call reads to find out), anything else stops it.
    pub fn write_failed(
        &mut self,
        call: &mut RawCall,
        code: &str,
        reason: &str,
        arrived: f64,
    ) -> bool {
        let failed = Err(self.error_of(code, reason, call.call.key()));
        self.answered_write(call, failed, arrived)
    }

    fn answered_write(
        &mut self,
        call: &mut RawCall,
        written: Result<Written, StoreError>,
        arrived: f64,
    ) -> bool {
        let Some(client) = self.client.as_mut() else {
            return false;
        };
        let handled = client.handle_written(&mut call.call, written, local(arrived));
        self.handled(handled)
    }

    fn handled(&mut self, handled: Result<(), StoreError>) -> bool {
        match handled {
            Ok(()) => true,
            Err(e) => {
                self.stop(e);
                false
            }
        }
    }

    /// A record as the store answered it (a version that is not a number is a corrupt record).
    fn read_of(
        &self,
        call: &RawCall,
        found: bool,
        version: &str,
        bytes: Vec<u8>,
        tokens: &[f64],
        now: f64,
    ) -> Result<Read, StoreError> {
        let record = if found {
            let version = version.parse::<u64>().map_err(|_| StoreError::Corrupt {
                key: call.call.key().to_owned(),
                error: lock_core::LockError::SnapshotCorrupt {
                    reason: lock_core::Corruption::BodyEndsEarly,
                },
            })?;
            Some(Stored {
                version,
                bytes,
                fences: fences(tokens),
            })
        } else {
            None
        };
        Ok(Read {
            record,
            now: at(now),
        })
    }

    /// The store error a JS client met, by code.
    fn error_of(&self, code: &str, reason: &str, key: &str) -> StoreError {
        let store = self.store();
        let reason = reason.to_owned();
        match code {
            // A stored value the driver could not read (as the Rust SQL stores report one).
            "corrupt" => StoreError::Corrupt {
                key: key.to_owned(),
                error: lock_core::LockError::SnapshotCorrupt {
                    reason: lock_core::Corruption::BodyEndsEarly,
                },
            },
            "connect" => StoreError::Connect { store, reason },
            "lost" => StoreError::Lost { store, reason },
            "unreplicated" => StoreError::Unreplicated { store, reason },
            "schema" => StoreError::Schema { store, reason },
            "no-namespace" => StoreError::NoNamespace { store },
            "fences-exhausted" => StoreError::FencesExhausted { store },
            // The driver's reason is "<until> <at>" (ms, the store's time).
            "recovering" => {
                let mut instants = reason.split(' ').map(str::parse::<u64>);
                match (instants.next(), instants.next()) {
                    (Some(Ok(until)), Some(Ok(at))) => StoreError::Recovering {
                        store,
                        until: Instant(until),
                        at: Instant(at),
                    },
                    _ => StoreError::Server { store, reason },
                }
            }
            _ => StoreError::Server { store, reason },
        }
    }

    fn store(&self) -> String {
        self.client
            .as_ref()
            .map(|c| c.store().to_owned())
            .unwrap_or_default()
    }

    /// Ends `call` (after `poll` answered 4 or 0) at local instant `t`. Status as `RawRecord`'s
    /// `answer` (0: a lock error; 1: done; 2 + an outcome's index), or 100: a store error
    /// (`store_error_*`; `no-namespace`: install it and call again). `events_json()` and
    /// `outcome_json()` describe the rest.
    pub fn finish(&mut self, call: RawCall, t: f64) -> u32 {
        let Some(client) = self.client.as_mut() else {
            return FAILED;
        };
        let key = call.call.key().to_owned();
        let lease = call.lease;
        match client.finish(call.call) {
            Err(e) => {
                self.store_error = Some(e);
                STORE_FAILED
            }
            Ok(mut outcome) => {
                if let Some((deadline, unsure)) = lease {
                    outcome.settle_release(unsure, deadline);
                }
                self.outcome = outcome_json(&outcome, local(t));
                self.answer.events(&key, &outcome.decided.events);
                match outcome.decided.reply {
                    Reply::Response(r) => self.answer.request(r),
                    Reply::Inspect(r) => self.answer.inspect(r),
                    _ => FAILED,
                }
            }
        }
    }

    /// After `finish`: `{now, nextDeadline, ambiguous, handedTo, localEnd, releasedAt}`
    /// (`localEnd`: for a grant or an extension, the local instant in ms at which its holder
    /// stops believing in it, else null; `releasedAt`: for a release done, when the lease ended,
    /// store's time, by lock-protocol's `holding::released_at`, else 0).
    pub fn outcome_json(&self) -> String {
        self.outcome.clone()
    }

    /// The holder and waiters of the last answered `inspect` as JSON (`null`: free).
    pub fn info_json(&self) -> String {
        self.answer.info.clone()
    }

    /// The key's events of the last answer, oldest first, as a JSON array.
    pub fn events_json(&self) -> String {
        self.answer.events.clone()
    }

    /// Checks a query's arguments against the client's limits (`Limits::check_query`): `DONE`,
    /// or `FAILED` with the error, before the store is read.
    pub fn check_query(&mut self, prefix: &str, after: &str, limit: f64) -> u32 {
        let Some(client) = &self.client else {
            return FAILED;
        };
        match client.limits().check_query(prefix, after, count(limit)) {
            Ok(()) => DONE,
            Err(e) => self.answer.fail(e),
        }
    }

    /// The kebab-case code of the last lock error (`""` if none).
    pub fn error_code(&self) -> String {
        code_of(self.answer.error.as_ref())
    }

    /// The human-readable message of the last lock error.
    pub fn error_message(&self) -> String {
        message_of(self.answer.error.as_ref())
    }

    /// The payload of the last lock error as a JSON object.
    pub fn error_details(&self) -> String {
        details_of(self.answer.error.as_ref())
    }

    /// The code of the last store error (`StoreError::code`: `lost`, `contention`, ...).
    pub fn store_error_code(&self) -> String {
        self.store_error
            .as_ref()
            .map_or("", StoreError::code)
            .into()
    }

    /// When a store that recovers grants again (ms, its time; -1 for any other error).
    pub fn store_error_until(&self) -> f64 {
        match &self.store_error {
            Some(StoreError::Recovering { until, .. }) => until.0 as f64,
            _ => -1.0,
        }
    }

    /// The message of the last store error.
    pub fn store_error_message(&self) -> String {
        self.store_error
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    }
}

/// Every store error code, as `StoreError.CODES` in Rust.
#[wasm_bindgen(js_name = storeErrorCodesJson)]
pub fn store_error_codes_json() -> String {
    json::array(StoreError::CODES.iter().map(|c| json::string(c)))
}

fn outcome_json(outcome: &Outcome, t: LocalInstant) -> String {
    let decided = &outcome.decided;
    let deadline = match &decided.reply {
        Reply::Response(Response::Acquire(Ok(
            AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g),
        ))) => Some(g.deadline),
        Reply::Response(Response::Extend(Ok(g))) => Some(g.deadline),
        _ => None,
    };
    let local_end = deadline.map_or_else(
        || String::from("null"),
        |d| {
            let nanos = outcome.local_end(d, t).as_nanos();
            // Milliseconds with the nanoseconds as a fraction, as performance.now() gives.
            format!("{}.{:06}", nanos / 1_000_000, nanos % 1_000_000)
        },
    );
    let next = decided
        .next_deadline
        .map_or_else(|| String::from("null"), |d| d.0.to_string());
    let released_at = match &decided.reply {
        Reply::Response(Response::Release(Ok(o))) => holding::released_at(*o, decided.now),
        _ => Instant::ZERO,
    };
    Obj::new()
        .num("now", decided.now.0)
        .raw("nextDeadline", &next)
        .raw(
            "ambiguous",
            if decided.ambiguous { "true" } else { "false" },
        )
        .raw(
            "handedTo",
            &json::array(outcome.handed_to.iter().map(|o| json::string(o))),
        )
        .raw("localEnd", &local_end)
        .num("releasedAt", released_at.0)
        .done()
}

/// Why `name` cannot be a namespace (`""`: it can), as every store checks it.
#[wasm_bindgen(js_name = namespaceError)]
pub fn namespace_error(name: &str) -> String {
    lock_protocol::records::check_namespace(name)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

/// How long after a lease of `ttl` ms was granted or extended its keep-alive extends it (ms):
/// lock-protocol's `keep_alive::extend_every`, the one policy of every face.
#[wasm_bindgen(js_name = keepAliveEvery)]
#[must_use]
pub fn keep_alive_every(ttl: f64) -> f64 {
    let ttl = std::time::Duration::from_millis(ms(ttl));
    lock_protocol::keep_alive::extend_every(ttl).as_secs_f64() * 1000.0
}

/// How long after an unanswered extension of a lease of `ttl` ms its keep-alive tries again
/// (ms): lock-protocol's `keep_alive::retry_after`.
#[wasm_bindgen(js_name = keepAliveRetry)]
#[must_use]
pub fn keep_alive_retry(ttl: f64) -> f64 {
    let ttl = std::time::Duration::from_millis(ms(ttl));
    lock_protocol::keep_alive::retry_after(ttl).as_secs_f64() * 1000.0
}
