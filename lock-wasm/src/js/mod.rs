//! The JS face (feature `js`): `lock-core` through wasm-bindgen, for the npm package.
//!
//! The exported class `RawTable` is the package's private engine; `lock-wasm/js/` wraps it in the
//! public `LockTable` and `Locks` classes. It is shaped for a cheap JS boundary: the operations
//! on the hot path take `&str` and `f64` and return a small status number, with their numeric
//! results written into a fixed buffer (`out_ptr`) that the wrapper reads through a
//! `Float64Array`, so no call allocates a JS object on the wasm-bindgen side. Everything else
//! (events, inspection, stats, error details) crosses as JSON text.
//!
//! This module translates only: every outcome and error is `lock-core`'s, and every name
//! (outcomes, errors, events) comes from the core's `name()`/`code()`.

mod answer;
mod client;
mod departures;
mod election;
mod json;
mod records;

use lock_core::{
    AcquireOutcome, Duration, ErrorCode, Event, EventKind, Fence, Instant, Limits, LockError,
    LockTable, PayloadValue,
};
use wasm_bindgen::prelude::*;

use json::Obj;

/// Status of a call that failed: read `error_code`, `error_message` and `error_details`.
const FAILED: u32 = 0;
/// Status of a call that succeeded without an acquire outcome (release, cancel-wait, restore).
const DONE: u32 = 1;
/// Status of an acquire outcome: `FIRST_OUTCOME + AcquireOutcome::index()`.
const FIRST_OUTCOME: u32 = 2;
/// Status of a `restore` refused because the snapshot holds a fence or an instant past
/// `Number.MAX_SAFE_INTEGER` (the table is unchanged).
const UNREPRESENTABLE: u32 = 100;
/// The largest integer a JS number holds exactly.
const MAX_SAFE: u64 = (1 << 53) - 1;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

/// Reports a panic on the JS console before the trap, for diagnostics only: no input reaches a
/// panic (every input is validated by the wrapper or the core).
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            console_error(&format!("expiring-lock: internal error: {info}"));
        }));
    });
}

/// Slot of `out` that holds, after a failed call, the index of its error in `errorCodesJson()`.
const OUT_ERROR: usize = 2;
/// Slot of `out` that holds the number of undrained events after every call.
const OUT_PENDING: usize = 3;

/// Every error code, in the order of the index a failed call leaves in `out[2]`.
#[wasm_bindgen(js_name = errorCodesJson)]
pub fn error_codes_json() -> String {
    json::array(LockError::CODES.iter().map(|c| json::string(c)))
}

/// Whether a refusal with error code `code`, answering a holder's extend or release, means
/// that the holder lost the lease (`lock-core`'s `ErrorCode::is_lease_loss`, which every face's
/// lease asks; `false` for an unknown code).
#[wasm_bindgen(js_name = isLeaseLoss)]
#[must_use]
pub fn is_lease_loss(code: &str) -> bool {
    ErrorCode::parse(code).is_some_and(ErrorCode::is_lease_loss)
}

