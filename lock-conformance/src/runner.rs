//! Loading vector files strictly and running them against a [`Driver`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::format::{Expectation, HolderView, Op, Step, VectorFile};
use crate::{hex, Answer, Driver};

/// A vector file that could not be read or does not follow the format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The file.
    pub file: String,
    /// What is wrong, and where.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for LoadError {}

/// A loaded, fully checked vector file.
#[derive(Clone, Debug)]
pub struct LoadedFile {
    /// The name used in reports (the file name).
    pub label: String,
    /// The file as parsed.
    pub file: VectorFile,
    /// The checked steps of each scenario, in order.
    pub steps: Vec<Vec<Step>>,
}

/// One failed step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The vector file.
    pub file: String,
    /// The scenario.
    pub scenario: String,
    /// 1-based step number.
    pub step: usize,
    /// `expected X, got Y`, or the runtime's own failure.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {} / step {}: {}",
            self.file, self.scenario, self.step, self.message
        )
    }
}

/// The result of running vector files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Scenarios run.
    pub scenarios: usize,
    /// Steps run (a scenario stops at its first failing step).
    pub steps: usize,
    /// What failed.
    pub failures: Vec<Failure>,
}

impl Report {
    /// Adds another report to this one.
    pub fn merge(&mut self, other: Report) {
        self.scenarios += other.scenarios;
        self.steps += other.steps;
        self.failures.extend(other.failures);
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for failure in &self.failures {
            writeln!(f, "FAIL {failure}")?;
        }
        write!(
            f,
            "{} scenarios, {} steps, {} failed",
            self.scenarios,
            self.steps,
            self.failures.len()
        )
    }
}

/// Reads and checks one vector file: strict JSON, unique scenario names, every step well-formed.
///
/// # Errors
/// A [`LoadError`] naming the file, and the scenario and step where relevant.
pub fn load_file(path: &Path) -> Result<LoadedFile, LoadError> {
    let label = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let text = std::fs::read_to_string(path).map_err(|e| LoadError {
        file: label.clone(),
        message: format!("cannot read: {e}"),
    })?;
    parse_file(&label, &text)
}

