//! `lockstore`: run a command under a lock shared by every replica, inspect and list keys, and
//! a demo of two processes contending for one key.
//!
//! ```text
//! lockstore run --store URL --key KEY --ttl 30s [--wait 0s] [--grace 10s] [--namespace NS] [--owner NAME]
//!               [--shared] [--permits N] [--min-hold DUR] [--lock-delay DUR] [--metadata TEXT] -- CMD [ARGS...]
//! lockstore steal (as run, without --wait) -- CMD [ARGS...]
//! lockstore inspect --store URL [--namespace NS] [--json] KEY
//! lockstore list --store URL [--namespace NS] [--json]
//! lockstore query --store URL [--namespace NS] [--prefix P] [--after KEY] [--limit N] [--json]
//! lockstore install --store URL [--namespace NS]
//! lockstore uninstall --store URL [--namespace NS] --yes
//! lockstore demo [--store URL]...
//! ```
//!
//! `--store` may come from `LOCKSTORE_URL`, `--namespace` from `LOCKSTORE_NAMESPACE`. Exit
//! statuses (as `flock(1)`, `timeout(1)` and `env(1)` use them): `run` exits with its command's
//! status (128 + the signal that killed it); 126 when the command cannot run, 127 when it is not
//! found; and for `lockstore`'s own outcomes, [`HELD`], [`LOST`], [`USAGE`], [`STORE`] and
//! [`NO_NAMESPACE`]. `lockstore help` prints them.
//!
//! The command is the whole process tree it starts. When the lock is lost, every process of
//! it gets `SIGTERM` at once (at the lease's end on this machine's clock, whatever the store is
//! doing), and `SIGKILL` if it is still running `--grace` later (default 10 s; `0s`: `SIGKILL`
//! at once). `SIGTERM`, `SIGINT` and `SIGHUP` sent to `lockstore` by a process (`kill`, a
//! supervisor) are passed on to the tree; the lock is kept while it finishes, then released.
//! The terminal's (Ctrl-C, a hangup) already reach the command, which runs in `lockstore`'s
//! process group, and are not passed on again. When the command exits, what it left running
//! in the background is stopped the same way (`SIGTERM`, then `SIGKILL` after `--grace`)
//! before the lock is released: nothing it started outlives the lease.
//!
//! While `lockstore run` waits in line (`--wait`), `SIGTERM`, `SIGINT` or `SIGHUP` make it give
//! up: it leaves the line (a lease it was handed meanwhile is released at once, never left to
//! its TTL), says so, and exits with 128 + the signal, without running the command.
//! `SIGTERM` and `SIGINT` passed on to a running command are followed by `SIGKILL` if it still
//! runs `--grace` later (as `timeout -k`); `SIGHUP` is only passed on (a reload, for many).
//!
//! An owner id given with `--owner` is never taken over: if the store shows that owner holding
//! the key already (an earlier run that still runs, or one that died before its lease ended),
//! `run` waits for that lease like any other holder's (`--wait`), or exits with [`HELD`], and
//! says why; a fence never serves two runs.
//!
//! The command runs under a small guard process (`lockstore` itself, `__guard`): if `lockstore`
//! dies, even by `SIGKILL`, the guard kills the whole tree at once. If `lockstore` is only
//! stopped (`SIGSTOP`, a frozen cgroup, never scheduled), the guard stops the command by itself
//! a fifth of `--ttl` before the lease ends on this machine's clock (`SIGTERM`, then `SIGKILL`
//! after `--grace`): `lockstore` tells it that instant after each extension. On Linux, `lockstore` and
//! the guard adopt orphans (child subreapers), so a process that leaves its parent (a daemon's
//! double fork, `setsid`) stays in the tree. Elsewhere the tree is the command's own process
//! only: a `SIGKILL` of `lockstore` stops it, not what it started.

use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};

/// `eprintln!` that never panics: a closed stderr (a supervisor's pipe gone) must not end
/// `lockstore` and leave its command or its campaign behind.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod elect;
mod guard;
mod show;
mod stop_line;
mod tree;

use lock_store::{AcquireOptions, Error, LockError, Locks, Mode, StoreError};