/// The fields of [`Limits`] in the order `RawTable::new` takes them, with their JS names.
fn limits_fields(l: &Limits) -> [(&'static str, u64); 12] {
    [
        ("maxKeyBytes", l.max_key_bytes as u64),
        ("maxOwnerBytes", l.max_owner_bytes as u64),
        ("maxTtl", l.max_ttl.0),
        ("maxKeys", l.max_keys as u64),
        ("maxWaitersPerKey", l.max_waiters_per_key as u64),
        ("maxWaiters", l.max_waiters as u64),
        ("expiredRetention", l.expired_retention.0),
        ("maxExpiredRecords", l.max_expired_records as u64),
        ("maxPendingEvents", l.max_pending_events as u64),
        ("maxHoldersPerKey", l.max_holders_per_key as u64),
        ("maxMetadataBytes", l.max_metadata_bytes as u64),
        ("lockDelay", l.lock_delay.0),
    ]
}

fn limits_json(l: &Limits) -> String {
    limits_fields(l)
        .iter()
        .fold(Obj::new(), |o, (name, v)| o.num(name, *v))
        .done()
}

/// A JS number the wrapper has checked to be a safe non-negative integer, as `u64`.
fn ms(v: f64) -> u64 {
    // `as` saturates; the wrapper rejects anything that is not a safe integer before this.
    v as u64
}

/// An instant from JS milliseconds.
fn at(v: f64) -> Instant {
    Instant(ms(v))
}

/// A duration from JS milliseconds.
fn span(v: f64) -> Duration {
    Duration(ms(v))
}

/// A count as `usize`; counts that do not fit (wasm32 has a 32-bit `usize`) saturate, which the
/// core's range checks then report like any other out-of-range limit.
fn count(v: f64) -> usize {
    usize::try_from(ms(v)).unwrap_or(usize::MAX)
}

/// The limits of a new table, from `values` in the order of `defaultLimits()`'s fields.
fn limits_from(values: &[f64]) -> Limits {
    let mut l = Limits::default();
    let get = |i: usize, default: f64| values.get(i).copied().unwrap_or(default);
    let d = Limits::default();
    l.max_key_bytes = count(get(0, d.max_key_bytes as f64));
    l.max_owner_bytes = count(get(1, d.max_owner_bytes as f64));
    l.max_ttl = span(get(2, d.max_ttl.0 as f64));
    l.max_keys = count(get(3, d.max_keys as f64));
    l.max_waiters_per_key = count(get(4, d.max_waiters_per_key as f64));
    l.max_waiters = count(get(5, d.max_waiters as f64));
    l.expired_retention = span(get(6, d.expired_retention.0 as f64));
    l.max_expired_records = count(get(7, d.max_expired_records as f64));
    l.max_pending_events = count(get(8, d.max_pending_events as f64));
    l.max_holders_per_key = count(get(9, d.max_holders_per_key as f64));
    l.max_metadata_bytes = count(get(10, d.max_metadata_bytes as f64));
    l.lock_delay = span(get(11, d.lock_delay.0 as f64));
    l
}

/// The options of an acquire from the wrapper's checked values (`shared`: the mode is shared).
pub(super) fn options(
    shared: bool,
    permits: f64,
    min_hold: f64,
    lock_delay: f64,
    metadata: &str,
    wait_alive: f64,
) -> lock_core::AcquireOptions<'_> {
    lock_core::AcquireOptions {
        mode: if shared {
            lock_core::Mode::Shared
        } else {
            lock_core::Mode::Exclusive
        },
        // The wrapper checks a u32; `as` saturates anyway.
        permits: permits as u32,
        min_hold: span(min_hold),
        lock_delay: span(lock_delay),
        metadata,
        wait_alive: span(wait_alive),
    }
}

/// The default limits as a JSON object with camelCase field names, in `RawTable::new`'s order.
#[wasm_bindgen(js_name = defaultLimitsJson)]
pub fn default_limits_json() -> String {
    limits_json(&Limits::default())
}

/// The acquire outcome names, indexed by `status - 2` of `try_acquire`/`acquire`.
#[wasm_bindgen(js_name = outcomeNamesJson)]
pub fn outcome_names_json() -> String {
    json::array(AcquireOutcome::NAMES.iter().map(|n| json::string(n)))
}

/// The payload of an error as a JSON object (camelCase fields; `{}` when it has none).
fn error_details(e: &LockError) -> String {
    e.payload()
        .iter()
        .flatten()
        .fold(Obj::new(), |o, (name, value)| {
            let name = json::camel(name);
            match value {
                PayloadValue::Number(n) => o.num(&name, *n),
                PayloadValue::Limit(l) => o.str(&name, l.as_str()),
                PayloadValue::Corruption(c) => o.str(&name, c.as_str()),
            }
        })
        .done()
}

/// A key's leases and waiters as JSON (`null` if free): `owner`, `fence` and `deadline` of its
/// first lease (the only one of a key held exclusively; a key in use always has one), then
/// `holders` (every lease), `waiters` and `permits`.
fn info_json(info: Option<&lock_core::KeyInfo>) -> String {
    match info {
        None => String::from("null"),
        Some(i) => key_obj(i).done(),
    }
}

