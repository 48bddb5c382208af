//! A cache of compiled components on disk, so a host starts without compiling: wasmtime
//! serializes the compiled code, and a later process loads it in milliseconds instead of
//! compiling for hundreds (release) or thousands (debug) of them.
//!
//! An entry is named after a key that covers everything the compiled code depends on: the
//! engine's compilation settings and target (wasmtime's `precompile_compatibility_hash`, which
//! includes wasmtime's version), and the component's bytes. A different engine, wasmtime or
//! component never reads another's entry. The entry is framed (magic, format version, length,
//! CRC-32 of the payload); a short, corrupt or mismatched entry is refused and replaced by a
//! fresh compilation, never used. Entries are written to a unique temporary file and renamed
//! into place, so concurrent processes never read half an entry.
//!
//! **Trust**: an entry is native code that the process will run. The frame's checksum catches
//! accidents (a torn write, a flipped bit), not an attacker who can write the directory: keep the
//! cache directory private to the user that runs the host (the default one is created `0700`),
//! or turn the cache off.

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::component::Component;
use wasmtime::Engine;

/// The environment variable that chooses the cache directory of
/// [`LockComponent::embedded`](super::LockComponent::embedded); `off` disables the cache.
pub const CACHE_DIR_ENV: &str = "EXPIRING_LOCK_CACHE_DIR";

const MAGIC: &[u8; 8] = b"LOCKCWSM";
const FORMAT: u32 = 1;
/// Magic, format, payload length, payload CRC-32.
const HEADER: usize = 8 + 4 + 8 + 4;

/// Where compiled components are kept, or no cache at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ComponentCache {
    /// Compile every time (nothing is read or written).
    Off,
    /// Keep compiled components in this directory (created if missing).
    Dir(PathBuf),
}

/// How a component was obtained, for start-up reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// No cache: compiled.
    Disabled,
    /// Loaded from a valid cache entry.
    Hit,
    /// No entry yet: compiled and stored.
    Miss,
    /// An entry was there but refused (truncated, corrupt, or from another wasmtime or engine
    /// configuration): compiled and replaced.
    Replaced,
}

impl fmt::Display for CacheOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CacheOutcome::Disabled => "cache off",
            CacheOutcome::Hit => "cache hit",
            CacheOutcome::Miss => "cache miss",
            CacheOutcome::Replaced => "cache entry replaced",
        })
    }
}

impl ComponentCache {
    /// The cache [`LockComponent::embedded`](super::LockComponent::embedded) uses: the directory
    /// in `EXPIRING_LOCK_CACHE_DIR` (`off` for none), else `$XDG_CACHE_HOME/expiring-lock`, else
    /// `$HOME/.cache/expiring-lock`, else none.
    #[must_use]
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    /// [`from_env`](Self::from_env) over any source of variables.
    fn from_vars(get: impl Fn(&str) -> Option<std::ffi::OsString>) -> Self {
        let var = |name: &str| get(name).filter(|v| !v.is_empty());
        if let Some(dir) = var(CACHE_DIR_ENV) {
            if dir == "off" {
                return ComponentCache::Off;
            }
            return ComponentCache::Dir(PathBuf::from(dir));
        }
        let base = var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| Path::new(&home).join(".cache")));
        base.map_or(ComponentCache::Off, |base| {
            ComponentCache::Dir(base.join("expiring-lock"))
        })
    }

    /// The entry file for `bytes` compiled by `engine` (`None` when the cache is off).
    #[must_use]
    pub fn entry(&self, engine: &Engine, bytes: &[u8]) -> Option<PathBuf> {
        let ComponentCache::Dir(dir) = self else {
            return None;
        };
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        let engine_key = h.finish();
        let mut h = DefaultHasher::new();
        bytes.hash(&mut h);
        let component_key = h.finish();
        let crc = lock_core::crc32(bytes);
        Some(dir.join(format!(
            "lock-{engine_key:016x}-{component_key:016x}-{crc:08x}.cwasm"
        )))
    }

    /// The compiled `bytes` for `engine`: from the cache if a valid entry is there, else
    /// compiled (and stored, best effort: a cache that cannot be written only costs time).
    ///
    /// # Errors
    /// wasmtime's error if the component does not compile.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(path) = self.entry(engine, bytes) else {
            return Ok((Component::new(engine, bytes)?, CacheOutcome::Disabled));
        };
        let existing = std::fs::read(&path).ok();
        if let Some(payload) = existing.as_deref().and_then(unframe) {
            // SAFETY: `Component::deserialize` runs the payload as native code. The payload is
            // an entry this cache wrote from `Component::serialize` (its frame's checksum
            // verified it is intact), named after this engine's settings and these component
            // bytes; wasmtime itself refuses an entry from another version or configuration.
            // A directory that others can write is outside this guarantee (see the module docs).
            if let Ok(component) = unsafe { Component::deserialize(engine, payload) } {
                return Ok((component, CacheOutcome::Hit));
            }
        }
        let component = Component::new(engine, bytes)?;
        let outcome = if existing.is_some() {
            CacheOutcome::Replaced
        } else {
            CacheOutcome::Miss
        };
        if let Ok(serialized) = component.serialize() {
            let _ = store(&path, &frame(&serialized));
        }
        Ok((component, outcome))
    }
}

