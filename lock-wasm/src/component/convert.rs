//! Type translation between the WIT contract and `lock-core`. Nothing here decides an outcome.

use lock_core as core_;

use super::exports::expiring::lock::types::{
    AcquireOptions, AcquireOutcome, DeadlineOverflowInfo, Event, EventKind, ExpiredEvent, Grant,
    GrantedEvent, HolderInfo, KeyEntry, KeyInfo, LeaseEnd, LengthLimit, Limits, LockDelayLimit,
    LockError, MinHoldInfo, Mode, PermitsLimit, QueryPage, ReleaseOutcome, Stats, TtlLimit,
    VersionMismatch, WaiterInfo,
};

/// WIT counts are u32; the core's are usize. Saturates (the core's limits keep them far below).
fn u32_of(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub fn limits_in(l: &Limits) -> core_::Limits {
    core_::Limits {
        max_key_bytes: l.max_key_bytes as usize,
        max_owner_bytes: l.max_owner_bytes as usize,
        max_ttl: core_::Duration(l.max_ttl),
        max_keys: l.max_keys as usize,
        max_waiters_per_key: l.max_waiters_per_key as usize,
        max_waiters: l.max_waiters as usize,
        expired_retention: core_::Duration(l.expired_retention),
        max_expired_records: l.max_expired_records as usize,
        max_pending_events: l.max_pending_events as usize,
        max_holders_per_key: l.max_holders_per_key as usize,
        max_metadata_bytes: l.max_metadata_bytes as usize,
        lock_delay: core_::Duration(l.lock_delay),
    }
}

pub fn limits_out(l: &core_::Limits) -> Limits {
    Limits {
        max_key_bytes: u32_of(l.max_key_bytes),
        max_owner_bytes: u32_of(l.max_owner_bytes),
        max_ttl: l.max_ttl.0,
        max_keys: u32_of(l.max_keys),
        max_waiters_per_key: u32_of(l.max_waiters_per_key),
        max_waiters: u32_of(l.max_waiters),
        expired_retention: l.expired_retention.0,
        max_expired_records: u32_of(l.max_expired_records),
        max_pending_events: u32_of(l.max_pending_events),
        max_holders_per_key: u32_of(l.max_holders_per_key),
        max_metadata_bytes: u32_of(l.max_metadata_bytes),
        lock_delay: l.lock_delay.0,
    }
}

pub fn mode_in(m: Mode) -> core_::Mode {
    match m {
        Mode::Exclusive => core_::Mode::Exclusive,
        Mode::Shared => core_::Mode::Shared,
    }
}

pub fn mode_out(m: core_::Mode) -> Mode {
    match m {
        core_::Mode::Exclusive => Mode::Exclusive,
        core_::Mode::Shared => Mode::Shared,
    }
}

pub fn options_in(o: &AcquireOptions) -> core_::AcquireOptions<'_> {
    core_::AcquireOptions {
        mode: mode_in(o.mode),
        permits: o.permits,
        min_hold: core_::Duration(o.min_hold),
        lock_delay: core_::Duration(o.lock_delay),
        metadata: &o.metadata,
        wait_alive: core_::Duration(o.wait_alive),
    }
}

pub fn release(r: core_::ReleaseOutcome) -> ReleaseOutcome {
    match r {
        core_::ReleaseOutcome::Released => ReleaseOutcome::Released,
        core_::ReleaseOutcome::HeldUntil { until } => ReleaseOutcome::HeldUntil(until.0),
    }
}

pub fn grant(g: core_::Grant) -> Grant {
    Grant {
        fence: g.fence.0,
        deadline: g.deadline.0,
    }
}

pub fn outcome(o: core_::AcquireOutcome) -> AcquireOutcome {
    match o {
        core_::AcquireOutcome::Acquired(g) => AcquireOutcome::Acquired(grant(g)),
        core_::AcquireOutcome::AlreadyHeld(g) => AcquireOutcome::AlreadyHeld(grant(g)),
        core_::AcquireOutcome::Queued { position } => AcquireOutcome::Queued(u32_of(position)),
        core_::AcquireOutcome::AlreadyWaiting { position } => {
            AcquireOutcome::AlreadyWaiting(u32_of(position))
        }
    }
}

