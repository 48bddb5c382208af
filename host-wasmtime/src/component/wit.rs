//! The WIT side of the boundary, private to this module: the generated bindings, and the one
//! translation between the contract's values and `lock-core`'s (the inverse of `lock-wasm`'s
//! `convert.rs`). Nothing outside `component` sees a WIT type.

wasmtime::component::bindgen!({
    path: "wit",
    world: "lock",
    additional_derives: [PartialEq, Eq, Clone],
});

use exports::expiring::lock::types::{
    self, AcquireOutcome, Event, EventKind, Grant, KeyInfo, LeaseEnd, LockError, Mode, QueryPage,
    ReleaseOutcome, Stats,
};

/// A core value as the plain number (or the same value) the WIT contract passes.
pub(super) trait Plain {
    /// The WIT form.
    type Wit;
    /// Converts.
    fn plain(self) -> Self::Wit;
}

impl Plain for lock_core::Instant {
    type Wit = u64;
    fn plain(self) -> u64 {
        self.0
    }
}

impl Plain for lock_core::Duration {
    type Wit = u64;
    fn plain(self) -> u64 {
        self.0
    }
}

impl Plain for lock_core::Fence {
    type Wit = u64;
    fn plain(self) -> u64 {
        self.0
    }
}

impl<'a> Plain for &'a str {
    type Wit = &'a str;
    fn plain(self) -> &'a str {
        self
    }
}

impl<'a> Plain for &'a [u8] {
    type Wit = &'a [u8];
    fn plain(self) -> &'a [u8] {
        self
    }
}

impl Plain for u32 {
    type Wit = u32;
    fn plain(self) -> u32 {
        self
    }
}

/// The core's limits in WIT terms (counts saturate at u32::MAX).
pub(super) fn limits(l: &lock_core::Limits) -> types::Limits {
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    types::Limits {
        max_key_bytes: n(l.max_key_bytes),
        max_owner_bytes: n(l.max_owner_bytes),
        max_ttl: l.max_ttl.0,
        max_keys: n(l.max_keys),
        max_waiters_per_key: n(l.max_waiters_per_key),
        max_waiters: n(l.max_waiters),
        expired_retention: l.expired_retention.0,
        max_expired_records: n(l.max_expired_records),
        max_pending_events: n(l.max_pending_events),
        max_holders_per_key: n(l.max_holders_per_key),
        max_metadata_bytes: n(l.max_metadata_bytes),
        lock_delay: l.lock_delay.0,
    }
}

/// The contract's mode.
fn mode_out(m: lock_core::Mode) -> Mode {
    match m {
        lock_core::Mode::Exclusive => Mode::Exclusive,
        lock_core::Mode::Shared => Mode::Shared,
    }
}

/// The core's mode.
fn mode(m: Mode) -> lock_core::Mode {
    match m {
        Mode::Exclusive => lock_core::Mode::Exclusive,
        Mode::Shared => lock_core::Mode::Shared,
    }
}

/// The contract's acquire options.
pub(super) fn options(o: &lock_core::AcquireOptions<'_>) -> types::AcquireOptions {
    types::AcquireOptions {
        mode: mode_out(o.mode),
        permits: o.permits,
        min_hold: o.min_hold.0,
        lock_delay: o.lock_delay.0,
        metadata: o.metadata.into(),
        wait_alive: o.wait_alive.0,
    }
}

/// The core's release outcome.
pub(super) fn release(r: &ReleaseOutcome) -> lock_core::ReleaseOutcome {
    match r {
        ReleaseOutcome::Released => lock_core::ReleaseOutcome::Released,
        ReleaseOutcome::HeldUntil(until) => lock_core::ReleaseOutcome::HeldUntil {
            until: lock_core::Instant(*until),
        },
    }
}

/// The core's grant.
pub(super) fn grant(g: &Grant) -> lock_core::Grant {
    lock_core::Grant {
        fence: lock_core::Fence(g.fence),
        deadline: lock_core::Instant(g.deadline),
    }
}