/// Exit status when the key is held by someone else (and `--wait` ran out).
const HELD: u8 = 3;
/// Exit status when the lock was lost while the command ran.
const LOST: u8 = 4;
/// Exit status for a usage error (clap's, as every parser of this family).
const USAGE: u8 = 2;
/// Exit status when the store failed: unreachable, refused, a bad URL, missing rights, or
/// recovering after a change of authority past `--wait`.
const STORE: u8 = 5;
/// Exit status when a read-only command (`inspect`, `list`) finds no such namespace.
const NO_NAMESPACE: u8 = 6;

const EXIT_CODES: &str = "\
Exit status:
  0    done (run: the command succeeded)
  1-125, 128+N   run: the command's own status; 128+N when signal N ended it
  2    usage: an unknown command or option, a bad value
  3    held: the key is held by another owner, or by this --owner in another run (and
       --wait ran out)
  4    lost: the lock was lost while the command ran (the command was stopped)
  5    store error: unreachable, refused, a bad URL, missing rights; or recovering after
       a failover (a try, or --wait shorter than the recovery: the message says until when)
  6    no such namespace (inspect, list: nothing was ever locked in it)
  128+N  run, waiting in line: signal N made it give up (it left the line)
  126  run: the command cannot run (not executable)
  127  run: the command was not found

Environment:
  LOCKSTORE_URL        the store, when --store is not given
  LOCKSTORE_NAMESPACE  the namespace, when --namespace is not given (default: default)
  LOCKSTORE_BOUND      the bound on each store call, when --bound is not given (default: 5s)
  run sets for its command: EXPIRING_LOCK_KEY, EXPIRING_LOCK_FENCE, EXPIRING_LOCK_OWNER

