//! Embeds the lock component (`lock-wasm`, WIT world `expiring:lock/lock`) with wasmtime and gives
//! plugin hosts what they expect from Redisson, etcd's Mutex or MySQL `GET_LOCK`:
//!
//! - [`LockHost`]: a `Send + Sync`, cheap-to-clone handle over one component instance, fed by a
//!   monotonic [`Clock`] (one place reads time; tests pass a [`ManualClock`]);
//! - `try_acquire`, blocking `acquire` with a wait timeout (granted by the table's FIFO
//!   hand-off), and `with_lock`;
//! - [`Lease`] guards: `fence`, `deadline`, `extend`, idempotent `release` (also on drop),
//!   opt-in `keep_alive`, and `on_lost` callbacks fired once when the table reports an expiry;
//! - one timer thread for the whole table, driven by the table's next wake-up;
//! - a sandbox: memory cap and a per-call time bound (epoch interruption); a trap returns [`HostError::Trap`] and poisons the
//!   table (every later call is refused with a clear error) instead of taking the host down;
//! - optional persistence: atomic, checksummed snapshot files loaded at start, and fencing
//!   tokens reserved durably ahead of use, so no token is issued twice across crashes.
//!
//! The lock semantics are decided by `lock-core` inside the component; this crate never decides
//! an outcome.

#![warn(missing_docs)]

mod builder;
pub mod clock;
pub mod component;
pub mod election;
mod error;
mod host;
mod inner;
mod lease;
mod lease_shared;
mod persist;
mod reserve;
mod timer;

pub use builder::LockHostBuilder;
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use component::{
    Batch, CacheOutcome, ComponentCache, ComponentRecords, ComponentTable, HostError,
    LockComponent, RecordStep, SandboxLimits, CACHE_DIR_ENV, LOCK_COMPONENT,
};
pub use error::Error;
pub use host::LockHost;
pub use lease::Lease;
pub use lease_shared::LostLease;
pub use lock_core::{AcquireOptions, Mode, QueryPage};
pub use persist::Recovery;
pub use persist::{CLOCK_BLOCK, FENCE_BLOCK};

/// The README's Rust examples (core, host, stores), compiled and run as doctests so they cannot
/// rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The examples of the plugin-host and release pages, compiled too (those of the core's and
/// lock-store's other pages are doctests of their own crates, which link no wasmtime).
#[cfg(doctest)]
#[doc = include_str!("../../docs/plugin-host.md")]
struct PluginHostDocDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/release.md")]
struct ReleaseDocDoctests;

/// The examples of the election page (a plugin host's, a store's, async), here because this
/// crate's tests link both.
#[cfg(doctest)]
#[doc = include_str!("../../docs/election.md")]
struct ElectionDocDoctests;
