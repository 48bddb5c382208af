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
//! # What is here
//! - At the root, the API for services: [`Locks`] (opened by URL, or with [`Options`] for the
//!   call bound and the limits), the [`Lease`] it hands out, and one [`Error`] for every call,
//!   whose variants carry [`LockError`] (`held`, `not-owner`...) and [`StoreError`] (unreachable,
//!   no namespace...): match them without depending on `lock-core`.
//! - [`store`]: for store implementers and their tests: the [`store::Store`] trait, the stores of
//!   this crate, the decision loop ([`store::Engine`]) and a namespace seen as one lock table with
//!   the caller's clock ([`store::StoreTable`], for the shared conformance vectors).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "tokio")]
pub mod aio;
#[cfg(feature = "tokio")]
mod async_store;
#[cfg(all(feature = "tokio", any(feature = "redis", feature = "postgres")))]
mod bounded;
mod client;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod collect;
mod decider;
pub mod election;
mod engine;
mod give_up;
mod held;
mod lease;
mod listen;
mod local;
mod locks;
mod memory;
#[cfg(feature = "mysql")]
mod mysql;
mod noop;
mod options;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(any(
    feature = "redis",
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite"
))]
// Each store uses part of it: a build with some of the stores leaves the rest unused.
#[cfg_attr(
    not(all(
        feature = "redis",
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite"
    )),
    allow(dead_code)
)]
mod steps;
pub mod store;
mod table;
#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
mod tls;
mod url;

pub use give_up::GiveUp;
pub use held::LostLease;
pub use lease::Lease;
pub use lock_core::{
    AcquireOptions, Fence, HolderInfo, Instant, KeyInfo, LeaseEnd, Limits, LockError, Mode,
    QueryPage, WaiterInfo, QUERY_MAX,
};
/// The protocol for drivers in other runtimes (the npm package's engine), sans IO: the
/// `lock-protocol` crate's, re-exported.
pub use lock_protocol::driver;
pub use lock_protocol::keep_alive;
pub use locks::{Error, Locks, WAIT_ALIVE};
pub use options::Options;
pub use store::StoreError;

/// The example of `docs/lock-store.md`, compiled as a doctest so that it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../docs/lock-store.md")]
struct LockStoreDocDoctests;
