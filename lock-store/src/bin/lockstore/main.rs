//! `lockstore`: run a command under a lock shared by every replica, inspect and list keys, and
//! a demo of two processes contending for one key.
//!
//! ```text
//! lockstore run --store URL --key KEY --ttl 30s [--wait 0s] [--grace 10s] [--namespace NS] [--owner NAME] -- CMD [ARGS...]
//! lockstore inspect --store URL [--namespace NS] KEY
//! lockstore list --store URL [--namespace NS]
//! lockstore demo [--store URL]...
//! ```
//!
//! Exit status of `run`: the command's (128 + signal if it was killed by one); 3 when the key is
//! held (and `--wait` ran out), 4 when the lock was lost while the command ran, 2 for a usage or
//! store error.
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
//! The command runs under a small guard process (`lockstore` itself, `__guard`): if `lockstore`
//! dies, even by `SIGKILL`, the guard kills the whole tree at once. On Linux, `lockstore` and
//! the guard adopt orphans (child subreapers), so a process that leaves its parent (a daemon's
//! double fork, `setsid`) stays in the tree. Elsewhere the tree is the command's own process
//! only: a `SIGKILL` of `lockstore` stops it, not what it started.

use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

mod guard;
mod tree;

use lock_core::LockError;
use lock_store::{Error, Locks};

const USAGE: &str = "usage:
  lockstore run --store URL --key KEY --ttl DURATION [--wait DURATION] [--grace DURATION] [--namespace NS] [--owner NAME] -- CMD [ARGS...]
  lockstore inspect --store URL [--namespace NS] KEY
  lockstore list --store URL [--namespace NS]
  lockstore demo [--store URL]...
URL: sqlite://PATH, redis://HOST:PORT, postgres://USER@HOST/DB, mysql://USER@HOST/DB
DURATION: 30s, 500ms, 2m, 1h (a bare number is seconds)";

/// Exit status when the key is held by someone else.
const HELD: u8 = 3;
/// Exit status when the lock was lost while the command ran.
const LOST: u8 = 4;
/// Exit status for a usage or store error.
const FAILED: u8 = 2;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("inspect") => inspect(&args[1..]),
        Some("list") => list(&args[1..]),
        Some("demo") => demo(&args[1..]),
        Some(guard::COMMAND) => return guard::run(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(format!("unknown command\n{USAGE}")),
    };
    result.unwrap_or_else(|message| {
        eprintln!("lockstore: {message}");
        ExitCode::from(FAILED)
    })
}

/// Parsed `--name value` options and the rest.
#[derive(Default)]
struct Options {
    stores: Vec<String>,
    namespace: Option<String>,
    key: Option<String>,
    ttl: Option<Duration>,
    wait: Option<Duration>,
    grace: Option<Duration>,
    owner: Option<String>,
    positional: Vec<String>,
    command: Vec<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            o.command = args[i + 1..].to_vec();
            break;
        }
        let mut value = || {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg {
            "--store" => o.stores.push(value()?),
            "--namespace" => o.namespace = Some(value()?),
            "--key" => o.key = Some(value()?),
            "--ttl" => o.ttl = Some(duration(&value()?)?),
            "--wait" => o.wait = Some(duration(&value()?)?),
            "--grace" => o.grace = Some(duration(&value()?)?),
            "--owner" => o.owner = Some(value()?),
            other if other.starts_with("--") => {
                return Err(format!("unknown option {other}\n{USAGE}"))
            }
            other => o.positional.push(other.to_owned()),
        }
        i += 1;
    }
    Ok(o)
}

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
fn duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("bad duration \"{text}\": use 30s, 500ms, 2m or 1h");
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

fn open(o: &Options) -> Result<Locks, String> {
    let url = match o.stores.as_slice() {
        [url] => url,
        [] => return Err(format!("--store URL is required\n{USAGE}")),
        _ => return Err("give --store once".into()),
    };
    let namespace = o.namespace.as_deref().unwrap_or("default");
    Locks::open(url, namespace).map_err(|e| e.to_string())
}

