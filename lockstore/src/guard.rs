//! The guard between `lockstore run` and its command: it starts the command, exits with its
//! status, and if `lockstore` dies first (even by `SIGKILL`, which `lockstore` cannot act on)
//! kills the command's whole tree at once. It learns of that death from the kernel: a
//! parent that is no longer `lockstore`, looked at every 10 ms (on Linux the parent-death
//! signal it asks for is caught rather than let end it).
//!
//! It does not trust `lockstore` to be scheduled, either: `lockstore` tells it, after each
//! extension of the lease, when the lease can end on this machine's clock ([`stop_line`]); if
//! that instant comes without a later one (`lockstore` stopped by `SIGSTOP`, or never run), the
//! guard stops the command's tree itself: `SIGTERM`, then `SIGKILL` after the grace.
//!
//! It ignores the terminal's signals (Ctrl-C reaches the command directly, in the same process
//! group) and those `lockstore` passes on to the tree: besides its own clock, only `lockstore`
//! stops the command.

use std::process::{Command, ExitCode};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

use crate::{stop_line, tree};

/// The hidden subcommand: `lockstore __guard PARENT_PID STOP_FD GRACE_MS -- CMD [ARGS...]`.
pub const COMMAND: &str = "__guard";

/// How long [`wait_started`] waits for the guard to start its command at most.
const START_WITHIN: Duration = Duration::from_secs(2);

/// Waits until the guard `guard` (just spawned) has started its command, or has exited (at
/// most [`START_WITHIN`]): a stop is sent to the command's tree, and one sent before the
/// command is in it (a stop right after the start: a resignation, a term whose lease ends at
/// once) would reach nobody, leaving the command to run until its `SIGKILL` after the grace.
/// A command that has not set up its handlers yet takes the signal's default action: it ends.
pub fn wait_started(guard: &mut std::process::Child) {
    let pid = Pid::from_child(guard);
    let until = std::time::Instant::now() + START_WITHIN;
    while !tree::has_child(pid)
        && matches!(guard.try_wait(), Ok(None))
        && std::time::Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The command that starts the guard of `command` (`lockstore` itself, [`COMMAND`]): its line
/// from `lockstore` (`line`, see [`stop_line`]), the grace between its `SIGTERM` and `SIGKILL`,
/// and the lease the command runs under (`EXPIRING_LOCK_KEY`, `EXPIRING_LOCK_FENCE`,
/// `EXPIRING_LOCK_OWNER` in its environment). `run` and `elect` start it alike.
///
/// # Errors
/// `lockstore` cannot find itself.
pub fn command(
    line: &std::os::fd::OwnedFd,
    grace: Duration,
    lease: (&str, u64, &str),
    command: &[String],
) -> Result<Command, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find lockstore itself: {e}"))?;
    let (key, fence, owner) = lease;
    let mut guard = Command::new(me);
    guard
        .arg(COMMAND)
        .arg(std::process::id().to_string())
        .arg(std::os::fd::AsRawFd::as_raw_fd(line).to_string())
        .arg(grace.as_millis().to_string())
        .arg("--")
        .args(command)
        .env("EXPIRING_LOCK_KEY", key)
        .env("EXPIRING_LOCK_FENCE", fence.to_string())
        .env("EXPIRING_LOCK_OWNER", owner);
    Ok(guard)
}

/// The guard's exit status when it killed the tree (`lockstore` is gone: nobody reads it).
const KILLED: u8 = 137;
/// The guard's exit status when the command is not found (as a shell's, `env(1)`'s).
const NOT_FOUND: u8 = 127;
/// The guard's exit status when the command was found but cannot run (not executable, no
/// permission), as a shell's.
const CANNOT_RUN: u8 = 126;

/// Runs the guard (see the module's documentation).
pub fn run(args: &[String]) -> ExitCode {
    let number = |i: usize| args.get(i).and_then(|p| p.parse::<u64>().ok());
    let (Some(parent), Some(line), Some(grace), Some(command)) = (
        args.first().and_then(|p| p.parse::<i32>().ok()),
        number(1).and_then(|fd| i32::try_from(fd).ok()),
        number(2).map(Duration::from_millis),
        args.iter()
            .position(|a| a == "--")
            .map(|i| &args[i + 1..])
            .filter(|c| !c.is_empty()),
    ) else {
        say!("lockstore: {COMMAND} is lockstore run's own");
        return ExitCode::from(2);
    };
    let Ok(mut line) = stop_line::Listener::adopt(line) else {
        say!("lockstore: {COMMAND} is lockstore run's own");
        return ExitCode::from(2);
    };
    // Signals first: the parent-death signal must find its handler.
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGUSR1, SIGTERM, SIGINT, SIGHUP])
    else {
        say!("lockstore: the guard cannot handle signals");
        return ExitCode::from(2);
    };
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::set_parent_process_death_signal(Some(Signal::USR1));
    }
    tree::adopt_orphans();
    let parent_alive = || rustix::process::getppid() == Pid::from_raw(parent);
    if !parent_alive() {
        // `lockstore` died before the guard could watch it: nothing is started.
        return ExitCode::from(KILLED);
    }
    let child = match Command::new(&command[0]).args(&command[1..]).spawn() {
        Ok(child) => child,
        Err(e) => {
            say!("lockstore: cannot start {}: {e}", command[0]);
            return ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_RUN
            });
        }
    };
    let pid = Pid::from_child(&child);
    // When the guard itself began stopping the command (the lease's end came on its clock).
    let mut stopping: Option<std::time::Instant> = None;
    loop {
        // Orphans adopted by the guard are reaped with the command itself.
        // (Any child: those of other sessions and process groups too.)
        while let Ok(Some((ended, status))) =
            rustix::process::wait(rustix::process::WaitOptions::NOHANG)
        {
            if ended == pid {
                return ExitCode::from(exit_code(status));
            }
        }
        // The signals caught are only noted (they must not end the guard).
        let _ = signals.pending().count();
        if !parent_alive() {
            // Until none is left (a process may fork while the first ones are killed), for a
            // second at most.
            for _ in 0..1000 {
                if tree::signal_all(Some(pid), None, Signal::KILL) == 0 {
                    break;
                }
                tree::reap_ended();
                std::thread::sleep(Duration::from_millis(1));
            }
            return ExitCode::from(KILLED);
        }
        match stopping {
            None if line.due() => {
                say!(
                    "lockstore: the lease can end within its margin and no extension was heard of (lockstore paused, or its store silent): stopping the command"
                );
                let first = if grace.is_zero() {
                    Signal::KILL
                } else {
                    Signal::TERM
                };
                tree::signal_all(Some(pid), None, first);
                stopping = Some(std::time::Instant::now());
            }
            Some(since) if since.elapsed() >= grace => {
                tree::signal_all(Some(pid), None, Signal::KILL);
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The command's exit code, or 128 + the signal that killed it (as a shell reports it).
fn exit_code(status: rustix::process::WaitStatus) -> u8 {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        _ => 1,
    }
}
