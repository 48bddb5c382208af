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
    adopt_held: bool,
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
            .field("adopt_held", &self.adopt_held)
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
            adopt_held: true,
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

    /// Whether an acquire whose owner already holds the key (`already-held`) takes that lease
    /// as its own: `true` by default (the lease is the owner's, whoever asks). With `false`,
    /// a lease this owner holds that the acquire was not handed (an earlier process that
    /// used the same owner id and died, or a duplicate still running) is waited for like any
    /// other holder's, and a try answers `held`: no fence serves two runs or terms. For
    /// processes with fixed owner ids that a supervisor restarts (`lockstore run --owner`,
    /// `lockstore elect --candidate` set it).
    #[must_use]
    pub fn adopt_held(mut self, adopt: bool) -> Self {
        self.adopt_held = adopt;
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
        Locks::build(store, self.decider, self.limits, self.adopt_held)
    }

    /// Opens namespace `namespace` of the store at `url` for async code (see
    /// [`aio::Locks::open`](crate::aio::Locks::open)). Redis and PostgreSQL: native async
    /// clients whose connections every task shares (`aio::AsyncRedisStore`,
    /// `aio::AsyncPostgresStore`, with the `redis` and `postgres` features). Other stores: the connect runs on a
    /// blocking thread, and more connections are opened as tasks need them (at most
    /// [`POOL_SIZE`](crate::aio::POOL_SIZE), see [`Pooled`](crate::aio::Pooled)).
    ///
    /// # Errors
    /// As [`open`](Self::open); also [`Error::Store`] if called outside a tokio runtime.
    #[cfg(feature = "tokio")]
    pub async fn open_async(self, url: &str, namespace: &str) -> Result<crate::aio::Locks, Error> {
        #[cfg(feature = "redis")]
        if url.starts_with("redis://")
            || url.starts_with("rediss://")
            || url.starts_with("redis+sentinel://")
        {
            let store = crate::aio::AsyncRedisStore::open(url, namespace, self.bound).await?;
            return crate::aio::Locks::build(
                std::sync::Arc::new(store),
                self.decider,
                self.limits,
                self.adopt_held,
            );
        }
        #[cfg(feature = "postgres")]
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let store = crate::aio::AsyncPostgresStore::open(url, namespace, self.bound).await?;
            return crate::aio::Locks::build(
                std::sync::Arc::new(store),
                self.decider,
                self.limits,
                self.adopt_held,
            );
        }
        let pooled = pool(url, namespace, self.bound).await?;
        crate::aio::Locks::build(
            std::sync::Arc::new(pooled),
            self.decider,
            self.limits,
            self.adopt_held,
        )
    }

    /// [`aio::Locks`](crate::aio::Locks) over an async store of your own (call it within a
    /// tokio runtime).
    ///
    /// # Errors
    /// [`Error::Lock`] with [`LockError::InvalidLimits`](crate::LockError::InvalidLimits);
    /// [`Error::Store`] outside a tokio runtime.
    #[cfg(feature = "tokio")]
    pub fn over_async(
        self,
        store: impl crate::aio::AsyncStore,
    ) -> Result<crate::aio::Locks, Error> {
        crate::aio::Locks::build(
            std::sync::Arc::new(store),
            self.decider,
            self.limits,
            self.adopt_held,
        )
    }

    /// Locks over a store of your own (the bound is the store's: see
    /// [`Store::bound`](crate::store::Store::bound)).
    ///
    /// # Errors
    /// [`Error::Lock`] with [`LockError::InvalidLimits`](crate::LockError::InvalidLimits).
    pub fn over(self, store: impl Store + 'static) -> Result<Locks, Error> {
        Locks::build(Box::new(store), self.decider, self.limits, self.adopt_held)
    }
}

/// The connections of an async `Locks` to the store at `url`: the first opened now (on a
/// blocking thread), the rest as tasks need them, by URL; for `memory:`, clones of the first
/// (whose contents they share).
#[cfg(feature = "tokio")]
async fn pool(url: &str, namespace: &str, bound: Duration) -> Result<crate::aio::Pooled, Error> {
    use crate::store::{MemoryStore, Store};
    let size = crate::aio::POOL_SIZE;
    if url == "memory:" {
        let memory = MemoryStore::new(namespace)?;
        let more = memory.clone();
        let more: crate::aio::OpenStore =
            Box::new(move || Ok(Box::new(more.clone()) as Box<dyn Store>));
        return Ok(crate::aio::Pooled::new(Box::new(memory), Some(more), size));
    }
    let (url, namespace) = (url.to_owned(), namespace.to_owned());
    let open = move || crate::store::open(&url, &namespace, bound);
    let first = tokio::task::spawn_blocking(open.clone())
        .await
        .map_err(|e| {
            Error::Store(crate::StoreError::Server {
                store: String::new(),
                reason: format!("the connect failed on its thread: {e}"),
            })
        })??;
    Ok(crate::aio::Pooled::new(first, Some(Box::new(open)), size))
}
