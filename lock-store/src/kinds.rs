//! [`AcquireOptions`]: what an acquire over a store may ask for beyond its TTL and its wait
//! (the lock kinds: shared mode and permits, a minimum hold, a lock-delay, metadata). The core
//! decides what each means (`docs/semantics.md`, "Lock kinds"); this is only their owned form,
//! with the standard library's durations.

use std::time::Duration;

pub use lock_core::Mode;

use crate::clock::millis;

/// The options of [`Locks::acquire_with`](crate::Locks::acquire_with) and
/// [`Locks::steal`](crate::Locks::steal). The default is a plain exclusive lease (what
/// [`Locks::acquire`](crate::Locks::acquire) takes).
///
/// ```
/// use std::time::Duration;
/// use lock_store::AcquireOptions;
///
/// let reader = AcquireOptions::shared().metadata("report-7 on host-3");
/// let slot = AcquireOptions::shared().permits(4); // at most 4 holders at once
/// let job = AcquireOptions::default().min_hold(Duration::from_secs(60)); // ShedLock's lockAtLeastFor
/// let careful = AcquireOptions::default().lock_delay(Duration::from_secs(15)); // Consul's lock-delay
/// assert_eq!(slot.permits, 4);
/// # let _ = (reader, job, careful);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AcquireOptions {
    /// Exclusive (the default) or shared.
    pub mode: Mode,
    /// The key's permits: 0 for a plain lock, else at most this many leases at once (fixed at
    /// the key's first grant; another number is refused with `permits-mismatch`).
    pub permits: u32,
    /// The lease keeps its place at least this long after its grant, even if released earlier
    /// (at most its TTL). Whole milliseconds.
    pub min_hold: Duration,
    /// After the lease expires or is stolen (not after a release), its place is kept this long
    /// past its end. Whole milliseconds.
    pub lock_delay: Duration,
    /// Who holds it and why, shown by inspection, query and events (checked like a key, may be
    /// empty).
    pub metadata: String,
}

impl AcquireOptions {
    /// A shared lease (with every other option at its default).
    #[must_use]
    pub fn shared() -> Self {
        AcquireOptions {
            mode: Mode::Shared,
            ..AcquireOptions::default()
        }
    }

    /// With `permits` places for the key.
    #[must_use]
    pub fn permits(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// With a minimum hold.
    #[must_use]
    pub fn min_hold(mut self, min_hold: Duration) -> Self {
        self.min_hold = min_hold;
        self
    }

    /// With a lock-delay.
    #[must_use]
    pub fn lock_delay(mut self, lock_delay: Duration) -> Self {
        self.lock_delay = lock_delay;
        self
    }

    /// With metadata.
    #[must_use]
    pub fn metadata(mut self, metadata: impl Into<String>) -> Self {
        self.metadata = metadata.into();
        self
    }

    /// The core's form.
    pub(crate) fn core(&self) -> lock_core::AcquireOptions<'_> {
        lock_core::AcquireOptions {
            mode: self.mode,
            permits: self.permits,
            min_hold: millis(self.min_hold),
            lock_delay: millis(self.lock_delay),
            metadata: &self.metadata,
        }
    }
}
