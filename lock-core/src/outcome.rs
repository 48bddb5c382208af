//! Values returned by successful requests.

use alloc::string::String;
use alloc::vec::Vec;

use crate::{Duration, Fence, Instant, Mode};

/// A lease as its holder sees it: the fencing token and the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    /// Fencing token of the lease; strictly greater than every token the table issued before it.
    /// Pass it to the protected resource with every write, and to `release`/`extend`.
    pub fence: Fence,
    /// The lease is live while `now < deadline`.
    pub deadline: Instant,
}

/// What a successful `try_acquire` / `acquire` did.
///
/// The caller must look at the variant: only [`AcquireOutcome::Acquired`] and
/// [`AcquireOutcome::AlreadyHeld`] mean it may enter its critical section now.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AcquireOutcome {
    /// The key was free: a new lease was granted to the caller.
    Acquired(Grant),
    /// The caller already holds a live lease on the key: it is returned unchanged (same fence, same
    /// deadline). This makes a retried acquire safe; use `extend` to push the deadline.
    AlreadyHeld(Grant),
    /// The caller was queued behind the holder. It will be granted the lock by hand-off (an
    /// [`EventKind::Granted`](crate::EventKind::Granted) event) or leave the queue with an
    /// [`EventKind::WaitTimedOut`](crate::EventKind::WaitTimedOut) event.
    Queued {
        /// 1-based place in the queue (1 = next in line).
        position: usize,
    },
    /// The caller was already waiting on the key: it keeps its place and its original TTL and
    /// wait deadline.
    AlreadyWaiting {
        /// 1-based place in the queue (1 = next in line).
        position: usize,
    },
}

impl AcquireOutcome {
    /// Every outcome name, in declaration order: `NAMES[o.index()] == o.name()`.
    pub const NAMES: [&'static str; 4] = ["acquired", "already-held", "queued", "already-waiting"];

    /// The stable kebab-case name of this outcome, shared by the WIT contract, the JS package and
    /// the conformance vectors.
    ///
    /// ```
    /// use lock_core::{AcquireOutcome, Fence, Grant, Instant};
    /// let g = Grant { fence: Fence(1), deadline: Instant(100) };
    /// assert_eq!(AcquireOutcome::AlreadyHeld(g).name(), "already-held");
    /// ```
    #[must_use]
    pub const fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// The position of this outcome's name in [`AcquireOutcome::NAMES`] (a compact tag for
    /// bindings that pass outcomes as numbers).
    #[must_use]
    pub const fn index(&self) -> usize {
        match self {
            AcquireOutcome::Acquired(_) => 0,
            AcquireOutcome::AlreadyHeld(_) => 1,
            AcquireOutcome::Queued { .. } => 2,
            AcquireOutcome::AlreadyWaiting { .. } => 3,
        }
    }

    /// The outcome's two numbers: fence and deadline of a grant, or the queue position and 0.
    #[must_use]
    pub const fn numbers(&self) -> (u64, u64) {
        match *self {
            AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g) => {
                (g.fence.get(), g.deadline.as_millis())
            }
            AcquireOutcome::Queued { position } | AcquireOutcome::AlreadyWaiting { position } => {
                (position as u64, 0)
            }
        }
    }
}

/// What a successful `release` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReleaseOutcome {
    /// The lease ended now; the next waiters, if any, were handed the key.
    Released,
    /// The lease was asked to hold at least until `until` (a minimum hold): its holder is done
    /// with it, but its place stays taken until then, when the next waiters are handed the key.
    HeldUntil {
        /// The instant the lease really ends.
        until: Instant,
    },
}

impl ReleaseOutcome {
    /// Every outcome name, in declaration order.
    pub const NAMES: [&'static str; 2] = ["released", "held-until"];

    /// The stable kebab-case name shared by the WIT contract, the JS package and the vectors.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            ReleaseOutcome::Released => Self::NAMES[0],
            ReleaseOutcome::HeldUntil { .. } => Self::NAMES[1],
        }
    }
}

/// Why a lease that still takes its place in a key has ended for its holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseEnd {
    /// Released before its minimum hold: it ends at its minimum hold.
    Released,
    /// Ran out its TTL: it ends at its deadline plus its lock-delay.
    Expired,
    /// Stolen: it ends at the steal plus its lock-delay.
    Stolen,
}

