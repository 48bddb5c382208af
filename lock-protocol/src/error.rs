//! The errors of a store client: a store's failure ([`StoreError`]) and what a call answers
//! ([`Error`]).

use std::fmt;

use lock_core::{Instant, LockError};

/// Why a store call failed. Lock refusals are never errors here: they are answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL cannot be used: unknown scheme, missing part, bad parameter.
    Url {
        /// The URL as given (without password).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL names a store this build was compiled without.
    NotCompiled {
        /// The scheme (`redis`, `postgres`, `mysql`, `sqlite`).
        scheme: String,
        /// The cargo feature that adds it.
        feature: &'static str,
    },
    /// A namespace name that is not 1-40 of `a-z`, `0-9`, `_`, starting with a letter.
    Namespace {
        /// The name given.
        name: String,
    },
    /// The server could not be reached or refused the connection.
    Connect {
        /// The store.
        store: String,
        /// The server's or the OS's words.
        reason: String,
    },
    /// The connection failed during a call (dropped, timed out): a write may or may not have
    /// happened. The client re-reads to find out, then reconnects.
    Lost {
        /// The store.
        store: String,
        /// What happened.
        reason: String,
    },
    /// The namespace's tables, scripts or schema are not ours, not the version this build
    /// writes, or cannot be created (permissions).
    Schema {
        /// The store.
        store: String,
        /// What is wrong.
        reason: String,
    },
    /// The namespace does not exist in this store: nothing was ever written to it (a misspelt
    /// name?), or it was uninstalled. Reads answer this, never "free"; the first write creates
    /// it (see `lock-store`'s `Store::install`).
    NoNamespace {
        /// The store and namespace.
        store: String,
    },
    /// A stored record does not decode: it is reported, never reset. A record of a newer
    /// format than this client reads (a newer client wrote it, during a rolling upgrade) is
    /// this error with [`LockError::SnapshotVersion`] naming both versions.
    Corrupt {
        /// The key.
        key: String,
        /// The decoder's error.
        error: LockError,
    },
    /// Other writers kept winning the compare-and-set.
    Contention {
        /// The key.
        key: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// A fencing token would reach 2^53 (JavaScript numbers): the namespace is used up.
    FencesExhausted {
        /// The store.
        store: String,
    },
    /// The decider failed (the lock component trapped, or answered something this build does
    /// not know); the store is untouched.
    Decider {
        /// The store.
        store: String,
        /// What happened.
        reason: String,
    },
    /// Any other error the server answered.
    Server {
        /// The store.
        store: String,
        /// The server's words.
        reason: String,
    },
    /// The server became the namespace's authority (a promoted replica, a restarted server)
    /// and grants nothing before `until`, its recovery delay after the change: a lease the
    /// previous authority granted may have been lost with its record, and may still be held
    /// (docs/stores.md, "Recovery after a change of authority"). Nothing was written. A waiting
    /// acquire waits it out; extensions and releases that grant nothing go on as usual.
    Recovering {
        /// The store.
        store: String,
        /// The store's time from which it grants again.
        until: Instant,
        /// The store's time when it refused.
        at: Instant,
    },
    /// The write was made on the primary, but fewer replicas than the store's URL asks
    /// (Redis `wait_replicas`) acknowledged it in time: a failover may lose it. A grant is
    /// given back at once (the acquire fails with this error, or a waiting one tries again);
    /// an extension stays unsettled (the lease keeps its deadline, the keep-alive tries again);
    /// a release answers this error (a release tried again finds it done).
    Unreplicated {
        /// The store.
        store: String,
        /// How many replicas acknowledged it, of how many, within how long.
        reason: String,
    },
}

impl StoreError {
    /// Every [`StoreError::code`], in declaration order.
    pub const CODES: [&'static str; 14] = [
        "url",
        "not-compiled",
        "namespace",
        "connect",
        "lost",
        "schema",
        "no-namespace",
        "corrupt",
        "contention",
        "fences-exhausted",
        "decider",
        "server",
        "recovering",
        "unreplicated",
    ];

    /// The error's kebab-case name, the same in Rust and JS (the npm package's
    /// `StoreError.code`).
    #[must_use]
    pub fn code(&self) -> &'static str {
        let index = match self {
            StoreError::Url { .. } => 0,
            StoreError::NotCompiled { .. } => 1,
            StoreError::Namespace { .. } => 2,
            StoreError::Connect { .. } => 3,
            StoreError::Lost { .. } => 4,
            StoreError::Schema { .. } => 5,
            StoreError::NoNamespace { .. } => 6,
            StoreError::Corrupt { .. } => 7,
            StoreError::Contention { .. } => 8,
            StoreError::FencesExhausted { .. } => 9,
            StoreError::Decider { .. } => 10,
            StoreError::Server { .. } => 11,
            StoreError::Recovering { .. } => 12,
            StoreError::Unreplicated { .. } => 13,
        };
        Self::CODES[index]
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Url { url, reason } => write!(f, "bad store URL \"{url}\": {reason}"),
            StoreError::NotCompiled { scheme, feature } => write!(
                f,
                "this build has no {scheme} store (enable the lock-store feature \"{feature}\")"
            ),
            StoreError::Namespace { name } => write!(
                f,
                "bad namespace \"{name}\": use 1-40 of a-z, 0-9 and _, starting with a letter"
            ),
            StoreError::Connect { store, reason } => {
                write!(f, "cannot connect to {store}: {reason}")
            }
            StoreError::Lost { store, reason } => {
                write!(f, "lost the connection to {store}: {reason}")
            }
            StoreError::Schema { store, reason } => write!(f, "{store}: {reason}"),
            StoreError::NoNamespace { store } => write!(
                f,
                "{store} does not exist (nothing was ever locked in it; the first lock creates it)"
            ),
            StoreError::Corrupt {
                key,
                error: LockError::SnapshotVersion { found, supported },
            } => write!(
                f,
                "the record of key \"{key}\" is in format version {found}, newer than this \
                 client reads (up to {supported}): a newer client wrote it; upgrade this one \
                 (the record is left as it is)"
            ),
            StoreError::Corrupt { key, error } => {
                write!(f, "the record of key \"{key}\" is corrupt: {error}")
            }
            StoreError::Contention { key, attempts } => write!(
                f,
                "key \"{key}\": other writers won {attempts} compare-and-set attempts in a row"
            ),
            StoreError::FencesExhausted { store } => {
                write!(f, "{store}: the fencing-token counter reached 2^53")
            }
            StoreError::Decider { store, reason } => {
                write!(f, "{store}: the decider failed: {reason}")
            }
            StoreError::Server { store, reason } => write!(f, "{store}: {reason}"),
            StoreError::Recovering { store, until, at } => write!(
                f,
                "{store} took over the namespace (a failover or a restart) and grants nothing \
                 for {} ms more (until {} ms, its time): a lease granted before may have been \
                 lost with its record",
                until.0.saturating_sub(at.0),
                until.0
            ),
            StoreError::Unreplicated { store, reason } => write!(
                f,
                "{store}: the write was made on the primary but may not survive a failover: \
                 {reason}"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The lock refused (`held`, `expired`, `not-owner`, a validation error...).
    Lock(LockError),
    /// The store failed (unreachable, lost connection, corrupt record...).
    Store(StoreError),
    /// `acquire` waited `wait` without being handed the lock.
    WaitTimedOut,
    /// This owner already waits for this key (in another call or process).
    AlreadyWaiting,
    /// The caller gave up the acquire (`lock-store`'s `GiveUp::give_up`) before it was handed the key (or
    /// after, before it took it): its wait was cancelled and what it was handed released.
    GaveUp,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Lock(e) => e.fmt(f),
            Error::Store(e) => e.fmt(f),
            Error::WaitTimedOut => f.write_str("wait timed out"),
            Error::AlreadyWaiting => f.write_str("this owner already waits for this key"),
            Error::GaveUp => f.write_str("the caller gave up the acquire"),
        }
    }
}

impl std::error::Error for Error {}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<LockError> for Error {
    fn from(e: LockError) -> Self {
        Error::Lock(e)
    }
}

impl Error {
    /// This answer to a campaign's ask, in the lock's names (the election recipe decides what
    /// follows; a place in line this candidate id left behind lapses within
    /// [`WAIT_ALIVE`](crate::WAIT_ALIVE)): what every election over a store is told.
    #[must_use]
    pub fn refusal(&self) -> lock_core::election::Refusal {
        use lock_core::election::Refusal;
        match self {
            Error::Lock(e) => Refusal::lock(e),
            Error::Store(_) => Refusal::Unreachable,
            // A campaign never gives its asks up by a `GiveUp`: its shut-down ends it.
            Error::WaitTimedOut | Error::GaveUp => Refusal::WaitTimedOut,
            Error::AlreadyWaiting => Refusal::AlreadyWaiting,
        }
    }
}
