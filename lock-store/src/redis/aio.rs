//! The async Redis client: one multiplexed connection per store, shared by every task (calls
//! are pipelined on it, none waits for a connection of its own), the same commands as the
//! blocking client ([`Space`]).
//!
//! Why not redis-rs' `ConnectionManager`: it reconnects after an IO error only, and a path that
//! goes silent without closing (a gray failure) gives none. Here a call with no answer within
//! the bound, or one given up by its caller (the engine's bound), drops the connection it was
//! sent on, and the next call connects again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration as StdDuration;

use lock_core::Fence;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Value};

use super::replicas::Replicas;
use super::space::{Space, NO_SCRIPT};
use super::target::Target;
use crate::async_store::{AsyncStore, StoreFuture};
use crate::bounded::within;
use crate::store::{check_namespace, OpenWatcher, Read, StoreError, Write, Written};

/// Records in Redis, for async code (see [`RedisStore`](crate::store::RedisStore) for the
/// layout and the URL).
pub struct AsyncRedisStore {
    target: Target,
    space: Space,
    timeout: StdDuration,
    seed_from_time: bool,
    /// Whether the namespace was seen to exist (see the blocking store's).
    installed: AtomicBool,
    /// The live connection and its number (a failed call drops it only if it is still the one
    /// it was sent on).
    live: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// The `run_id` of the server the live connection reached (see [`Space::server_id`]).
    server_id: Mutex<Arc<str>>,
    /// Held while connecting: tasks that find no connection wait for one connect.
    connecting: tokio::sync::Mutex<()>,
    connections: AtomicU64,
}

impl std::fmt::Debug for AsyncRedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.space.described)
    }
}