/// The fields of [`info_json`], for a key object that gets more (a query's `key`).
fn key_obj(i: &lock_core::KeyInfo) -> Obj {
    let holder = |h: &lock_core::HolderInfo| {
        Obj::new()
            .str("owner", &h.owner)
            .num("fence", h.fence.0)
            .num("deadline", h.deadline.0)
            .str("mode", h.mode.name())
            .str("metadata", &h.metadata)
            .raw(
                "minUntil",
                &h.min_until.map_or("null".into(), |m| m.0.to_string()),
            )
            .raw(
                "ended",
                &h.ended.map_or("null".into(), |e| json::string(e.name())),
            )
            .raw(
                "grantedAt",
                &h.granted_at.map_or("null".into(), |m| m.0.to_string()),
            )
            .done()
    };
    Obj::new()
        .str("owner", i.holder().map_or("", |h| &h.owner))
        .num("fence", i.holder().map_or(0, |h| h.fence.0))
        .num("deadline", i.holder().map_or(0, |h| h.deadline.0))
        .raw("holders", &json::array(i.holders.iter().map(holder)))
        .raw(
            "waiters",
            &json::array(i.waiters.iter().map(|w| {
                Obj::new()
                    .str("owner", &w.owner)
                    .num("ttl", w.ttl.0)
                    .num("waitDeadline", w.wait_deadline.0)
                    .num("waitEnd", w.wait_end.0)
                    .str("mode", w.mode.name())
                    .str("metadata", &w.metadata)
                    .done()
            })),
        )
        .num("permits", u64::from(i.permits))
}

/// A query page as JSON: `{keys: [{key, ...the key's fields}], next: cursor or null}`.
fn page_json(page: &lock_core::QueryPage) -> String {
    let keys = json::array((page.keys.iter()).map(|(key, info)| {
        Obj::new()
            .str("key", key)
            .raw("info", &key_obj(info).done())
            .done()
    }));
    Obj::new()
        .raw("keys", &keys)
        .raw(
            "next",
            &page.next.as_deref().map_or("null".into(), json::string),
        )
        .done()
}

fn event_json(e: &Event) -> String {
    let o = Obj::new().str("type", e.kind.name()).str("key", &e.key);
    match &e.kind {
        EventKind::Expired {
            owner,
            fence,
            metadata,
        }
        | EventKind::Stolen {
            owner,
            fence,
            metadata,
        } => o
            .str("owner", owner)
            .num("fence", fence.0)
            .str("metadata", metadata),
        EventKind::Granted {
            owner,
            fence,
            deadline,
            mode,
            metadata,
        } => o
            .str("owner", owner)
            .num("fence", fence.0)
            .num("deadline", deadline.0)
            .str("mode", mode.name())
            .str("metadata", metadata),
        EventKind::WaitTimedOut { owner } => o.str("owner", owner),
    }
    .num("at", e.at.0)
    .done()
}

/// The kebab-case code of `error` (`""` if none).
fn code_of(error: Option<&LockError>) -> String {
    error.map_or("", LockError::code).into()
}

/// The human-readable message of `error` (the core's `Display`).
fn message_of(error: Option<&LockError>) -> String {
    error.map(ToString::to_string).unwrap_or_default()
}

/// The payload of `error` as a JSON object.
fn details_of(error: Option<&LockError>) -> String {
    error.map_or_else(|| String::from("{}"), error_details)
}

/// A lock table for the npm package's wrapper (not part of the package's public API).
#[wasm_bindgen]
pub struct RawTable {
    table: LockTable,
    /// Numeric results of the last call: `[fence or position, deadline, -, pending events]`.
    out: [f64; 4],
    error: Option<LockError>,
    /// Key and owner of the next call, as UTF-8 written by the wrapper straight into this
    /// buffer (`input_ptr`): no allocation and no copy per call.
    input: Vec<u8>,
}

