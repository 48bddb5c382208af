//! The lock API for async code (feature `tokio`): [`Locks`] and [`Lease`], the same shape as
//! the blocking [`crate::Locks`] and [`crate::Lease`], every call awaited.
//!
//! # How it runs
//! The decision loop is the blocking face's, sans IO (`lock-protocol`'s `exchange.rs`: read or
//! reuse a record, decide in `lock-core`, compare-and-set, re-read an ambiguous result, retry a
//! conflict), and so is an acquire's waiting and giving up (`queue.rs`: ask, renew the place,
//! look, nap, give up). This module only
//! awaits what they ask for: store calls on an [`AsyncStore`], naps on tokio's timers, hand-off
//! notices from one listening connection per [`Locks`]. Nothing is decided here.
//!
//! Over Redis and PostgreSQL, the calls of every task go through one connection per `Locks`
//! (`AsyncRedisStore`, `AsyncPostgresStore`: native async clients, no thread per call, calls
//! pipelined). The other stores (SQLite, MariaDB/MySQL, memory) run through [`Pooled`]: the blocking clients of this crate on the runtime's blocking
//! threads, over up to [`POOL_SIZE`] connections per `Locks`, so that tasks never block an
//! executor thread and many calls are in flight at once. A store of your own implements
//! [`AsyncStore`] (or [`Store`](crate::store::Store), through [`Pooled`]).
//!
//! # Cancellation and loss
//! - Dropping an [`acquire`](Locks::acquire) future at any point leaves nothing behind: its
//!   task finishes the store call in flight, then cancels its wait or releases what it was
//!   handed (see [`Locks`]).
//! - [`Lease::lost`] completes when the lease is lost, before anyone else can be handed the
//!   key; [`Locks::with_lock`] cancels its work then and answers `expired`.
//! - Dropping a [`Lease`] releases it in a task.

mod batch;
pub mod election;
mod engine;
mod lease;
mod locks;
mod renewals;

pub use crate::async_store::{AsyncStore, OpenStore, Pooled, StoreFuture, POOL_SIZE};
#[cfg(feature = "postgres")]
pub use crate::postgres::AsyncPostgresStore;
#[cfg(feature = "redis")]
pub use crate::redis::AsyncRedisStore;
pub use lease::Lease;
pub use locks::Locks;