impl LeaseEnd {
    /// Every name, in declaration order.
    pub const NAMES: [&'static str; 3] = ["released", "expired", "stolen"];

    /// The stable name shared by the WIT contract, the JS package and the vectors.
    #[must_use]
    pub const fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The end called `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| [LeaseEnd::Released, LeaseEnd::Expired, LeaseEnd::Stolen][i])
    }
}

/// A lease of a key, as reported by inspection and query.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HolderInfo {
    /// Owner of the lease.
    pub owner: String,
    /// Its fencing token.
    pub fence: Fence,
    /// Its deadline (live while `now < deadline`); for a lease that has `ended`, the instant its
    /// place is freed.
    pub deadline: Instant,
    /// Exclusive or shared.
    pub mode: Mode,
    /// Its metadata ("" if none).
    pub metadata: String,
    /// Until when a release still keeps it (its minimum hold), if that is after its grant.
    pub min_until: Option<Instant>,
    /// `None` while its holder holds it; else why it ended, though its place is still taken
    /// (minimum hold, lock-delay).
    pub ended: Option<LeaseEnd>,
    /// When it was granted: at its acquire, at the hand-off that promoted its waiter, or at its
    /// steal; extensions keep it (a leader's "since when"). `None` for a lease read from a record
    /// or snapshot written before grant instants were kept (format versions 1 and 2).
    pub granted_at: Option<Instant>,
}

/// A waiter, as reported by inspection and query.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WaiterInfo {
    /// Owner that waits.
    pub owner: String,
    /// TTL its lease will get when it is handed the lock.
    pub ttl: Duration,
    /// It keeps its place while `now < wait_deadline`.
    pub wait_deadline: Instant,
    /// The end of the wait it asked for: `wait_deadline`, or later for a waiter that keeps its
    /// place by renewing it (see [`AcquireOptions::wait_alive`](crate::AcquireOptions::wait_alive)).
    pub wait_end: Instant,
    /// The mode it asked for.
    pub mode: Mode,
    /// The metadata its lease will carry ("" if none).
    pub metadata: String,
}

/// The state of one key in use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyInfo {
    /// Its leases in grant order (never empty): the live ones and those whose place is still
    /// taken (see [`HolderInfo::ended`]).
    pub holders: Vec<HolderInfo>,
    /// The wait queue, first in line first.
    pub waiters: Vec<WaiterInfo>,
    /// The key's permits (0: a plain lock).
    pub permits: u32,
}

impl KeyInfo {
    /// The first lease (the only one of a key held exclusively).
    #[must_use]
    pub fn holder(&self) -> Option<&HolderInfo> {
        self.holders.first()
    }
}

/// Most keys one [`LockTable::query`](crate::LockTable::query) answers.
pub const QUERY_MAX: usize = 1000;

/// One page of a query: keys in byte order, each with its leases and waiters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueryPage {
    /// The keys of this page, in increasing byte order.
    pub keys: Vec<(String, KeyInfo)>,
    /// If more keys match: the cursor for the next page (the last key of this one).
    pub next: Option<String>,
}

impl QueryPage {
    /// Whether a query for `prefix` after the cursor `after` takes the key `name`: it starts
    /// with the prefix and comes after the cursor in byte order.
    #[must_use]
    pub fn matches(prefix: &str, after: &str, name: &str) -> bool {
        name.starts_with(prefix) && name.as_bytes() > after.as_bytes()
    }

    /// The page of a query with `limit` (checked by
    /// [`Limits::check_query`](crate::Limits::check_query)) from the keys in use that
    /// [`matches`](Self::matches) takes, in increasing byte order: the first `limit`, and the
    /// cursor of the next page if another key follows. Reads at most `limit + 1` keys, so a
    /// caller that inspects keys lazily (a store) stops there.
    #[must_use]
    pub fn from_ordered(keys: impl IntoIterator<Item = (String, KeyInfo)>, limit: usize) -> Self {
        let mut keys = keys.into_iter();
        let page: Vec<(String, KeyInfo)> = keys.by_ref().take(limit).collect();
        let next = match keys.next() {
            Some(_) => page.last().map(|(key, _)| key.clone()),
            None => None,
        };
        QueryPage { keys: page, next }
    }
}

/// Counters and gauges of a table, for observability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stats {
    /// Keys with a live lease now.
    pub live_leases: usize,
    /// Waiters queued now, over all keys.
    pub waiters: usize,
    /// Expired leases remembered now (see [`Limits::expired_retention`](crate::Limits::expired_retention)).
    pub expired_records: usize,
    /// Events waiting to be drained.
    pub pending_events: usize,
    /// The table's clock: the latest `now` it has seen.
    pub clock: Instant,
    /// The last fencing token issued (0 if none yet).
    pub last_fence: Fence,
    /// Leases granted directly by `try_acquire`/`acquire`.
    pub acquired: u64,
    /// Leases granted to a waiter by hand-off.
    pub handed_off: u64,
    /// Leases ended by their holder's `release`.
    pub released: u64,
    /// Successful `extend` calls.
    pub extended: u64,
    /// Leases that ran out their TTL.
    pub expired: u64,
    /// Callers that were put in a wait queue.
    pub queued: u64,
    /// Waiters that left their queue because their wait deadline passed.
    pub wait_timed_out: u64,
    /// Waiters that left their queue by `cancel_wait`.
    pub cancelled: u64,
    /// Requests answered with an error (contention, bad input, wrong owner, bad snapshot...).
    pub rejected: u64,
    /// Events dropped because more than `max_pending_events` were left undrained.
    pub events_dropped: u64,
    /// Leases ended by a steal.
    pub stolen: u64,
}

/// A stats field's value as the `u64` that bindings and vectors carry.
trait StatValue: Copy {
    fn to_u64(self) -> u64;
    fn from_u64(v: u64) -> Self;
}

impl StatValue for u64 {
    fn to_u64(self) -> u64 {
        self
    }
    fn from_u64(v: u64) -> Self {
        v
    }
}

/// Gauges saturate at `usize::MAX` on 32-bit targets.
impl StatValue for usize {
    fn to_u64(self) -> u64 {
        self as u64
    }
    fn from_u64(v: u64) -> Self {
        usize::try_from(v).unwrap_or(usize::MAX)
    }
}

impl StatValue for Instant {
    fn to_u64(self) -> u64 {
        self.0
    }
    fn from_u64(v: u64) -> Self {
        Instant(v)
    }
}

impl StatValue for Fence {
    fn to_u64(self) -> u64 {
        self.0
    }
    fn from_u64(v: u64) -> Self {
        Fence(v)
    }
}

/// `FIELDS`, `values` and `from_values` from one list of the fields, in declaration order (the
/// struct is the only other list: `from_values` does not compile if they differ).
macro_rules! stats_fields {
    ($($field:ident)*) => {
        impl Stats {
            /// Every field name (snake_case), in declaration order: the one list the bindings
            /// and the vectors spell the stats from (JS as camelCase, WIT as kebab-case).
            pub const FIELDS: [&'static str; 17] = [$(stringify!($field)),*];

            /// Every field's value, in the order of [`Stats::FIELDS`] (gauges widened to `u64`).
            #[must_use]
            pub fn values(&self) -> [u64; 17] {
                [$(StatValue::to_u64(self.$field)),*]
            }

            /// Stats from values in the order of [`Stats::FIELDS`] (the inverse of
            /// [`Stats::values`]; gauges saturate at `usize::MAX` on 32-bit targets).
            #[must_use]
            pub fn from_values(values: [u64; 17]) -> Self {
                let [$($field),*] = values;
                Stats {
                    $($field: StatValue::from_u64($field)),*
                }
            }
        }
    };
}

stats_fields! {
    live_leases waiters expired_records pending_events clock last_fence acquired handed_off
    released extended expired queued wait_timed_out cancelled rejected events_dropped stolen
}

#[cfg(test)]
mod tests {
    use super::Stats;

    #[test]
    fn stats_values_follow_the_field_list_and_invert() {
        let values: [u64; 17] = core::array::from_fn(|i| 100 + i as u64);
        let stats = Stats::from_values(values);
        assert_eq!(stats.values(), values);
        // Spot-check that names and positions agree (a swapped pair would pass the round trip).
        let at = |name: &str| values[Stats::FIELDS.iter().position(|f| *f == name).unwrap()];
        assert_eq!(stats.live_leases as u64, at("live_leases"));
        assert_eq!(stats.clock.as_millis(), at("clock"));
        assert_eq!(stats.last_fence.get(), at("last_fence"));
        assert_eq!(stats.handed_off, at("handed_off"));
        assert_eq!(stats.wait_timed_out, at("wait_timed_out"));
        assert_eq!(stats.events_dropped, at("events_dropped"));
        assert_eq!(stats.rejected, at("rejected"));
        assert_eq!(stats.expired_records as u64, at("expired_records"));
    }
}
