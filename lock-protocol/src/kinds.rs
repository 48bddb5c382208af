//! The lock kinds' options as an acquire keeps them while it waits: the caller's
//! [`lock_core::AcquireOptions`] (borrowed) copied into an owned form, so the waiting machine
//! can send them with every ask. The core decides what each means (`docs/semantics.md`, "Lock
//! kinds").

use lock_core::{AcquireOptions, Duration, Mode};

/// An owned copy of [`AcquireOptions`] (for an operation kept while it waits, or handed to a
/// [`driver`](crate::driver) call).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OwnedOptions {
    mode: Mode,
    permits: u32,
    min_hold: Duration,
    lock_delay: Duration,
    metadata: String,
    wait_alive: Duration,
}

impl OwnedOptions {
    /// A copy of `options`.
    #[must_use]
    pub fn of(options: &AcquireOptions<'_>) -> Self {
        OwnedOptions {
            mode: options.mode,
            permits: options.permits,
            min_hold: options.min_hold,
            lock_delay: options.lock_delay,
            metadata: options.metadata.to_owned(),
            wait_alive: options.wait_alive,
        }
    }

    /// The core's form, borrowing the metadata.
    #[must_use]
    pub fn core(&self) -> AcquireOptions<'_> {
        AcquireOptions {
            mode: self.mode,
            permits: self.permits,
            min_hold: self.min_hold,
            lock_delay: self.lock_delay,
            metadata: &self.metadata,
            wait_alive: self.wait_alive,
        }
    }
}