/// This process's default owner name: host and process id.
fn default_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".into());
    format!("{host}:{}", std::process::id())
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let o = parse(args)?;
    let key = o.key.clone().ok_or("--key is required")?;
    let ttl = o.ttl.ok_or("--ttl is required")?;
    if o.command.is_empty() {
        return Err(format!("no command after --\n{USAGE}"));
    }
    let owner = o.owner.clone().unwrap_or_else(default_owner);
    let locks = open(&o)?;
    let lease = match locks.acquire(&key, &owner, ttl, o.wait.unwrap_or_default()) {
        Ok(lease) => lease,
        Err(Error::Lock(LockError::Held { .. }) | Error::WaitTimedOut) => {
            let holder = locks
                .inspect(&key)
                .ok()
                .flatten()
                .map(|i| format!(" by {} (fence {})", i.holder.owner, i.holder.fence.0))
                .unwrap_or_default();
            eprintln!("lockstore: key \"{key}\" is held{holder}; not running the command");
            return Ok(ExitCode::from(HELD));
        }
        Err(e) => return Err(e.to_string()),
    };
    eprintln!(
        "lockstore: {owner} holds \"{key}\" with fence {} ({})",
        lease.fence().0,
        locks.describe()
    );
    // Signals for the command, from now on (before it starts, so none is missed).
    let mut received = catch_signals()?;
    tree::adopt_orphans();
    let me = std::env::current_exe().map_err(|e| format!("cannot find lockstore itself: {e}"))?;
    let mut child = Command::new(me)
        .arg(guard::COMMAND)
        .arg(std::process::id().to_string())
        .arg("--")
        .args(&o.command)
        .env("EXPIRING_LOCK_KEY", &key)
        .env("EXPIRING_LOCK_FENCE", lease.fence().0.to_string())
        .env("EXPIRING_LOCK_OWNER", &owner)
        .stdin(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", o.command[0]))?;
    let lost = Arc::new(AtomicBool::new(false));
    let (lost_tx, lost_heard) = mpsc::channel();
    {
        let lost = Arc::clone(&lost);
        lease.on_lost(move |l| {
            lost.store(true, Ordering::SeqCst);
            let _ = lost_tx.send(());
            eprintln!(
                "lockstore: lost \"{}\" (fence {}); stopping the command",
                l.key, l.fence.0
            );
        });
    }
    lease.keep_alive();
    let grace = o.grace.unwrap_or(DEFAULT_GRACE);
    let status = supervise(&mut child, &lost, &lost_heard, grace, &mut received)?;
    let released = lease.release();
    if lost.load(Ordering::SeqCst) {
        return Ok(ExitCode::from(LOST));
    }
    if let Err(e) = released {
        eprintln!("lockstore: release: {e}");
    }
    Ok(ExitCode::from(exit_code(status)))
}

/// How long a command may take to stop after `SIGTERM` once the lock is lost.
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

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

