//! Time and fencing tokens as types, as smoltcp does for time: an [`Instant`] of the host's
//! monotonic clock, a [`Duration`] on it, and a [`Fence`]. Each wraps a `u64` (of milliseconds,
//! or a count) in a public field, so `Instant(100)` reads as what it is and can be matched in a
//! pattern, but they do not mix: `extend(key, owner, fence, ttl, now)` cannot take them in the
//! wrong order. The bindings (WIT, JS) and the vector files keep plain numbers and convert at
//! their edge.

use core::fmt;

/// An instant of the host's monotonic clock, in milliseconds from an origin the host chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A span of the host's clock, in milliseconds: a TTL, a retention, a limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

/// A fencing token: strictly increasing over every grant of a table. 0 is "none issued yet".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fence(pub u64);

impl Instant {
    /// The clock's origin.
    pub const ZERO: Instant = Instant(0);
    /// The last representable instant.
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `ms` milliseconds after the origin.
    #[must_use]
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms)
    }

    /// Milliseconds since the origin.
    #[must_use]
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + d`, or `None` past [`Instant::MAX`].
    #[must_use]
    pub const fn checked_add(self, d: Duration) -> Option<Instant> {
        match self.0.checked_add(d.0) {
            Some(ms) => Some(Instant(ms)),
            None => None,
        }
    }

    /// `self + d`, at most [`Instant::MAX`].
    #[must_use]
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }

    /// `self - d`, at least [`Instant::ZERO`].
    #[must_use]
    pub const fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }

    /// The time from `earlier` to `self`; zero if `earlier` is later.
    #[must_use]
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// No time.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable duration.
    pub const MAX: Duration = Duration(u64::MAX);

    /// A duration of `ms` milliseconds.
    #[must_use]
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms)
    }

    /// A duration of `s` seconds (saturating).
    #[must_use]
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(1_000))
    }

    /// The duration in milliseconds.
    #[must_use]
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Whether it is zero.
    #[must_use]
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Fence {
    /// "No token issued yet": every issued token is greater.
    pub const ZERO: Fence = Fence(0);

    /// The token with this number.
    #[must_use]
    pub const fn new(n: u64) -> Self {
        Fence(n)
    }

    /// The token's number.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The next token; `u64::MAX` stays `u64::MAX` (a counter refuses to get near it).
    #[must_use]
    pub const fn saturating_next(self) -> Fence {
        Fence(self.0.saturating_add(1))
    }

    /// The token `n` after this one, at most `u64::MAX` (for hosts that reserve tokens in
    /// blocks).
    #[must_use]
    pub const fn saturating_add(self, n: u64) -> Fence {
        Fence(self.0.saturating_add(n))
    }

    /// The next token, or `None` once `u64::MAX` was issued.
    #[must_use]
    pub const fn checked_next(self) -> Option<Fence> {
        match self.0.checked_add(1) {
            Some(n) => Some(Fence(n)),
            None => None,
        }
    }
}

/// `instant + duration`, for hosts and tests. Panics past [`Instant::MAX`], as
/// `std::time::Instant` does; the core itself only uses [`Instant::checked_add`].
impl core::ops::Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, d: Duration) -> Instant {
        match self.checked_add(d) {
            Some(t) => t,
            None => panic!("instant + duration is past Instant::MAX"),
        }
    }
}

impl core::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

/// Plain numbers, so the core's messages read as before (`held until 100`).
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Whole milliseconds of a standard duration (saturating at `u64::MAX`; sub-millisecond parts
/// are dropped), so options and limits can be written with `core::time::Duration` (the
/// standard library's `std::time::Duration`).
///
/// ```
/// assert_eq!(lock_core::Duration::from(core::time::Duration::from_secs(2)).0, 2000);
/// ```
impl From<core::time::Duration> for Duration {
    fn from(d: core::time::Duration) -> Self {
        Duration(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_or_says_none_at_the_ends() {
        let t = Instant::from_millis(10);
        assert_eq!(
            t.checked_add(Duration::from_millis(5)),
            Some(Instant::from_millis(15))
        );
        assert_eq!(Instant::MAX.checked_add(Duration::from_millis(1)), None);
        assert_eq!(Instant::MAX.saturating_add(Duration::MAX), Instant::MAX);
        assert_eq!(t.saturating_sub(Duration::from_millis(20)), Instant::ZERO);
        assert_eq!(
            t.saturating_since(Instant::from_millis(4)),
            Duration::from_millis(6)
        );
        assert_eq!(t.saturating_since(Instant::from_millis(40)), Duration::ZERO);
        assert_eq!(Duration::from_secs(2).as_millis(), 2_000);
        assert_eq!(Fence::new(u64::MAX).checked_next(), None);
        assert_eq!(Fence::ZERO.checked_next(), Some(Fence::new(1)));
        assert_eq!(
            alloc::format!("{} {} {}", t, Duration::from_millis(3), Fence::new(7)),
            "10 3 7"
        );
    }
}
