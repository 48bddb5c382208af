//! The Jepsen-style fault suite (docs/testing.md, "The fault suite"): seeded clients take
//! locks on real servers while a nemesis makes faults, then checkers read what happened.
#![allow(dead_code)] // each topology uses part of it

pub mod check;
pub mod client;
pub mod history;
pub mod recorder;
pub mod register;
pub mod replay;
pub mod run;

/// The run's seed: `LOCK_JEPSEN_SEED` if set (to replay a run), else one from the clock,
/// printed with every report.
pub fn seed() -> u64 {
    match std::env::var("LOCK_JEPSEN_SEED") {
        Ok(s) => s.parse().expect("LOCK_JEPSEN_SEED is a number"),
        Err(_) => history::now_us() % 1_000_000_007,
    }
}

/// Faults per run: `short` by default, ten times as many with `LOCK_JEPSEN_LONG=1`.
pub fn faults(short: usize) -> usize {
    if std::env::var("LOCK_JEPSEN_LONG").is_ok_and(|v| v == "1") {
        short * 10
    } else {
        short
    }
}
#[cfg(feature = "postgres")]
pub mod postgres_standby;
#[cfg(feature = "redis")]
pub mod redis_sentinel;
