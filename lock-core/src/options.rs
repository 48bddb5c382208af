//! What an acquire may ask for beyond a TTL: shared mode and permits, a minimum hold, a
//! lock-delay, metadata and a wait kept alive by renewals ([`AcquireOptions`]).

use crate::{Duration, Limits, LockError};

/// How a lease shares its key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// The only lease of the key (today's lock, the default): granted when the key has no
    /// lease at all.
    #[default]
    Exclusive,
    /// One of several: granted with other shared leases while no exclusive lease is held, up to
    /// the key's permits (see [`AcquireOptions::permits`]).
    Shared,
}

impl Mode {
    /// Every mode name, in declaration order.
    pub const NAMES: [&'static str; 2] = ["exclusive", "shared"];

    /// The stable name shared by the WIT contract, the JS package and the vectors.
    ///
    /// ```
    /// assert_eq!(lock_core::Mode::Shared.name(), "shared");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The mode called `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "exclusive" => Some(Mode::Exclusive),
            "shared" => Some(Mode::Shared),
            _ => None,
        }
    }
}

/// The options of an acquire. [`AcquireOptions::default`] is today's exclusive lease: no permits,
/// no minimum hold, the table's lock-delay, no metadata.
///
/// ```
/// use lock_core::{AcquireOptions, Duration, Mode};
/// let reader = AcquireOptions { mode: Mode::Shared, metadata: "report-7 on host-3", ..Default::default() };
/// let job = AcquireOptions { min_hold: Duration(60_000), ..Default::default() };
/// assert_eq!(reader.permits, 0);
/// assert_eq!(job.mode, Mode::Exclusive);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AcquireOptions<'a> {
    /// Exclusive (the default) or shared.
    pub mode: Mode,
    /// The key's permits: 0 (the default) for a plain lock, where shared leases are bounded only
    /// by [`Limits::max_holders_per_key`]; N for a semaphore of N leases (a shared lease takes
    /// one, an exclusive lease all N). Fixed at the key's first grant until the key is free
    /// again; a request that says another number is refused with
    /// [`LockError::PermitsMismatch`].
    pub permits: u32,
    /// The lease holds at least until its grant instant plus this, even if released earlier
    /// (ShedLock's `lockAtLeastFor`): an early release answers when the lease really ends. At
    /// most the TTL; 0 (the default) for none.
    pub min_hold: Duration,
    /// If the lease expires or is stolen (not if it is released), its place stays taken for this
    /// long after it ended (Consul's lock-delay): the old holder may still be working. The larger
    /// of this and [`Limits::lock_delay`] applies; at most [`Limits::max_ttl`].
    pub lock_delay: Duration,
    /// Who holds the lease and why, shown by inspection, query and events; at most
    /// [`Limits::max_metadata_bytes`], no control character, empty (the default) for none.
    pub metadata: &'a str,
    /// For a waiter that lives apart from the table (a store's client, another process): its
    /// place in the queue is kept only while it renews it (`renew_wait`) within this long, so a
    /// waiter that dies leaves the queue soon, while inspection still shows the end of the wait
    /// it asked for ([`WaiterInfo::wait_end`](crate::WaiterInfo::wait_end)). 0 (the default):
    /// the place is kept for the whole wait. A call that waits in the table's own process (a
    /// plugin host's or the npm table's blocking `acquire`) does not renew, so it leaves this at 0.
    pub wait_alive: Duration,
}

impl<'a> AcquireOptions<'a> {
    /// A shared lease, every other option at its default (see the builder methods below).
    ///
    /// ```
    /// use std::time::Duration;
    /// use lock_core::{AcquireOptions, Mode};
    /// let slot = AcquireOptions::shared().permits(4).metadata("gpu job 7");
    /// let job = AcquireOptions::default().min_hold(Duration::from_secs(60)); // ShedLock's lockAtLeastFor
    /// let careful = AcquireOptions::default().lock_delay(Duration::from_secs(15)); // Consul's lock-delay
    /// assert_eq!((slot.mode, slot.permits, job.min_hold.0, careful.lock_delay.0), (Mode::Shared, 4, 60_000, 15_000));
    /// ```
    #[must_use]
    pub const fn shared() -> Self {
        AcquireOptions {
            mode: Mode::Shared,
            ..AcquireOptions::EXCLUSIVE
        }
    }

    /// With `permits` places for the key (see [`permits`](Self::permits)).
    #[must_use]
    pub const fn permits(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// With a minimum hold (milliseconds, or a `std::time::Duration`).
    #[must_use]
    pub fn min_hold(mut self, min_hold: impl Into<Duration>) -> Self {
        self.min_hold = min_hold.into();
        self
    }

    /// With a lock-delay (milliseconds, or a `std::time::Duration`).
    #[must_use]
    pub fn lock_delay(mut self, lock_delay: impl Into<Duration>) -> Self {
        self.lock_delay = lock_delay.into();
        self
    }

    /// With metadata.
    #[must_use]
    pub const fn metadata(mut self, metadata: &'a str) -> Self {
        self.metadata = metadata;
        self
    }

    /// With a waiter's place kept only while it renews it within `wait_alive` (milliseconds, or
    /// a `std::time::Duration`; see [`wait_alive`](Self::wait_alive)).
    #[must_use]
    pub fn wait_alive(mut self, wait_alive: impl Into<Duration>) -> Self {
        self.wait_alive = wait_alive.into();
        self
    }

    /// The options of a plain exclusive lease (the same as `default()`, usable in `const`).
    pub const EXCLUSIVE: AcquireOptions<'static> = AcquireOptions {
        mode: Mode::Exclusive,
        permits: 0,
        min_hold: Duration::ZERO,
        lock_delay: Duration::ZERO,
        metadata: "",
        wait_alive: Duration::ZERO,
    };

    /// Whether these are the plain options (no shared mode, permits, minimum hold, lock-delay,
    /// metadata or kept-alive wait).
    #[must_use]
    #[inline]
    pub fn is_plain(&self) -> bool {
        self.mode == Mode::Exclusive
            && self.permits == 0
            && self.min_hold.is_zero()
            && self.lock_delay.is_zero()
            && self.metadata.is_empty()
            && self.wait_alive.is_zero()
    }

    /// Checks the options of a request with `ttl` against `limits`, in this order: metadata,
    /// permits, minimum hold, lock-delay.
    ///
    /// # Errors
    /// [`LockError::MetadataTooLong`], [`LockError::MetadataInvalid`],
    /// [`LockError::TooManyPermits`], [`LockError::MinHoldTooLong`] or
    /// [`LockError::LockDelayTooLong`].
    pub fn validate(&self, ttl: Duration, limits: &Limits) -> Result<(), LockError> {
        limits.check_metadata(self.metadata)?;
        if self.permits as usize > limits.max_holders_per_key {
            return Err(LockError::TooManyPermits {
                permits: self.permits,
                max: limits.max_holders_per_key,
            });
        }
        if self.min_hold > ttl {
            return Err(LockError::MinHoldTooLong {
                min_hold: self.min_hold,
                ttl,
            });
        }
        if self.lock_delay > limits.max_ttl {
            return Err(LockError::LockDelayTooLong {
                lock_delay: self.lock_delay,
                max: limits.max_ttl,
            });
        }
        Ok(())
    }
}