/// Exhaustive: a new core error does not compile until it has its WIT case.
pub fn error(e: core_::LockError) -> LockError {
    use core_::LockError as E;
    match e {
        E::KeyEmpty => LockError::KeyEmpty,
        E::KeyTooLong { len, max } => LockError::KeyTooLong(LengthLimit {
            len: u32_of(len),
            max: u32_of(max),
        }),
        E::KeyInvalid => LockError::KeyInvalid,
        E::OwnerEmpty => LockError::OwnerEmpty,
        E::OwnerTooLong { len, max } => LockError::OwnerTooLong(LengthLimit {
            len: u32_of(len),
            max: u32_of(max),
        }),
        E::OwnerInvalid => LockError::OwnerInvalid,
        E::TtlZero => LockError::TtlZero,
        E::TtlTooLong { ttl, max } => LockError::TtlTooLong(TtlLimit {
            ttl: ttl.0,
            max: max.0,
        }),
        E::DeadlineOverflow { now, ttl } => LockError::DeadlineOverflow(DeadlineOverflowInfo {
            now: now.0,
            ttl: ttl.0,
        }),
        E::TableFull { max_keys } => LockError::TableFull(u32_of(max_keys)),
        E::QueueFull {
            max_waiters_per_key,
        } => LockError::QueueFull(u32_of(max_waiters_per_key)),
        E::TooManyWaiters { max_waiters } => LockError::TooManyWaiters(u32_of(max_waiters)),
        E::Held { deadline } => LockError::Held(deadline.0),
        E::NotOwner => LockError::NotOwner,
        E::NotHeld => LockError::NotHeld,
        E::Expired { deadline } => LockError::Expired(deadline.0),
        E::NotWaiting => LockError::NotWaiting,
        E::InvalidLimits { limit } => LockError::InvalidLimits(limit.as_str().into()),
        E::SnapshotTruncated => LockError::SnapshotTruncated,
        E::SnapshotBadMagic => LockError::SnapshotBadMagic,
        E::SnapshotVersion { found, supported } => {
            LockError::SnapshotVersion(VersionMismatch { found, supported })
        }
        E::SnapshotChecksum => LockError::SnapshotChecksum,
        E::SnapshotCorrupt { reason } => LockError::SnapshotCorrupt(reason.as_str().into()),
        E::SnapshotExceedsLimits { limit } => {
            LockError::SnapshotExceedsLimits(limit.as_str().into())
        }
        E::MetadataTooLong { len, max } => LockError::MetadataTooLong(LengthLimit {
            len: u32_of(len),
            max: u32_of(max),
        }),
        E::MetadataInvalid => LockError::MetadataInvalid,
        E::TooManyPermits { permits, max } => LockError::TooManyPermits(PermitsLimit {
            permits,
            max: u32_of(max),
        }),
        E::PermitsMismatch { permits } => LockError::PermitsMismatch(permits),
        E::ModeMismatch => LockError::ModeMismatch,
        E::MinHoldTooLong { min_hold, ttl } => LockError::MinHoldTooLong(MinHoldInfo {
            min_hold: min_hold.0,
            ttl: ttl.0,
        }),
        E::LockDelayTooLong { lock_delay, max } => LockError::LockDelayTooLong(LockDelayLimit {
            lock_delay: lock_delay.0,
            max: max.0,
        }),
        E::Stolen { at } => LockError::Stolen(at.0),
        E::QueryLimit { max } => LockError::QueryLimit(u32_of(max)),
    }
}

pub fn event(e: core_::Event) -> Event {
    let kind = match e.kind {
        core_::EventKind::Expired {
            owner,
            fence,
            metadata,
        } => EventKind::Expired(ExpiredEvent {
            owner,
            fence: fence.0,
            metadata,
        }),
        core_::EventKind::Stolen {
            owner,
            fence,
            metadata,
        } => EventKind::Stolen(ExpiredEvent {
            owner,
            fence: fence.0,
            metadata,
        }),
        core_::EventKind::Granted {
            owner,
            fence,
            deadline,
            mode,
            metadata,
        } => EventKind::Granted(GrantedEvent {
            owner,
            fence: fence.0,
            deadline: deadline.0,
            mode: mode_out(mode),
            metadata,
        }),
        core_::EventKind::WaitTimedOut { owner } => EventKind::WaitTimedOut(owner),
    };
    Event {
        key: e.key,
        at: e.at.0,
        kind,
    }
}

pub fn key_info(i: core_::KeyInfo) -> KeyInfo {
    KeyInfo {
        holders: (i.holders.into_iter())
            .map(|h| HolderInfo {
                owner: h.owner,
                fence: h.fence.0,
                deadline: h.deadline.0,
                mode: mode_out(h.mode),
                metadata: h.metadata,
                min_until: h.min_until.map(|m| m.0),
                ended: h.ended.map(|e| match e {
                    core_::LeaseEnd::Released => LeaseEnd::Released,
                    core_::LeaseEnd::Expired => LeaseEnd::Expired,
                    core_::LeaseEnd::Stolen => LeaseEnd::Stolen,
                }),
                granted_at: h.granted_at.map(|m| m.0),
            })
            .collect(),
        waiters: (i.waiters.into_iter())
            .map(|w| WaiterInfo {
                owner: w.owner,
                ttl: w.ttl.0,
                wait_deadline: w.wait_deadline.0,
                wait_end: w.wait_end.0,
                mode: mode_out(w.mode),
                metadata: w.metadata,
            })
            .collect(),
        permits: i.permits,
    }
}

pub fn query_page(p: core_::QueryPage) -> QueryPage {
    QueryPage {
        keys: (p.keys.into_iter())
            .map(|(key, info)| KeyEntry {
                key,
                info: key_info(info),
            })
            .collect(),
        next: p.next,
    }
}

pub fn stats(s: &core_::Stats) -> Stats {
    Stats {
        live_leases: s.live_leases as u64,
        waiters: s.waiters as u64,
        expired_records: s.expired_records as u64,
        pending_events: s.pending_events as u64,
        clock: s.clock.0,
        last_fence: s.last_fence.0,
        acquired: s.acquired,
        handed_off: s.handed_off,
        released: s.released,
        extended: s.extended,
        expired: s.expired,
        queued: s.queued,
        wait_timed_out: s.wait_timed_out,
        cancelled: s.cancelled,
        rejected: s.rejected,
        events_dropped: s.events_dropped,
        stolen: s.stolen,
    }
}
