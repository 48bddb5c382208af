//! Runs the shared conformance vectors against the component: a [`Driver`] over a
//! [`ComponentTable`], translating WIT values into the vector terms.

use lock_conformance::native::{event, key_view, outcome, stats_view};
use lock_conformance::{Answer, Driver, ErrorCase, EventCase, Op, Outcome};

use crate::to_core;
use crate::types::LockError;
use crate::{ComponentTable, LockComponent, SandboxLimits};

/// A WIT result in vector terms, through the core's types; an error name unknown to this build
/// is a runtime failure, not an answer.
fn answered<T, U>(
    result: Result<T, LockError>,
    ok: impl FnOnce(T) -> U,
) -> Result<Result<U, ErrorCase>, String> {
    match result {
        Ok(value) => Ok(Ok(ok(value))),
        Err(e) => to_core::error(&e)
            .map(|core| Err(lock_conformance::native::error(core)))
            .ok_or_else(|| format!("the component answered an error unknown to this build: {e:?}")),
    }
}

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
            } => Answer::Result(answered(
                t.try_acquire(key, owner, *ttl, *now).map_err(e)?,
                |o| outcome(to_core::outcome(&o)),
            )?),
            Op::Acquire {
                now,
                key,
                owner,
                ttl,
                wait_deadline,
            } => Answer::Result(answered(
                t.acquire(key, owner, *ttl, *wait_deadline, *now)
                    .map_err(e)?,
                |o| outcome(to_core::outcome(&o)),
            )?),
            Op::Release {
                now,
                key,
                owner,
                fence,
            } => Answer::Result(answered(
                t.release(key, owner, *fence, *now).map_err(e)?,
                |()| Outcome::Released,
            )?),
            Op::Extend {
                now,
                key,
                owner,
                fence,
                ttl,
            } => Answer::Result(answered(
                t.extend(key, owner, *fence, *ttl, *now).map_err(e)?,
                |g| Outcome::Extended {
                    fence: g.fence,
                    deadline: g.deadline,
                },
            )?),
            Op::CancelWait { now, key, owner } => Answer::Result(answered(
                t.cancel_wait(key, owner, *now).map_err(e)?,
                |()| Outcome::Cancelled,
            )?),
            Op::HandleTimeout { now } => {
                t.handle_timeout(*now).map_err(e)?;
                Answer::Nothing
            }
            Op::Inspect { now, key } => {
                Answer::Inspect(answered(t.inspect(key, *now).map_err(e)?, |i| {
                    i.map(|i| key_view(to_core::key_info(i)))
                })?)
            }
            Op::Stats { now } => {
                Answer::Stats(stats_view(&to_core::stats(&t.stats(*now).map_err(e)?)))
            }
            Op::NextWakeup => Answer::Wakeup(t.next_wakeup().map_err(e)?),
            Op::Snapshot { now } => Answer::Snapshot(t.snapshot(*now).map_err(e)?),
            Op::Restore { bytes } => Answer::Result(answered(
                t.restore(bytes.as_deref().unwrap_or_default()).map_err(e)?,
                |()| Outcome::Restored,
            )?),
        })
    }

    fn drain_events(&mut self) -> Result<Vec<EventCase>, String> {
        let t = self.table.as_mut().ok_or("no table started")?;
        Ok(t.poll_events()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|e| event(to_core::event(e)))
            .collect())
    }
}
