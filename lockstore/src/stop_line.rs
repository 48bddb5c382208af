//! The line from `lockstore` to the guard of its command: when the guard must stop the command
//! by itself, on its own clock. `lockstore` tells it after each extension of the lease; if
//! `lockstore` stops telling (it is stopped by `SIGSTOP`, never scheduled, or hung), the guard
//! stops the command at the last instant it was told, as `timeout(1)` stops its child, and
//! `SIGKILL`s it after the grace: the command never outlives the lease by more than the grace
//! because its supervisor was paused.
//!
//! The line is a pipe: each message is 8 bytes, little-endian, an instant of `CLOCK_MONOTONIC`
//! (nanoseconds; one clock for both processes, which it never jumps) at which the guard sends
//! `SIGTERM` unless a later message moves it. Both ends are non-blocking: a guard that is not
//! reading never blocks `lockstore` (a full pipe drops the message; the guard's instant then
//! stays the earlier one, which is the safe side).

use std::io::{ErrorKind, Read, Write};
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::io::FdFlags;
use rustix::pipe::PipeFlags;

/// Now on `CLOCK_MONOTONIC`, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// `lockstore`'s end of the line.
pub struct Teller {
    line: std::fs::File,
    /// The instant last told.
    told: u64,
}

/// Opens a line: `lockstore`'s end, and the guard's (to pass to it by its number, then drop in
/// `lockstore` once the guard started).
///
/// # Errors
/// The pipe could not be made.
pub fn open() -> std::io::Result<(Teller, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // The guard inherits its end (and only it: the guard makes it close-on-exec again before
    // it starts the command).
    rustix::io::fcntl_setfd(&read, FdFlags::empty())?;
    Ok((
        Teller {
            line: std::fs::File::from(write),
            told: 0,
        },
        read,
    ))
}

impl Teller {
    /// The guard stops the command `left` from now (a lease's time left on this machine's
    /// clock). Sent when it moved by a millisecond or more.
    pub fn tell(&mut self, left: Duration) {
        let left = u64::try_from(left.as_nanos()).unwrap_or(u64::MAX);
        let at = monotonic_ns().saturating_add(left);
        if at.abs_diff(self.told) < 1_000_000 {
            return;
        }
        // A full pipe (a guard that does not read) drops it: the guard keeps the earlier one.
        if self.line.write_all(&at.to_le_bytes()).is_ok() {
            self.told = at;
        }
    }
}

/// The guard's end of the line.
pub struct Listener {
    line: std::fs::File,
    /// When to stop the command (`CLOCK_MONOTONIC` ns); `u64::MAX` before the first message.
    stop_at: u64,
    /// Bytes of a message split across reads.
    partial: Vec<u8>,
}

impl Listener {
    /// The guard's end, inherited as file descriptor `fd` (see [`open`]).
    ///
    /// # Errors
    /// `fd` is not an open descriptor of this process's.
    pub fn adopt(fd: i32) -> std::io::Result<Self> {
        // Checked before it is owned: a descriptor that is not open is refused.
        if std::fs::metadata(format!("/proc/self/fd/{fd}")).is_err() && cfg!(target_os = "linux") {
            return Err(std::io::Error::from(ErrorKind::NotFound));
        }
        // SAFETY: `lockstore` passed this descriptor to this process (the guard) for this use
        // alone, and nothing else in the guard owns or closes it.
        let owned = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        // The command must not inherit it.
        rustix::io::fcntl_setfd(&owned, FdFlags::CLOEXEC)?;
        Ok(Listener {
            line: std::fs::File::from(owned),
            stop_at: u64::MAX,
            partial: Vec::new(),
        })
    }

    /// Reads what `lockstore` told since the last call; answers whether the stop is due now.
    pub fn due(&mut self) -> bool {
        let mut buf = [0u8; 512];
        loop {
            match self.line.read(&mut buf) {
                Ok(0) => break, // `lockstore` closed it (it exited): its own end applies.
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break, // nothing more now
            }
        }
        let whole = self.partial.len() / 8 * 8;
        if let Some(last) = self.partial[..whole].chunks_exact(8).last() {
            self.stop_at = u64::from_le_bytes(last.try_into().unwrap_or([0xff; 8]));
        }
        self.partial.drain(..whole);
        monotonic_ns() >= self.stop_at
    }
}
