//! The per-key history behind the timeline: one segment per lease, opened at its grant and
//! closed at its release or expiry.

use lock_conformance::EventCase;

use super::{secs, LineKind, LogLine, Playground};

/// How a lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Its holder released it.
    Released,
    /// It ran out its TTL.
    Expired,
}

/// One lease in a key's history (a bar of the timeline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Its holder.
    pub owner: String,
    /// Its fencing token.
    pub fence: u64,
    /// When it was granted.
    pub start: u64,
    /// Its (latest) deadline.
    pub deadline: u64,
    /// Whether it was granted by hand-off from the queue.
    pub handoff: bool,
    /// When and how it ended, once it has.
    pub end: Option<(u64, End)>,
}

impl Playground {
    pub(super) fn open_segment(&mut self, key: &str, fence: u64) -> Option<&mut Segment> {
        self.history
            .get_mut(key)?
            .iter_mut()
            .rev()
            .find(|s| s.fence == fence && s.end.is_none())
    }

    pub(super) fn apply_event(&mut self, e: &EventCase) {
        match e {
            EventCase::Expired {
                key,
                owner,
                fence,
                at,
            } => {
                if let Some(s) = self.open_segment(key, *fence) {
                    s.end = Some((*at, End::Expired));
                }
                // The client keeps its fence: like a real holder that was paused, it does not
                // know yet, and its next release or extend hears the core's `expired`.
                self.log.push(LogLine {
                    at: *at,
                    kind: LineKind::Lost,
                    text: format!(
                        "{owner} lost \"{key}\": its lease (fence {fence}) expired at {}",
                        secs(*at)
                    ),
                });
            }
            EventCase::Granted {
                key,
                owner,
                fence,
                deadline,
                at,
            } => {
                self.history.entry(key.clone()).or_default().push(Segment {
                    owner: owner.clone(),
                    fence: *fence,
                    start: *at,
                    deadline: *deadline,
                    handoff: true,
                    end: None,
                });
                if let Some(c) = self.client_mut(owner) {
                    c.fences.insert(key.clone(), *fence);
                }
                self.log.push(LogLine {
                    at: *at,
                    kind: LineKind::Handoff,
                    text: format!(
                        "{owner} was handed \"{key}\" from the queue: fence {fence}, until {}",
                        secs(*deadline)
                    ),
                });
            }
            EventCase::WaitTimedOut { key, owner, at } => self.log.push(LogLine {
                at: *at,
                kind: LineKind::Timeout,
                text: format!("{owner} gave up waiting for \"{key}\" at {}", secs(*at)),
            }),
        }
    }

    /// After a restore: the history restarts from the table's current holders.
    pub(super) fn rebuild_history(&mut self) {
        let keys: Vec<String> = self
            .history
            .keys()
            .cloned()
            .chain(self.keys.clone())
            .collect();
        self.history.clear();
        let now = self.table.clock();
        for key in keys {
            if let Some(info) = self.inspect(&key) {
                self.history.entry(key).or_default().push(Segment {
                    owner: info.holder.owner,
                    fence: info.holder.fence.0,
                    start: now.0,
                    deadline: info.holder.deadline.0,
                    handoff: false,
                    end: None,
                });
            }
        }
    }
}
