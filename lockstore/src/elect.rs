//! `lockstore elect NAME -- CMD`: campaign in the election `NAME` and run the command only
//! while this process leads; `lockstore leader NAME`: who leads. The recipe is the core's
//! (`lock_store::election`); this file gives it a process as the term's body.

use std::process::{Child, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

use lock_store::election::{Body, CampaignOptions, Election, Leader, StopReason, Term};
use lock_store::Locks;

use crate::{guard, show, stop_line, tree};

/// A term's body: the command, under its guard, as `lockstore run` starts it.
pub struct ProcessBody {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The election's name, the candidate, shown to the command in its environment.
    pub name: String,
    /// This candidate's id.
    pub candidate: String,
    /// The running guard.
    pub child: Option<Child>,
    /// A command that cannot start ends the campaign with 126 or 127.
    pub failed: Option<(u8, String)>,
    /// How long what the command left running after it exited gets between `SIGTERM` and
    /// `SIGKILL` (`--grace`).
    pub grace: Duration,
    /// The term in progress (its stop instant, told to the guard).
    pub term: Option<Term>,
    /// The line to the guard (see [`stop_line`]).
    pub teller: Option<stop_line::Teller>,
}

impl ProcessBody {
    fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(Pid::from_child)
    }

    /// Tells the guard the term's stop instant, if it moved.
    fn tell(&mut self) {
        let by = self.term.as_ref().and_then(Term::stop_by);
        if let (Some(by), Some(teller)) = (by, self.teller.as_mut()) {
            teller.tell(by.saturating_duration_since(std::time::Instant::now()));
        }
    }
}

impl Body for ProcessBody {
    fn start(&mut self, term: &Term) {
        say!(
            "lockstore: {} leads \"{}\" with fence {}",
            self.candidate,
            self.name,
            term.fence().0
        );
        let (teller, guard_end) = match stop_line::open() {
            Ok(line) => line,
            Err(e) => {
                self.failed = Some((126, format!("cannot open the guard's line: {e}")));
                return;
            }
        };
        self.teller = Some(teller);
        self.term = Some(term.clone());
        // The guard stops the command by itself at the term's stop instant, unless told of an
        // extension first (this process may be paused).
        self.tell();
        let lease = (self.name.as_str(), term.fence().0, self.candidate.as_str());
        let spawned = guard::command(&guard_end, self.grace, lease, &self.command)
            .map(|mut guard| guard.stdin(Stdio::null()).spawn());
        let spawned = match spawned {
            Ok(spawned) => spawned,
            Err(e) => {
                self.failed = Some((126, e));
                return;
            }
        };
        drop(guard_end);
        match spawned {
            Ok(mut child) => {
                guard::wait_started(&mut child);
                self.child = Some(child);
            }
            Err(e) => {
                self.failed = Some((126, format!("cannot start {}: {e}", self.command[0])));
            }
        }
    }

    fn stop(&mut self, term: &Term, reason: StopReason) {
        say!(
            "lockstore: {} stops leading \"{}\" (fence {}): {}",
            self.candidate,
            self.name,
            term.fence().0,
            reason.name()
        );
        if reason != StopReason::Returned {
            tree::signal_all(self.pid(), self.pid(), Signal::TERM);
        }
    }

    fn returned(&mut self) -> bool {
        self.tell();
        let Some(child) = self.child.as_mut() else {
            return true;
        };
        match child.try_wait() {
            Ok(None) => false,
            Ok(Some(status)) => {
                // The guard's status is the command's; 127: not found (the guard could not
                // exec it), which ends the campaign.
                if status.code() == Some(127) {
                    self.failed = Some((127, format!("{}: command not found", self.command[0])));
                }
                self.child = None;
                self.term = None;
                tree::stop_leftovers(self.grace, None);
                true
            }
            Err(_) => {
                self.child = None;
                true
            }
        }
    }

    fn abandon(&mut self) {
        say!(
            "lockstore: the command did not stop within the grace: SIGKILL ({})",
            self.name
        );
        tree::signal_all(self.pid(), None, Signal::KILL);
    }

    fn wait(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
            tree::stop_leftovers(self.grace, None);
        }
    }
}

/// What `lockstore elect` is given.
pub struct ElectArgs<'a> {
    /// The store's URL.
    pub url: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// The election's name (its key).
    pub name: &'a str,
    /// This candidate.
    pub candidate: &'a str,
    /// The recipe's options.
    pub options: CampaignOptions,
    /// Shown to readers of the leader.
    pub metadata: &'a str,
    /// The bound on each store call.
    pub bound: Duration,
}