/// The entry bytes for a serialized component.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&lock_core::crc32(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of an intact entry, `None` for anything else.
fn unframe(bytes: &[u8]) -> Option<&[u8]> {
    let header = bytes.get(..HEADER)?;
    let payload = &bytes[HEADER..];
    let word = |at: usize, n: usize| header.get(at..at + n);
    if word(0, 8)? != MAGIC || word(8, 4)? != FORMAT.to_le_bytes() {
        return None;
    }
    let len = u64::from_le_bytes(word(12, 8)?.try_into().ok()?);
    let crc = u32::from_le_bytes(word(20, 4)?.try_into().ok()?);
    (len == payload.len() as u64 && lock_core::crc32(payload) == crc).then_some(payload)
}

/// Writes an entry atomically: a unique temporary file in the directory, then a rename.
fn store(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static UNIQUE: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let temp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::File::create(&temp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&temp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_comes_from_the_environment() {
        let from = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect();
            ComponentCache::from_vars(|name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
            })
        };
        let dir = |p: &str| ComponentCache::Dir(PathBuf::from(p));
        assert_eq!(from(&[(CACHE_DIR_ENV, "/c"), ("HOME", "/h")]), dir("/c"));
        assert_eq!(
            from(&[(CACHE_DIR_ENV, "off"), ("HOME", "/h")]),
            ComponentCache::Off
        );
        assert_eq!(
            from(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]),
            dir("/x/expiring-lock")
        );
        assert_eq!(from(&[("HOME", "/h")]), dir("/h/.cache/expiring-lock"));
        assert_eq!(
            from(&[(CACHE_DIR_ENV, ""), ("HOME", "/h")]),
            dir("/h/.cache/expiring-lock")
        );
        assert_eq!(from(&[]), ComponentCache::Off);
    }

    #[test]
    fn a_frame_round_trips_and_any_damage_is_refused() {
        let payload = b"compiled code".to_vec();
        let framed = frame(&payload);
        assert_eq!(unframe(&framed), Some(&payload[..]));
        for cut in 0..framed.len() {
            assert_eq!(unframe(&framed[..cut]), None, "cut at {cut}");
        }
        for at in 0..framed.len() {
            let mut bad = framed.clone();
            bad[at] ^= 0x40;
            assert_eq!(unframe(&bad), None, "flipped byte {at}");
        }
        let mut longer = framed.clone();
        longer.push(0);
        assert_eq!(unframe(&longer), None);
    }
}