Stores: redis://HOST[:PORT][/DB], postgres://USER@HOST[:PORT]/DB, mysql://USER@HOST[:PORT]/DB
(or mariadb://), sqlite://PATH";

/// Expiring locks shared by every replica, over Redis, PostgreSQL, MariaDB/MySQL or a SQLite file.
#[derive(Parser)]
// An option given twice takes its last value (`--ttl 600ms ... --ttl 30s`), as in most tools.
#[command(
    name = "lockstore",
    version,
    after_help = EXIT_CODES,
    arg_required_else_help = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a command while holding a lock; stop it if the lock is lost.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Take a key now whatever its holders (they lose it: their lockstore stops its command),
    /// then run a command as `run` does. For an operator's forced take-over.
    #[command(after_help = EXIT_CODES)]
    Steal(RunArgs),
    /// Campaign in an election: run the command only while this process leads (SIGTERM when
    /// its term stops, SIGKILL after --grace), then campaign again; exit 0 on SIGTERM, SIGINT
    /// or SIGHUP once the current term has stopped; SIGUSR1 resigns the term. A server store
    /// that cannot be reached at the start is asked again until it answers.
    #[command(after_help = EXIT_CODES)]
    Elect(ElectArgs),
    /// Show the leader of an election (its candidate, term fence, lease deadline, metadata).
    Leader {
        #[command(flatten)]
        at: Target,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
        /// Keep watching: print the leader again each time it changes.
        #[arg(long)]
        watch: bool,
        /// How often --watch looks.
        #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "200ms")]
        every: Duration,
        /// The election's name.
        name: String,
    },
    /// Show a key's holder (owner, fence, deadline) and its waiters.
    Inspect {
        #[command(flatten)]
        at: Target,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// The key.
        key: String,
    },
    /// List the keys of a namespace with their holders.
    List {
        #[command(flatten)]
        at: Target,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List the keys in use (held, kept, or waited for) with every lease and waiter, a page at
    /// a time.
    Query {
        #[command(flatten)]
        at: Target,
        /// Only keys that start with this.
        #[arg(long, default_value = "")]
        prefix: String,
        /// Only keys after this one (the `next` of the page before).
        #[arg(long, value_name = "KEY", default_value = "")]
        after: String,
        /// At most this many keys (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print one JSON object: `{"keys":[...],"next":KEY or null}`.
        #[arg(long)]
        json: bool,
    },
    /// Create a namespace ahead of its first lock (for services whose role may not create).
    Install {
        #[command(flatten)]
        at: Target,
    },
    /// Drop a namespace: its records, fence counter and tables.
    Uninstall {
        #[command(flatten)]
        at: Target,
        /// Yes, drop it (its locks and fence counter are gone for good).
        #[arg(long)]
        yes: bool,
    },
    /// Two processes contend for one key on each store given (default: a SQLite file in the
    /// temp directory).
    Demo {
        /// A store to run the demo on (repeat for several).
        #[arg(long = "store", value_name = "URL")]
        stores: Vec<String>,
    },
}

/// Where the lock lives.
#[derive(Args)]
struct Target {
    /// The store's URL.
    #[arg(long = "store", value_name = "URL", env = "LOCKSTORE_URL")]
    url: String,
    /// The namespace (1-40 of a-z, 0-9, _, starting with a letter).
    #[arg(
        long,
        value_name = "NS",
        env = "LOCKSTORE_NAMESPACE",
        default_value = "default"
    )]
    namespace: String,
    /// The longest one store call may take (connecting included), and one request as a whole:
    /// then it fails rather than hangs.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration,
        env = "LOCKSTORE_BOUND",
        default_value = "5s"
    )]
    bound: Duration,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    at: Target,
    /// The key to lock.
    #[arg(long)]
    key: String,
    /// The lease: kept alive while the command runs, so a crashed lockstore frees the key
    /// within it. 30s, 500ms, 2m, 1h (a bare number is seconds).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    ttl: Duration,
    /// How long to wait in line for the key (0s: fail at once if held). SIGTERM, SIGINT or
    /// SIGHUP meanwhile leave the line (exit 128 + N; the command does not run).
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "0s")]
    wait: Duration,
    /// How long the command may take to stop after SIGTERM (the lock lost, its guard's own
    /// stop, or an operator's SIGTERM or SIGINT passed on), then SIGKILL; 0s: SIGKILL at once.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "10s")]
    grace: Duration,
    /// Who holds the lock (default: this host and lockstore's process id). A lease this id
    /// already holds (another run, or one that died before its lease ended) is never taken
    /// over: it is waited for, or the key is held (exit 3).
    #[arg(long, value_name = "NAME")]
    owner: Option<String>,
    #[command(flatten)]
    kinds: KindArgs,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `lockstore elect`'s arguments (see `docs/election.md`).
#[derive(Args)]
struct ElectArgs {
    #[command(flatten)]
    at: Target,
    /// The term's lease: extended every third of it while this process leads.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "15s")]
    ttl: Duration,
    /// The command gets SIGTERM at the latest this long before the lease's end on this
    /// machine's clock when the lease could not be extended (default: a fifth of --ttl).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    margin: Option<Duration>,
    /// How long the command may take to stop after SIGTERM (then SIGKILL; default: the
    /// margin, so that it never outlives the lease).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    grace: Option<Duration>,
    /// This candidate's id (default: this host and lockstore's process id). A term this id
    /// still holds (a restarted candidate's predecessor) is waited for, never led again.
    #[arg(long, value_name = "ID")]
    candidate: Option<String>,
    /// Shown to every reader of the leader (an address, say).
    #[arg(long, value_name = "TEXT", default_value = "")]
    metadata: String,
    /// Lead one term, then exit with 0 (default: campaign again after each term).
    #[arg(long)]
    once: bool,
    /// The election's name (the key it is held under).
    name: String,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The lock kinds (see `docs/semantics.md`, "Lock kinds").
#[derive(Args)]
struct KindArgs {
    /// Hold the key shared: beside other shared holders, never beside an exclusive one.
    #[arg(long)]
    shared: bool,
    /// The key's permits: at most N holders at once (with --shared; fixed by the key's first
    /// holder).
    #[arg(long, value_name = "N", default_value_t = 0)]
    permits: u32,
    /// Keep the key at least this long after it was granted, even if the command ends sooner
    /// (so a replica with a skewed schedule does not run the job again).
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "0s")]
    min_hold: Duration,
    /// If this lease is lost (expired or stolen, not released), nobody gets the key until this
    /// long after its end: the command may still be running somewhere.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "0s")]
    lock_delay: Duration,
    /// Who holds it and why, shown by inspect, list and query.
    #[arg(long, value_name = "TEXT", default_value = "")]
    metadata: String,
}