/// Checks the text of one vector file (as [`load_file`] does), reporting it as `label`. For
/// runtimes without files (the browser playground imports and runs vectors from text).
///
/// # Errors
/// A [`LoadError`] naming `label`, and the scenario and step where relevant.
pub fn parse_file(label: &str, text: &str) -> Result<LoadedFile, LoadError> {
    let fail = |message: String| LoadError {
        file: label.to_owned(),
        message,
    };
    let file: VectorFile = serde_json::from_str(text).map_err(|e| fail(e.to_string()))?;
    if file.scenarios.is_empty() {
        return Err(fail("no scenarios".into()));
    }
    let mut steps = Vec::with_capacity(file.scenarios.len());
    for (i, scenario) in file.scenarios.iter().enumerate() {
        if file.scenarios[..i].iter().any(|s| s.name == scenario.name) {
            return Err(fail(format!(
                "scenario name \"{}\" is used twice",
                scenario.name
            )));
        }
        if scenario.steps.is_empty() {
            return Err(fail(format!("{}: no steps", scenario.name)));
        }
        if let Err(e) = scenario.limits.resolve().validate() {
            return Err(fail(format!("{}: {e}", scenario.name)));
        }
        let checked = scenario
            .steps
            .iter()
            .enumerate()
            .map(|(n, raw)| {
                raw.parse()
                    .map_err(|m| fail(format!("{} / step {}: {m}", scenario.name, n + 1)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A restore of "the latest snapshot" needs a snapshot step before it.
        let mut snapshot_seen = false;
        for (n, step) in checked.iter().enumerate() {
            match &step.op {
                Op::Snapshot { .. } => snapshot_seen = true,
                Op::Restore { bytes: None } if !snapshot_seen => {
                    return Err(fail(format!(
                        "{} / step {}: restore without hex needs an earlier snapshot step",
                        scenario.name,
                        n + 1
                    )));
                }
                _ => {}
            }
        }
        steps.push(checked);
    }
    Ok(LoadedFile {
        label: label.to_owned(),
        file,
        steps,
    })
}

/// The `*.json` files of a directory, sorted; or the path itself if it is not a directory.
///
/// # Errors
/// An I/O error message, or a directory that holds no `*.json` file (running nothing is not a
/// pass).
pub fn vector_files(path: &Path) -> Result<Vec<PathBuf>, String> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    if files.is_empty() {
        return Err(format!(
            "{}: a directory without *.json vector files",
            path.display()
        ));
    }
    files.sort();
    Ok(files)
}

/// Loads and runs one vector file.
///
/// # Errors
/// A [`LoadError`] if the file does not load; failing steps are in the [`Report`].
pub fn run_file(driver: &mut dyn Driver, path: &Path) -> Result<Report, LoadError> {
    Ok(run_loaded(driver, &load_file(path)?))
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| format!("<{e}>"))
}

fn result_json<T: Serialize, E: Serialize>(r: &Result<T, E>) -> String {
    match r {
        Ok(v) => format!("{{\"ok\":{}}}", json(v)),
        Err(e) => format!("{{\"err\":{}}}", json(e)),
    }
}

/// Compares one answer with its expectation; `Some(message)` on a mismatch.
/// Why `answer` does not meet `expect` (`None` when it does), as `expected X, got Y`.
#[must_use]
pub fn check(expect: &Expectation, answer: &Answer) -> Option<String> {
    let differ = |e: String, g: String| Some(format!("expected {e}, got {g}"));
    match (expect, answer) {
        (Expectation::Result(e), Answer::Result(g)) if e != g => {
            differ(result_json(e), result_json(g))
        }
        (Expectation::Inspect(e), Answer::Inspect(g)) => {
            let g = g.clone().map(|view| {
                view.map(|mut v| {
                    let named = e.as_ref().ok().and_then(Option::as_ref);
                    keep_named_grants(named.map_or(&[], |n| &n.holders), &mut v.holders);
                    v
                })
            });
            (*e != g)
                .then(|| differ(result_json(e), result_json(&g)))
                .flatten()
        }
        (Expectation::Stats(e), Answer::Stats(g)) => e
            .mismatch(g)
            .and_then(|(e, g)| differ(e.to_string(), g.to_string())),
        (Expectation::Wakeup(e), Answer::Wakeup(g)) if e != g => differ(json(e), json(g)),
        (Expectation::Query(e), Answer::Query(g)) => {
            let mut g = g.clone();
            if let (Ok(expected), Ok(got)) = (e, &mut g) {
                for (i, key) in got.keys.iter_mut().enumerate() {
                    let named = expected.keys.get(i).map_or(&[][..], |k| &k.holders);
                    keep_named_grants(named, &mut key.holders);
                }
            }
            (*e != g)
                .then(|| differ(result_json(e), result_json(&g)))
                .flatten()
        }
        (Expectation::More(e), Answer::More(g)) if e != g => differ(json(e), json(g)),
        (Expectation::Count(e), Answer::Count(g)) if e != g => differ(json(e), json(g)),
        (Expectation::Snapshot(Some(e)), Answer::Snapshot(g)) if e != g => differ(
            format!("snapshot {}", hex::encode(e)),
            format!("snapshot {}", hex::encode(g)),
        ),
        (Expectation::Result(_), Answer::Result(_))
        | (Expectation::Wakeup(_), Answer::Wakeup(_))
        | (Expectation::Snapshot(_), Answer::Snapshot(_))
        | (Expectation::Nothing, Answer::Nothing)
        | (Expectation::More(_), Answer::More(_))
        | (Expectation::Count(_), Answer::Count(_)) => None,
        (_, g) => Some(format!(
            "the runtime answered the wrong kind of value: {g:?}"
        )),
    }
}

/// Leaves out each answered holder's grant instant where the expected holder at its place does
/// not name one: vectors check grant instants only where they name them, so the files written
/// before grant instants were reported run unchanged.
fn keep_named_grants(expected: &[HolderView], got: &mut [HolderView]) {
    for (i, holder) in got.iter_mut().enumerate() {
        if expected.get(i).is_none_or(|h| h.granted_at.is_none()) {
            holder.granted_at = None;
        }
    }
}

/// Runs a loaded file against `driver`; each scenario on a fresh table, stopping at its first
/// failing step.
pub fn run_loaded(driver: &mut dyn Driver, loaded: &LoadedFile) -> Report {
    let mut report = Report::default();
    for (scenario, steps) in loaded.file.scenarios.iter().zip(&loaded.steps) {
        report.scenarios += 1;
        let fail = |step: usize, message: String| Failure {
            file: loaded.label.clone(),
            scenario: scenario.name.clone(),
            step,
            message,
        };
        if let Err(e) = driver.start(&scenario.limits.resolve()) {
            report
                .failures
                .push(fail(0, format!("could not start a table: {e}")));
            continue;
        }
        let mut last_snapshot: Option<Vec<u8>> = None;
        for (i, step) in steps.iter().enumerate() {
            report.steps += 1;
            let op = match &step.op {
                Op::Restore { bytes: None } => match &last_snapshot {
                    Some(bytes) => Op::Restore {
                        bytes: Some(bytes.clone()),
                    },
                    None => {
                        report.failures.push(fail(
                            i + 1,
                            "restore without hex needs an earlier snapshot step".into(),
                        ));
                        break;
                    }
                },
                op => op.clone(),
            };
            let outcome = driver.run(&op).and_then(|answer| {
                if let Answer::Snapshot(bytes) = &answer {
                    last_snapshot = Some(bytes.clone());
                }
                let events = driver.drain_events()?;
                Ok(check(&step.expect, &answer).or_else(|| {
                    (events != step.events).then(|| {
                        format!(
                            "events: expected {}, got {}",
                            json(&step.events),
                            json(&events)
                        )
                    })
                }))
            });
            let message = match outcome {
                Ok(None) => continue,
                Ok(Some(mismatch)) => mismatch,
                Err(runtime) => format!("runtime failure: {runtime}"),
            };
            report.failures.push(fail(i + 1, message));
            break;
        }
    }
    report
}

/// What [`run_paths`] found, as a process exit status: 0 all passed, 1 a step failed, 2 a path
/// or file could not be loaded.
///
/// Runs every vector file given (a path may be a directory of `*.json` files) against `driver`,
/// printing one line per file, the failures and a summary ending with `label`. Both CLIs
/// (`lock-vectors`, `lockhost vectors`) are this function over their driver.
pub fn run_paths(driver: &mut dyn Driver, paths: &[String], label: &str) -> u8 {
    let mut total = Report::default();
    let mut load_failed = false;
    for arg in paths {
        let files = match vector_files(Path::new(arg)) {
            Ok(files) => files,
            Err(e) => {
                eprintln!("error: {e}");
                load_failed = true;
                continue;
            }
        };
        for path in files {
            match load_file(&path) {
                Ok(loaded) => {
                    let report = run_loaded(driver, &loaded);
                    let status = if report.failures.is_empty() {
                        "ok"
                    } else {
                        "FAILED"
                    };
                    println!(
                        "{status:6} {} ({} scenarios, {} steps)",
                        path.display(),
                        report.scenarios,
                        report.steps
                    );
                    total.merge(report);
                }
                Err(e) => {
                    eprintln!("error: cannot load {e}");
                    load_failed = true;
                }
            }
        }
    }
    println!("{total}{label}");
    if load_failed {
        2
    } else if total.failures.is_empty() {
        0
    } else {
        1
    }
}
