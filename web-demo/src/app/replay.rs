//! Sessions as conformance vectors: the export of what was done, and the step-by-step replay of
//! an imported vector file, each step checked against its expectation.

use lock_conformance::format::LimitsSpec;
use lock_conformance::{record, Answer, LoadedFile, Op};

use lock_core::LockTable;

use super::{LineKind, Playground, PRESET_KEYS};

/// An imported vector file being replayed.
#[derive(Clone, Debug)]
pub struct Replay {
    file: LoadedFile,
    scenario: usize,
    next: usize,
    /// Steps that matched their expectation.
    pub passed: usize,
    /// Steps that did not.
    pub failed: usize,
    last_snapshot: Option<Vec<u8>>,
}

impl Replay {
    /// `scenario i of n: name`, and how far the replay is.
    #[must_use]
    pub fn describe(&self) -> String {
        let s = &self.file.file.scenarios[self.scenario];
        format!(
            "\"{}\" (scenario {} of {} in {}): step {} of {}, {} passed, {} failed",
            s.name,
            self.scenario + 1,
            self.file.file.scenarios.len(),
            self.file.label,
            self.next,
            self.file.steps[self.scenario].len(),
            self.passed,
            self.failed
        )
    }

    /// Whether every step has run.
    #[must_use]
    pub fn finished(&self) -> bool {
        self.next >= self.file.steps[self.scenario].len()
    }

    /// Names of the file's scenarios.
    #[must_use]
    pub fn scenario_names(&self) -> Vec<String> {
        self.file
            .file
            .scenarios
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }
}

impl Playground {
    /// The session so far as a vector file (one scenario) that every runner accepts unchanged.
    #[must_use]
    pub fn export(&self) -> String {
        record::file(
            "Recorded in the expiring-lock playground: each step is what the core answered.",
            "playground session",
            &self.limits,
            &self.recorded,
        )
    }

    /// Number of recorded steps.
    #[must_use]
    pub fn recorded_steps(&self) -> usize {
        self.recorded.len()
    }

    /// Starts over: a fresh table with `limits`, a paused virtual clock at 0, no clients.
    pub(super) fn reset(&mut self, limits: &LimitsSpec) -> Result<(), String> {
        self.table = LockTable::new(limits.resolve()).map_err(|e| e.to_string())?;
        self.limits = limits.clone();
        self.clock.reset();
        self.clients.clear();
        self.history.clear();
        self.waits.clear();
        self.log.clear();
        self.recorded.clear();
        self.storage = super::Storage::default();
        self.keys = PRESET_KEYS.iter().map(|k| (*k).to_owned()).collect();
        Ok(())
    }

    /// Loads a vector file (checked strictly, like every runner does) for step-by-step replay
    /// of its first scenario.
    ///
    /// # Errors
    /// Why the file is not a valid vector file, naming the scenario and step.
    pub fn import(&mut self, label: &str, text: &str) -> Result<(), String> {
        let file = lock_conformance::parse_file(label, text).map_err(|e| e.to_string())?;
        self.replay = Some(Replay {
            file,
            scenario: 0,
            next: 0,
            passed: 0,
            failed: 0,
            last_snapshot: None,
        });
        self.choose_scenario(0)
    }

    /// Restarts the replay on scenario `index` of the imported file.
    ///
    /// # Errors
    /// No file imported, no such scenario, or limits the core refuses.
    pub fn choose_scenario(&mut self, index: usize) -> Result<(), String> {
        let replay = self.replay.as_mut().ok_or("no scenario imported")?;
        let scenario = replay
            .file
            .file
            .scenarios
            .get(index)
            .ok_or("no such scenario")?
            .clone();
        replay.scenario = index;
        replay.next = 0;
        replay.passed = 0;
        replay.failed = 0;
        replay.last_snapshot = None;
        let label = replay.file.label.clone();
        self.reset(&scenario.limits)?;
        self.note(
            LineKind::Info,
            format!(
                "imported \"{}\" from {label}: {} steps to replay",
                scenario.name,
                scenario.steps.len()
            ),
        );
        if let Some(description) = scenario.description {
            self.note(LineKind::Guide, description);
        }
        Ok(())
    }

    /// Runs the next step of the imported scenario and checks it: `Some(true)` if it matched,
    /// `Some(false)` if not, `None` when there is nothing left to replay.
    pub fn replay_step(&mut self) -> Option<bool> {
        let replay = self.replay.as_mut()?;
        let step = replay.file.steps[replay.scenario].get(replay.next)?.clone();
        replay.next += 1;
        let number = replay.next;
        let op = match &step.op {
            Op::Restore { bytes: None } => Op::Restore {
                bytes: Some(replay.last_snapshot.clone().unwrap_or_default()),
            },
            other => other.clone(),
        };
        if let Some(owner) = op.owner() {
            if !self.clients.iter().any(|c| c.name == owner) {
                let id = self.next_client;
                self.next_client += 1;
                self.push_client(id, owner.to_owned());
            }
            // The card shows what the replayed step used: its key, TTL, wait and lock kind.
            let (ttl, wait) = match &op {
                Op::TryAcquire { ttl, .. } | Op::Extend { ttl, .. } | Op::Steal { ttl, .. } => {
                    (Some(*ttl), None)
                }
                Op::Acquire {
                    ttl,
                    wait_deadline,
                    now,
                    ..
                } => (Some(*ttl), Some(wait_deadline.saturating_sub(*now))),
                _ => (None, None),
            };
            let key = op.key().map(str::to_owned);
            if let Some(c) = self.client_mut(owner) {
                if let Some(key) = key {
                    c.key = key;
                }
                if let Some(ttl) = ttl {
                    c.ttl = ttl.to_string();
                }
                if let Some(wait) = wait {
                    c.wait = wait.to_string();
                }
                if let Some(o) = op.options() {
                    c.kind = super::KindFields::of(o);
                }
                c.unencodable.clear();
            }
        }
        if let Some(key) = op.key() {
            if !self.keys.iter().any(|k| k == key) {
                self.keys.push(key.to_owned());
            }
        }
        if let Some(now) = op.now() {
            self.clock.advance_to(now, 0.0);
        }
        let (answer, events) = self.perform(&op);
        let problem = lock_conformance::check(&step.expect, &answer).or_else(|| {
            (events != step.events).then(|| {
                format!(
                    "expected events {}, got {}",
                    serde_json::to_string(&step.events).unwrap_or_default(),
                    serde_json::to_string(&events).unwrap_or_default()
                )
            })
        });
        let replay = self.replay.as_mut()?;
        if let Answer::Snapshot(bytes) = &answer {
            replay.last_snapshot = Some(bytes.clone());
        }
        let ok = problem.is_none();
        if ok {
            replay.passed += 1;
        } else {
            replay.failed += 1;
        }
        let name = op.name();
        if let Some(note) = step.note {
            self.note(LineKind::Guide, format!("step {number}: {note}"));
        }
        match problem {
            None => self.note(
                LineKind::ReplayOk,
                format!("replay step {number} ({name}): as expected"),
            ),
            Some(p) => self.note(
                LineKind::ReplayFail,
                format!("replay step {number} ({name}): {p}"),
            ),
        }
        Some(ok)
    }
}
