//! The component's WIT values mapped back to `lock-core`'s types: the inverse of
//! `lock-wasm/src/convert.rs`. With it the host reuses the core's `Display` texts and the
//! conformance crate's translation into vector terms instead of writing them again.

use lock_core as core_;

use crate::types::{AcquireOutcome, Event, EventKind, KeyInfo, LockError, Stats};

/// The core error for a WIT error; `None` only if a name (limit, corruption) is unknown to this
/// build, i.e. the component was built from a different `lock-core`.
#[must_use]
pub fn error(e: &LockError) -> Option<core_::LockError> {
    use core_::LockError as E;
    let n = |v: u32| v as usize;
    let limit = |name: &str| core_::LimitName::from_name(name);
    Some(match e {
        LockError::KeyEmpty => E::KeyEmpty,
        LockError::KeyTooLong(l) => E::KeyTooLong {
            len: n(l.len),
            max: n(l.max),
        },
        LockError::KeyInvalid => E::KeyInvalid,
        LockError::OwnerEmpty => E::OwnerEmpty,
        LockError::OwnerTooLong(l) => E::OwnerTooLong {
            len: n(l.len),
            max: n(l.max),
        },
        LockError::OwnerInvalid => E::OwnerInvalid,
        LockError::TtlZero => E::TtlZero,
        LockError::TtlTooLong(l) => E::TtlTooLong {
            ttl: l.ttl,
            max: l.max,
        },
        LockError::DeadlineOverflow(d) => E::DeadlineOverflow {
            now: d.now,
            ttl: d.ttl,
        },
        LockError::TableFull(m) => E::TableFull { max_keys: n(*m) },
        LockError::QueueFull(m) => E::QueueFull {
            max_waiters_per_key: n(*m),
        },
        LockError::TooManyWaiters(m) => E::TooManyWaiters { max_waiters: n(*m) },
        LockError::Held(deadline) => E::Held {
            deadline: *deadline,
        },
        LockError::NotOwner => E::NotOwner,
        LockError::NotHeld => E::NotHeld,
        LockError::Expired(deadline) => E::Expired {
            deadline: *deadline,
        },
        LockError::NotWaiting => E::NotWaiting,
        LockError::InvalidLimits(name) => E::InvalidLimits {
            limit: limit(name)?,
        },
        LockError::SnapshotTruncated => E::SnapshotTruncated,
        LockError::SnapshotBadMagic => E::SnapshotBadMagic,
        LockError::SnapshotVersion(v) => E::SnapshotVersion {
            found: v.found,
            supported: v.supported,
        },
        LockError::SnapshotChecksum => E::SnapshotChecksum,
        LockError::SnapshotCorrupt(reason) => E::SnapshotCorrupt {
            reason: core_::Corruption::from_name(reason)?,
        },
        LockError::SnapshotExceedsLimits(name) => E::SnapshotExceedsLimits {
            limit: limit(name)?,
        },
    })
}

/// The core's acquire outcome.
pub fn outcome(o: &AcquireOutcome) -> core_::AcquireOutcome {
    let grant = |g: &crate::types::Grant| core_::Grant {
        fence: g.fence,
        deadline: g.deadline,
    };
    match o {
        AcquireOutcome::Acquired(g) => core_::AcquireOutcome::Acquired(grant(g)),
        AcquireOutcome::AlreadyHeld(g) => core_::AcquireOutcome::AlreadyHeld(grant(g)),
        AcquireOutcome::Queued(p) => core_::AcquireOutcome::Queued {
            position: *p as usize,
        },
        AcquireOutcome::AlreadyWaiting(p) => core_::AcquireOutcome::AlreadyWaiting {
            position: *p as usize,
        },
    }
}

/// The core's event.
#[must_use]
pub fn event(e: Event) -> core_::Event {
    let kind = match e.kind {
        EventKind::Expired(x) => core_::EventKind::Expired {
            owner: x.owner,
            fence: x.fence,
        },
        EventKind::Granted(x) => core_::EventKind::Granted {
            owner: x.owner,
            fence: x.fence,
            deadline: x.deadline,
        },
        EventKind::WaitTimedOut(owner) => core_::EventKind::WaitTimedOut { owner },
    };
    core_::Event {
        key: e.key,
        at: e.at,
        kind,
    }
}

/// The core's view of a held key.
#[must_use]
pub fn key_info(i: KeyInfo) -> core_::KeyInfo {
    core_::KeyInfo {
        holder: core_::HolderInfo {
            owner: i.owner,
            fence: i.fence,
            deadline: i.deadline,
        },
        waiters: i
            .waiters
            .into_iter()
            .map(|w| core_::WaiterInfo {
                owner: w.owner,
                ttl: w.ttl,
                wait_deadline: w.wait_deadline,
            })
            .collect(),
    }
}

/// The core's stats (gauges saturate at `usize::MAX` on 32-bit hosts).
#[must_use]
pub fn stats(s: &Stats) -> core_::Stats {
    let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    core_::Stats {
        live_leases: n(s.live_leases),
        waiters: n(s.waiters),
        expired_records: n(s.expired_records),
        pending_events: n(s.pending_events),
        clock: s.clock,
        last_fence: s.last_fence,
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_back_to_the_core_and_unknown_ones_do_not() {
        let known = LockError::SnapshotExceedsLimits("max_keys".into());
        assert_eq!(
            error(&known),
            Some(core_::LockError::SnapshotExceedsLimits {
                limit: core_::LimitName::MaxKeys
            })
        );
        assert_eq!(
            error(&LockError::SnapshotCorrupt("from another build".into())),
            None
        );
        assert_eq!(error(&LockError::InvalidLimits("max_magic".into())), None);
    }

    #[test]
    fn host_messages_are_the_core_messages() {
        let e = LockError::Held(5);
        assert_eq!(
            crate::describe(&e),
            core_::LockError::Held { deadline: 5 }.to_string()
        );
        assert!(
            crate::describe(&LockError::InvalidLimits("max_magic".into())).contains("max_magic")
        );
    }
}
