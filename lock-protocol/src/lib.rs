//! The store client protocol of expiring locks, **sans IO**: what a client of a shared store
//! (Redis, PostgreSQL, MariaDB, SQLite, memory) must do around `lock-core`'s decisions, written
//! once, driven by every face (`lock-store`'s blocking and tokio faces, the npm package's store
//! client through its WebAssembly engine, the `lockstore` CLI), as quinn-proto sits under quinn.
//!
//! This crate never reads a clock, sleeps, spawns a thread or opens a socket (its `clippy.toml`
//! forbids them, and it depends on `lock-core` alone): local time comes in as a
//! [`LocalInstant`], the store's time in its answers, and every wait or IO is an output the
//! driver carries out, handing the answer back.
//!
//! # What is here
//! - **One call** ([`exchange`], driven through [`driver::Client`]): read (or reuse a remembered
//!   record), decide in `lock-core` (through a [`decider::Decider`]), compare-and-set, re-read
//!   an ambiguous result, pause and retry a conflict, bound the whole call; a call on a namespace
//!   that does not exist yet asks the driver to install it.
//! - **Waiting** ([`queue`], driven through [`driver::Waiting`]): ask, keep the place alive,
//!   look, nap, ride out a failing store, and **give up**: a transition with one end, where the
//!   attempt leaves the key neither queued nor held ([`queue`]'s documentation). [`departures`]
//!   keeps a new attempt of the same owner from asking before a give-up is over.
//! - **Holding** ([`keep_alive`]: the extension schedule and retry rule; [`holding`]: the
//!   ambiguous-release rule, what a release's or an extension's answer means, what a release
//!   answers after a loss; [`clock::local_end`]: when a holder stops believing in its lease).
//! - The records a store keeps ([`records`]) and the errors ([`Error`], [`StoreError`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
pub mod decided;
pub mod decider;
pub mod departures;
pub mod driver;
pub mod error;
pub mod exchange;
pub mod holding;
pub mod keep_alive;
pub mod kinds;
mod local;
pub mod queue;
pub mod records;

pub use error::{Error, StoreError};
pub use local::LocalInstant;
pub use queue::WAIT_ALIVE;
