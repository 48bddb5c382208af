//! The snapshot byte formats (versions 1 to 3). All integers little-endian.
//!
//! A table is written in version 3, the only one that holds each lease's grant instant; this
//! build reads every version (a lease restored from version 1 or 2 has no known grant instant).
//!
//! ```text
//! magic      8 bytes  "LOCKSNAP"
//! version    u16      1 to 3
//! body_len   u32      length of the body in bytes
//! body                (below)
//! crc32      u32      CRC-32 (IEEE) of everything before it
//!
//! body:
//!   clock u64, last_fence u64,
//!   10 × u64 counters: acquired handed_off released extended expired queued
//!                      wait_timed_out cancelled rejected events_dropped
//!   key_count u32, then per key, in strictly increasing byte order:
//!     key str, owner str, fence u64, deadline u64,
//!     waiter_count u32, then per waiter, first in line first: owner str, ttl u64, wait_deadline u64
//!   expired_count u32, then per remembered expiry, oldest first:
//!     fence u64, key str, owner str, deadline u64
//! str = u32 byte length + UTF-8 bytes
//!
//! version 2 and 3 body:
//!   clock u64, last_fence u64,
//!   11 × u64 counters: the 10 above, then stolen
//!   key_count u32, then per key, in strictly increasing byte order:
//!     key str, then the key's leases and waiters in that version (see `key_codec`: version 3
//!     adds each lease's grant instant)
//!   expired_count u32, then per remembered lost lease, oldest first:
//!     fence u64, key str, owner str, deadline u64 (or instant of the steal), stolen u8
//! ```
//!
//! Decoding checks the frame (magic, version, length, checksum) before reading the body, then
//! every invariant of the body against the restoring table's limits, and builds nothing until all
//! of it is valid.

use alloc::vec::Vec;

use crate::expired_log::{ExpiredLog, ExpiredRecord};
use crate::frame::{against_limits, close_frame, corrupt, open_frame, start_frame, Reader};
use crate::key_codec::{read_flag, read_key, write_key, KEY_VERSION};
use crate::key_state::{FenceCounter, KeyState, Lease, Record, Room, Waiter};
use crate::stored_name::Name;
use crate::{Corruption, Fence, Instant, LimitName, Limits, LockError, Stats};

/// The magic bytes that open every snapshot.
pub const MAGIC: [u8; 8] = *b"LOCKSNAP";
/// The format version this build writes, the newest it reads (it reads every version from 1).
pub const VERSION: u16 = KEY_VERSION;

/// What the table hands to the encoder.
pub(crate) struct SnapshotRef<'a> {
    pub(crate) clock: Instant,
    pub(crate) last_fence: Fence,
    pub(crate) counters: &'a Stats,
    pub(crate) keys: &'a [&'a Record],
    pub(crate) expired: &'a ExpiredLog,
}

/// What the decoder hands back, fully validated.
pub(crate) struct Decoded {
    pub(crate) clock: Instant,
    pub(crate) fences: FenceCounter,
    pub(crate) counters: Stats,
    pub(crate) keys: Vec<(Name, KeyState)>,
    pub(crate) expired: Vec<(Fence, ExpiredRecord)>,
}

/// The first of [`Stats::FIELDS`] that a snapshot keeps: the counters (`acquired` to
/// `events_dropped`); the gauges before it are recomputed from the restored table.
const FIRST_COUNTER: usize = 6;

/// How many counters a snapshot of `version` keeps (version 2 adds `stolen`).
fn counter_count(version: u16) -> usize {
    match version {
        1 => 10,
        _ => 11,
    }
}

fn stats_from(counters: &[u64]) -> Stats {
    let mut values = [0; Stats::FIELDS.len()];
    for (value, counter) in values[FIRST_COUNTER..].iter_mut().zip(counters) {
        *value = *counter;
    }
    Stats::from_values(values)
}

pub(crate) fn encode(s: &SnapshotRef<'_>) -> Vec<u8> {
    let mut w = start_frame(&MAGIC, VERSION, 96 + s.keys.len() * 64);
    w.u64(s.clock.as_millis());
    w.u64(s.last_fence.get());
    let counters = &s.counters.values()[FIRST_COUNTER..];
    for c in &counters[..counter_count(VERSION)] {
        w.u64(*c);
    }
    w.len(s.keys.len());
    for record in s.keys {
        w.str(record.key.as_str());
        write_key(&mut w, &record.state);
    }
    w.len(s.expired.len());
    for (fence, record) in s.expired.iter() {
        w.u64(fence.get());
        w.str(record.key.as_str());
        w.str(record.owner.as_str());
        w.u64(record.deadline.as_millis());
        w.0.push(u8::from(record.stolen));
    }
    close_frame(w)
}

pub(crate) fn decode(bytes: &[u8], limits: &Limits) -> Result<Decoded, LockError> {
    let (version, body) = open_frame(bytes, &MAGIC, VERSION)?;
    let mut r = Reader { rest: body };
    let decoded = decode_body(&mut r, limits, version)?;
    if !r.rest.is_empty() {
        return Err(corrupt(Corruption::BodyTooLong));
    }
    Ok(decoded)
}

