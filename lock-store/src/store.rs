//! For store implementers and their tests: what every store implements (read a key's record
//! with the store's time, and compare-and-set it while allocating fencing tokens), the stores of
//! this crate, the decision loop that runs `lock-core` over a store ([`Engine`]), and a namespace
//! seen as one lock table with the caller's clock ([`StoreTable`]), which the shared conformance
//! vectors drive. No lock rule lives in a store.
//!
//! A service does not need this module: [`crate::Locks::open`] opens a store by URL.
//!
//! ```
//! use lock_store::store::{self, Store};
//!
//! // A store by URL with the default bound on each call, as `Locks::open` opens it.
//! let mut memory = store::open("memory:", "jobs", store::DEFAULT_BOUND)?;
//! assert_eq!(memory.keys()?, Vec::<String>::new());
//! # Ok::<(), lock_store::StoreError>(())
//! ```

use std::time::Duration;

use lock_core::{Fence, Instant};

#[cfg(feature = "component")]
pub use crate::decider::{Component, ComponentRecord};
pub use crate::decider::{DecideError, Decider, Decision, InspectReply, Native};
pub use crate::engine::Engine;
pub use crate::memory::MemoryStore;
#[cfg(feature = "mysql")]
pub use crate::mysql::MysqlStore;
pub use crate::noop::NoopStore;
#[cfg(feature = "postgres")]
pub use crate::postgres::PostgresStore;
#[cfg(feature = "redis")]
pub use crate::redis::RedisStore;
#[cfg(feature = "sqlite")]
pub use crate::sqlite::SqliteStore;
pub use crate::table::{StoreTable, TableFault};
pub use crate::url::{open, DEFAULT_BOUND};
pub use lock_protocol::decided::{Decided, TimeSource, MAX_ATTEMPTS, TOMBSTONE_LIFE};
pub use lock_protocol::records::{
    check_namespace, Read, Stored, Write, Written, MAX_FENCE, TOMBSTONE,
};
pub use lock_protocol::StoreError;

/// A store of key records for one namespace.
///
/// Implementations translate and store; they never decide an outcome. Every call has a time
/// bound; a call that fails after the request may have reached the server is reported as
/// [`StoreError::Lost`], and the caller resolves it by reading again.
pub trait Store: Send {
    /// What this store is, for messages: `redis://127.0.0.1:6379 namespace "jobs"`.
    fn describe(&self) -> String;

    /// The key's record and the store's time. Creates nothing: a namespace that was never
    /// installed answers [`StoreError::NoNamespace`] (here, and from [`write`](Self::write),
    /// [`keys`](Self::keys) and [`last_fence`](Self::last_fence)).
    ///
    /// # Errors
    /// A [`StoreError`] naming what failed.
    fn read(&mut self, key: &str) -> Result<Read, StoreError>;

    /// One compare-and-set (see [`Write`]).
    ///
    /// # Errors
    /// A [`StoreError`]; after [`StoreError::Lost`] the write may or may not have happened.
    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError>;

    /// Every key of the namespace that has a record, in byte order; not tombstones
    /// ([`TOMBSTONE`], at most 8 bytes: every record is longer).
    ///
    /// # Errors
    /// A [`StoreError`].
    fn keys(&mut self) -> Result<Vec<String>, StoreError>;

    /// The last fencing token the namespace's counter issued (0 if none).
    ///
    /// # Errors
    /// A [`StoreError`].
    fn last_fence(&mut self) -> Result<Fence, StoreError>;

    /// Creates the namespace (tables, sequence, procedures, format marker: whatever this store
    /// keeps), or checks that what is there is ours and of this build's format. Idempotent, and
    /// safe for replicas to run together. It needs the rights to create (see `docs/stores.md`);
    /// nothing else does. The engine calls it when a write finds no namespace
    /// ([`StoreError::NoNamespace`]); operators may run it ahead (`lockstore install`), so that
    /// the services' own role needs no such rights.
    ///
    /// # Errors
    /// A [`StoreError`]: [`StoreError::Schema`] for a foreign object or missing rights.
    fn install(&mut self) -> Result<(), StoreError>;

    /// Removes every record and the fence counter of this namespace (tests, and operators
    /// retiring a namespace). Never touches anything outside the namespace.
    ///
    /// # Errors
    /// A [`StoreError`].
    fn clear(&mut self) -> Result<(), StoreError>;

    /// Removes the namespace entirely: its records, counter, tables, scripts and format marker.
    /// The store is unusable afterwards (open it again to reinstall).
    ///
    /// # Errors
    /// A [`StoreError`].
    fn uninstall(&mut self) -> Result<(), StoreError>;

    /// Tells the waiters of `key` that it was handed to `owner` (called after a write that
    /// granted it to a waiter). Best effort: a notice that is lost only delays the waiter until
    /// it looks by itself. Stores that cannot notify do nothing (the default).
    ///
    /// # Errors
    /// A [`StoreError`]; callers ignore it.
    fn announce(&mut self, key: &str, owner: &str) -> Result<(), StoreError> {
        let _ = (key, owner);
        Ok(())
    }

    /// How long one call may wait for the server (`None`: a local store that never waits on a
    /// network). The engine holds a whole request (its reads, writes and the re-read of an
    /// ambiguous write together) to this bound, with [`limit_calls`](Self::limit_calls).
    fn bound(&self) -> Option<std::time::Duration> {
        None
    }

