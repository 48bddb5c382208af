//! The answer of one operation on one key, shaped for the JS wrappers: a status number, the
//! numeric results in a fixed buffer the wrapper reads through a `Float64Array`, the key's events
//! and an inspection as JSON, and the error. Written once for `RawRecord` (one record) and
//! `RawClient` (a store's decision loop), which answer alike.

use lock_core::{Event, KeyEvent, LockError, Response};

use super::{event_json, info_json, json, DONE, FAILED, FIRST_OUTCOME, OUT_ERROR};

/// What the last operation answered.
pub(super) struct Answer {
    /// `[fence or position, deadline, error index, -]`.
    pub(super) out: [f64; 4],
    pub(super) error: Option<LockError>,
    /// The answered inspection (JSON, `null`: free).
    pub(super) info: String,
    /// The key's events (a JSON array).
    pub(super) events: String,
}

impl Answer {
    pub(super) fn new(error: Option<LockError>) -> Self {
        Answer {
            out: [0.0; 4],
            error,
            info: String::from("null"),
            events: String::from("[]"),
        }
    }

    /// Status 0 with `e` as the error.
    pub(super) fn fail(&mut self, e: LockError) -> u32 {
        self.out[OUT_ERROR] = e.index() as f64;
        self.error = Some(e);
        FAILED
    }

    /// Keeps `events` of `key` as JSON.
    pub(super) fn events(&mut self, key: &str, events: &[KeyEvent]) {
        self.events = json::array(events.iter().map(|e| {
            event_json(&Event {
                key: key.into(),
                at: e.at,
                kind: e.kind.clone(),
            })
        }));
    }

    /// Status as `RawTable`'s calls: 0 (an error), 1 (done; `out = [fence, deadline]` after
    /// `extend`), or 2 + an acquire outcome's index (`out = [fence or position, deadline]`).
    pub(super) fn request(&mut self, reply: Response) -> u32 {
        self.error = None;
        match reply {
            Response::Acquire(Ok(outcome)) => {
                let (a, b) = outcome.numbers();
                self.out[0] = a as f64;
                self.out[1] = b as f64;
                FIRST_OUTCOME + outcome.index() as u32
            }
            Response::Extend(Ok(grant)) => {
                self.out[0] = grant.fence.0 as f64;
                self.out[1] = grant.deadline.0 as f64;
                DONE
            }
            Response::Release(Ok(outcome)) => {
                // `out[0]`: when the lease really ends (a minimum hold), 0 if now.
                self.out[0] = match outcome {
                    lock_core::ReleaseOutcome::HeldUntil { until } => until.0 as f64,
                    lock_core::ReleaseOutcome::Released => 0.0,
                };
                DONE
            }
            Response::Done(Ok(())) | Response::Timeout | Response::Malformed => DONE,
            Response::Acquire(Err(e))
            | Response::Done(Err(e))
            | Response::Extend(Err(e))
            | Response::Release(Err(e)) => self.fail(e),
        }
    }

    /// Status 1 and the inspection in `info`, or 0 and the error.
    pub(super) fn inspect(&mut self, reply: Result<Option<lock_core::KeyInfo>, LockError>) -> u32 {
        self.error = None;
        match reply {
            Ok(info) => {
                self.info = info_json(info.as_ref());
                DONE
            }
            Err(e) => self.fail(e),
        }
    }
}