/// Splits the input buffer into the key (`key_len` bytes) and the owner (`owner_len` bytes).
fn names(input: &[u8], key_len: usize, owner_len: usize) -> Result<(&str, &str), LockError> {
    let end = key_len.saturating_add(owner_len);
    if end > input.len() {
        // The wrapper never asks past what it reserved; refuse rather than panic if it did.
        return Err(LockError::KeyInvalid);
    }
    let key = std::str::from_utf8(&input[..key_len]).map_err(|_| LockError::KeyInvalid)?;
    let owner = std::str::from_utf8(&input[key_len..end]).map_err(|_| LockError::OwnerInvalid)?;
    Ok((key, owner))
}

#[wasm_bindgen]
impl RawTable {
    /// A table with `limits` (in `defaultLimitsJson()`'s field order) and a hash `seed`. On
    /// invalid limits the returned table is unusable and `error_code()` says why; check
    /// `failed()` first.
    #[wasm_bindgen(constructor)]
    pub fn new(limits: &[f64], seed: f64) -> RawTable {
        install_panic_hook();
        let (table, error) = match LockTable::with_seed(limits_from(limits), ms(seed)) {
            Ok(t) => (t, None),
            // The wrapper checks `failed()` and never uses this stand-in table.
            Err(e) => (LockTable::default(), Some(e)),
        };
        RawTable {
            table,
            out: [0.0; 4],
            error,
            input: vec![0; 1024],
        }
    }

    /// Whether the constructor failed (its error is in `error_code()`).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// Address of the `out` buffer (four `f64`) in the module's memory.
    pub fn out_ptr(&self) -> *const f64 {
        self.out.as_ptr()
    }

    /// Makes the input buffer at least `bytes` long; returns its (possibly new) address.
    pub fn reserve_input(&mut self, bytes: usize) -> *mut u8 {
        if self.input.len() < bytes {
            self.input.resize(bytes, 0);
        }
        self.input.as_mut_ptr()
    }

    /// The limits of this table as JSON.
    pub fn limits_json(&self) -> String {
        limits_json(self.table.limits())
    }

    fn finish(&mut self, result: Result<u32, LockError>) -> u32 {
        self.out[OUT_PENDING] = self.table.pending_events() as f64;
        match result {
            Ok(status) => status,
            Err(e) => {
                self.out[OUT_ERROR] = e.index() as f64;
                self.error = Some(e);
                FAILED
            }
        }
    }

    fn outcome(&mut self, outcome: AcquireOutcome) -> u32 {
        let (a, b) = outcome.numbers();
        self.out[0] = a as f64;
        self.out[1] = b as f64;
        FIRST_OUTCOME + outcome.index() as u32
    }

    /// `try_acquire` of the key and owner in the input buffer: status 0 (error) or 2 + the
    /// outcome's index in `outcomeNamesJson()`; `out = [fence or position, deadline]`.
    pub fn try_acquire(&mut self, key_len: usize, owner_len: usize, ttl: f64, now: f64) -> u32 {
        let r = names(&self.input, key_len, owner_len)
            .and_then(|(k, o)| self.table.try_acquire(k, o, span(ttl), at(now)));
        let r = r.map(|o| self.outcome(o));
        self.finish(r)
    }

    /// `acquire` with an absolute wait deadline; answers like `try_acquire`.
    pub fn acquire(
        &mut self,
        key_len: usize,
        owner_len: usize,
        ttl: f64,
        wait_deadline: f64,
        now: f64,
    ) -> u32 {
        let r = names(&self.input, key_len, owner_len).and_then(|(k, o)| {
            self.table
                .acquire(k, o, span(ttl), at(wait_deadline), at(now))
        });
        let r = r.map(|o| self.outcome(o));
        self.finish(r)
    }

