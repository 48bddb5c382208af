//! The `records` interface: one key's record of a shared store, decided by `lock-core`'s
//! `KeyRecord`. Translation only; nothing is kept between calls.

use lock_core::{wire, Fence, Instant, KeyEvent, KeyRecord, Response};

use super::convert;
use super::exports::expiring::lock::records::{Guest, Step};
use super::exports::expiring::lock::types::{KeyInfo, Limits, LockError};
use super::Component;

/// The stored record (none: a key nobody used), with the tokens the store allocated for it.
fn load(
    limits: &lock_core::Limits,
    record: Option<Vec<u8>>,
    fresh: &[u64],
) -> Result<KeyRecord, LockError> {
    let fresh: Vec<Fence> = fresh.iter().copied().map(Fence).collect();
    match record {
        None => Ok(KeyRecord::new()),
        Some(bytes) => KeyRecord::decode(&bytes, &fresh, limits).map_err(convert::error),
    }
}

/// The WIT step of a transition that left `record`.
fn step(
    key: &str,
    record: &KeyRecord,
    limits: &lock_core::Limits,
    changed: bool,
    fresh_fences: usize,
    events: Vec<KeyEvent>,
) -> Step {
    Step {
        changed,
        fresh_fences: u32::try_from(fresh_fences).unwrap_or(u32::MAX),
        bytes: (changed && !record.is_empty()).then(|| record.encode()),
        events: events
            .into_iter()
            .map(|KeyEvent { at, kind }| {
                convert::event(lock_core::Event {
                    key: key.into(),
                    at,
                    kind,
                })
            })
            .collect(),
        clock: record.clock().0,
        next_deadline: record.next_deadline().map(Instant::as_millis),
        forget_at: record.forget_at(limits).map(Instant::as_millis),
    }
}

impl Guest for Component {
    fn handle(
        limits: Limits,
        stored: Option<Vec<u8>>,
        fresh: Vec<u64>,
        request: Vec<u8>,
        names: String,
    ) -> Result<(Vec<u8>, Step), LockError> {
        let limits = convert::limits_in(&limits);
        let mut key_record = load(&limits, stored, &fresh)?;
        let mut out = Vec::with_capacity(24);
        let Some(Ok(request)) = wire::decode_requests(&request, &names).next() else {
            wire::encode_response(&mut out, &Response::Malformed);
            return Ok((out, step("", &key_record, &limits, false, 0, Vec::new())));
        };
        let key = request.key().unwrap_or("");
        let s = key_record.handle(request, &limits);
        wire::encode_response(&mut out, &s.reply);
        let step = step(
            key,
            &key_record,
            &limits,
            s.changed,
            s.fresh_fences,
            s.events,
        );
        Ok((out, step))
    }

    fn inspect(
        limits: Limits,
        key: String,
        stored: Option<Vec<u8>>,
        fresh: Vec<u64>,
        now: u64,
    ) -> Result<(Result<Option<KeyInfo>, LockError>, Step), LockError> {
        let limits = convert::limits_in(&limits);
        let mut key_record = load(&limits, stored, &fresh)?;
        let s = key_record.inspect(&key, Instant(now), &limits);
        let info = s
            .reply
            .map(|i| i.map(convert::key_info))
            .map_err(convert::error);
        let step = step(
            &key,
            &key_record,
            &limits,
            s.changed,
            s.fresh_fences,
            s.events,
        );
        Ok((info, step))
    }
}
