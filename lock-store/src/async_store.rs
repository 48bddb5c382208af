//! What an async store implements ([`AsyncStore`]), and [`Pooled`]: any blocking [`Store`] made
//! async by running its calls on the runtime's blocking threads, over a few connections.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::{Fence, Instant};

use crate::store::{OpenWatcher, Read, Store, StoreError, Write, Written};

/// The future of one [`AsyncStore`] call.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A store of key records for one namespace, called from async code: the calls of
/// [`Store`](crate::store::Store), with the same contracts, taking `&self` so that the calls of
/// many tasks can be in flight at once.
///
/// A call's future may be dropped before it is done (when the call's bound is up): the store
/// must stay usable, and a write whose future was dropped may or may not take effect (the
/// caller reads to find out, as after [`StoreError::Lost`]).
pub trait AsyncStore: Send + Sync + 'static {
    /// What this store is, for messages.
    fn describe(&self) -> String;

    /// See [`Store::read`].
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Read>;

    /// See [`Store::write`].
    fn write<'a>(&'a self, key: &'a str, write: &'a Write<'a>) -> StoreFuture<'a, Written>;

    /// See [`Store::keys`].
    fn keys(&self) -> StoreFuture<'_, Vec<String>>;

    /// See [`Store::last_fence`].
    fn last_fence(&self) -> StoreFuture<'_, Fence>;

    /// See [`Store::install`].
    fn install(&self) -> StoreFuture<'_, ()>;

    /// See [`Store::announce`].
    fn announce<'a>(&'a self, key: &'a str, owner: &'a str) -> StoreFuture<'a, ()>;

    /// See [`Store::bound`]: the engine holds each request to it.
    fn bound(&self) -> Option<Duration>;

    /// See [`Store::watcher`]; the watcher is read on a thread of its own, shared by every
    /// waiting task of one `aio::Locks`.
    fn watcher(&self) -> StoreFuture<'_, Option<OpenWatcher>>;
}

/// Opens one more connection of a [`Pooled`] store.
pub type OpenStore = Box<dyn Fn() -> Result<Box<dyn Store>, StoreError> + Send + Sync>;

/// How many connections a [`Pooled`] store opens at most by default.
pub const POOL_SIZE: usize = 8;

/// A blocking [`Store`] made async: each call runs on the runtime's blocking threads
/// (`spawn_blocking`) on one of at most `size` connections, opened as needed. A call whose
/// future is dropped finishes on its thread and gives its connection back. Used for SQLite
/// (which has no async client), MySQL/MariaDB (whose protocol runs one statement at a time per
/// connection, as an async client's pool would), the memory store and stores of your own.
pub struct Pooled {
    open: Option<Arc<OpenStore>>,
    idle: Arc<Mutex<Vec<Box<dyn Store>>>>,
    slots: Arc<tokio::sync::Semaphore>,
    describe: String,
    bound: Option<Duration>,
}

impl std::fmt::Debug for Pooled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("store", &self.describe)
            .finish_non_exhaustive()
    }
}

/// A compare-and-set as a blocking call keeps it (it outlives the caller's borrow).
struct OwnedWrite {
    expected: u64,
    replaces: Vec<u8>,
    version: u64,
    bytes: Option<Vec<u8>>,
    fresh_fences: usize,
    not_before: Option<Instant>,
    forget_at: Option<Instant>,
    holds_for: lock_core::Duration,
}

impl OwnedWrite {
    fn of(w: &Write<'_>) -> Self {
        OwnedWrite {
            expected: w.expected,
            replaces: w.replaces.to_vec(),
            version: w.version,
            bytes: w.bytes.map(<[u8]>::to_vec),
            fresh_fences: w.fresh_fences,
            not_before: w.not_before,
            forget_at: w.forget_at,
            holds_for: w.holds_for,
        }
    }

    fn write(&self) -> Write<'_> {
        Write {
            expected: self.expected,
            replaces: &self.replaces,
            version: self.version,
            bytes: self.bytes.as_deref(),
            fresh_fences: self.fresh_fences,
            not_before: self.not_before,
            forget_at: self.forget_at,
            holds_for: self.holds_for,
        }
    }
}

impl Pooled {
    /// `first` as the pool's first connection; `open` opens more, up to `size` (at least 1):
    /// without it, `first` is the only one.
    #[must_use]
    pub fn new(first: Box<dyn Store>, open: Option<OpenStore>, size: usize) -> Self {
        let size = if open.is_some() { size.max(1) } else { 1 };
        Pooled {
            describe: first.describe(),
            bound: first.bound(),
            open: open.map(Arc::new),
            idle: Arc::new(Mutex::new(vec![first])),
            slots: Arc::new(tokio::sync::Semaphore::new(size)),
        }
    }

    /// Runs `call` on a connection, on a blocking thread.
    async fn call<T: Send + 'static>(
        &self,
        call: impl FnOnce(&mut dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Ok(slot) = Arc::clone(&self.slots).acquire_owned().await else {
            return Err(self.failed("the pool is closed"));
        };
        let (idle, open) = (Arc::clone(&self.idle), self.open.clone());
        let describe = self.describe.clone();
        let task = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let taken = idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let mut store = match (taken, open) {
                (Some(store), _) => store,
                (None, Some(open)) => open()?,
                (None, None) => {
                    return Err(StoreError::Server {
                        store: describe,
                        reason: "no connection is free".into(),
                    })
                }
            };
            let result = call(&mut *store);
            idle.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(store);
            result
        });
        match task.await {
            Ok(result) => result,
            Err(e) => Err(self.failed(&format!("the store call failed on its thread: {e}"))),
        }
    }

    fn failed(&self, reason: &str) -> StoreError {
        StoreError::Lost {
            store: self.describe.clone(),
            reason: reason.to_owned(),
        }
    }
}

impl AsyncStore for Pooled {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Read> {
        let key = key.to_owned();
        Box::pin(self.call(move |s| s.read(&key)))
    }

    fn write<'a>(&'a self, key: &'a str, write: &'a Write<'a>) -> StoreFuture<'a, Written> {
        let (key, write) = (key.to_owned(), OwnedWrite::of(write));
        Box::pin(self.call(move |s| s.write(&key, &write.write())))
    }

    fn keys(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(self.call(|s| s.keys()))
    }

    fn last_fence(&self) -> StoreFuture<'_, Fence> {
        Box::pin(self.call(|s| s.last_fence()))
    }

    fn install(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.call(|s| s.install()))
    }

    fn announce<'a>(&'a self, key: &'a str, owner: &'a str) -> StoreFuture<'a, ()> {
        let (key, owner) = (key.to_owned(), owner.to_owned());
        Box::pin(self.call(move |s| s.announce(&key, &owner)))
    }

    fn bound(&self) -> Option<Duration> {
        self.bound
    }

    fn watcher(&self) -> StoreFuture<'_, Option<OpenWatcher>> {
        Box::pin(self.call(|s| Ok(s.watcher())))
    }
}
