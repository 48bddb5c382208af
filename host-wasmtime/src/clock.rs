//! The one place the host reads time, and the seam tests use to drive time by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A monotonic clock in milliseconds.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since some fixed start; never decreases.
    fn now_ms(&self) -> u64;

    /// The reading as the core's instant.
    fn now(&self) -> lock_core::Instant {
        lock_core::Instant(self.now_ms())
    }
}

/// The real clock: `std::time::Instant`, offset so that it can continue a restored table's clock.
#[derive(Debug)]
pub struct MonotonicClock {
    start: Instant,
    offset_ms: u64,
}

impl MonotonicClock {
    /// A clock that reads `offset_ms` now and counts up in real time.
    #[must_use]
    pub fn starting_at(offset_ms: u64) -> Self {
        MonotonicClock {
            start: Instant::now(),
            offset_ms,
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::starting_at(0)
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.offset_ms.saturating_add(elapsed)
    }
}

/// A clock moved by hand (tests, simulations). Clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `ms`.
    #[must_use]
    pub fn at(ms: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(ms)))
    }
    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    /// Sets the clock (it may only move forward; an earlier value is ignored).
    pub fn set(&self, ms: u64) {
        self.0.fetch_max(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