/// Campaigns until `SIGTERM`, `SIGINT` or `SIGHUP` (then the current term, if any, stops and
/// `lockstore` exits 0) or, with `--once`, until one term ended; `SIGUSR1` resigns the current
/// term (the next candidate in line leads at once) and campaigns again. Answers the exit
/// status.
///
/// A store that cannot be reached at the start (its server down or restarting) is asked again
/// every retry pause, as a lost connection delays a campaign; a bad URL or namespace, a schema
/// that is not ours, or a store this build lacks ends it at once.
///
/// # Errors
/// A failure of the store (not a lost connection: that only delays the campaign) or a command
/// that cannot run, with its exit status.
pub fn elect(args: &ElectArgs<'_>, command: Vec<String>) -> Result<u8, (u8, String)> {
    // Bad options are refused before anything waits for the store.
    lock_core::election::Campaign::new(args.options).map_err(|e| (crate::USAGE, e.to_string()))?;
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1])
        .map_err(|e| (crate::STORE, format!("cannot handle signals: {e}")))?;
    let Some(locks) = open_when_reachable(args, &mut signals)? else {
        say!(
            "lockstore: {} leaves \"{}\" after 0 terms",
            args.candidate,
            args.name
        );
        return Ok(0);
    };
    let election = Election::new(&locks, args.name, args.candidate, args.options)
        .map_err(|e| (crate::USAGE, e.to_string()))?
        .metadata(args.metadata);
    let control = election.control();
    tree::adopt_orphans();
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if signal == SIGUSR1 {
                control.resign();
            } else {
                control.shut_down();
            }
        }
    });
    let mut body = ProcessBody {
        command,
        name: args.name.to_owned(),
        candidate: args.candidate.to_owned(),
        child: None,
        failed: None,
        grace: Duration::from_millis(args.options.grace.0),
        term: None,
        teller: None,
    };
    let terms = election
        .run_with(&mut body)
        .map_err(|e| (crate::STORE, e.to_string()))?;
    if let Some(failed) = body.failed {
        return Err(failed);
    }
    say!(
        "lockstore: {} leaves \"{}\" after {terms} terms",
        args.candidate,
        args.name
    );
    Ok(0)
}

/// Opens the store, asking again every retry pause while a server store cannot be reached
/// (saying so once); `None` if a signal asked to leave meanwhile (`SIGUSR1`, resign, means
/// nothing before a term). A local store (SQLite) that cannot be opened is an error at once: a
/// wrong path does not heal by itself.
fn open_when_reachable(
    args: &ElectArgs<'_>,
    signals: &mut signal_hook::iterator::Signals,
) -> Result<Option<Locks>, (u8, String)> {
    let pause = Duration::from_millis(args.options.retry.0.max(1));
    let server = !args.url.starts_with("sqlite:") && !args.url.starts_with("memory:");
    let mut said = false;
    loop {
        // A term this candidate id holds that this process did not take (a restarted
        // candidate's predecessor, a duplicate) is waited for, never led again: no fence serves
        // two terms.
        let options = lock_store::Options::new()
            .bound(args.bound)
            .adopt_held(false);
        match options.open(args.url, args.namespace) {
            Ok(locks) => {
                if said {
                    say!("lockstore: the store answers; {} campaigns", args.candidate);
                }
                return Ok(Some(locks));
            }
            Err(lock_store::Error::Store(e @ lock_store::StoreError::Connect { .. })) if server => {
                if !said {
                    said = true;
                    say!(
                        "lockstore: {e}; {} campaigns once it answers (asked again every {})",
                        args.candidate,
                        show::duration(pause)
                    );
                }
            }
            Err(e) => {
                let crate::Failed(code, message) = e.into();
                return Err((code, message));
            }
        }
        let until = std::time::Instant::now() + pause;
        while std::time::Instant::now() < until {
            if signals.pending().any(|signal| signal != SIGUSR1) {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The leader as text: `NAME: led by C with fence F, since S, until T (metadata)`, or `NAME: no
/// leader`.
pub fn leader_text(name: &str, leader: Option<&Leader>) -> String {
    match leader {
        None => format!("{name}: no leader"),
        Some(l) => {
            let since = l
                .since
                .map_or(String::new(), |at| format!(" since {},", show::until(at)));
            let mut text = format!(
                "{name}: led by {} with fence {},{since} until {}",
                l.candidate,
                l.fence.0,
                show::until(l.deadline)
            );
            if !l.metadata.is_empty() {
                text.push_str(&format!(" ({})", l.metadata));
            }
            text
        }
    }
}

/// The leader as one JSON object.
pub fn leader_json(name: &str, leader: Option<&Leader>) -> String {
    match leader {
        None => format!(
            "{{\"election\":{},\"leader\":null}}",
            show::json_string(name)
        ),
        Some(l) => format!(
            "{{\"election\":{},\"leader\":{{\"candidate\":{},\"fence\":{},\"since_ms\":{},\"since\":{},\"deadline_ms\":{},\"deadline\":{},\"metadata\":{}}}}}",
            show::json_string(name),
            show::json_string(&l.candidate),
            l.fence.0,
            show::ms_or_null(l.since),
            show::utc_or_null(l.since),
            l.deadline.0,
            show::json_string(&show::utc(l.deadline)),
            show::json_string(&l.metadata)
        ),
    }
}

/// `lockstore leader NAME`: prints the leader once, or with `watch` each time it changes (a
/// new term, or no leader), looking every `every`.
///
/// # Errors
/// The store's failure (`watch` rides out failures, printing nothing until the store answers).
pub fn leader(
    locks: &Locks,
    name: &str,
    json: bool,
    watch: Option<Duration>,
) -> Result<(), lock_store::Error> {
    let show = |leader: Option<&Leader>| {
        if json {
            println!("{}", leader_json(name, leader));
        } else {
            println!("{}", leader_text(name, leader));
        }
    };
    let first = locks.leader(name)?;
    show(first.as_ref());
    let Some(every) = watch else {
        return Ok(());
    };
    let term = |l: &Option<Leader>| l.as_ref().map(|l| (l.candidate.clone(), l.fence));
    let mut last = term(&first);
    loop {
        std::thread::sleep(every);
        let Ok(now) = locks.leader(name) else {
            continue;
        };
        if term(&now) != last {
            last = term(&now);
            show(now.as_ref());
        }
    }
}
