//! The command's process tree: every process it started, however deep, and whatever became of
//! their parents. `lockstore run` and its guard are Linux child subreapers: a process whose
//! parent dies is re-parented to the nearest of them instead of to init, so the tree stays
//! below `lockstore` and can be found (in `/proc`) and stopped as a whole. Elsewhere the tree
//! is the direct child alone.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

/// Makes this process a child subreaper (Linux; elsewhere nothing happens).
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
}

/// Every process below this one (children, their children...), read from `/proc` (Linux;
/// elsewhere `direct`, the one child known).
pub fn descendants(direct: Option<Pid>) -> Vec<Pid> {
    #[cfg(target_os = "linux")]
    {
        let _ = direct;
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let parents = parents();
        let mut found = Vec::new();
        let mut frontier = vec![me];
        while let Some(parent) = frontier.pop() {
            for &(pid, ppid) in &parents {
                if ppid == parent && !found.contains(&pid) {
                    found.push(pid);
                    frontier.push(pid);
                }
            }
        }
        found.into_iter().filter_map(Pid::from_raw).collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        direct.into_iter().collect()
    }
}

/// (pid, parent pid) of every process, from `/proc/<pid>/stat` (whose second field, the
/// command's name in parentheses, may itself hold spaces and parentheses: the parent is the
/// second field after the last `)`).
#[cfg(target_os = "linux")]
fn parents() -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let after_name = &stat[stat.rfind(')')? + 1..];
            let ppid = after_name.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// Whether `pid` has a child (Linux; elsewhere, where the tree is the direct child alone,
/// always).
pub fn has_child(pid: Pid) -> bool {
    #[cfg(target_os = "linux")]
    {
        let raw = pid.as_raw_nonzero().get();
        parents().iter().any(|&(_, ppid)| ppid == raw)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        true
    }
}

/// Sends `signal` to every process of the tree (`except` left out); answers how many there
/// were.
pub fn signal_all(direct: Option<Pid>, except: Option<Pid>, signal: Signal) -> usize {
    let tree: Vec<Pid> = descendants(direct)
        .into_iter()
        .filter(|&pid| Some(pid) != except)
        .collect();
    for &pid in &tree {
        let _ = rustix::process::kill_process(pid, signal);
    }
    tree.len()
}

/// Reaps every child that has ended (orphans adopted as a subreaper end as our children), not
/// blocking. Call it only once `std`'s own `Child` handles were waited for: it would take their
/// status from them.
pub fn reap_ended() {
    use rustix::process::{wait, WaitOptions};
    while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {}
}

/// Stops what a command left running once its guard exited (processes this subreaper adopted):
/// `SIGTERM` now, unless a stop is already under way with its `SIGKILL` due at `kill_at`, then
/// `SIGKILL` from `grace` later (at once for a zero grace), until none is left.
pub fn stop_leftovers(grace: Duration, mut kill_at: Option<Instant>) {
    loop {
        reap_ended();
        if descendants(None).is_empty() {
            return;
        }
        if kill_at.is_none() {
            let first = if grace.is_zero() {
                Signal::KILL
            } else {
                Signal::TERM
            };
            signal_all(None, None, first);
            kill_at = Some(Instant::now() + grace);
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            signal_all(None, None, Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