/// The core error for a WIT error; `None` only if a name (limit, corruption) is unknown to this
/// build, i.e. the component was built from a different `lock-core`.
pub(super) fn error(e: &LockError) -> Option<lock_core::LockError> {
    use lock_core::LockError as E;
    let n = |v: u32| v as usize;
    let limit = |name: &str| lock_core::LimitName::from_name(name);
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
            ttl: lock_core::Duration(l.ttl),
            max: lock_core::Duration(l.max),
        },
        LockError::DeadlineOverflow(d) => E::DeadlineOverflow {
            now: lock_core::Instant(d.now),
            ttl: lock_core::Duration(d.ttl),
        },
        LockError::TableFull(m) => E::TableFull { max_keys: n(*m) },
        LockError::QueueFull(m) => E::QueueFull {
            max_waiters_per_key: n(*m),
        },
        LockError::TooManyWaiters(m) => E::TooManyWaiters { max_waiters: n(*m) },
        LockError::Held(deadline) => E::Held {
            deadline: lock_core::Instant(*deadline),
        },
        LockError::NotOwner => E::NotOwner,
        LockError::NotHeld => E::NotHeld,
        LockError::Expired(deadline) => E::Expired {
            deadline: lock_core::Instant(*deadline),
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
            reason: lock_core::Corruption::from_name(reason)?,
        },
        LockError::SnapshotExceedsLimits(name) => E::SnapshotExceedsLimits {
            limit: limit(name)?,
        },
        LockError::MetadataTooLong(l) => E::MetadataTooLong {
            len: n(l.len),
            max: n(l.max),
        },
        LockError::MetadataInvalid => E::MetadataInvalid,
        LockError::TooManyPermits(p) => E::TooManyPermits {
            permits: p.permits,
            max: n(p.max),
        },
        LockError::PermitsMismatch(permits) => E::PermitsMismatch { permits: *permits },
        LockError::ModeMismatch => E::ModeMismatch,
        LockError::MinHoldTooLong(m) => E::MinHoldTooLong {
            min_hold: lock_core::Duration(m.min_hold),
            ttl: lock_core::Duration(m.ttl),
        },
        LockError::LockDelayTooLong(l) => E::LockDelayTooLong {
            lock_delay: lock_core::Duration(l.lock_delay),
            max: lock_core::Duration(l.max),
        },
        LockError::Stolen(at) => E::Stolen {
            at: lock_core::Instant(*at),
        },
        LockError::QueryLimit(max) => E::QueryLimit { max: n(*max) },
    })
}

/// The core's acquire outcome.
pub(super) fn outcome(o: &AcquireOutcome) -> lock_core::AcquireOutcome {
    match o {
        AcquireOutcome::Acquired(g) => lock_core::AcquireOutcome::Acquired(grant(g)),
        AcquireOutcome::AlreadyHeld(g) => lock_core::AcquireOutcome::AlreadyHeld(grant(g)),
        AcquireOutcome::Queued(p) => lock_core::AcquireOutcome::Queued {
            position: *p as usize,
        },
        AcquireOutcome::AlreadyWaiting(p) => lock_core::AcquireOutcome::AlreadyWaiting {
            position: *p as usize,
        },
    }
}

/// The core's event.
pub(super) fn event(e: Event) -> lock_core::Event {
    let kind = match e.kind {
        EventKind::Expired(x) => lock_core::EventKind::Expired {
            owner: x.owner,
            fence: lock_core::Fence(x.fence),
            metadata: x.metadata,
        },
        EventKind::Stolen(x) => lock_core::EventKind::Stolen {
            owner: x.owner,
            fence: lock_core::Fence(x.fence),
            metadata: x.metadata,
        },
        EventKind::Granted(x) => lock_core::EventKind::Granted {
            owner: x.owner,
            fence: lock_core::Fence(x.fence),
            deadline: lock_core::Instant(x.deadline),
            mode: mode(x.mode),
            metadata: x.metadata,
        },
        EventKind::WaitTimedOut(owner) => lock_core::EventKind::WaitTimedOut { owner },
    };
    lock_core::Event {
        key: e.key,
        at: lock_core::Instant(e.at),
        kind,
    }
}

/// The core's view of a key in use.
pub(super) fn key_info(i: KeyInfo) -> lock_core::KeyInfo {
    lock_core::KeyInfo {
        holders: (i.holders.into_iter())
            .map(|h| lock_core::HolderInfo {
                owner: h.owner,
                fence: lock_core::Fence(h.fence),
                deadline: lock_core::Instant(h.deadline),
                mode: mode(h.mode),
                metadata: h.metadata,
                min_until: h.min_until.map(lock_core::Instant),
                ended: h.ended.map(|e| match e {
                    LeaseEnd::Released => lock_core::LeaseEnd::Released,
                    LeaseEnd::Expired => lock_core::LeaseEnd::Expired,
                    LeaseEnd::Stolen => lock_core::LeaseEnd::Stolen,
                }),
                granted_at: h.granted_at.map(lock_core::Instant),
            })
            .collect(),
        waiters: (i.waiters.into_iter())
            .map(|w| lock_core::WaiterInfo {
                owner: w.owner,
                ttl: lock_core::Duration(w.ttl),
                wait_deadline: lock_core::Instant(w.wait_deadline),
                wait_end: lock_core::Instant(w.wait_end),
                mode: mode(w.mode),
                metadata: w.metadata,
            })
            .collect(),
        permits: i.permits,
    }
}

/// The core's query page.
pub(super) fn query_page(p: QueryPage) -> lock_core::QueryPage {
    lock_core::QueryPage {
        keys: (p.keys.into_iter())
            .map(|entry| (entry.key, key_info(entry.info)))
            .collect(),
        next: p.next,
    }
}

/// The core's stats (gauges saturate at `usize::MAX` on 32-bit hosts).
pub(super) fn stats(s: &Stats) -> lock_core::Stats {
    // Named on both sides: a field missing from either struct does not compile.
    let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    lock_core::Stats {
        live_leases: n(s.live_leases),
        waiters: n(s.waiters),
        expired_records: n(s.expired_records),
        pending_events: n(s.pending_events),
        clock: lock_core::Instant(s.clock),
        last_fence: lock_core::Fence(s.last_fence),
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