fn decode_body(r: &mut Reader<'_>, limits: &Limits, version: u16) -> Result<Decoded, LockError> {
    let clock = r.instant()?;
    let last_fence = r.fence()?;
    let fences = FenceCounter::starting_after(last_fence)
        .ok_or(corrupt(Corruption::FenceCounterOutOfRange))?;
    let mut counters = [0u64; 11];
    for c in &mut counters[..counter_count(version)] {
        *c = r.u64()?;
    }
    let issued = |fence: Fence| match fence == Fence::ZERO || fence > last_fence {
        true => Err(corrupt(Corruption::LeaseFenceNotIssued)),
        false => Ok(fence),
    };
    let room = Room::of(limits, 0);
    let key_count = r.count(4 + 1 + 4 + 1 + 8 + 8 + 4)?;
    if key_count > limits.max_keys {
        return Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxKeys,
        });
    }
    let mut keys: Vec<(Name, KeyState)> = Vec::with_capacity(key_count);
    let mut lease_fences: Vec<Fence> = Vec::with_capacity(key_count);
    // A lease that expired or was stolen may keep its place (a lock-delay) and be remembered
    // as lost at once: only live leases may not be remembered.
    let mut live_fences: Vec<Fence> = Vec::with_capacity(key_count);
    let mut total_waiters = 0usize;
    for _ in 0..key_count {
        let key = r.str()?;
        against_limits(limits.check_key(key))?;
        if keys
            .last()
            .is_some_and(|(prev, _)| prev.as_bytes() >= key.as_bytes())
        {
            return Err(corrupt(Corruption::KeysOutOfOrder));
        }
        let state = match version {
            1 => read_key_v1(r, limits, clock, &room, issued)?,
            _ => read_key(r, version, limits, clock, issued)?,
        };
        if state.is_free() {
            return Err(corrupt(Corruption::BodyEndsEarly));
        }
        total_waiters += state.waiter_count();
        if total_waiters > limits.max_waiters {
            return Err(LockError::SnapshotExceedsLimits {
                limit: LimitName::MaxWaiters,
            });
        }
        lease_fences.extend(state.leases().map(Lease::fence));
        live_fences.extend(
            state
                .leases()
                .filter(|l| l.ended().is_none())
                .map(Lease::fence),
        );
        keys.push((Name::new(key), state));
    }
    lease_fences.sort_unstable();
    live_fences.sort_unstable();
    if lease_fences.windows(2).any(|w| w[0] == w[1]) {
        return Err(corrupt(Corruption::LeasesShareFence));
    }
    let expired_count = r.count(8 + 4 + 1 + 4 + 1 + 8)?;
    let mut expired: Vec<(Fence, ExpiredRecord)> = Vec::with_capacity(expired_count);
    for _ in 0..expired_count {
        let fence = r.fence()?;
        let key = r.str()?;
        against_limits(limits.check_key(key))?;
        let owner = r.str()?;
        against_limits(limits.check_owner(owner))?;
        let deadline = r.instant()?;
        let stolen = version >= 2 && read_flag(r)?;
        if fence == Fence::ZERO || fence > last_fence || live_fences.binary_search(&fence).is_ok() {
            return Err(corrupt(Corruption::ExpiredFenceInvalid));
        }
        if deadline > clock
            || expired
                .last()
                .is_some_and(|(_, prev)| prev.deadline > deadline)
        {
            return Err(corrupt(Corruption::ExpiredOutOfOrder));
        }
        expired.push((
            fence,
            ExpiredRecord {
                key: Name::new(key),
                owner: Name::new(owner),
                deadline,
                stolen,
            },
        ));
    }
    let mut expired_fences: Vec<Fence> = expired.iter().map(|(f, _)| *f).collect();
    expired_fences.sort_unstable();
    if expired_fences.windows(2).any(|w| w[0] == w[1]) {
        return Err(corrupt(Corruption::ExpiredShareFence));
    }
    Ok(Decoded {
        clock,
        fences,
        counters: stats_from(&counters),
        keys,
        expired,
    })
}

/// Reads one key of a version 1 snapshot (after its name): its lease and waiters.
fn read_key_v1(
    r: &mut Reader<'_>,
    limits: &Limits,
    clock: Instant,
    room: &Room,
    issued: impl Fn(Fence) -> Result<Fence, LockError>,
) -> Result<KeyState, LockError> {
    let owner = r.str()?;
    against_limits(limits.check_owner(owner))?;
    let fence = issued(r.fence()?)?;
    let deadline = r.instant()?;
    let waiter_count = r.count(4 + 1 + 8 + 8)?;
    if waiter_count > limits.max_waiters_per_key {
        return Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxWaitersPerKey,
        });
    }
    let mut waiters = Vec::with_capacity(waiter_count);
    for _ in 0..waiter_count {
        let owner = r.str()?;
        against_limits(limits.check_owner(owner))?;
        let ttl = r.duration()?;
        against_limits(limits.check_ttl(ttl))?;
        let wait_deadline = r.instant()?;
        waiters.push(Waiter::new(owner, ttl, wait_deadline));
    }
    let lease = Lease::new(owner, fence, deadline);
    KeyState::from_parts(alloc::vec![lease], waiters, 0, clock, room).map_err(corrupt)
}
