//! The log in plain words: what each operation did and what each event means, for people
//! learning how expiring locks behave.

use lock_conformance::native::core_error;
use lock_conformance::{Answer, ErrorCase, Op, Outcome};

use lock_conformance::format::{ModeName, OptionsSpec};

use super::{secs, End, Playground};

/// What a grant's options add to its log line: `; at least until ..., lock-delay ...` etc.
fn terms(o: &OptionsSpec) -> String {
    let mut text = String::new();
    if o.permits != 0 {
        text.push_str(&format!("; one of {} permits", o.permits));
    }
    if o.min_hold != 0 {
        text.push_str(&format!(
            "; kept at least {} even if released",
            secs(o.min_hold)
        ));
    }
    if o.lock_delay != 0 {
        text.push_str(&format!(
            "; if it expires or is stolen, nobody gets the key for {} more",
            secs(o.lock_delay)
        ));
    }
    if !o.metadata.is_empty() {
        text.push_str(&format!("; \"{}\"", o.metadata));
    }
    text
}

/// What kind of thing a log line reports (the page colours them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// A lease was granted directly.
    Grant,
    /// A waiter was handed the lock.
    Handoff,
    /// A lease was released.
    Release,
    /// A lease expired: its holder lost the lock.
    Lost,
    /// A client started waiting.
    Wait,
    /// A waiter gave up (timeout or cancel).
    Timeout,
    /// The table refused a request.
    Refused,
    /// The protected storage accepted a write.
    Write,
    /// A guided scenario's explanation of a step.
    Guide,
    /// Anything else (extend, already held, imports).
    Info,
    /// A replayed step matched its expectation.
    ReplayOk,
    /// A replayed step did not.
    ReplayFail,
}

impl LineKind {
    /// CSS class of the line.
    #[must_use]
    pub fn class(self) -> &'static str {
        match self {
            LineKind::Grant => "grant",
            LineKind::Handoff => "handoff",
            LineKind::Release => "release",
            LineKind::Lost => "lost",
            LineKind::Wait => "wait",
            LineKind::Timeout => "timeout",
            LineKind::Refused => "refused",
            LineKind::Write => "write",
            LineKind::Guide => "guide",
            LineKind::Info => "info",
            LineKind::ReplayOk => "replay-ok",
            LineKind::ReplayFail => "replay-fail",
        }
    }
}

/// One line of the event log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// When it happened (ms on the playground clock).
    pub at: u64,
    /// What kind of thing.
    pub kind: LineKind,
    /// In plain words.
    pub text: String,
}

impl Playground {
    pub(super) fn describe(&mut self, op: &Op, answer: &Answer) {
        if let (Op::Restore { .. }, Answer::Result(Ok(_))) = (op, answer) {
            self.rebuild_history();
            self.note(
                LineKind::Info,
                "the table was restored from a snapshot".into(),
            );
            return;
        }
        // Only a client's requests are told in the log (inspect, stats... have no owner).
        let (Some(key), Some(owner)) = (op.key(), op.owner()) else {
            return;
        };
        let verb = match op {
            Op::TryAcquire { .. } | Op::Acquire { .. } => "acquire",
            Op::CancelWait { .. } => "stop waiting for",
            other => other.name(),
        };
        let now = op.now().unwrap_or(self.clock.now());
        let Answer::Result(result) = answer else {
            return;
        };
        match result {
            Ok(Outcome::Acquired { fence, deadline }) => {
                let options = op.options().cloned().unwrap_or_default();
                let shared = options.mode == ModeName::Shared;
                let span = (now, *deadline);
                let meta = &options.metadata;
                self.open_lease(key, owner, *fence, span, false, shared, meta);
                let (what, how) = match (op, shared) {
                    (Op::Steal { .. }, _) => ("stole", ""),
                    (_, true) => ("acquired", " shared"),
                    (_, false) => ("acquired", ""),
                };
                self.note(
                    LineKind::Grant,
                    format!(
                        "{owner} {what} \"{key}\"{how}: fence {fence}, until {}{}",
                        secs(*deadline),
                        terms(&options)
                    ),
                );
            }
            Ok(Outcome::AlreadyHeld { fence, deadline }) => self.note(
                LineKind::Info,
                format!(
                    "{owner} already holds \"{key}\" (fence {fence}, until {})",
                    secs(*deadline)
                ),
            ),
            Ok(Outcome::Queued { position }) => {
                if let Op::Acquire { wait_deadline, .. } = op {
                    self.waits
                        .entry(key.to_owned())
                        .or_default()
                        .push(super::WaitSegment {
                            owner: owner.to_owned(),
                            start: now,
                            wait_deadline: *wait_deadline,
                            end: None,
                        });
                }
                let until = match op {
                    Op::Acquire { wait_deadline, .. } => {
                        format!(", gives up at {}", secs(*wait_deadline))
                    }
                    _ => String::new(),
                };
                self.note(
                    LineKind::Wait,
                    format!("{owner} waits for \"{key}\" in place {position}{until}"),
                );
            }
            Ok(Outcome::AlreadyWaiting { position }) => self.note(
                LineKind::Info,
                format!("{owner} is already waiting for \"{key}\" (place {position})"),
            ),
            Ok(Outcome::Released) => {
                if let Op::Release { fence, .. } = op {
                    if let Some(s) = self.open_segment(key, *fence) {
                        s.end = Some((now, End::Released));
                    }
                }
                self.note(LineKind::Release, format!("{owner} released \"{key}\""));
            }
            Ok(Outcome::HeldUntil { until }) => {
                if let Op::Release { fence, .. } = op {
                    if let Some(s) = self.open_segment(key, *fence) {
                        s.end = Some((now, End::Released));
                        s.kept_until = Some(*until);
                    }
                }
                self.note(
                    LineKind::Release,
                    format!(
                        "{owner} released \"{key}\"; its minimum hold keeps it taken until {}",
                        secs(*until)
                    ),
                );
            }
            Ok(Outcome::Extended { fence, deadline }) => {
                if let Some(s) = self.open_segment(key, *fence) {
                    s.deadline = *deadline;
                }
                self.note(
                    LineKind::Info,
                    format!("{owner} extended \"{key}\" to {}", secs(*deadline)),
                );
            }
            Ok(Outcome::Cancelled) => {
                self.end_wait(key, owner, now, super::WaitEnd::Cancelled);
                self.note(
                    LineKind::Timeout,
                    format!("{owner} stopped waiting for \"{key}\""),
                );
            }
            Ok(Outcome::Restored) => {}
            Err(e) => {
                let why = core_error(e).map_or_else(|| format!("{e:?}"), |e| e.to_string());
                // The core's words, with its instant in the page's one unit (seconds).
                let why = match e {
                    ErrorCase::Held { deadline } | ErrorCase::Expired { deadline } => {
                        why.replace(&format!("{deadline} ms"), &secs(*deadline))
                    }
                    _ => why,
                };
                self.note(
                    LineKind::Refused,
                    format!("{owner} could not {verb} \"{key}\": {why}"),
                );
            }
        }
    }

    pub(super) fn note(&mut self, kind: LineKind, text: String) {
        let at = self.clock.now();
        self.log.push(LogLine { at, kind, text });
    }
}
