//! The files a persisting host keeps, and how they are written.
//!
//! **The table file** (`path`): `LOCKHOST` (8 bytes), format version (u16 LE, 2), the wall-clock
//! time of the save in ms since the Unix epoch (u64 LE), the table's snapshot bytes (versioned
//! and checksummed by the core), then a CRC-32 of everything before it (u32 LE): a flipped bit
//! anywhere, the wall-clock field included, is an error, never a silently different table.
//!
//! **The reservation file** (`path` + `.reserve`): `LOCKRSRV`, version (u16 LE, 1), the fence
//! ceiling and the clock ceiling (u64 LE each), CRC-32 (u32 LE). The host never hands out a
//! fencing token above the fence ceiling, nor uses a clock reading above the clock ceiling,
//! before that ceiling is on disk; a restarted host starts above both. This is how tokens
//! survive a `kill -9` between two saves of the table, at the cost of one small synced write per
//! block of tokens or of time (see [`FENCE_BLOCK`], [`CLOCK_BLOCK`]).
//!
//! Every write goes to a temporary file with a name of its own in the same directory, is synced,
//! renamed over the old file, and the directory is synced: a crash leaves the old or the new
//! file, never a torn one, and two hosts persisting next to each other never share a temporary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use lock_core::{crc32, Fence, Instant};

use crate::Error;

/// What a host found in its persisted files at start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Whether a table file was there (otherwise the table started empty).
    pub loaded: bool,
    /// Live leases restored.
    pub leases: usize,
    /// Waiters dropped: they belonged to the previous process, which cannot collect a hand-off.
    pub waiters_dropped: u32,
    /// Every fence this host issues is above this (the previous run's reservation).
    pub fence_floor: Fence,
    /// The clock reading the host resumed at.
    pub clock: Instant,
}

const MAGIC: &[u8; 8] = b"LOCKHOST";
const VERSION: u16 = 2;
/// Magic, version, wall clock.
const HEADER: usize = 18;
const RESERVE_MAGIC: &[u8; 8] = b"LOCKRSRV";
const RESERVE_VERSION: u16 = 1;
const RESERVE_LEN: usize = 8 + 2 + 8 + 8 + 4;

/// Tokens reserved per synced write of the reservation file. A crash skips at most this many.
pub const FENCE_BLOCK: u64 = 1 << 16;
/// Clock time reserved per synced write (ms): a restarted host's clock may start up to this far
/// ahead of the last reading it used, never behind it.
pub const CLOCK_BLOCK: lock_core::Duration = lock_core::Duration(2_000);

/// No table file can have been written before this instant (2020-01-01, ms since the epoch).
const EARLIEST_SAVE_MS: u64 = 1_577_836_800_000;
/// A file saved more than this far in the future (ms) means the wall clock is wrong, not that
/// time passed: refused instead of guessing the downtime.
const FUTURE_TOLERANCE_MS: u64 = 24 * 3_600_000;

/// A loaded table file.
pub(crate) struct Saved {
    /// The snapshot bytes.
    pub(crate) snapshot: Vec<u8>,
    /// How long ago (wall clock) it was written; 0 if at most a day in the future.
    pub(crate) downtime_ms: u64,
}

/// The durable ceilings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub(crate) fence_ceiling: Fence,
    pub(crate) clock_ceiling: Instant,
}