    /// `acquire_with` (`try_acquire` when `wait_deadline` is not after `now`): the options as
    /// checked values; answers like `try_acquire`.
    #[allow(clippy::too_many_arguments)] // flat numbers: no object crosses the boundary
    pub fn acquire_with(
        &mut self,
        key_len: usize,
        owner_len: usize,
        ttl: f64,
        wait_deadline: f64,
        shared: bool,
        permits: f64,
        min_hold: f64,
        lock_delay: f64,
        metadata: &str,
        wait_alive: f64,
        now: f64,
    ) -> u32 {
        let options = options(shared, permits, min_hold, lock_delay, metadata, wait_alive);
        let r = names(&self.input, key_len, owner_len).and_then(|(k, o)| {
            (self.table).acquire_with(k, o, span(ttl), at(wait_deadline), &options, at(now))
        });
        let r = r.map(|o| self.outcome(o));
        self.finish(r)
    }

    /// `steal`: answers like `try_acquire`.
    #[allow(clippy::too_many_arguments)] // flat numbers: no object crosses the boundary
    pub fn steal(
        &mut self,
        key_len: usize,
        owner_len: usize,
        ttl: f64,
        shared: bool,
        permits: f64,
        min_hold: f64,
        lock_delay: f64,
        metadata: &str,
        now: f64,
    ) -> u32 {
        // A steal never waits: no `wait_alive`.
        let options = options(shared, permits, min_hold, lock_delay, metadata, 0.0);
        let r = names(&self.input, key_len, owner_len)
            .and_then(|(k, o)| self.table.steal(k, o, span(ttl), &options, at(now)));
        let r = r.map(|o| self.outcome(o));
        self.finish(r)
    }

    /// `query`: the page as JSON (`page_json`); `None` on error.
    pub fn query_json(
        &mut self,
        prefix: &str,
        after: &str,
        limit: f64,
        now: f64,
    ) -> Option<String> {
        let r = self.table.query(prefix, after, count(limit), at(now));
        let r = r.map(|page| page_json(&page));
        match r {
            Ok(text) => {
                self.finish(Ok(DONE));
                Some(text)
            }
            Err(e) => {
                self.finish(Err(e));
                None
            }
        }
    }

    /// `handle_timeout_bounded`: applies at most `max_changes` due changes; whether more are due.
    pub fn handle_timeout_bounded(&mut self, now: f64, max_changes: u32) -> bool {
        let more = self.table.handle_timeout_bounded(at(now), max_changes);
        self.finish(Ok(DONE));
        more
    }

    /// `raise_fence_floor`: every later fence is above `floor`.
    pub fn raise_fence_floor(&mut self, floor: f64) {
        self.table.raise_fence_floor(Fence(ms(floor)));
        self.finish(Ok(DONE));
    }

    /// `cancel_all_waits`: drops every waiter; answers how many.
    pub fn cancel_all_waits(&mut self, now: f64) -> f64 {
        let cancelled = self.table.cancel_all_waits(at(now));
        self.finish(Ok(DONE));
        cancelled as f64
    }

    /// `release`: status 0 (error) or 1.
    pub fn release(&mut self, key_len: usize, owner_len: usize, fence: f64, now: f64) -> u32 {
        let r = names(&self.input, key_len, owner_len)
            .and_then(|(k, o)| self.table.release(k, o, Fence(ms(fence)), at(now)));
        // `out[0]`: when the lease really ends (a minimum hold), 0 if now.
        self.out[0] = match r {
            Ok(lock_core::ReleaseOutcome::HeldUntil { until }) => until.0 as f64,
            _ => 0.0,
        };
        self.finish(r.map(|_| DONE))
    }

    /// `extend`: status 0 (error) or 1; `out = [fence, deadline]`.
    pub fn extend(
        &mut self,
        key_len: usize,
        owner_len: usize,
        fence: f64,
        ttl: f64,
        now: f64,
    ) -> u32 {
        let r = names(&self.input, key_len, owner_len).and_then(|(k, o)| {
            self.table
                .extend(k, o, Fence(ms(fence)), span(ttl), at(now))
        });
        let r = r.map(|g| {
            self.out[0] = g.fence.0 as f64;
            self.out[1] = g.deadline.0 as f64;
            DONE
        });
        self.finish(r)
    }

