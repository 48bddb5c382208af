//! [`Options`]: how [`Locks`] is opened when the defaults do not suit (the bound on each store
//! call, the limits requests are checked against, the decider).

use std::time::Duration;

use lock_core::Limits;

use crate::decider::{AnyDecider, Native};
use crate::locks::{Error, Locks};
use crate::store::{Store, DEFAULT_BOUND};

/// How to open [`Locks`]: the options, then [`open`](Options::open) with a URL (or
/// [`over`](Options::over) with a store of your own).
///
/// ```
/// use std::time::Duration;
/// use lock_store::{Limits, Options};
///
/// let locks = Options::new()
///     .bound(Duration::from_secs(2)) // no store call waits longer; a request as a whole neither
///     .limits(Limits::default())
///     .open("memory:", "jobs")?;
/// assert_eq!(locks.describe(), "memory namespace \"jobs\"");
/// # Ok::<(), lock_store::Error>(())
/// ```
pub struct Options {
    bound: Duration,
    limits: Limits,
    decider: AnyDecider,
}

impl Default for Options {
    fn default() -> Self {
        Options::new()
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let decider = match self.decider {
            AnyDecider::Native(_) => "native core",
            #[cfg(feature = "component")]
            AnyDecider::Component(_) => "lock component",
        };
        f.debug_struct("Options")
            .field("bound", &self.bound)
            .field("limits", &self.limits)
            .field("decider", &decider)
            .finish()
    }
}

impl Options {
    /// The defaults: each call to a server store bounded by 5 s ([`DEFAULT_BOUND`]), the core's
    /// default [`Limits`], the native core deciding.
    #[must_use]
    pub fn new() -> Self {
        Options {
            bound: DEFAULT_BOUND,
            limits: Limits::default(),
            decider: AnyDecider::Native(Native),
        }
    }

    /// The longest a call to a server store may wait (connecting included), and the longest a
    /// whole request (its reads, writes and the re-read of an ambiguous write) may take. Past it
    /// the call fails with [`StoreError::Lost`](crate::StoreError::Lost) or
    /// [`StoreError::Connect`](crate::StoreError::Connect) instead of hanging. Local stores
    /// (SQLite, memory) do not wait on a network and ignore it.
    #[must_use]
    pub fn bound(mut self, bound: Duration) -> Self {
        self.bound = bound;
        self
    }

    /// The limits every request is checked against (key and owner sizes, TTLs, queue lengths).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Decides with the lock component (the same WebAssembly bytes as in the browser, in Node
    /// and in a plugin host, run in wasmtime) instead of the native core.
    #[cfg(feature = "component")]
    #[must_use]
    pub fn component(mut self, component: crate::store::Component) -> Self {
        self.decider = AnyDecider::Component(Box::new(component));
        self
    }

    /// Opens namespace `namespace` of the store at `url` (see [`crate::store::open`] for the
    /// URLs).
    ///
    /// # Errors
    /// [`Error::Store`] for a bad URL or namespace, a store this build lacks, or a server that
    /// cannot be reached; [`Error::Lock`] with
    /// [`LockError::InvalidLimits`](crate::LockError::InvalidLimits).
    pub fn open(self, url: &str, namespace: &str) -> Result<Locks, Error> {
        let store = crate::store::open(url, namespace, self.bound)?;
        Locks::build(store, self.decider, self.limits)
    }

    /// Locks over a store of your own (the bound is the store's: see
    /// [`Store::bound`](crate::store::Store::bound)).
    ///
    /// # Errors
    /// [`Error::Lock`] with [`LockError::InvalidLimits`](crate::LockError::InvalidLimits).
    pub fn over(self, store: impl Store + 'static) -> Result<Locks, Error> {
        Locks::build(Box::new(store), self.decider, self.limits)
    }
}