/// Waits for the command's guard, passing on the signals `lockstore` receives to the tree; if
/// the lock is lost, stops the tree: `SIGTERM` (the moment the loss is heard), then `SIGKILL`
/// after `grace`. Once the guard has exited, stops what the command left running the same way.
fn supervise(
    guard: &mut std::process::Child,
    lost: &AtomicBool,
    lost_heard: &mpsc::Receiver<()>,
    grace: Duration,
    received: &mut Caught,
) -> Result<std::process::ExitStatus, String> {
    use rustix::process::{Pid, Signal};
    let guard_pid = Some(Pid::from_child(guard));
    let mut kill_at: Option<Instant> = None;
    let stop = |kill_at: &mut Option<Instant>| {
        if kill_at.is_none() {
            let first = if grace.is_zero() {
                Signal::KILL
            } else {
                Signal::TERM
            };
            tree::signal_all(guard_pid, guard_pid, first);
            *kill_at = Some(Instant::now() + grace);
        }
    };
    let status = loop {
        if let Some(status) = guard.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        for origin in received.pending() {
            // A signal from the terminal (Ctrl-C, a hangup) was sent by the kernel to the whole
            // foreground process group, the command included: passing it on would deliver it
            // twice. One sent by a process (`kill`, a supervisor) reached `lockstore` alone.
            if origin.cause == signal_hook::low_level::siginfo::Cause::Kernel {
                continue;
            }
            if let Some((_, signal)) = PASSED_ON.iter().find(|(r, _)| *r == origin.signal) {
                tree::signal_all(guard_pid, guard_pid, *signal);
            }
        }
        if lost.load(Ordering::SeqCst) {
            stop(&mut kill_at);
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            tree::signal_all(guard_pid, None, Signal::KILL);
        }
        // Woken at once by a loss; the guard's exit is looked for every 10 ms.
        let _ = lost_heard.recv_timeout(Duration::from_millis(10));
    };
    // What the command left behind (adopted by `lockstore` when the guard exited).
    loop {
        tree::reap_ended();
        if tree::descendants(None).is_empty() {
            break;
        }
        stop(&mut kill_at);
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            tree::signal_all(None, None, Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(status)
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        _ => 1,
    }
}

fn inspect(args: &[String]) -> Result<ExitCode, String> {
    let o = parse(args)?;
    let [key] = o.positional.as_slice() else {
        return Err(format!("inspect takes one KEY\n{USAGE}"));
    };
    let locks = open(&o)?;
    print_key(&locks, key)?;
    Ok(ExitCode::SUCCESS)
}

fn print_key(locks: &Locks, key: &str) -> Result<(), String> {
    match locks.inspect(key).map_err(|e| e.to_string())? {
        None => println!("{key}: free"),
        Some(info) => {
            println!(
                "{key}: held by {} with fence {} until {} ms",
                info.holder.owner, info.holder.fence.0, info.holder.deadline.0
            );
            for (i, w) in info.waiters.iter().enumerate() {
                println!(
                    "  {}. {} (ttl {} ms, waits until {} ms)",
                    i + 1,
                    w.owner,
                    w.ttl.0,
                    w.wait_deadline.0
                );
            }
        }
    }
    Ok(())
}

fn list(args: &[String]) -> Result<ExitCode, String> {
    let o = parse(args)?;
    let locks = open(&o)?;
    let keys = locks.keys().map_err(|e| e.to_string())?;
    println!(
        "{}: {} keys, last fence {}",
        locks.describe(),
        keys.len(),
        locks.last_fence().map_err(|e| e.to_string())?.0
    );
    for key in keys {
        print_key(&locks, &key)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Two `lockstore run` processes contend for one key on each store given (default: a SQLite
/// file in the temp directory): the first holds it for a second, the second waits and is handed
/// it with a higher fence.
fn demo(args: &[String]) -> Result<ExitCode, String> {
    let o = parse(args)?;
    let mut stores = o.stores.clone();
    if stores.is_empty() {
        let path = std::env::temp_dir().join("lockstore-demo.db");
        stores.push(format!("sqlite://{}", path.display()));
    }
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
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
                .map_err(|e| e.to_string())
        };
        let mut first = spawn("replica-1")?;
        std::thread::sleep(Duration::from_millis(300));
        let mut second = spawn("replica-2")?;
        let (a, b) = (
            first.wait().map_err(|e| e.to_string())?,
            second.wait().map_err(|e| e.to_string())?,
        );
        if !a.success() || !b.success() {
            return Err(format!("a demo process failed on {url}: {a}, {b}"));
        }
        if let Ok(mut store) = lock_store::url::open(url, &namespace) {
            let _ = store.uninstall();
        }
    }
    Ok(ExitCode::SUCCESS)
}
