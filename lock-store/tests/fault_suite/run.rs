//! One run: a fresh namespace, the clients, the nemesis making faults while they work, then
//! every checker over what was recorded.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_store::Locks;

use super::check::{self, RegisterCheck};
use super::client::{self, Behaviour, Tag};
use super::history::{now_us, Fault, History, Rng};
use super::recorder::{Log, Recorder};
use super::register::Register;
use super::replay::{self, Replayed};
use crate::common;
use crate::common::proxy::{self, Proxy};

/// The faults of a topology's servers.
pub trait Nemesis {
    /// The faults it can make.
    fn faults(&self) -> Vec<&'static str>;
    /// Makes `fault` and heals it (the servers answer again, maybe another one as primary)
    /// before it returns.
    fn make(&mut self, fault: &'static str, rng: &mut Rng);
    /// The fault every run makes (halfway through), whatever the seed draws.
    fn must(&self) -> Option<&'static str> {
        None
    }
}

/// A topology whose servers take no fault (the single servers the machine runs: only the
/// clients' paths to them are cut).
pub struct NoServerFaults;

impl Nemesis for NoServerFaults {
    fn faults(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn make(&mut self, _: &'static str, _: &mut Rng) {}
}

/// How a run is set up.
pub struct Setup {
    pub name: String,
    /// What the clients open.
    pub url: String,
    /// Each client reaches the server through a proxy of its own that the nemesis cuts
    /// (single-host URLs only).
    pub proxied: bool,
    pub clients: usize,
    /// Candidates of the election, beside the clients.
    pub candidates: usize,
    pub behaviour: Behaviour,
    pub fenced: bool,
    pub bound: Duration,
    /// How many faults the nemesis makes (one every 0.2-0.7 s, each healed before the next);
    /// the clients work on for `tail` after the last.
    pub faults: usize,
    pub tail: Duration,
}

/// What a run did and what the checkers found.
#[derive(Debug)]
pub struct Report {
    pub name: String,
    pub seed: u64,
    pub tried: usize,
    pub failed: usize,
    pub holds: usize,
    pub stalls: usize,
    pub crashes: usize,
    pub faults: Vec<Fault>,
    /// The lock-set register and the leaders' register, together.
    pub register: RegisterCheck,
    pub terms: usize,
    pub replay: Replayed,
    /// Fences repeated or out of order.
    pub fences: Vec<String>,
    /// More holders at once than the key's places.
    pub exclusion: Vec<String>,
    pub seconds: f64,
}

impl Report {
    /// One paragraph for the test's output.
    pub fn summary(&self) -> String {
        let mut kinds: Vec<&str> = self.faults.iter().map(|f| f.what.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let counted: Vec<String> = kinds
            .iter()
            .map(|k| {
                format!(
                    "{k} x{}",
                    self.faults.iter().filter(|f| f.what == *k).count()
                )
            })
            .collect();
        format!(
            "jepsen {} (seed {}, {:.1} s): {} operations ({} failed with a store error), {} leases, \
             {} terms, {} stalls, {} crashes; faults: {}; registers: {} writes, {} accepted, {} refused, \
             {} adds lost, {} live holders refused; replay: {} writes replayed, {} unreplayable, \
             {} forks, {} leases unverified; fence violations {}, exclusion \
             violations {}, replay violations {}",
            self.name,
            self.seed,
            self.seconds,
            self.tried,
            self.failed,
            self.holds,
            self.terms,
            self.stalls,
            self.crashes,
            if counted.is_empty() { "none".into() } else { counted.join(", ") },
            self.register.writes,
            self.register.accepted,
            self.register.refused,
            self.register.lost_adds,
            self.register.live_refused,
            self.replay.replayed,
            self.replay.unreplayable,
            self.replay.forks,
            self.replay.unverified,
            self.fences.len(),
            self.exclusion.len(),
            self.replay.violations.len(),
        )
    }

    /// Every violation, for a failure message.
    pub fn violations(&self) -> Vec<String> {
        let mut all = Vec::new();
        all.extend(self.fences.iter().map(|v| format!("fences: {v}")));
        all.extend(self.exclusion.iter().map(|v| format!("exclusion: {v}")));
        all.extend(
            self.replay
                .violations
                .iter()
                .map(|v| format!("replay: {v}")),
        );
        all
    }
}

/// A proxy fault on one client's path.
fn cut(proxies: &[Proxy], rng: &mut Rng) -> &'static str {
    let p = &proxies[rng.between(0, proxies.len() as u64) as usize];
    let (what, fault) = match rng.between(0, 3) {
        0 => ("client path silent", Some(proxy::Fault::Blackhole)),
        1 => ("client answers held back", Some(proxy::Fault::StallReplies)),
        _ => ("client connections reset", None),
    };
    match fault {
        Some(fault) => {
            p.set(fault);
            std::thread::sleep(Duration::from_millis(rng.between(100, 1500)));
            p.set(proxy::Fault::None);
        }
        None => p.reset(),
    }
    what
}

/// Runs `setup` with `nemesis` from `seed`.
pub fn run(setup: &Setup, nemesis: &mut dyn Nemesis, seed: u64) -> Report {
    let started = std::time::Instant::now();
    let ns = common::unique_namespace("jepsen");
    {
        let mut store = lock_store::store::open(&setup.url, &ns, lock_store::store::DEFAULT_BOUND)
            .expect("the store answers before the run");
        store.install().expect("the namespace installs");
    }
    let proxies: Vec<Proxy> = if setup.proxied {
        (0..setup.clients + setup.candidates)
            .map(|_| Proxy::for_url(&setup.url))
            .collect()
    } else {
        Vec::new()
    };
    let log: Log = Arc::default();
    let history = History::default();
    let register = Register::new(setup.fenced);
    let leader_register = Register::new(setup.fenced);
    let clients: Vec<(Locks, Arc<Mutex<Tag>>)> = (0..setup.clients + setup.candidates)
        .map(|i| {
            let index = if i < setup.clients {
                i
            } else {
                client::CANDIDATES + i - setup.clients
            };
            let url = proxies
                .get(i)
                .map_or(setup.url.clone(), |p| p.url(&setup.url));
            let tag = Arc::new(Mutex::new(Tag::default()));
            let inner = lock_store::store::open(&url, &ns, setup.bound).expect("a client opens");
            let recorder = Recorder {
                inner,
                client: index,
                tag: tag.clone(),
                log: log.clone(),
            };
            (Locks::new(recorder), tag)
        })
        .collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let shared = client::Shared {
            register: &register,
            leader_register: &leader_register,
            history: &history,
            stop: &stop,
        };
        for (i, (locks, tag)) in clients.iter().enumerate() {
            if i < setup.clients {
                s.spawn(move || client::run(i, seed, locks, tag, setup.behaviour, shared));
            } else {
                let index = i - setup.clients;
                s.spawn(move || {
                    client::run_candidate(index, seed, locks, tag, setup.behaviour, shared)
                });
            }
        }
        let mut rng = Rng::stream(seed, 0);
        let mut faults = nemesis.faults();
        if setup.proxied {
            faults.push("cut");
        }
        assert!(!faults.is_empty(), "a run makes faults");
        for step in 0..setup.faults {
            std::thread::sleep(Duration::from_millis(rng.between(200, 700)));
            let from_us = now_us();
            let drawn = faults[rng.between(0, faults.len() as u64) as usize];
            let fault = match nemesis.must() {
                Some(must) if step == setup.faults / 2 => must,
                _ => drawn,
            };
            let what = if fault == "cut" {
                cut(&proxies, &mut rng)
            } else {
                nemesis.make(fault, &mut rng);
                fault
            };
            history.faults.lock().unwrap().push(Fault {
                what: what.to_owned(),
                from_us,
                to_us: now_us(),
            });
        }
        std::thread::sleep(setup.tail);
        stop.store(true, SeqCst);
    });
    drop(clients);
    let holds = history.holds.lock().unwrap().clone();
    let log = log.lock().unwrap().clone();
    let (final_set, writes) = register.finish();
    let (leaders_set, leaders_writes) = leader_register.finish();
    if let Ok(dir) = std::env::var("LOCK_JEPSEN_HISTORY") {
        keep_history(
            std::path::Path::new(&dir),
            &setup.name,
            seed,
            &history,
            &log,
        );
    }
    let report = Report {
        name: setup.name.clone(),
        seed,
        tried: history.tried.load(SeqCst),
        failed: history.failed.load(SeqCst),
        holds: holds.len(),
        stalls: history.stalls.load(SeqCst),
        crashes: history.crashes.load(SeqCst),
        faults: history.faults.lock().unwrap().clone(),
        register: check::register(&holds, &writes, &final_set)
            + check::register(&holds, &leaders_writes, &leaders_set),
        terms: holds
            .iter()
            .filter(|h| h.workload == super::history::Workload::Election)
            .count(),
        replay: replay::replay(&log, &holds),
        fences: check::fences(&holds, &log.sent),
        exclusion: check::exclusion(&holds),
        seconds: started.elapsed().as_secs_f64(),
    };
    common::uninstall(&setup.url, &ns);
    report
}

/// Writes what the run recorded under `dir` (one line per fault, lease and compare-and-set,
/// in Rust's debug notation), for a failure's reader.
fn keep_history(
    dir: &std::path::Path,
    name: &str,
    seed: u64,
    history: &History,
    log: &super::recorder::Recorded,
) {
    use std::fmt::Write as _;
    let mut text = String::new();
    for f in history.faults.lock().unwrap().iter() {
        writeln!(text, "{f:?}").unwrap();
    }
    for h in history.holds.lock().unwrap().iter() {
        writeln!(text, "{h:?}").unwrap();
    }
    for s in &log.sent {
        writeln!(text, "{s:?}").unwrap();
    }
    let file: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{file}-{seed}.txt")), text).unwrap();
}
