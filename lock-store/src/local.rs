//! This process's monotonic clock as the protocol's [`LocalInstant`]: the one place the Rust faces
//! read it (the protocol itself never does). `LocalInstant::now()` works wherever
//! [`ProcessClock`] is imported.

use std::sync::OnceLock;
use std::time::Duration;

pub use lock_protocol::LocalInstant;

/// The origin of [`ProcessClock::now`]: the first time this process asked.
fn origin() -> std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// Reading this process's monotonic clock as a [`LocalInstant`].
pub(crate) trait ProcessClock: Sized {
    /// Now.
    fn now() -> Self;
    /// How long ago this instant was (zero if it is ahead).
    fn elapsed(&self) -> Duration;
    /// The same instant as a `std::time::Instant` (for timers that take one).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    fn to_std(self) -> std::time::Instant;
}

impl ProcessClock for LocalInstant {
    fn now() -> Self {
        let since = origin().elapsed();
        LocalInstant::from_nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
    }

    fn elapsed(&self) -> Duration {
        LocalInstant::now().saturating_duration_since(*self)
    }

    fn to_std(self) -> std::time::Instant {
        origin() + Duration::from_nanos(self.as_nanos())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_follows_the_process_clock() {
        let a = LocalInstant::now();
        std::thread::sleep(Duration::from_millis(2));
        let b = LocalInstant::now();
        assert!(b > a && b - a >= Duration::from_millis(2));
        assert_eq!(a.to_std() + (b - a), b.to_std());
        assert!(a.elapsed() >= Duration::from_millis(2));
    }
}
