//! One key's leases and waiters in bytes, shared by the key record and the snapshot formats.
//!
//! Version 1 holds plain keys only (one exclusive lease without terms, plain waiters; its
//! reader is in each format's module); version 2 holds every lock kind; version 3 adds each
//! lease's grant instant. Writers write version 3; every version is read (a lease read from
//! version 1 or 2 has no known grant instant).
//!
//! ```text
//! version 2 and 3, per key:
//!   permits u32,
//!   lease_count u32, per lease in grant order:
//!     owner str, fence u64, deadline u64, mode u8 (0 exclusive, 1 shared),
//!     ended u8 (0 live, 1 released, 2 expired, 3 stolen), metadata str,
//!     has_min_until u8 (0 or 1), [min_until u64], lock_delay u64,
//!     version 3 only: has_granted_at u8 (0 or 1), [granted_at u64] (at or before the clock)
//!   waiter_count u32, per waiter first in line first:
//!     owner str, ttl u64, wait_deadline u64, mode u8, metadata str, min_hold u64, lock_delay u64,
//!     wait_alive u64, [wait_end u64 if wait_alive > 0] (the end of the wait it asked for, at
//!     or after wait_deadline)
//! ```

use alloc::vec::Vec;

use crate::frame::{against_limits, corrupt, Reader, Writer};
use crate::key_state::{KeyState, Lease, Room, Waiter};
use crate::{
    AcquireOptions, Corruption, Fence, Instant, LeaseEnd, LimitName, Limits, LockError, Mode,
};

/// The newest version of a key's bytes, the one [`write_key`] writes.
pub(crate) const KEY_VERSION: u16 = 3;

/// Smallest encoded lease and waiter of version 2, to bound counts before allocating.
const MIN_LEASE_V2: usize = 4 + 1 + 8 + 8 + 1 + 1 + 4 + 1 + 8;
const MIN_WAITER_V2: usize = 4 + 1 + 8 + 8 + 1 + 4 + 8 + 8 + 8;

fn mode_byte(mode: Mode) -> u8 {
    match mode {
        Mode::Exclusive => 0,
        Mode::Shared => 1,
    }
}

fn read_mode(r: &mut Reader<'_>) -> Result<Mode, LockError> {
    match r.take(1)?[0] {
        0 => Ok(Mode::Exclusive),
        1 => Ok(Mode::Shared),
        _ => Err(corrupt(Corruption::UnknownTag)),
    }
}

fn end_byte(ended: Option<LeaseEnd>) -> u8 {
    match ended {
        None => 0,
        Some(LeaseEnd::Released) => 1,
        Some(LeaseEnd::Expired) => 2,
        Some(LeaseEnd::Stolen) => 3,
    }
}

fn read_end(r: &mut Reader<'_>) -> Result<Option<LeaseEnd>, LockError> {
    match r.take(1)?[0] {
        0 => Ok(None),
        1 => Ok(Some(LeaseEnd::Released)),
        2 => Ok(Some(LeaseEnd::Expired)),
        3 => Ok(Some(LeaseEnd::Stolen)),
        _ => Err(corrupt(Corruption::UnknownTag)),
    }
}

/// A flag byte: 0 or 1.
pub(crate) fn read_flag(r: &mut Reader<'_>) -> Result<bool, LockError> {
    match r.take(1)?[0] {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(corrupt(Corruption::UnknownTag)),
    }
}

fn read_metadata<'a>(r: &mut Reader<'a>, limits: &Limits) -> Result<&'a str, LockError> {
    let metadata = r.str()?;
    match limits.check_metadata(metadata) {
        Ok(()) => Ok(metadata),
        Err(LockError::MetadataTooLong { .. }) => Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxMetadataBytes,
        }),
        Err(_) => Err(corrupt(Corruption::InvalidMetadata)),
    }
}