/// The reservation file that goes with the table file `path`.
pub(crate) fn reservation_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".reserve");
    PathBuf::from(name)
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The table file's bytes for `snapshot`, written at wall-clock `wall`.
pub(crate) fn encode_table_file(snapshot: &[u8], wall: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER + snapshot.len() + 4);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&wall.to_le_bytes());
    bytes.extend_from_slice(snapshot);
    let crc = crc32(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// Writes `snapshot` to `path` atomically.
pub(crate) fn save(path: &Path, snapshot: &[u8]) -> Result<(), Error> {
    write_atomic(path, &encode_table_file(snapshot, wall_ms()))
}

/// Reads the table file `path`; `None` if it does not exist.
pub(crate) fn load(path: &Path) -> Result<Option<Saved>, Error> {
    let Some(bytes) = read_if_exists(path)? else {
        return Ok(None);
    };
    decode_table_file(path, &bytes, wall_ms()).map(Some)
}

/// Checks and splits a table file read at wall-clock `now_wall`.
pub(crate) fn decode_table_file(path: &Path, bytes: &[u8], now_wall: u64) -> Result<Saved, Error> {
    let corrupt = |why: &str| {
        Error::Persist(format!(
            "{} is not a usable lock-table file: {why}",
            path.display()
        ))
    };
    if bytes.len() < 8 || &bytes[..8] != MAGIC {
        return Err(corrupt("it does not start with the LOCKHOST header"));
    }
    if bytes.len() < HEADER + 4 {
        return Err(corrupt("it is truncated"));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(corrupt(&format!(
            "file format version {version}, this build reads {VERSION}"
        )));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32(body).to_le_bytes() != crc {
        return Err(corrupt(
            "its checksum does not match (truncated or damaged)",
        ));
    }
    let wall = u64::from_le_bytes(body[10..18].try_into().unwrap_or_default());
    if wall < EARLIEST_SAVE_MS {
        return Err(corrupt(&format!(
            "it claims to be saved at {wall} ms after 1970, before this format existed"
        )));
    }
    if wall > now_wall.saturating_add(FUTURE_TOLERANCE_MS) {
        return Err(corrupt(&format!(
            "it was saved {} s in the future of this machine's wall clock: fix the clock \
             rather than guess how long the host was down",
            (wall - now_wall) / 1000
        )));
    }
    Ok(Saved {
        snapshot: body[HEADER..].to_vec(),
        downtime_ms: now_wall.saturating_sub(wall),
    })
}

/// Writes the reservation file for the table file `path`.
pub(crate) fn save_reservation(path: &Path, r: Reservation) -> Result<(), Error> {
    let mut bytes = Vec::with_capacity(RESERVE_LEN);
    bytes.extend_from_slice(RESERVE_MAGIC);
    bytes.extend_from_slice(&RESERVE_VERSION.to_le_bytes());
    bytes.extend_from_slice(&r.fence_ceiling.0.to_le_bytes());
    bytes.extend_from_slice(&r.clock_ceiling.0.to_le_bytes());
    let crc = crc32(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    write_atomic(&reservation_path(path), &bytes)
}

/// Reads the reservation file for the table file `path`; `None` if it does not exist.
pub(crate) fn load_reservation(path: &Path) -> Result<Option<Reservation>, Error> {
    let file = reservation_path(path);
    let Some(bytes) = read_if_exists(&file)? else {
        return Ok(None);
    };
    decode_reservation(&file, &bytes).map(Some)
}

/// Checks and reads a reservation file's bytes.
pub(crate) fn decode_reservation(file: &Path, bytes: &[u8]) -> Result<Reservation, Error> {
    let corrupt = |why: &str| {
        Error::Persist(format!(
            "{} is not a usable token reservation: {why}",
            file.display()
        ))
    };
    if bytes.len() != RESERVE_LEN || &bytes[..8] != RESERVE_MAGIC {
        return Err(corrupt("wrong length or header"));
    }
    if u16::from_le_bytes([bytes[8], bytes[9]]) != RESERVE_VERSION {
        return Err(corrupt("unknown version"));
    }
    let (body, crc) = bytes.split_at(RESERVE_LEN - 4);
    if crc32(body).to_le_bytes() != crc {
        return Err(corrupt("its checksum does not match"));
    }
    let word = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().unwrap_or_default());
    Ok(Reservation {
        fence_ceiling: Fence(word(10)),
        clock_ceiling: Instant(word(18)),
    })
}

fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Persist(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// Replaces `path` by `bytes` atomically and durably (see the module docs).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let fail =
        |what: &str, e: std::io::Error| Error::Persist(format!("{what} {}: {e}", path.display()));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "lock-table".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file =
            std::fs::File::create(&tmp).map_err(|e| fail("cannot create a file next to", e))?;
        file.write_all(bytes).map_err(|e| fail("cannot write", e))?;
        file.sync_all().map_err(|e| fail("cannot sync", e))?;
        std::fs::rename(&tmp, path).map_err(|e| fail("cannot replace", e))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    sync_dir(&dir).map_err(|e| fail("cannot sync the directory of", e))
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    // Directories cannot be opened for syncing here; the rename is as durable as the platform makes it.
    Ok(())
}
