//! Runs the shared conformance vectors against the component: a [`Driver`] over a
//! [`ComponentTable`], translating WIT values into the vector terms.

use lock_conformance::format::WaiterView;
use lock_conformance::{Answer, Driver, ErrorCase, EventCase, KeyView, Op, Outcome, StatsView};

use crate::types::{AcquireOutcome, Event, EventKind, KeyInfo, LockError, Stats};
use crate::{ComponentTable, LockComponent, SandboxLimits};

/// A vector driver that starts a fresh component instance for every scenario.
#[derive(Debug)]
pub struct ComponentDriver {
    component: LockComponent,
    table: Option<ComponentTable>,
}

impl ComponentDriver {
    /// A driver over this compiled component.
    #[must_use]
    pub fn new(component: LockComponent) -> Self {
        ComponentDriver {
            component,
            table: None,
        }
    }
}

impl Driver for ComponentDriver {
    fn start(&mut self, limits: &lock_core::Limits) -> Result<(), String> {
        let table = self
            .component
            .instantiate(limits, 0, SandboxLimits::default())
            .map_err(|e| e.to_string())?;
        self.table = Some(table);
        Ok(())
    }

    fn run(&mut self, op: &Op) -> Result<Answer, String> {
        let t = self.table.as_mut().ok_or("no table started")?;
        let e = |e: crate::HostError| e.to_string();
        Ok(match op {
            Op::TryAcquire {
                now,
                key,
                owner,
                ttl,
            } => Answer::Result(
                t.try_acquire(key, owner, *ttl, *now)
                    .map_err(e)?
                    .map(outcome)
                    .map_err(error),
            ),
            Op::Acquire {
                now,
                key,
                owner,
                ttl,
                wait_deadline,
            } => Answer::Result(
                t.acquire(key, owner, *ttl, *wait_deadline, *now)
                    .map_err(e)?
                    .map(outcome)
                    .map_err(error),
            ),
            Op::Release {
                now,
                key,
                owner,
                fence,
            } => Answer::Result(
                t.release(key, owner, *fence, *now)
                    .map_err(e)?
                    .map(|()| Outcome::Released)
                    .map_err(error),
            ),
            Op::Extend {
                now,
                key,
                owner,
                fence,
                ttl,
            } => Answer::Result(
                t.extend(key, owner, *fence, *ttl, *now)
                    .map_err(e)?
                    .map(|g| Outcome::Extended {
                        fence: g.fence,
                        deadline: g.deadline,
                    })
                    .map_err(error),
            ),
            Op::CancelWait { now, key, owner } => Answer::Result(
                t.cancel_wait(key, owner, *now)
                    .map_err(e)?
                    .map(|()| Outcome::Cancelled)
                    .map_err(error),
            ),
            Op::HandleTimeout { now } => {
                t.handle_timeout(*now).map_err(e)?;
                Answer::Nothing
            }
            Op::Inspect { now, key } => Answer::Inspect(
                t.inspect(key, *now)
                    .map_err(e)?
                    .map(|i| i.map(key_view))
                    .map_err(error),
            ),
            Op::Stats { now } => Answer::Stats(stats_view(&t.stats(*now).map_err(e)?)),
            Op::NextWakeup => Answer::Wakeup(t.next_wakeup().map_err(e)?),
            Op::Snapshot { now } => Answer::Snapshot(t.snapshot(*now).map_err(e)?),
            Op::Restore { bytes } => Answer::Result(
                t.restore(bytes.as_deref().unwrap_or_default())
                    .map_err(e)?
                    .map(|()| Outcome::Restored)
                    .map_err(error),
            ),
        })
    }

    fn drain_events(&mut self) -> Result<Vec<EventCase>, String> {
        let t = self.table.as_mut().ok_or("no table started")?;
        Ok(t.poll_events()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(event)
            .collect())
    }
}

fn outcome(o: AcquireOutcome) -> Outcome {
    match o {
        AcquireOutcome::Acquired(g) => Outcome::Acquired {
            fence: g.fence,
            deadline: g.deadline,
        },
        AcquireOutcome::AlreadyHeld(g) => Outcome::AlreadyHeld {
            fence: g.fence,
            deadline: g.deadline,
        },
        AcquireOutcome::Queued(p) => Outcome::Queued { position: p.into() },
        AcquireOutcome::AlreadyWaiting(p) => Outcome::AlreadyWaiting { position: p.into() },
    }
}

