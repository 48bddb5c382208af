//! [`Client`]: a blocking `Locks`' hold on its store, the engine behind one mutex, through which
//! every call of the `Locks` and every `Lease` it handed out sends its requests. `Locks` builds
//! on it and so do its leases, neither knowing the other.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lock_core::{Instant, Limits, Request, Response};
use lock_protocol::decided::{Decided, TimeSource};
use lock_protocol::departures::{AttemptId, Departures};
use lock_protocol::Error;

use crate::decider::AnyDecider;
use crate::engine::Engine;
use crate::listen::Hub;
use crate::store::{Store, StoreError};

/// What the clones of one `Locks` share.
struct Shared {
    engine: Mutex<Engine<Box<dyn Store>, AnyDecider>>,
    /// The releases of leases dropped inside an async runtime, which run on threads of their
    /// own past the drop (see `Lease`'s `Drop`): lock-protocol's same-owner rule.
    departures: Mutex<Departures>,
    /// Notified when one of them is over.
    departed: Condvar,
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
                departures: Mutex::new(Departures::default()),
                departed: Condvar::new(),
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

    fn departures(&self) -> MutexGuard<'_, Departures> {
        (self.shared.departures)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The release of a dropped lease of `owner` on `key` goes on past the drop: until
    /// [`released_dropped`](Self::released_dropped), a new acquire of the key by the same owner
    /// waits ([`after_departures`](Self::after_departures)), so that it is never handed, as
    /// already held, the lease being released.
    pub(crate) fn releasing_dropped(&self, key: &str, owner: &str) -> AttemptId {
        self.departures().begin(key, owner, true)
    }

    /// The release `id` (see [`releasing_dropped`](Self::releasing_dropped)) is over.
    pub(crate) fn released_dropped(&self, key: &str, id: AttemptId) {
        if self.departures().finish(key, id) {
            self.shared.departed.notify_all();
        }
    }

    /// Returns once no release of a dropped lease of `owner` on `key` is under way, or once
    /// `stop` answers true (looked at every 20 ms while waiting). Each such release is bounded
    /// by the store's call bound.
    pub(crate) fn after_departures(&self, key: &str, owner: &str, stop: impl Fn() -> bool) {
        let mut departures = self.departures();
        while departures.must_wait(key, owner) && !stop() {
            let nap = Duration::from_millis(20);
            departures = (self.shared.departed.wait_timeout(departures, nap))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
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
