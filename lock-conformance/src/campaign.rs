//! The campaign vectors (`tests/vectors/election/*.json`): leader election's recipe
//! ([`lock_core::election::Campaign`]) pinned as data, as the lock table's vectors pin the
//! table. A scenario is one candidate's campaign driven by hand: answers come in with a `now`,
//! and a `poll` step drains every action due by its `now` and compares them, and the next
//! wake-up, with the expected ones. Every runtime of the recipe runs the same files: the native
//! core ([`run_campaign_file`]) and the npm package's engine (`tests/js/campaign-vectors.test.js`).
//! The format is described for humans in `tests/vectors/README.md`.

use std::fmt::Write as _;
use std::path::Path;

use lock_core::election::{Action, Campaign, CampaignOptions, Refusal};
use lock_core::{Duration, Fence, Instant};
use serde::Deserialize;

/// One campaign vector file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignFile {
    /// What the file covers.
    pub description: String,
    /// Its scenarios, each a fresh campaign.
    pub scenarios: Vec<CampaignScenario>,
}

/// One campaign, driven by hand.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignScenario {
    /// Unique within the file; used in failure reports.
    pub name: String,
    /// Why the scenario exists (optional prose).
    #[serde(default)]
    pub description: Option<String>,
    /// The campaign's options.
    pub options: OptionsSpec,
    /// The steps, in order.
    pub steps: Vec<CampaignStep>,
}

/// A campaign's options: `ttl`, and overrides of the defaults of
/// [`CampaignOptions::new`] (ms).
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct OptionsSpec {
    pub ttl: u64,
    #[serde(default)]
    pub margin: Option<u64>,
    #[serde(default)]
    pub grace: Option<u64>,
    #[serde(default)]
    pub retry: Option<u64>,
    #[serde(default)]
    pub once: bool,
}

impl OptionsSpec {
    /// The options it names.
    #[must_use]
    pub fn options(&self) -> CampaignOptions {
        let mut o = CampaignOptions::new(Duration(self.ttl));
        o.margin = self.margin.map_or(o.margin, Duration);
        o.grace = self.grace.map_or(o.margin, Duration);
        o.retry = self.retry.map_or(o.retry, Duration);
        o.once = self.once;
        o
    }
}

/// One step: an answer or a call coming in at `now`, or a `poll`.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
#[allow(missing_docs)]
pub enum CampaignStep {
    /// Drains the actions due by `now` ([`Campaign::poll_action`] until it answers `None`) and
    /// expects exactly `actions` (see [`action_name`]), then the next wake-up `timeout`
    /// ([`Campaign::poll_timeout`]; `null`: only an answer moves it on) and, if given, how
    /// many `terms` have started.
    Poll {
        now: u64,
        actions: Vec<String>,
        #[serde(deserialize_with = "required_nullable")]
        timeout: Option<u64>,
        #[serde(default)]
        terms: Option<u64>,
    },
    /// [`Campaign::handle_granted`].
    Granted {
        now: u64,
        fence: u64,
        local_end: u64,
    },
    /// [`Campaign::handle_refused`] with the refusal named `refusal` ([`Refusal::parse`]);
    /// `ends`: whether it answers that the campaign is over.
    Refused {
        now: u64,
        refusal: String,
        ends: bool,
    },
    /// [`Campaign::handle_extended`].
    Extended { now: u64, local_end: u64 },
    /// [`Campaign::handle_extend_failed`].
    ExtendFailed { now: u64 },
    /// [`Campaign::handle_lost`].
    Lost { now: u64 },
    /// [`Campaign::handle_body_returned`].
    BodyReturned { now: u64 },
    /// [`Campaign::handle_released`].
    Released { now: u64 },
    /// [`Campaign::resign`].
    Resign { now: u64 },
    /// [`Campaign::shut_down`].
    ShutDown { now: u64 },
}

/// A field that must be present, `null` or a number (serde would take a missing `Option` as
/// `None`: a forgotten expectation would pass unseen).
fn required_nullable<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::deserialize(d)
}

/// An action's name in the vectors: `campaign`, `start F`, `extend F`, `stop F REASON`,
/// `abandon F`, `release F`, `done` (`F` the term's fence, `REASON` a
/// [`StopReason`](lock_core::election::StopReason) name).
#[must_use]
pub fn action_name(action: Action) -> String {
    match action {
        Action::Campaign => "campaign".into(),
        Action::Start { fence } => format!("start {}", fence.0),
        Action::Extend { fence } => format!("extend {}", fence.0),
        Action::Stop { fence, reason } => format!("stop {} {}", fence.0, reason.name()),
        Action::Abandon { fence } => format!("abandon {}", fence.0),
        Action::Release { fence } => format!("release {}", fence.0),
        Action::Done => "done".into(),
    }
}

