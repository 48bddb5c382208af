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

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The waiter was handed the lock.
    Granted,
    /// Its wait deadline passed.
    TimedOut,
    /// It cancelled its wait.
    Cancelled,
}

/// One wait in a key's queue (a thin bar under the key's track).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitSegment {
    /// Who waited.
    pub owner: String,
    /// When it started waiting.
    pub start: u64,
    /// When it would have given up.
    pub wait_deadline: u64,
    /// When and how the wait ended, once it has.
    pub end: Option<(u64, WaitEnd)>,
}

/// The part of the session the timeline shows: a span of time that follows the clock (now in
/// the middle) or stays where the user panned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimelineView {
    /// How much time the timeline spans, in ms.
    pub span: u64,
    /// `None`: follow the clock; `Some(end)`: the window ends at `end` (panned).
    pub pinned_end: Option<u64>,
}

impl TimelineView {
    /// The narrowest span (zoomed in).
    pub const MIN_SPAN: u64 = 1_000;
    /// The widest span (zoomed out).
    pub const MAX_SPAN: u64 = 600_000;

    /// The window `(from, span)` at `now`, never before the session's start.
    #[must_use]
    pub fn window(&self, now: u64) -> (u64, u64) {
        let end = self.pinned_end.unwrap_or(now + self.span / 2);
        (end.saturating_sub(self.span), self.span)
    }

    /// Zooms in (halves the span, around the same end when panned).
    pub fn zoom_in(&mut self) {
        self.span = (self.span / 2).max(Self::MIN_SPAN);
    }

    /// Zooms out (doubles the span).
    pub fn zoom_out(&mut self) {
        self.span = (self.span * 2).min(Self::MAX_SPAN);
    }

    /// Moves the window by half a span back (`back`) or forward, and stops following the clock;
    /// forward past now follows the clock again.
    pub fn pan(&mut self, back: bool, now: u64) {
        let end = self.window(now).0 + self.span;
        let step = self.span / 2;
        let end = if back {
            end.saturating_sub(step).max(self.span)
        } else {
            end + step
        };
        self.pinned_end = (end < now + self.span / 2).then_some(end);
    }

    /// Follows the clock again.
    pub fn follow(&mut self) {
        self.pinned_end = None;
    }
}

impl Default for TimelineView {
    /// The last 10 s and the next 10 s, following the clock.
    fn default() -> Self {
        TimelineView {
            span: 20_000,
            pinned_end: None,
        }
    }
}

impl Playground {
    /// Ends `owner`'s open wait on `key` at `at`.
    pub(super) fn end_wait(&mut self, key: &str, owner: &str, at: u64, how: WaitEnd) {
        if let Some(w) = self.waits.get_mut(key).and_then(|ws| {
            ws.iter_mut()
                .rev()
                .find(|w| w.owner == owner && w.end.is_none())
        }) {
            w.end = Some((at, how));
        }
    }

    pub(super) fn open_segment(&mut self, key: &str, fence: u64) -> Option<&mut Segment> {
        self.history
            .get_mut(key)?
            .iter_mut()
            .rev()
            .find(|s| s.fence == fence && s.end.is_none())
    }

    pub(super) fn apply_event(&mut self, e: &EventCase) {
        match e {
            EventCase::Stolen {
                key,
                owner,
                fence,
                at,
                ..
            } => {
                if let Some(s) = self.open_segment(key, *fence) {
                    s.end = Some((*at, End::Expired));
                }
                self.log.push(LogLine {
                    at: *at,
                    kind: LineKind::Lost,
                    text: format!(
                        "{owner} lost \"{key}\": its lease (fence {fence}) was stolen at {}",
                        secs(*at)
                    ),
                });
            }
            EventCase::Expired {
                key,
                owner,
                fence,
                at,
                ..
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
                ..
            } => {
                self.history.entry(key.clone()).or_default().push(Segment {
                    owner: owner.clone(),
                    fence: *fence,
                    start: *at,
                    deadline: *deadline,
                    handoff: true,
                    end: None,
                });
                self.end_wait(key, owner, *at, WaitEnd::Granted);
                self.log.push(LogLine {
                    at: *at,
                    kind: LineKind::Handoff,
                    text: format!(
                        "{owner} was handed \"{key}\" from the queue: fence {fence}, until {}",
                        secs(*deadline)
                    ),
                });
            }
            EventCase::WaitTimedOut { key, owner, at } => {
                self.end_wait(key, owner, *at, WaitEnd::TimedOut);
                self.log.push(LogLine {
                    at: *at,
                    kind: LineKind::Timeout,
                    text: format!("{owner} gave up waiting for \"{key}\" at {}", secs(*at)),
                });
            }
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
        self.waits.clear();
        let now = self.table.clock();
        for key in keys {
            if let Some(info) = self.inspect(&key) {
                let waits: Vec<WaitSegment> = info
                    .waiters
                    .iter()
                    .map(|w| WaitSegment {
                        owner: w.owner.clone(),
                        start: now.0,
                        wait_deadline: w.wait_deadline.0,
                        end: None,
                    })
                    .collect();
                if !waits.is_empty() {
                    self.waits.insert(key.clone(), waits);
                }
                let segments = info.holders.iter().map(|h| Segment {
                    owner: h.owner.clone(),
                    fence: h.fence.0,
                    start: now.0,
                    deadline: h.deadline.0,
                    handoff: false,
                    end: None,
                });
                self.history.entry(key).or_default().extend(segments);
            }
        }
    }
}

#[cfg(test)]
mod view_tests {
    use super::TimelineView;

    #[test]
    fn the_window_follows_the_clock_until_panned_and_zooms_within_bounds() {
        let mut v = TimelineView::default();
        assert_eq!(v.window(30_000), (20_000, 20_000), "now in the middle");
        assert_eq!(v.window(3_000), (0, 20_000), "never before the start");
        v.pan(true, 30_000);
        assert_eq!(v.window(30_000), (10_000, 20_000), "half a span back");
        assert_eq!(
            v.window(90_000),
            (10_000, 20_000),
            "pinned: the clock moves on"
        );
        v.pan(true, 90_000);
        v.pan(true, 90_000);
        assert_eq!(
            v.window(90_000),
            (0, 20_000),
            "the session's start is the limit"
        );
        v.zoom_in();
        assert_eq!(v.window(90_000).1, 10_000);
        for _ in 0..10 {
            v.zoom_in();
        }
        assert_eq!(v.span, TimelineView::MIN_SPAN);
        for _ in 0..20 {
            v.zoom_out();
        }
        assert_eq!(v.span, TimelineView::MAX_SPAN);
        v.follow();
        assert_eq!(v.pinned_end, None);
        let mut v = TimelineView::default();
        v.pan(true, 30_000);
        v.pan(false, 30_000);
        v.pan(false, 30_000);
        assert_eq!(
            v.pinned_end, None,
            "panning forward past now follows the clock again"
        );
    }
}