    /// `cancel_wait`: status 0 (error) or 1.
    pub fn cancel_wait(&mut self, key_len: usize, owner_len: usize, now: f64) -> u32 {
        let r = names(&self.input, key_len, owner_len)
            .and_then(|(k, o)| self.table.cancel_wait(k, o, at(now)));
        self.finish(r.map(|()| DONE))
    }

    /// `renew_wait`: answers like `try_acquire` (already-waiting or already-held).
    pub fn renew_wait(
        &mut self,
        key_len: usize,
        owner_len: usize,
        wait_deadline: f64,
        now: f64,
    ) -> u32 {
        let r = names(&self.input, key_len, owner_len)
            .and_then(|(k, o)| self.table.renew_wait(k, o, at(wait_deadline), at(now)));
        let r = r.map(|o| self.outcome(o));
        self.finish(r)
    }

    /// Applies every time-driven change up to `now`; returns the number of undrained events.
    pub fn handle_timeout(&mut self, now: f64) -> u32 {
        self.table.handle_timeout(at(now));
        self.finish(Ok(DONE));
        self.out[OUT_PENDING] as u32
    }

    /// The next instant at which `handle_timeout` has work, or -1 if none.
    pub fn next_wakeup(&self) -> f64 {
        self.table.next_wakeup().map_or(-1.0, |t| t.0 as f64)
    }

    /// All undrained events, oldest first, as a JSON array.
    pub fn drain_events_json(&mut self) -> String {
        let events = json::array(self.table.drain_events().map(|e| event_json(&e)));
        self.out[OUT_PENDING] = 0.0;
        events
    }

    /// `inspect`: the key's holder and waiters as JSON (`null` if free); `None` on error.
    pub fn inspect_json(&mut self, key: &str, now: f64) -> Option<String> {
        let r = self.table.inspect(key, at(now));
        let r = r.map(|info| info_json(info.as_ref()));
        match r {
            Ok(text) => {
                self.finish(Ok(DONE));
                Some(text)
            }
            Err(e) => {
                self.finish(Err(e));
                None
            }
        }
    }

    /// `stats` as JSON (camelCase fields).
    pub fn stats_json(&mut self, now: f64) -> String {
        let s = self.table.stats(at(now));
        self.finish(Ok(DONE));
        // Every field of the core's one list, in camelCase.
        let mut o = Obj::new();
        for (field, value) in lock_core::Stats::FIELDS.iter().zip(s.values()) {
            o = o.num(&json::camel(field), value);
        }
        o.done()
    }

    /// The table's snapshot bytes at `now`.
    pub fn snapshot(&mut self, now: f64) -> Vec<u8> {
        let bytes = self.table.snapshot(at(now));
        self.finish(Ok(DONE));
        bytes
    }

    /// `restore`: status 0 (error) or 1.
    pub fn restore(&mut self, bytes: &[u8]) -> u32 {
        // JS cannot represent a later instant or a higher fence exactly (two grants would show
        // the same rounded fence): check the snapshot before it replaces anything. A corrupt
        // one falls through to `restore`, which names what is wrong.
        if let Ok(mut decoded) = LockTable::from_snapshot(self.table.limits().clone(), 0, bytes) {
            if decoded.latest_instant() > Instant(MAX_SAFE)
                || decoded.stats(Instant::ZERO).last_fence >= Fence(MAX_SAFE)
            {
                return UNREPRESENTABLE;
            }
        }
        let r = self.table.restore(bytes);
        self.finish(r.map(|()| DONE))
    }

    /// The kebab-case code of the last error (`""` if none).
    pub fn error_code(&self) -> String {
        code_of(self.error.as_ref())
    }

    /// The human-readable message of the last error (the core's `Display`).
    pub fn error_message(&self) -> String {
        message_of(self.error.as_ref())
    }

    /// The payload of the last error as a JSON object.
    pub fn error_details(&self) -> String {
        details_of(self.error.as_ref())
    }
}
