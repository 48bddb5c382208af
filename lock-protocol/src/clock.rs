//! What a client knows of the store's clock: two bounds drawn from the read that fetched a
//! record, so that a decision never runs ahead of the store and a holder never believes in its
//! lease after the store may have freed the key.

use std::time::Duration as StdDuration;

use crate::local::LocalInstant;

use lock_core::Instant;

/// A duration of this machine's clock as the core's whole milliseconds (rounded down,
/// saturating).
pub fn millis(d: StdDuration) -> lock_core::Duration {
    lock_core::Duration(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The largest rate at which this machine's monotonic clock and the store's clock may drift
/// apart, as a fraction (1/1000: twice the most that NTP slews a clock, 500 ppm). A holder's
/// view of its lease is shortened by this fraction of what remains, so that it ends before the
/// store's even if the two clocks run at different rates.
pub const MAX_DRIFT: f64 = 0.001;

/// How long a read's upper bound is trusted by default (see
/// `lock-store`'s `Engine::set_read_life`): a record remembered for longer is
/// read again before the next decision on it. The drift allowance grows with the time since
/// the read ([`MAX_DRIFT`] of it: 30 ms here); without a fresh read it would, after hours of
/// extensions from memory, exceed the lease itself.
pub const READ_LIFE: StdDuration = StdDuration::from_secs(30);

/// The store's clock as a client knows it from one read (and the writes that followed it):
/// between a lower bound, which decisions use, and an upper bound, which holders use.
///
/// A read answers the store's time in whole milliseconds, rounded down, taken by the store at
/// some instant between when the request left this machine and when the answer arrived. So at
/// any later local instant `t` the store's clock is at least that time plus what this machine's
/// clock measured since the answer *arrived* (whole milliseconds, rounded down), and less than
/// that time plus one millisecond plus what it measured since the request was *sent*
/// (stretched by [`MAX_DRIFT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreClock {
    /// The store's clock was at least this...
    at_least: Instant,
    /// ...at this local instant.
    at_least_when: LocalInstant,
    /// The store's time of the read, rounded down (the clock was below it plus 1 ms)...
    read: Instant,
    /// ...read after this local instant.
    read_sent: LocalInstant,
}

impl StoreClock {
    /// What a read tells: the store's time `store` (rounded down to the millisecond), taken
    /// between `sent` and `arrived` on this machine's clock.
    #[must_use]
    pub fn from_read(store: Instant, sent: LocalInstant, arrived: LocalInstant) -> Self {
        StoreClock {
            at_least: store,
            at_least_when: arrived,
            read: store,
            read_sent: sent,
        }
    }

    /// The store's time at local instant `t`, never ahead of it: the lower bound, in whole
    /// milliseconds. Counted from the last time it was raised, not from the previous estimate,
    /// so that rounding down never adds up: a client calling faster than once a millisecond
    /// still sees the store's time go on.
    #[must_use]
    pub fn at_least_at(&self, t: LocalInstant) -> Instant {
        self.at_least
            .saturating_add(millis(t.saturating_duration_since(self.at_least_when)))
    }

    /// The store's clock has reached `at` by local instant `when` (a write that carried `at`
    /// as its `not_before` was done, and `when` is after its answer arrived): raises the lower
    /// bound if that says more than it did. The upper bound stays the read's.
    pub fn reached(&mut self, at: Instant, when: LocalInstant) {
        if at > self.at_least_at(when) {
            self.at_least = at;
            self.at_least_when = when;
        }
    }

    /// How old the read is at local instant `t` (from when it was sent). Writes do not make
    /// it younger: only a read bounds the store's clock from above.
    #[must_use]
    pub fn read_age(&self, t: LocalInstant) -> StdDuration {
        t.saturating_duration_since(self.read_sent)
    }

    /// The first local instant at which the store's clock may have reached `at`: the holder
    /// of a lease ending at `at` must stop believing in it then. The read's send instant if
    /// `at` is within a millisecond of the read's time (the store may have reached it already).
    /// A deadline further ahead than the local clock reaches (584 years) ends at its end.
    #[must_use]
    pub fn earliest_local(&self, at: Instant) -> LocalInstant {
        // The store's clock at local instant t is below read + 1 ms + (t - read_sent) *
        // (1 + MAX_DRIFT); solve for the t at which that reaches `at`.
        let Some(ahead) = at.0.checked_sub(self.read.0.saturating_add(1)) else {
            return self.read_sent;
        };
        let ahead = StdDuration::from_millis(ahead).div_f64(1.0 + MAX_DRIFT);
        self.read_sent + ahead
    }
}

/// Where a holder stops believing in its lease ending at `deadline` (store's time), on its own
/// clock: the first instant at which the store's clock may have reached it (see
/// [`StoreClock::earliest_local`]), so before any other client can be handed the key. At once
/// (`now`) if the decision carried no clock (never with the store's time, which `Locks` always
/// uses).
#[must_use]
pub fn local_end(clock: Option<StoreClock>, deadline: Instant, now: LocalInstant) -> LocalInstant {
    clock.map_or(now, |c| c.earliest_local(deadline))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: StdDuration = StdDuration::from_millis(1);

    #[test]
    fn the_lower_bound_goes_on_between_calls_shorter_than_a_millisecond() {
        let t0 = LocalInstant::from_nanos(1_000_000_000);
        let mut clock = StoreClock::from_read(Instant(1_000), t0, t0);
        // A thousand writes 0.6 ms apart, each done at the instant the bound gave: the bound
        // must move with them (0.6 s), not stay at the read's time.
        let mut t = t0;
        for _ in 0..1000 {
            t += MS * 6 / 10;
            let at = clock.at_least_at(t);
            clock.reached(at, t);
        }
        assert_eq!(clock.at_least_at(t), Instant(1_600));
    }

    #[test]
    fn a_write_raises_the_lower_bound_only_when_it_says_more() {
        let t0 = LocalInstant::from_nanos(1_000_000_000);
        let mut clock = StoreClock::from_read(Instant(1_000), t0, t0);
        clock.reached(Instant(900), t0 + MS * 10);
        assert_eq!(clock.at_least_at(t0 + MS * 10), Instant(1_010));
        clock.reached(Instant(1_500), t0 + MS * 10);
        assert_eq!(clock.at_least_at(t0 + MS * 20), Instant(1_510));
        // The upper bound is still the read's.
        assert_eq!(clock.earliest_local(Instant(1_001)), t0);
    }

    #[test]
    fn a_read_ages_from_when_it_was_sent_and_writes_do_not_renew_it() {
        let t0 = LocalInstant::from_nanos(1_000_000_000);
        let mut clock = StoreClock::from_read(Instant(1_000), t0, t0 + MS * 5);
        assert_eq!(clock.read_age(t0 + READ_LIFE), READ_LIFE);
        clock.reached(Instant(20_000), t0 + READ_LIFE);
        assert_eq!(clock.read_age(t0 + READ_LIFE + MS), READ_LIFE + MS);
    }

    #[test]
    fn the_holder_stops_before_the_store_can_reach_the_deadline() {
        let sent = LocalInstant::from_nanos(1_000_000_000);
        let arrived = sent + MS * 40;
        let clock = StoreClock::from_read(Instant(10_000), sent, arrived);
        // The store read its clock at 10 000.999 ms at the latest, just after `sent`: it can
        // reach 40 001 at sent + 30 000.001 ms, less the drift allowance (~30 ms).
        let end = clock.earliest_local(Instant(40_001));
        let lead = (sent + MS * 30_000).saturating_duration_since(end);
        assert!(lead >= MS * 29 && lead <= MS * 31, "{lead:?}");
        // A deadline at or within a millisecond of the read: already possibly reached.
        assert_eq!(clock.earliest_local(Instant(10_001)), sent);
        assert_eq!(clock.earliest_local(Instant(5)), sent);
        // No deadline is so far that the answer overflows: it saturates, far in the future.
        assert!(clock.earliest_local(Instant(u64::MAX)) > sent);
    }
}
