//! The per-key history behind the timeline: one segment per lease, opened at its grant and
//! closed at its release, expiry or steal, in a lane of its key's track (leases held together,
//! shared or under permits, side by side), with the place it kept afterwards (a minimum hold, a
//! lock-delay) as the core reports it.

use lock_conformance::format::ModeName;
use lock_conformance::EventCase;
use lock_core::LeaseEnd;

use super::{secs, LineKind, LogLine, Playground};

/// How a lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Its holder released it.
    Released,
    /// It ran out its TTL.
    Expired,
    /// Another client stole the key.
    Stolen,
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
    /// Whether it is a shared lease.
    pub shared: bool,
    /// Its metadata ("" if none).
    pub metadata: String,
    /// Its lane in the key's track (0 at the top): leases held at once get distinct lanes.
    pub lane: usize,
    /// Until when a release still keeps it (its minimum hold), as the core reports it.
    pub min_until: Option<u64>,
    /// After it ended: until when its place stayed taken (minimum hold, lock-delay), as the
    /// core reports it.
    pub kept_until: Option<u64>,
}

impl Segment {
    /// Until when it takes a place on its track: open-ended while live.
    fn busy_until(&self) -> u64 {
        match self.end {
            None => u64::MAX,
            Some((at, _)) => at.max(self.kept_until.unwrap_or(0)),
        }
    }
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

    /// Opens the segment of a lease granted at `start`, in the lowest lane free then.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_lease(
        &mut self,
        key: &str,
        owner: &str,
        fence: u64,
        (start, deadline): (u64, u64),
        handoff: bool,
        shared: bool,
        metadata: &str,
    ) {
        let history = self.history.entry(key.to_owned()).or_default();
        let busy: Vec<usize> = (history.iter())
            .filter(|s| s.busy_until() > start)
            .map(|s| s.lane)
            .collect();
        let lane = (0..).find(|l| !busy.contains(l)).unwrap_or(0);
        history.push(Segment {
            owner: owner.to_owned(),
            fence,
            start,
            deadline,
            handoff,
            end: None,
            shared,
            metadata: metadata.to_owned(),
            lane,
            min_until: None,
            kept_until: None,
        });
    }

    /// Copies what the core says of `key`'s leases onto their segments: each one's minimum
    /// hold, and until when an ended one keeps its place.
    pub(super) fn sync_kept(&mut self, key: &str) {
        let Some(info) = self.inspect(key) else {
            return;
        };
        let Some(history) = self.history.get_mut(key) else {
            return;
        };
        for h in &info.holders {
            if let Some(s) = history.iter_mut().rev().find(|s| s.fence == h.fence.0) {
                s.min_until = h.min_until.map(|t| t.0);
                if let Some(why) = h.ended {
                    s.kept_until = Some(h.deadline.0);
                    if s.end.is_none() {
                        let at = s.deadline.min(h.deadline.0);
                        s.end = Some((at, end_of(why)));
                    }
                }
            }
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
                    s.end = Some((*at, End::Stolen));
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
                mode,
                metadata,
            } => {
                let shared = *mode == ModeName::Shared;
                self.open_lease(key, owner, *fence, (*at, *deadline), true, shared, metadata);
                self.end_wait(key, owner, *at, WaitEnd::Granted);
                let how = if shared { " (shared)" } else { "" };
                self.log.push(LogLine {
                    at: *at,
                    kind: LineKind::Handoff,
                    text: format!(
                        "{owner} was handed \"{key}\"{how} from the queue: fence {fence}, until {}",
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
                for h in info.holders.iter().filter(|h| h.ended.is_none()) {
                    let shared = h.mode == lock_core::Mode::Shared;
                    let span = (now.0, h.deadline.0);
                    self.open_lease(&key, &h.owner, h.fence.0, span, false, shared, &h.metadata);
                }
                self.sync_kept(&key);
            }
        }
    }
}

/// The segment end of a lease that ended without its holder's release being seen.
fn end_of(why: LeaseEnd) -> End {
    match why {
        LeaseEnd::Released => End::Released,
        LeaseEnd::Expired => End::Expired,
        LeaseEnd::Stolen => End::Stolen,
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