impl AsyncRedisStore {
    /// Connects to `url` (as [`RedisStore::open`](crate::store::RedisStore::open)) and checks
    /// the namespace's format marker if it has one (creating nothing). Every call waits at
    /// most `timeout`. Call it within a tokio runtime.
    ///
    /// # Errors
    /// [`StoreError::Url`], [`StoreError::Namespace`], [`StoreError::Connect`],
    /// [`StoreError::Schema`].
    pub async fn open(
        url: &str,
        namespace: &str,
        timeout: StdDuration,
    ) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let (url, replicas) = Replicas::take(url, timeout)?;
        let (target, shown) = Target::of(&url)?;
        let mut space = Space::new(&shown, namespace);
        space.replicas = replicas;
        let store = AsyncRedisStore {
            target,
            space,
            timeout,
            seed_from_time: true,
            installed: AtomicBool::new(false),
            live: Mutex::new(None),
            server_id: Mutex::new(Arc::from("")),
            connecting: tokio::sync::Mutex::new(()),
            connections: AtomicU64::new(0),
        };
        store.connection().await?;
        match store.present().await {
            Ok(()) | Err(StoreError::NoNamespace { .. }) => Ok(store),
            Err(e) => Err(e),
        }
    }

    /// Whether every token is also at least the server's time in microseconds (the default:
    /// tokens never repeat after a data loss or a failover) or counts from 1 (tests that expect
    /// tokens 1, 2, 3...).
    #[must_use]
    pub fn seed_from_time(mut self, seed: bool) -> Self {
        self.seed_from_time = seed;
        self
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Option<(u64, MultiplexedConnection)>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops connection `number` if it is still the live one.
    fn forget(&self, number: u64) {
        let mut live = self.live();
        if live.as_ref().is_some_and(|(n, _)| *n == number) {
            *live = None;
        }
    }

    /// The live connection (a handle to it), made if there is none.
    async fn connection(&self) -> Result<(u64, MultiplexedConnection), StoreError> {
        if let Some(live) = self.live().clone() {
            return Ok(live);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(live) = self.live().clone() {
            return Ok(live);
        }
        let fail = |reason: String| StoreError::Connect {
            store: self.space.described.clone(),
            reason,
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        // Asking the Sentinels (if any; on a thread: their client blocks), connecting and naming
        // the connection share the bound.
        let client = match &self.target {
            Target::Server(client) => client.clone(),
            sentinels => {
                let (target, bound) = (sentinels.clone(), self.timeout);
                tokio::task::spawn_blocking(move || target.client(bound))
                    .await
                    .map_err(|e| fail(e.to_string()))?
                    .map_err(fail)?
            }
        };
        let connect = async {
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            let (info,): (String,) = self.space.greeting().query_async(&mut conn).await?;
            Ok::<_, redis::RedisError>((conn, info))
        };
        let conn = match tokio::time::timeout(self.timeout, connect).await {
            Ok(Ok((conn, info))) => {
                *self
                    .server_id
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Arc::from(Space::server_id(&info));
                conn
            }
            Ok(Err(e)) if e.is_timeout() => {
                return Err(fail(format!("no answer within {:?}", self.timeout)))
            }
            // A TLS server that wants a client certificate says so in an alert after the
            // handshake, which the multiplexed connection's writer meets as a closed pipe.
            Ok(Err(e)) if e.is_io_error() && self.space.described.starts_with("rediss://") => {
                return Err(fail(format!(
                    "TLS: the server closed the connection after the handshake; does it ask \
                     for a client certificate (name it and its key in the URL)? {e}"
                )))
            }
            Ok(Err(e)) => return Err(fail(crate::tls::explain(e.to_string()))),
            Err(_) => return Err(fail(format!("no answer within {:?}", self.timeout))),
        };
        let number = self.connections.fetch_add(1, Ordering::Relaxed);
        *self.live() = Some((number, conn.clone()));
        Ok((number, conn))
    }

    /// Runs `call` on the live connection within the bound; a failure that may have broken the
    /// connection, no answer in time, or a caller that gives up drops it.
    async fn call<T, F>(
        &self,
        call: impl FnOnce(MultiplexedConnection) -> F,
    ) -> Result<Result<T, redis::RedisError>, StoreError>
    where
        F: Future<Output = Result<T, redis::RedisError>>,
    {
        let (number, conn) = self.connection().await?;
        let answer = within(self.timeout, call(conn), || self.forget(number)).await;
        match answer {
            Some(Ok(v)) => Ok(Ok(v)),
            Some(Err(e)) => {
                let failure = self.space.failure(&e, self.timeout);
                if failure.drop_connection {
                    self.forget(number);
                    return Err(failure.error);
                }
                Ok(Err(e))
            }
            None => Err(crate::store::no_answer(
                self.space.described.clone(),
                self.timeout,
            )),
        }
    }

    /// [`call`](Self::call) with every failure mapped.
    async fn query<T, F>(
        &self,
        call: impl FnOnce(MultiplexedConnection) -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, redis::RedisError>>,
    {
        match self.call(call).await? {
            Ok(v) => Ok(v),
            Err(e) => Err(self.space.failure(&e, self.timeout).error),
        }
    }

    /// Maps a verdict of [`Space::marker`] or [`Space::presence`].
    fn verdict(
        &self,
        verdict: Result<Result<bool, StoreError>, redis::RedisError>,
    ) -> Result<(), StoreError> {
        match verdict {
            Ok(Ok(true)) => {
                self.installed.store(true, Ordering::Relaxed);
                Ok(())
            }
            Ok(Ok(false)) => Err(StoreError::NoNamespace {
                store: self.space.described.clone(),
            }),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(self.space.failure(&e, self.timeout).error),
        }
    }

    /// Whether the namespace exists: looked up until it was seen once.
    async fn present(&self) -> Result<(), StoreError> {
        if self.installed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let query = self.space.presence_query();
        let found = self
            .call(|mut c| async move { query.query_async(&mut c).await })
            .await?;
        self.verdict(self.space.presence(found))
    }

    /// Every key matching `pattern`, by `SCAN`.
    async fn scan(&self, pattern: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut cursor: u64 = 0;
        let mut found = Vec::new();
        loop {
            let page = Space::scan(pattern, cursor);
            let (next, keys): (u64, Vec<Vec<u8>>) = self
                .query(|mut c| async move { page.query_async(&mut c).await })
                .await?;
            found.extend(keys);
            cursor = next;
            if cursor == 0 {
                return Ok(found);
            }
        }
    }
}

impl AsyncStore for AsyncRedisStore {
    fn describe(&self) -> String {
        self.space.described.clone()
    }

    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Read> {
        Box::pin(async move {
            self.present().await?;
            let query = self.space.read_query(key);
            let reply: Value = self
                .query(|mut c| async move { query.query_async(&mut c).await })
                .await?;
            let read = self.space.read(key, &reply);
            if let Err(StoreError::NoNamespace { .. }) = read {
                self.installed.store(false, Ordering::Relaxed);
            }
            read
        })
    }

    fn write<'a>(&'a self, key: &'a str, write: &'a Write<'a>) -> StoreFuture<'a, Written> {
        Box::pin(async move {
            self.present().await?;
            let server_id = Arc::clone(
                &self
                    .server_id
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            let cas = self.space.cas(key, write, self.seed_from_time, &server_id);
            let script = &self.space.script;
            let Some(replicas) = &self.space.replicas else {
                let reply: Value = self
                    .query(|mut c| async move {
                        match cas.query_async(&mut c).await {
                            // The server does not have the script (a restart, `SCRIPT FLUSH`):
                            // nothing ran.
                            Err(e) if e.kind() == NO_SCRIPT => {
                                script.load_async(&mut c).await?;
                                cas.query_async(&mut c).await
                            }
                            other => other,
                        }
                    })
                    .await?;
                return self.space.written(key, &reply);
            };
            // With `wait_replicas`, the `WAIT` follows in the same round trip.
            let mut pipe = redis::pipe();
            pipe.add_command(cas).add_command(replicas.command());
            let (reply, acked) = self
                .query(|mut c| async move {
                    let pipe = &pipe;
                    let send = |mut c: MultiplexedConnection| async move {
                        let mut replies = c.req_packed_commands(pipe, 0, 2).await?;
                        let acked = replies.pop();
                        let reply = replies.pop().unwrap_or(Value::Nil).extract_error()?;
                        Ok::<_, redis::RedisError>((reply, acked))
                    };
                    match send(c.clone()).await {
                        // As above: nothing ran.
                        Err(e) if e.kind() == NO_SCRIPT => {
                            script.load_async(&mut c).await?;
                            send(c).await
                        }
                        other => other,
                    }
                })
                .await?;
            self.space.written_and_kept(key, &reply, acked.as_ref())
        })
    }

    fn keys(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            self.present().await?;
            let found = self.scan(&self.space.records_pattern()).await?;
            let keys = self.space.keys_of(found);
            if keys.is_empty() {
                return Ok(keys);
            }
            let lengths = self.space.lengths_query(&keys);
            let lengths: Vec<i64> = self
                .query(|mut c| async move { lengths.query_async(&mut c).await })
                .await?;
            Ok(Space::live(keys, lengths))
        })
    }

    fn last_fence(&self) -> StoreFuture<'_, Fence> {
        Box::pin(async move {
            self.present().await?;
            let query = self.space.counter_query();
            let v: Value = self
                .query(|mut c| async move { query.query_async(&mut c).await })
                .await?;
            self.space.last_fence(&v)
        })
    }

    fn install(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let cmd = self.space.install_marker();
            let found = self
                .call(|mut c| async move { cmd.query_async(&mut c).await })
                .await?;
            self.verdict(self.space.marker(found))
        })
    }

    fn announce<'a>(&'a self, key: &'a str, owner: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let cmd = self.space.announce(key, owner);
            self.query(|mut c| async move { cmd.query_async::<i64>(&mut c).await })
                .await
                .map(|_| ())
        })
    }

    fn bound(&self) -> Option<StdDuration> {
        Some(self.timeout)
    }

    fn watcher(&self) -> StoreFuture<'_, Option<OpenWatcher>> {
        let watcher = super::blocking::watcher(&self.target, &self.space, self.timeout);
        Box::pin(std::future::ready(Ok(Some(watcher))))
    }
}