    /// Limits each of the calls that follow to `left` (less than [`bound`](Self::bound): what
    /// remains of a request's bound after its first calls); `None` gives them the whole bound
    /// again. Stores without a bound ignore it (the default).
    fn limit_calls(&mut self, left: Option<std::time::Duration>) {
        let _ = left;
    }

    /// How to open a connection of its own on which a waiter hears
    /// [`announce`](Self::announce)s of this namespace; `None` if the store cannot notify (its
    /// waiters look by themselves). Called while the store is in use by nobody else (the other
    /// calls of its `Locks` wait), so it only gathers what the connection needs: the returned
    /// function connects, without the store.
    fn watcher(&self) -> Option<OpenWatcher> {
        None
    }
}

/// Opens a [`Watcher`] (see [`Store::watcher`]). Its error: the waiter looks by itself.
pub type OpenWatcher = Box<dyn FnOnce() -> Result<Box<dyn Watcher>, StoreError> + Send>;

/// Hears the hand-offs of one namespace (Redis pub/sub, PostgreSQL `LISTEN`).
pub trait Watcher: Send {
    /// Waits at most `timeout` for the next notice of the namespace: its payload (see
    /// [`notice`]), or `None` when the time is up.
    ///
    /// # Errors
    /// A [`StoreError`] if the connection failed; the watcher is then useless.
    fn next(&mut self, timeout: Duration) -> Result<Option<String>, StoreError>;

    /// Waits at most `timeout` for a notice that `key` was handed to `owner`: `true` if one
    /// came (notices for other keys and owners are skipped), `false` when the time is up.
    ///
    /// # Errors
    /// A [`StoreError`] if the connection failed; the watcher is then useless.
    fn wait(&mut self, key: &str, owner: &str, timeout: Duration) -> Result<bool, StoreError> {
        let want = notice(key, owner);
        let end = std::time::Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            match self.next(left)? {
                Some(payload) if payload == want => return Ok(true),
                Some(_) => {}
                None => return Ok(false),
            }
        }
    }
}

/// The payload of a hand-off notice: the key and the owner it was handed to, apart by a newline
/// (neither may hold a control character).
#[must_use]
pub fn notice(key: &str, owner: &str) -> String {
    format!("{key}\n{owner}")
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        (**self).read(key)
    }
    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        (**self).write(key, write)
    }
    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        (**self).keys()
    }
    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        (**self).last_fence()
    }
    fn install(&mut self) -> Result<(), StoreError> {
        (**self).install()
    }
    fn clear(&mut self) -> Result<(), StoreError> {
        (**self).clear()
    }
    fn uninstall(&mut self) -> Result<(), StoreError> {
        (**self).uninstall()
    }
    fn announce(&mut self, key: &str, owner: &str) -> Result<(), StoreError> {
        (**self).announce(key, owner)
    }
    fn watcher(&self) -> Option<OpenWatcher> {
        (**self).watcher()
    }
    fn bound(&self) -> Option<std::time::Duration> {
        (**self).bound()
    }
    fn limit_calls(&mut self, left: Option<std::time::Duration>) {
        (**self).limit_calls(left);
    }
}

/// The error of a call that had no answer within `bound`: [`StoreError::Lost`] (a write's
/// outcome is unknown), worded the same on every store.
#[must_use]
pub(crate) fn no_answer(store: String, bound: std::time::Duration) -> StoreError {
    StoreError::Lost {
        store,
        reason: format!("no answer within {bound:?}"),
    }
}

/// A random non-zero version number (the OS-seeded hasher keys of the standard library).
#[must_use]
pub fn new_version() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    h.finish().max(1)
}

/// Milliseconds since the Unix epoch on this machine (the time of the SQLite and memory stores,
/// whose clients all share this machine's clock).
#[must_use]
pub fn system_now() -> Instant {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Instant(ms)
}

/// Fencing tokens as the text some stores keep next to a record: decimals joined by commas.
#[must_use]
#[allow(dead_code)] // the SQL stores use it, and a build may have none
pub(crate) fn fences_to_text(fences: &[Fence]) -> String {
    let parts: Vec<String> = fences.iter().map(|f| f.0.to_string()).collect();
    parts.join(",")
}

/// Reads [`fences_to_text`]'s text; `None` if it is not that (a damaged or foreign value).
#[must_use]
#[allow(dead_code)] // the SQL stores use it, and a build may have none
pub(crate) fn fences_from_text(text: &str) -> Option<Vec<Fence>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',')
        .map(|p| {
            p.parse::<u64>()
                .ok()
                .filter(|&f| f > 0 && f <= MAX_FENCE)
                .map(Fence)
        })
        .collect()
}

/// A stored version as the signed 64-bit integer SQL stores keep (the same bits).
#[must_use]
#[allow(dead_code)] // the SQL stores use it, and a build may have none
pub(crate) fn version_to_sql(version: u64) -> i64 {
    i64::from_ne_bytes(version.to_ne_bytes())
}

/// The version back from [`version_to_sql`].
#[must_use]
#[allow(dead_code)] // the SQL stores use it, and a build may have none
pub(crate) fn version_from_sql(version: i64) -> u64 {
    u64::from_ne_bytes(version.to_ne_bytes())
}

/// Clamps an instant to the signed milliseconds SQL and Lua keep (far beyond any real clock).
#[must_use]
#[allow(dead_code)] // the SQL stores use it, and a build may have none
pub(crate) fn instant_to_sql(at: Instant) -> i64 {
    i64::try_from(at.0).unwrap_or(i64::MAX)
}
