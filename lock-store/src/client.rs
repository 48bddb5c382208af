//! [`Client`]: a blocking `Locks`' hold on its store, the engine behind one mutex, through which
//! every call of the `Locks` and every `Lease` it handed out sends its requests. `Locks` builds
//! on it and so do its leases, neither knowing the other.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lock_core::{Instant, Limits, Request, Response};
use lock_protocol::decided::{Decided, TimeSource};
use lock_protocol::Error;

use crate::decider::AnyDecider;
use crate::engine::Engine;
use crate::listen::Hub;
use crate::store::{Store, StoreError};

/// What the clones of one `Locks` share.
struct Shared {
    engine: Mutex<Engine<Box<dyn Store>, AnyDecider>>,
}

/// A `Locks`' store, its hand-off notices and its settings. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Client {
    shared: Arc<Shared>,
    /// The notices of hand-offs, heard on one connection for all waiting calls.
    pub(crate) hub: Arc<Hub>,
    /// The longest a waiter sleeps between two looks at its key.
    pub(crate) poll: Duration,
    /// See [`Options::adopt_held`](crate::Options::adopt_held).
    pub(crate) adopt_held: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("store", &self.describe())
            .finish()
    }
}

impl Client {
    /// A client of `store`, decided by `decider`, requests checked against `limits`.
    pub(crate) fn new(
        store: Box<dyn Store>,
        decider: AnyDecider,
        limits: Limits,
        adopt_held: bool,
    ) -> Result<Self, Error> {
        let engine = Engine::with_decider(store, decider, limits, TimeSource::Store)?;
        Ok(Client {
            shared: Arc::new(Shared {
                engine: Mutex::new(engine),
            }),
            hub: Arc::new(Hub::default()),
            poll: Duration::from_millis(50),
            adopt_held,
        })
    }

    /// The engine (calls take turns on it).
    pub(crate) fn engine(&self) -> MutexGuard<'_, Engine<Box<dyn Store>, AnyDecider>> {
        // The engine holds no invariant across a panic: at worst a remembered record is stale,
        // and the next compare-and-set corrects it.
        (self.shared.engine)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One request on `key` at the store's time.
    pub(crate) fn request<'r>(
        &self,
        key: &str,
        make: impl Fn(Instant) -> Request<'r>,
    ) -> Result<Decided<Response>, StoreError> {
        self.engine().request(key, Instant::ZERO, make)
    }

    /// A decider's answer of the wrong kind for the request (a broken component, say): the
    /// one place it becomes an error.
    pub(crate) fn unexpected(&self, answer: &Response) -> Error {
        Error::Store(StoreError::Server {
            store: self.describe(),
            reason: format!("unexpected answer {answer:?}"),
        })
    }

    /// The store and namespace, for messages (no password).
    pub(crate) fn describe(&self) -> String {
        self.engine().store_mut().describe()
    }
}