impl KindArgs {
    fn options(&self) -> AcquireOptions<'_> {
        AcquireOptions {
            mode: if self.shared {
                Mode::Shared
            } else {
                Mode::Exclusive
            },
            permits: self.permits,
            min_hold: self.min_hold.into(),
            lock_delay: self.lock_delay.into(),
            metadata: &self.metadata,
            wait_alive: lock_core::Duration::ZERO,
        }
    }
}

/// A failure of `lockstore` itself: its message and exit status.
struct Failed(u8, String);

impl From<Error> for Failed {
    fn from(e: Error) -> Self {
        match e {
            Error::Store(StoreError::NoNamespace { .. }) => Failed(NO_NAMESPACE, e.to_string()),
            Error::Store(StoreError::Namespace { .. } | StoreError::Url { .. }) => {
                Failed(USAGE, e.to_string())
            }
            other => Failed(STORE, other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(guard::COMMAND) {
        return guard::run(&args[2..]);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { USAGE } else { 0 });
        }
    };
    let result = match cli.command {
        Cmd::Run(args) => run(&args, false),
        Cmd::Steal(args) => run(&args, true),
        Cmd::Query {
            at,
            prefix,
            after,
            limit,
            json,
        } => query(&at, &prefix, &after, limit, json),
        Cmd::Elect(args) => elect_cmd(args),
        Cmd::Leader {
            at,
            json,
            watch,
            every,
            name,
        } => leader_cmd(&at, &name, json, watch.then_some(every)),
        Cmd::Inspect { at, json, key } => inspect(&at, &key, json),
        Cmd::List { at, json } => list(&at, json),
        Cmd::Install { at } => install(&at),
        Cmd::Uninstall { at, yes } => uninstall(&at, yes),
        Cmd::Demo { stores } => demo(stores),
    };
    result.unwrap_or_else(|Failed(code, message)| {
        say!("lockstore: {message}");
        ExitCode::from(code)
    })
}

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
fn duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("\"{text}\": use 30s, 500ms, 2m or 1h");
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |i| text.split_at(i));
    let n: u64 = number.parse().map_err(|_| bad())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    };
    ms.map(Duration::from_millis).ok_or_else(bad)
}

fn open(at: &Target) -> Result<Locks, Failed> {
    // A lease this owner holds that this process did not take is another run's: never adopted.
    let options = lock_store::Options::new().bound(at.bound).adopt_held(false);
    Ok(options.open(&at.url, &at.namespace)?)
}

/// This process's default owner name: host and process id.
fn default_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".into());
    format!("{host}:{}", std::process::id())
}