/// Writes a key's leases and waiters in the newest version, [`KEY_VERSION`].
pub(crate) fn write_key(w: &mut Writer, state: &KeyState) {
    w.u32(state.permits());
    w.len(state.lease_count());
    for lease in state.leases() {
        w.str(lease.owner());
        w.u64(lease.fence().get());
        w.u64(lease.deadline().as_millis());
        w.0.push(mode_byte(lease.mode()));
        w.0.push(end_byte(lease.ended()));
        w.str(lease.metadata());
        match lease.min_until() {
            Some(at) => {
                w.0.push(1);
                w.u64(at.as_millis());
            }
            None => w.0.push(0),
        }
        w.u64(lease.lock_delay().as_millis());
        match lease.granted_at() {
            Some(at) => {
                w.0.push(1);
                w.u64(at.as_millis());
            }
            None => w.0.push(0),
        }
    }
    w.len(state.waiter_count());
    for waiter in state.waiters() {
        let options = waiter.options();
        w.str(waiter.owner());
        w.u64(waiter.ttl().as_millis());
        w.u64(waiter.wait_deadline().as_millis());
        w.0.push(mode_byte(options.mode));
        w.str(options.metadata);
        w.u64(options.min_hold.as_millis());
        w.u64(options.lock_delay.as_millis());
        w.u64(options.wait_alive.as_millis());
        if !options.wait_alive.is_zero() {
            w.u64(waiter.wait_end().as_millis());
        }
    }
}

/// Reads a key written in `version` 2 or 3 (by [`write_key`]), settling each lease's fence with
/// `fence` and checking everything against `limits`; `now` is the clock the key was written at.
pub(crate) fn read_key(
    r: &mut Reader<'_>,
    version: u16,
    limits: &Limits,
    now: Instant,
    mut fence: impl FnMut(Fence) -> Result<Fence, LockError>,
) -> Result<KeyState, LockError> {
    let permits = r.u32()?;
    if permits as usize > limits.max_holders_per_key {
        return Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxHoldersPerKey,
        });
    }
    let lease_count = r.count(MIN_LEASE_V2)?;
    if lease_count > limits.max_holders_per_key.saturating_add(1) {
        return Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxHoldersPerKey,
        });
    }
    let mut leases = Vec::with_capacity(lease_count);
    for _ in 0..lease_count {
        let owner = r.str()?;
        against_limits(limits.check_owner(owner))?;
        let fence = fence(r.fence()?)?;
        let deadline = r.instant()?;
        let mode = read_mode(r)?;
        let ended = read_end(r)?;
        let metadata = read_metadata(r, limits)?;
        let min_until = match read_flag(r)? {
            true => Some(r.instant()?),
            false => None,
        };
        let lock_delay = r.duration()?;
        if lock_delay > limits.max_ttl {
            return Err(LockError::SnapshotExceedsLimits {
                limit: LimitName::MaxTtl,
            });
        }
        let granted_at = match version >= 3 && read_flag(r)? {
            true => Some(r.instant()?),
            false => None,
        };
        if granted_at.is_some_and(|at| at > now) {
            return Err(corrupt(Corruption::GrantedAfterClock));
        }
        let lease = Lease::new(owner, fence, deadline)
            .with_granted_at(granted_at)
            .with_terms(mode, metadata, min_until, lock_delay)
            .with_end(ended);
        leases.push(lease);
    }
    let waiter_count = r.count(MIN_WAITER_V2)?;
    let waiters = read_waiters_v2(r, limits, waiter_count)?;
    let room = Room::of(limits, 0);
    KeyState::from_parts(leases, waiters, permits, now, &room).map_err(corrupt)
}

fn read_waiters_v2(
    r: &mut Reader<'_>,
    limits: &Limits,
    count: usize,
) -> Result<Vec<Waiter>, LockError> {
    if count > limits.max_waiters_per_key {
        return Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxWaitersPerKey,
        });
    }
    let mut waiters = Vec::with_capacity(count);
    for _ in 0..count {
        let owner = r.str()?;
        against_limits(limits.check_owner(owner))?;
        let ttl = r.duration()?;
        against_limits(limits.check_ttl(ttl))?;
        let wait_deadline = r.instant()?;
        let mode = read_mode(r)?;
        let metadata = read_metadata(r, limits)?;
        let min_hold = r.duration()?;
        let lock_delay = r.duration()?;
        let wait_alive = r.duration()?;
        let wait_end = match wait_alive.is_zero() {
            true => wait_deadline,
            false => r.instant()?,
        };
        if wait_end < wait_deadline {
            return Err(corrupt(Corruption::WaitKeptPastItsEnd));
        }
        if min_hold > ttl {
            return Err(corrupt(Corruption::MinHoldPastDeadline));
        }
        if lock_delay > limits.max_ttl {
            return Err(LockError::SnapshotExceedsLimits {
                limit: LimitName::MaxTtl,
            });
        }
        let options = AcquireOptions {
            mode,
            permits: 0,
            min_hold,
            lock_delay,
            metadata,
            wait_alive,
        };
        let waiter = Waiter::new(owner, ttl, wait_end).with_options(&options);
        waiters.push(waiter.kept_alive(wait_deadline));
    }
    Ok(waiters)
}
