//! A kept-alive lease's schedule, sans IO: one policy for every face (blocking, tokio, Node
//! through the npm engine), chosen once here.
//!
//! - A lease of `ttl` is extended (by `ttl` again) a third of its TTL after it was granted or last
//!   extended ([`extend_every`]): two more tries fit before its end if one goes unanswered.
//! - An extension that got no answer (the store could not be reached, or did not answer within
//!   its bound) is tried again [`retry_after`] it failed: at most 100 ms, sooner than the next
//!   period, so that a store that comes back within the lease's TTL keeps it. A refused extension
//!   (`expired`, `stolen`, `not-owner`...) is never tried again: the lease is lost.
//! - Whatever happens to the extensions, the holder stops believing in the lease at its end on
//!   its own clock (`Lease::time_left` reaching zero), before the store can hand the key on.

use std::time::Duration;

/// The longest pause before an unanswered extension is tried again.
const RETRY_AT_MOST: Duration = Duration::from_millis(100);

/// How long after a lease of `ttl` was granted or extended its keep-alive extends it.
#[must_use]
pub fn extend_every(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(1))
}

/// How long after an unanswered extension of a lease of `ttl` its keep-alive tries again.
#[must_use]
pub fn retry_after(ttl: Duration) -> Duration {
    extend_every(ttl).min(RETRY_AT_MOST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_third_of_the_ttl_and_a_retry_within_100_ms() {
        let s = Duration::from_secs(1);
        assert_eq!(extend_every(30 * s), 10 * s);
        assert_eq!(retry_after(30 * s), Duration::from_millis(100));
        assert_eq!(
            retry_after(Duration::from_millis(90)),
            Duration::from_millis(30)
        );
        assert_eq!(extend_every(Duration::ZERO), Duration::from_millis(1));
    }
}