/// `run`, or `steal` (take the key at once whatever its holders) then run.
fn run(o: &RunArgs, steal: bool) -> Result<ExitCode, Failed> {
    let key = &o.key;
    let owner = o.owner.clone().unwrap_or_else(default_owner);
    if steal && !o.wait.is_zero() {
        return Err(Failed(
            USAGE,
            "steal takes the key at once: --wait does not apply".into(),
        ));
    }
    let locks = open(&o.at)?;
    let options = o.kinds.options();
    // Signals from now on: one while it waits in line makes it give up (before any lease is
    // taken, so no signal can end `lockstore` with a key held and no command run); later ones
    // are passed on to the command.
    let received = catch_signals().map_err(|e| Failed(STORE, e))?;
    let give_up = lock_store::GiveUp::new();
    let listening = listen_while_waiting(received, give_up.clone());
    let taken = if steal {
        locks.steal(key, &owner, o.ttl, &options)
    } else {
        locks.acquire_or_give_up(key, &owner, o.ttl, o.wait, &options, &give_up)
    };
    let (mut received, signalled) = listening.stop();
    let lease = match (taken, signalled) {
        (Ok(lease), None) => lease,
        // A signal after the grant and before the command: the command never runs.
        (Ok(lease), Some(signal)) => {
            let _ = lease.release();
            say!(
                "lockstore: {} before \"{key}\" was taken: released, not running the command",
                signal_name(signal)
            );
            return Ok(ExitCode::from(signal_status(signal)));
        }
        (Err(Error::GaveUp), Some(signal)) => {
            say!(
                "lockstore: {} while waiting for \"{key}\": left the line, not running the command",
                signal_name(signal)
            );
            return Ok(ExitCode::from(signal_status(signal)));
        }
        (Err(Error::Lock(LockError::Held { .. }) | Error::WaitTimedOut), _) => {
            let holder = locks.inspect(key).ok().flatten();
            let holder = holder.as_ref().and_then(|i| i.holder());
            match holder {
                Some(h) if h.owner == owner => say!(
                    "lockstore: key \"{key}\" is held by this owner id, {owner} (fence {}), in another run (still running, or one that died before its lease ended); not running the command (owner ids must differ between runs that may overlap)",
                    h.fence.0
                ),
                Some(h) => say!(
                    "lockstore: key \"{key}\" is held by {} (fence {}); not running the command",
                    h.owner,
                    h.fence.0
                ),
                None => say!("lockstore: key \"{key}\" is held; not running the command"),
            }
            return Ok(ExitCode::from(HELD));
        }
        (Err(e), _) => return Err(e.into()),
    };
    let fail = |e: String| Failed(STORE, e);
    say!(
        "lockstore: {owner} {} \"{key}\" with fence {} ({})",
        if steal { "stole" } else { "holds" },
        lease.fence().0,
        locks.describe()
    );
    tree::adopt_orphans();
    let (mut teller, guard_end) =
        stop_line::open().map_err(|e| fail(format!("cannot open the guard's line: {e}")))?;
    // The guard stops the command by itself a margin before the lease ends on this machine's
    // clock, unless told of an extension first.
    let margin = guard_margin(o.ttl);
    teller.tell(lease.time_left().saturating_sub(margin));
    let lease_of = (key.as_str(), lease.fence().0, owner.as_str());
    let mut child = guard::command(&guard_end, o.grace, lease_of, &o.command)
        .map_err(fail)?
        .stdin(Stdio::inherit())
        .spawn()
        .map_err(|e| Failed(126, format!("cannot start {}: {e}", o.command[0])))?;
    drop(guard_end);
    guard::wait_started(&mut child);
    let lost = Arc::new(AtomicBool::new(false));
    let (lost_tx, lost_heard) = mpsc::channel();
    {
        let lost = Arc::clone(&lost);
        lease.on_lost(move |l| {
            lost.store(true, Ordering::SeqCst);
            let _ = lost_tx.send(());
            say!(
                "lockstore: lost \"{}\" (fence {}): {}; stopping the command",
                l.key,
                l.fence.0,
                show::lost_why(l)
            );
        });
    }
    lease.keep_alive();
    let watch = Watch {
        lost: &lost,
        lost_heard: &lost_heard,
        lease: &lease,
        teller: &mut teller,
        margin,
    };
    let status = supervise(&mut child, watch, o.grace, &mut received).map_err(fail)?;
    // Within the margin of its end (the guard stops the command then by itself: extensions
    // went unanswered), the lease is as good as lost: the key may be handed on any moment.
    let ending = lease.time_left() <= margin;
    if lost.load(Ordering::SeqCst) || lease.is_lost() || ending {
        if ending && !lost.load(Ordering::SeqCst) {
            say!(
                "lockstore: the lease of \"{key}\" (fence {}) was not extended and ends within its margin: lost",
                lease.fence().0
            );
        }
        // Lost: the store frees the key at the lease's deadline, whatever is sent now; a
        // release (and the extension in flight before it) could hold `lockstore` up to its
        // bound twice over a silent store. Exit now.
        std::mem::forget(lease);
        return Ok(ExitCode::from(LOST));
    }
    let released = lease.release();
    match released {
        Err(e) => say!("lockstore: release: {e}"),
        // A minimum hold keeps the key after a command that ended early.
        Ok(()) => match lease.released_at() {
            Some(at) if !o.kinds.min_hold.is_zero() && at.0 > show::now_ms() => say!(
                "lockstore: \"{key}\" stays held until {} (its minimum hold)",
                show::until(at)
            ),
            _ => {}
        },
    }
    Ok(ExitCode::from(exit_code(status)))
}

