//! Expiring locks shared by many processes and machines: the semantics of `lock-core`, decided
//! by `lock-core`, over a store every replica reaches (Redis, PostgreSQL, MariaDB/MySQL, a SQLite
//! file, or this process's memory), plus a no-op store that grants everything.
//!
//! # How it works
//! A store keeps one record per key (a [`lock_core::KeyRecord`]: lease, FIFO waiters, a per-key
//! clock, recently expired leases) as opaque bytes next to a version. A client reads the record
//! and the store's time, runs the transition in `lock-core`, and writes back with
//! compare-and-set; on a conflict it decides again from the record the conflict returned. The
//! store allocates fencing tokens from one counter per namespace in the same atomic step. The
//! store side has no lock rules: see `docs/stores.md` in the repository.
//!
//! # Quick start
//! ```
//! use std::time::Duration;
//! use lock_store::Locks;
//!
//! // Every replica opens the same store and namespace ("redis://127.0.0.1:6379",
//! // "postgres://app@db/app", "mysql://app@db/app", "sqlite:///var/lib/app/locks.db").
//! let locks = Locks::open("memory:", "jobs")?;
//! let lease = locks.try_acquire("nightly-report", "replica-1", Duration::from_secs(30))?;
//! // Pass lease.fence() with every write to what the lock protects.
//! assert!(lease.fence().0 > 0);
//! assert!(locks.try_acquire("nightly-report", "replica-2", Duration::from_secs(30)).is_err());
//! lease.release()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layers
//! - [`Locks`] and [`Lease`]: the API for services, with the store's clock.
//! - [`Store`]: read, compare-and-set, list, clear; one implementation per store.
//! - [`Engine`]: the decision loop (cached records, retries, ambiguous results).
//! - [`StoreTable`]: a namespace seen as one lock table with the caller's clock (the vectors).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod clock;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod collect;
mod decider;
mod engine;
mod lease;
mod listen;
mod locks;
mod memory;
#[cfg(feature = "mysql")]
mod mysql;
mod noop;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod table;
pub mod url;

pub use clock::{StoreClock, MAX_DRIFT, READ_LIFE};
pub use decider::{AnyDecider, AnyRecord, DecideError, Decider, Decision, InspectReply, Native};
#[cfg(feature = "component")]
pub use decider::{Component, ComponentRecord};
pub use engine::{Decided, Engine, TimeSource, MAX_ATTEMPTS, TOMBSTONE_LIFE};
pub use lease::{Lease, LostLease};
pub use locks::{Error, Locks, WAIT_ALIVE};
pub use memory::MemoryStore;
#[cfg(feature = "mysql")]
pub use mysql::MysqlStore;
pub use noop::NoopStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "redis")]
pub use redis::RedisStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{
    check_namespace, fences_from_text, fences_to_text, instant_to_sql, new_version, no_answer,
    notice, system_now, version_from_sql, version_to_sql, OpenWatcher, Read, Store, StoreError,
    Stored, Watcher, Write, Written, MAX_FENCE, TOMBSTONE,
};
pub use table::{StoreTable, TableFault};
