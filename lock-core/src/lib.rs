//! A `no_std`, sans-IO state machine for **expiring locks**: keyed, owner-checked, fenced leases
//! with FIFO waiting, driven entirely by the caller's clock.
//!
//! A lease has an owner and a deadline. Only its owner may release or extend it; if the owner
//! forgets or dies, the lease ends by itself when its TTL runs out, and the next waiter in line is
//! handed the lock. Every grant carries a **fencing token** that is strictly greater than every
//! token issued before, so a protected resource can refuse writes from a holder that was paused
//! past its deadline.
//!
//! # Sans-IO
//! This crate never reads a clock, sleeps, spawns or sets a timer. Time comes in as `now`, a
//! monotonic count of milliseconds supplied by the host, with every call. Outputs are returned
//! values and polled [`Event`]s, and [`LockTable::next_wakeup`] tells the host when to call
//! [`LockTable::handle_timeout`] next: one timer for the whole table. The same calls with the same
//! `now` values give the same results on every platform.
//!
//! # Layers
//! - [`KeyState`]: one key's lease and wait queue. A pure transition function with no knowledge of
//!   other keys, usable on records kept in an external store.
//! - [`KeyRecord`]: one key as a shared store keeps it (its state, clock and expired leases,
//!   encoded as checksummed bytes), with provisional fences the store settles when it writes.
//! - [`LockTable`]: many keys, a hash index, an indexed min-heap of deadlines (expiry costs
//!   O(expired · log n)), a fence counter, an event queue, limits, counters and snapshots.
//!
//! # Run loop
//! ```
//! use lock_core::{AcquireOutcome, Duration, EventKind, Fence, Instant, LockTable};
//!
//! let mut table = LockTable::default();
//! let mut now = Instant(0);
//! assert!(matches!(table.try_acquire("job", "a", Duration(100), now)?, AcquireOutcome::Acquired(_)));
//! // b waits up to 500 ms behind a.
//! assert_eq!(table.acquire("job", "b", Duration(100), Instant(500), now)?, AcquireOutcome::Queued { position: 1 });
//!
//! // The host sleeps until the next wake-up, then handles it and drains the events.
//! now = table.next_wakeup().unwrap();
//! table.handle_timeout(now);
//! let kinds: Vec<_> = table.drain_events().map(|e| (e.at, e.kind)).collect();
//! assert!(matches!(&kinds[0], (Instant(100), EventKind::Expired { owner, fence: Fence(1), .. }) if owner == "a"));
//! assert!(matches!(&kinds[1], (Instant(100), EventKind::Granted { owner, fence: Fence(2), deadline: Instant(200), .. }) if owner == "b"));
//! # Ok::<(), lock_core::LockError>(())
//! ```
//!
//! The full semantics, as a state table with guarantees and non-guarantees, are in
//! `docs/semantics.md` of the repository.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

mod call;
pub mod election;
mod error;
mod event;
mod expired_log;
mod frame;
mod key_codec;
mod key_state;
mod limits;
mod names;
mod options;
mod outcome;
pub mod record;

mod crc32;

pub mod snapshot;
mod stored_name;
mod table;
mod time;
mod timer_heap;
pub mod wire;

pub use call::{Call, LockBackend, Reply, Request, Response};
pub use crc32::crc32;
pub use error::{ErrorCode, LeaseLoss, LockError, PayloadValue};
pub use event::{Event, EventKind, KeyEvent};
pub use key_state::{
    ExpiredLeases, FenceCounter, FenceSource, KeyState, Lease, Room, Transition, Waiter,
};
pub use limits::{Limits, MAX_NAME_BYTES};
pub use names::{Corruption, LimitName};
pub use options::{AcquireOptions, Mode};
pub use outcome::{
    AcquireOutcome, Grant, HolderInfo, KeyInfo, LeaseEnd, QueryPage, ReleaseOutcome, Stats,
    WaiterInfo, QUERY_MAX,
};
pub use record::{KeyRecord, Step};
pub use table::LockTable;
pub use time::{Duration, Fence, Instant};

/// The example of `docs/core.md`, compiled and run as a doctest so that it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../docs/core.md")]
struct CoreDocDoctests;