/// The signals `lockstore` passes on to its command: (the number the handler reports, the
/// signal to send).
const PASSED_ON: [(i32, rustix::process::Signal); 3] = [
    (signal_hook::consts::SIGTERM, rustix::process::Signal::TERM),
    (signal_hook::consts::SIGINT, rustix::process::Signal::INT),
    (signal_hook::consts::SIGHUP, rustix::process::Signal::HUP),
];

/// The signals caught, with where each came from.
type Caught = signal_hook::iterator::SignalsInfo<signal_hook::iterator::exfiltrator::WithOrigin>;

/// Catches [`PASSED_ON`] from now on (they no longer end `lockstore` itself).
fn catch_signals() -> Result<Caught, String> {
    Caught::new(PASSED_ON.map(|(raw, _)| raw)).map_err(|e| format!("cannot handle signals: {e}"))
}

/// What [`supervise`] watches besides the guard: the lease's loss, and the guard's line.
struct Watch<'a> {
    lost: &'a AtomicBool,
    lost_heard: &'a mpsc::Receiver<()>,
    lease: &'a lock_store::Lease,
    teller: &'a mut stop_line::Teller,
    /// The guard stops the command this long before the lease's end (see [`guard_margin`]).
    margin: Duration,
}

/// How long before the lease's end on this machine's clock the guard of `run` stops the command
/// by itself when `lockstore` stopped telling it of extensions: a fifth of the TTL (the
/// election's default margin), so that the command has stopped before the store can hand the
/// key to anyone else.
fn guard_margin(ttl: Duration) -> Duration {
    ttl / 5
}

/// Waits for the command's guard, passing on the signals `lockstore` receives to the tree
/// (`SIGTERM` and `SIGINT` followed by `SIGKILL` if the tree still runs `grace` later); if
/// the lock is lost, stops the tree: `SIGTERM` (the moment the loss is heard), then `SIGKILL`
/// after `grace`. Tells the guard, after each extension, when the lease ends on this
/// machine's clock. Once the guard has exited, stops what the command left running the same
/// way.
fn supervise(
    guard: &mut std::process::Child,
    watch: Watch<'_>,
    grace: Duration,
    received: &mut Caught,
) -> Result<std::process::ExitStatus, String> {
    use rustix::process::{Pid, Signal};
    let guard_pid = Some(Pid::from_child(guard));
    let mut kill_at: Option<Instant> = None;
    let stop = |kill_at: &mut Option<Instant>, first: Option<Signal>| {
        if kill_at.is_none() {
            let first = match (first, grace.is_zero()) {
                (_, true) => Signal::KILL,
                (Some(signal), false) => signal,
                (None, false) => Signal::TERM,
            };
            tree::signal_all(guard_pid, guard_pid, first);
            *kill_at = Some(Instant::now() + grace);
        }
    };
    let status = loop {
        if let Some(status) = guard.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        (watch.teller).tell(watch.lease.time_left().saturating_sub(watch.margin));
        for origin in received.pending() {
            // A signal from the terminal (Ctrl-C, a hangup) was sent by the kernel to the whole
            // foreground process group, the command included: passing it on would deliver it
            // twice. One sent by a process (`kill`, a supervisor) reached `lockstore` alone.
            if origin.cause == signal_hook::low_level::siginfo::Cause::Kernel {
                continue;
            }
            if let Some((_, signal)) = PASSED_ON.iter().find(|(r, _)| *r == origin.signal) {
                if *signal == Signal::HUP {
                    tree::signal_all(guard_pid, guard_pid, *signal);
                } else if kill_at.is_none() {
                    // An operator's stop, escalated after the grace (as `timeout -k`).
                    stop(&mut kill_at, Some(*signal));
                } else {
                    tree::signal_all(guard_pid, guard_pid, *signal);
                }
            }
        }
        if watch.lost.load(Ordering::SeqCst) {
            stop(&mut kill_at, None);
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            tree::signal_all(guard_pid, None, Signal::KILL);
        }
        // Woken at once by a loss; the guard's exit is looked for every 10 ms.
        let _ = watch.lost_heard.recv_timeout(Duration::from_millis(10));
    };
    // What the command left behind (adopted by `lockstore` when the guard exited).
    tree::stop_leftovers(grace, kill_at);
    Ok(status)
}

