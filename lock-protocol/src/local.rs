//! This machine's monotonic clock as the protocol sees it ([`LocalInstant`]): a count of
//! nanoseconds from an origin, rather than `std::time::Instant`, so that the protocol takes its
//! local time from any driver and never reads a clock. The Rust drivers read theirs from the
//! process's monotonic clock (`lock-store`); a driver elsewhere (the npm engine, where
//! `std::time::Instant::now` does not exist) passes its own monotonic time in.

use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// An instant of this machine's monotonic clock, in nanoseconds from an arbitrary origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalInstant(u64);

/// A duration in whole nanoseconds (saturating past 584 years).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl LocalInstant {
    /// The instant `nanos` nanoseconds after the origin of a driver's own monotonic clock.
    #[must_use]
    pub fn from_nanos(nanos: u64) -> Self {
        LocalInstant(nanos)
    }

    /// Nanoseconds from the origin of the clock this instant is of.
    #[must_use]
    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to this instant, zero if `earlier` is later.
    #[must_use]
    pub fn saturating_duration_since(&self, earlier: LocalInstant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for LocalInstant {
    type Output = LocalInstant;
    /// `d` later, saturating at the end of the clock.
    fn add(self, d: Duration) -> LocalInstant {
        LocalInstant(self.0.saturating_add(nanos(d)))
    }
}

impl AddAssign<Duration> for LocalInstant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for LocalInstant {
    type Output = LocalInstant;
    /// `d` earlier, saturating at the origin.
    fn sub(self, d: Duration) -> LocalInstant {
        LocalInstant(self.0.saturating_sub(nanos(d)))
    }
}

impl Sub<LocalInstant> for LocalInstant {
    type Output = Duration;
    /// The time between the two, zero if `earlier` is later.
    fn sub(self, earlier: LocalInstant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_saturates_instead_of_panicking() {
        let (a, b) = (
            LocalInstant::from_nanos(1_000),
            LocalInstant::from_nanos(3_000_000),
        );
        assert_eq!(b - a, Duration::from_nanos(2_999_000));
        assert_eq!(a - b, Duration::ZERO);
        let end = LocalInstant::from_nanos(u64::MAX);
        assert_eq!(end + Duration::from_secs(1), end);
        assert_eq!(
            LocalInstant::from_nanos(5) - Duration::from_nanos(6),
            LocalInstant::from_nanos(0)
        );
    }
}