/// Loads a campaign vector file strictly (an unknown field or op is an error).
///
/// # Errors
/// An I/O or format error message naming the file.
pub fn load_campaign_file(path: &Path) -> Result<CampaignFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs a campaign vector file against the native core: the failures, each as
/// `file / scenario / step N: expected X, got Y` (empty: all passed), and the steps run.
///
/// # Errors
/// A file that cannot be loaded, bad options, or an unknown refusal name.
pub fn run_campaign_file(path: &Path) -> Result<(Vec<String>, usize), String> {
    let file = load_campaign_file(path)?;
    let label = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let (mut failures, mut steps) = (Vec::new(), 0);
    for scenario in &file.scenarios {
        let mut campaign = Campaign::new(scenario.options.options())
            .map_err(|e| format!("{label} / {}: {e}", scenario.name))?;
        for (i, step) in scenario.steps.iter().enumerate() {
            steps += 1;
            let at = format!("{label} / {} / step {}", scenario.name, i + 1);
            if let Some(failure) =
                run_step(&mut campaign, step).map_err(|e| format!("{at}: {e}"))?
            {
                failures.push(format!("{at}: {failure}"));
                break;
            }
        }
    }
    Ok((failures, steps))
}

/// Runs the campaign vector files named by `paths` (files, or directories of `*.json`) against
/// the native core, printing one line per file and each failure (the `lock-vectors --campaign`
/// CLI). Answers the exit status: 0 all passed, 1 a step failed, 2 a file could not be loaded.
pub fn run_campaign_paths(paths: &[String]) -> u8 {
    let (mut failed, mut load_failed, mut total) = (false, false, 0);
    for arg in paths {
        let files = crate::vector_files(Path::new(arg)).unwrap_or_else(|e| {
            eprintln!("error: {e}");
            load_failed = true;
            Vec::new()
        });
        for path in files {
            match run_campaign_file(&path) {
                Ok((failures, steps)) => {
                    let status = if failures.is_empty() { "ok" } else { "FAILED" };
                    println!("{status:6} {} ({steps} steps)", path.display());
                    for f in &failures {
                        println!("  {f}");
                    }
                    failed |= !failures.is_empty();
                    total += steps;
                }
                Err(e) => {
                    eprintln!("error: cannot load {e}");
                    load_failed = true;
                }
            }
        }
    }
    println!(
        "campaign vectors: {total} steps, {}",
        if failed { "FAILED" } else { "all passed" }
    );
    if load_failed {
        2
    } else {
        u8::from(failed)
    }
}

/// One step: `Ok(Some(failure))` when the campaign answered otherwise.
fn run_step(c: &mut Campaign, step: &CampaignStep) -> Result<Option<String>, String> {
    match *step {
        CampaignStep::Poll {
            now,
            ref actions,
            timeout,
            terms,
        } => {
            let mut got = Vec::new();
            while let Some(a) = c.poll_action(Instant(now)) {
                got.push(action_name(a));
            }
            let got_timeout = c.poll_timeout().map(|t| t.0);
            let mut failure = String::new();
            if &got != actions {
                let _ = write!(failure, "expected actions {actions:?}, got {got:?}");
            } else if got_timeout != timeout {
                let _ = write!(failure, "expected timeout {timeout:?}, got {got_timeout:?}");
            } else if terms.is_some_and(|t| t != c.terms()) {
                let _ = write!(failure, "expected {terms:?} terms, got {}", c.terms());
            }
            return Ok((!failure.is_empty()).then_some(failure));
        }
        CampaignStep::Granted {
            now,
            fence,
            local_end,
        } => c.handle_granted(Fence(fence), Instant(local_end), Instant(now)),
        CampaignStep::Refused {
            now,
            ref refusal,
            ends,
        } => {
            let r =
                Refusal::parse(refusal).ok_or_else(|| format!("unknown refusal {refusal:?}"))?;
            let ended = c.handle_refused(r, Instant(now)).is_err();
            if ended != ends {
                return Ok(Some(format!("expected ends {ends}, got {ended}")));
            }
        }
        CampaignStep::Extended { now, local_end } => {
            c.handle_extended(Instant(local_end), Instant(now));
        }
        CampaignStep::ExtendFailed { now } => c.handle_extend_failed(Instant(now)),
        CampaignStep::Lost { now } => c.handle_lost(Instant(now)),
        CampaignStep::BodyReturned { now } => c.handle_body_returned(Instant(now)),
        CampaignStep::Released { now } => c.handle_released(Instant(now)),
        CampaignStep::Resign { now } => c.resign(Instant(now)),
        CampaignStep::ShutDown { now } => c.shut_down(Instant(now)),
    }
    Ok(None)
}