/// Exhaustive over the WIT error cases.
fn error(e: LockError) -> ErrorCase {
    match e {
        LockError::KeyEmpty => ErrorCase::KeyEmpty,
        LockError::KeyTooLong(l) => ErrorCase::KeyTooLong {
            len: l.len.into(),
            max: l.max.into(),
        },
        LockError::KeyInvalid => ErrorCase::KeyInvalid,
        LockError::OwnerEmpty => ErrorCase::OwnerEmpty,
        LockError::OwnerTooLong(l) => ErrorCase::OwnerTooLong {
            len: l.len.into(),
            max: l.max.into(),
        },
        LockError::OwnerInvalid => ErrorCase::OwnerInvalid,
        LockError::TtlZero => ErrorCase::TtlZero,
        LockError::TtlTooLong(l) => ErrorCase::TtlTooLong {
            ttl: l.ttl,
            max: l.max,
        },
        LockError::DeadlineOverflow(d) => ErrorCase::DeadlineOverflow {
            now: d.now,
            ttl: d.ttl,
        },
        LockError::TableFull(n) => ErrorCase::TableFull { max_keys: n.into() },
        LockError::QueueFull(n) => ErrorCase::QueueFull {
            max_waiters_per_key: n.into(),
        },
        LockError::TooManyWaiters(n) => ErrorCase::TooManyWaiters {
            max_waiters: n.into(),
        },
        LockError::Held(deadline) => ErrorCase::Held { deadline },
        LockError::NotOwner => ErrorCase::NotOwner,
        LockError::NotHeld => ErrorCase::NotHeld,
        LockError::Expired(deadline) => ErrorCase::Expired { deadline },
        LockError::NotWaiting => ErrorCase::NotWaiting,
        LockError::InvalidLimits(limit) => ErrorCase::InvalidLimits { limit },
        LockError::SnapshotTruncated => ErrorCase::SnapshotTruncated,
        LockError::SnapshotBadMagic => ErrorCase::SnapshotBadMagic,
        LockError::SnapshotVersion(v) => ErrorCase::SnapshotVersion {
            found: v.found.into(),
            supported: v.supported.into(),
        },
        LockError::SnapshotChecksum => ErrorCase::SnapshotChecksum,
        LockError::SnapshotCorrupt(reason) => ErrorCase::SnapshotCorrupt { reason },
        LockError::SnapshotExceedsLimits(limit) => ErrorCase::SnapshotExceedsLimits { limit },
    }
}

fn event(e: Event) -> EventCase {
    let Event { key, at, kind } = e;
    match kind {
        EventKind::Expired(x) => EventCase::Expired {
            key,
            owner: x.owner,
            fence: x.fence,
            at,
        },
        EventKind::Granted(x) => EventCase::Granted {
            key,
            owner: x.owner,
            fence: x.fence,
            deadline: x.deadline,
            at,
        },
        EventKind::WaitTimedOut(owner) => EventCase::WaitTimedOut { key, owner, at },
    }
}

fn key_view(i: KeyInfo) -> KeyView {
    KeyView {
        owner: i.owner,
        fence: i.fence,
        deadline: i.deadline,
        waiters: i
            .waiters
            .into_iter()
            .map(|w| WaiterView {
                owner: w.owner,
                ttl: w.ttl,
                wait_deadline: w.wait_deadline,
            })
            .collect(),
    }
}

fn stats_view(s: &Stats) -> StatsView {
    StatsView {
        live_leases: Some(s.live_leases),
        waiters: Some(s.waiters),
        expired_records: Some(s.expired_records),
        pending_events: Some(s.pending_events),
        clock: Some(s.clock),
        last_fence: Some(s.last_fence),
        acquired: Some(s.acquired),
        handed_off: Some(s.handed_off),
        released: Some(s.released),
        extended: Some(s.extended),
        expired: Some(s.expired),
        queued: Some(s.queued),
        wait_timed_out: Some(s.wait_timed_out),
        cancelled: Some(s.cancelled),
        rejected: Some(s.rejected),
        events_dropped: Some(s.events_dropped),
    }
}
