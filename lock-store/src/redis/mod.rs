//! The Redis store. A namespace's keys share one hash tag (`{el:<namespace>}`), so a namespace
//! lives on one node of a cluster: one authority per namespace. Each record is a hash
//! (`v` version, `r` record bytes, `f` fences); the counter is a string. Reads are one pipeline
//! (`TIME` + `HMGET`); the compare-and-set is one Lua script that compares the version, allocates
//! tokens from the counter and writes, or returns the current record and the server's time. The
//! script has no lock rules. A writer that hands a key to a waiter publishes a notice
//! (`key` newline `owner`) on `{el:<ns>}:handoff`; waiting clients subscribe to it on a connection
//! of their own.
//!
//! Redis may lose its data (many run it without persistence), or be replaced by a replica that
//! missed the last writes. Every token is at least the server's time in microseconds as well as
//! above the last one, so a server that lost the tail of the counter still issues no token twice,
//! as long as the namespace issued fewer than one token per microsecond on average and the new
//! server's clock is not behind the old one's by more than the failover took (see
//! `docs/stores.md`).
//!
//! A `redis+sentinel://` URL names Sentinels and a primary: each new connection asks them which
//! server is the primary now (`target`), so that the store follows a failover.
//!
//! Two clients send the same commands ([`space`]): [`RedisStore`], blocking, on one connection,
//! and (feature `tokio`) [`AsyncRedisStore`], on one multiplexed connection shared by every task.

#[cfg(feature = "tokio")]
mod aio;
mod blocking;
mod replicas;
mod space;
mod target;

#[cfg(feature = "tokio")]
pub use aio::AsyncRedisStore;
pub use blocking::RedisStore;
