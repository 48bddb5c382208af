//! Saving the table to a file and loading it back.
//!
//! File format: `LOCKHOST` (8 bytes), format version (u16 LE, 1), the wall-clock time of the
//! save in ms since the Unix epoch (u64 LE), then the table's own snapshot bytes (versioned and
//! checksummed by the core). Writes go to a temporary file that is synced and renamed over the
//! old one, so a crash leaves either the old or the new file, never a torn one.

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{ComponentTable, Error};

const MAGIC: &[u8; 8] = b"LOCKHOST";
const VERSION: u16 = 1;

/// A loaded file.
pub(crate) struct Saved {
    pub(crate) wall_ms: u64,
    pub(crate) snapshot: Vec<u8>,
}

impl Saved {
    /// How long ago (wall clock) the file was written; 0 if the wall clock went backwards.
    pub(crate) fn downtime_ms(&self) -> u64 {
        wall_ms().saturating_sub(self.wall_ms)
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Writes the table at `now` to `path` atomically.
pub(crate) fn save(path: &Path, table: &mut ComponentTable, now: u64) -> Result<(), Error> {
    let snapshot = table.snapshot(now)?;
    let mut bytes = Vec::with_capacity(18 + snapshot.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&wall_ms().to_le_bytes());
    bytes.extend_from_slice(&snapshot);
    let fail =
        |what: &str, e: std::io::Error| Error::Persist(format!("{what} {}: {e}", path.display()));
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(|e| fail("cannot create", e))?;
    file.write_all(&bytes)
        .map_err(|e| fail("cannot write", e))?;
    file.sync_all().map_err(|e| fail("cannot sync", e))?;
    std::fs::rename(&tmp, path).map_err(|e| fail("cannot replace", e))
}

/// Reads `path`; `None` if it does not exist.
pub(crate) fn load(path: &Path) -> Result<Option<Saved>, Error> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::Persist(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let corrupt = |why: &str| {
        Error::Persist(format!(
            "{} is not a usable lock-table file: {why}",
            path.display()
        ))
    };
    if bytes.len() < 18 || &bytes[..8] != MAGIC {
        return Err(corrupt("it does not start with the LOCKHOST header"));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(corrupt(&format!(
            "file format version {version}, this build reads {VERSION}"
        )));
    }
    let mut wall = [0u8; 8];
    wall.copy_from_slice(&bytes[10..18]);
    Ok(Some(Saved {
        wall_ms: u64::from_le_bytes(wall),
        snapshot: bytes[18..].to_vec(),
    }))
}