/// The signals caught while `run` waits in line, on a thread of their own: the first makes the
/// acquire give up. [`Listening::stop`] hands the signals back for the command.
struct Listening {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Caught, Option<i32>)>,
}

fn listen_while_waiting(mut received: Caught, give_up: lock_store::GiveUp) -> Listening {
    let done = Arc::new(AtomicBool::new(false));
    let thread = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut first = None;
            loop {
                // Read before the flag: a signal that came before the acquire returned is
                // never left for the command.
                let stopping = done.load(Ordering::SeqCst);
                // Any origin: no command runs yet, so the terminal's reached nobody else.
                if let Some(origin) = received.pending().next() {
                    first.get_or_insert(origin.signal);
                    give_up.give_up();
                }
                if stopping {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            (received, first)
        })
    };
    Listening { done, thread }
}

impl Listening {
    /// Stops listening: the signals, and the first one heard while waiting, if any.
    fn stop(self) -> (Caught, Option<i32>) {
        self.done.store(true, Ordering::SeqCst);
        match self.thread.join() {
            Ok(caught) => caught,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// A signal's name, for messages.
fn signal_name(signal: i32) -> &'static str {
    signal_hook::low_level::signal_name(signal).unwrap_or("a signal")
}

/// The exit status for a signal that ended `lockstore`'s wait: 128 + its number, as a shell's.
fn signal_status(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(1)
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        _ => 1,
    }
}

fn elect_cmd(a: ElectArgs) -> Result<ExitCode, Failed> {
    let candidate = a.candidate.clone().unwrap_or_else(default_owner);
    let mut options = lock_store::election::CampaignOptions::new(a.ttl.into());
    if let Some(margin) = a.margin {
        options.margin = margin.into();
        options.grace = margin.into();
    }
    if let Some(grace) = a.grace {
        options.grace = grace.into();
    }
    options.once = a.once;
    let args = elect::ElectArgs {
        url: &a.at.url,
        namespace: &a.at.namespace,
        name: &a.name,
        candidate: &candidate,
        options,
        metadata: &a.metadata,
        bound: a.at.bound,
    };
    match elect::elect(&args, a.command) {
        Ok(code) => Ok(ExitCode::from(code)),
        Err((code, message)) => Err(Failed(code, message)),
    }
}

fn leader_cmd(
    at: &Target,
    name: &str,
    json: bool,
    watch: Option<Duration>,
) -> Result<ExitCode, Failed> {
    let locks = open(at)?;
    elect::leader(&locks, name, json, watch)?;
    Ok(ExitCode::SUCCESS)
}

fn inspect(at: &Target, key: &str, json: bool) -> Result<ExitCode, Failed> {
    let locks = open(at)?;
    let info = locks.inspect(key)?;
    if json {
        println!("{}", show::key_json(key, info.as_ref()));
    } else {
        println!("{}", show::key_text(key, info.as_ref()));
    }
    Ok(ExitCode::SUCCESS)
}

fn list(at: &Target, json: bool) -> Result<ExitCode, Failed> {
    let locks = open(at)?;
    let keys = locks.keys()?;
    let last = locks.last_fence()?;
    let mut states = Vec::with_capacity(keys.len());
    for key in &keys {
        states.push((key, locks.inspect(key)?));
    }
    if json {
        let keys: Vec<String> = states
            .iter()
            .map(|(k, i)| show::key_json(k, i.as_ref()))
            .collect();
        println!(
            "{{\"store\":{},\"last_fence\":{},\"keys\":[{}]}}",
            show::json_string(&locks.describe()),
            last.0,
            keys.join(",")
        );
    } else {
        println!(
            "{}: {} keys, last fence {}",
            locks.describe(),
            keys.len(),
            last.0
        );
        for (key, info) in &states {
            println!("{}", show::key_text(key, info.as_ref()));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn query(
    at: &Target,
    prefix: &str,
    after: &str,
    limit: usize,
    json: bool,
) -> Result<ExitCode, Failed> {
    let locks = open(at)?;
    let page = match locks.query(prefix, after, limit) {
        Err(Error::Lock(e)) => return Err(Failed(USAGE, e.to_string())),
        other => other?,
    };
    if json {
        let keys: Vec<String> = (page.keys.iter())
            .map(|(k, i)| show::key_json(k, Some(i)))
            .collect();
        let next = page
            .next
            .as_deref()
            .map_or("null".into(), show::json_string);
        println!("{{\"keys\":[{}],\"next\":{next}}}", keys.join(","));
    } else {
        if page.keys.is_empty() {
            println!("{}: no key in use matches", locks.describe());
        }
        for (key, info) in &page.keys {
            println!("{}", show::key_text(key, Some(info)));
        }
        if let Some(next) = &page.next {
            println!("(more: --after {next})");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn install(at: &Target) -> Result<ExitCode, Failed> {
    let mut store =
        lock_store::store::open(&at.url, &at.namespace, lock_store::store::DEFAULT_BOUND)
            .map_err(Error::from)?;
    store.install().map_err(Error::from)?;
    println!("{}: installed", store.describe());
    Ok(ExitCode::SUCCESS)
}

fn uninstall(at: &Target, yes: bool) -> Result<ExitCode, Failed> {
    let mut store =
        lock_store::store::open(&at.url, &at.namespace, lock_store::store::DEFAULT_BOUND)
            .map_err(Error::from)?;
    if !yes {
        return Err(Failed(
            USAGE,
            format!(
                "this drops {} with its locks and fence counter: add --yes to do it",
                store.describe()
            ),
        ));
    }
    store.uninstall().map_err(Error::from)?;
    println!("{}: uninstalled", store.describe());
    Ok(ExitCode::SUCCESS)
}

/// Two `lockstore run` processes contend for one key on each store given (default: a SQLite
/// file in the temp directory): the first holds it for a second, the second waits and is handed
/// it with a higher fence.
fn demo(mut stores: Vec<String>) -> Result<ExitCode, Failed> {
    let fail = |e: std::io::Error| Failed(STORE, e.to_string());
    if stores.is_empty() {
        let path = std::env::temp_dir().join("lockstore-demo.db");
        stores.push(format!("sqlite://{}", path.display()));
    }
    let me = std::env::current_exe().map_err(fail)?;
    let namespace = format!("demo_{}", std::process::id());
    for url in &stores {
        println!("== two processes, one key, on {url} ==");
        let spawn = |name: &str| {
            Command::new(&me)
                .args(["run", "--store", url, "--namespace", &namespace, "--key", "nightly-report"])
                .args(["--ttl", "5s", "--wait", "10s", "--owner", name, "--"])
                .args([
                    "sh",
                    "-c",
                    "echo \"  $EXPIRING_LOCK_OWNER works with fence $EXPIRING_LOCK_FENCE\"; sleep 1; echo \"  $EXPIRING_LOCK_OWNER done\"",
                ])
                .spawn()
        };
        let mut first = spawn("replica-1").map_err(fail)?;
        std::thread::sleep(Duration::from_millis(300));
        let mut second = spawn("replica-2").map_err(fail)?;
        let (a, b) = (first.wait().map_err(fail)?, second.wait().map_err(fail)?);
        if !a.success() || !b.success() {
            return Err(Failed(
                STORE,
                format!("a demo process failed on {url}: {a}, {b}"),
            ));
        }
        let opened = lock_store::store::open(url, &namespace, lock_store::store::DEFAULT_BOUND);
        if let Ok(mut store) = opened {
            let _ = store.uninstall();
        }
    }
    Ok(ExitCode::SUCCESS)
}
