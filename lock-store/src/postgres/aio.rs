//! The async PostgreSQL client: a few connections per store, driven on the caller's runtime
//! and shared by every task (`tokio-postgres` pipelines the statements of the tasks on one
//! connection), the same statements and error meanings as the blocking client ([`super`]). A
//! call takes an idle connection, opens another while fewer than [`CONNECTIONS`] are open, or
//! else shares the least busy: one connection is one server process, which runs its statements
//! one after the other, so 64 busy tasks need more than one. A statement with no answer within the
//! bound, or given up by its caller (the engine's bound), drops the connection it was sent on
//! (a path may have gone silent); the next call connects again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration as StdDuration;

use lock_core::Fence;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};

use super::{
    cas, channel, classify, found, install_on, is_conflict, prepare, read_row, step, target,
    written, Effect, Statements, Target,
};
use crate::async_store::{AsyncStore, StoreFuture};
use crate::bounded::within;
use crate::collect::CollectWalk;
use crate::store::{notice, OpenWatcher, Read, StoreError, Write, Written};

/// Records in PostgreSQL, for async code (see [`PostgresStore`](crate::store::PostgresStore)
/// for the schema and the URL).
pub struct AsyncPostgresStore {
    target: Target,
    schema: String,
    described: String,
    timeout: StdDuration,
    /// The live connections, each with its number (a failed call drops the one it was sent on,
    /// if it is still there).
    live: Mutex<Vec<(u64, Arc<Conn>)>>,
    /// A connection kept from a look that found no schema (no statements prepared on it).
    probe: Mutex<Option<(Client, JoinHandle<()>)>>,
    /// Held while connecting: tasks that find no connection to use wait for one connect.
    connecting: tokio::sync::Mutex<()>,
    connections: AtomicU64,
    /// Whether the schema was seen to exist (see the blocking store's).
    installed: AtomicBool,
    /// The schema holds objects of an earlier build: the next write installs again first.
    upgrade: AtomicBool,
    walk: Mutex<CollectWalk<String>>,
    /// Tokens start at the server's time on a new authority (see
    /// [`seed_from_time`](Self::seed_from_time)).
    seed_from_time: bool,
}

impl std::fmt::Debug for AsyncPostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.described)
    }
}

/// How many connections an [`AsyncPostgresStore`] opens at most.
pub const CONNECTIONS: usize = 8;

/// One live connection: the client, the task that drives its socket, its prepared statements,
/// and how many calls are in flight on it.
struct Conn {
    client: Client,
    driver: JoinHandle<()>,
    statements: Statements,
    busy: std::sync::atomic::AtomicUsize,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// A call in flight on a connection, counted in its `busy` while it lives.
struct Busy(Arc<Conn>);

impl Busy {
    fn on(conn: &Arc<Conn>) -> Busy {
        conn.busy.fetch_add(1, Ordering::Relaxed);
        Busy(Arc::clone(conn))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A statement's answer, or a compare-and-set aborted by the server as in a conflict.
enum Answer<T> {
    Done(T),
    Conflict,
}

impl AsyncPostgresStore {
    /// Connects to `url` (as [`PostgresStore::open`](crate::store::PostgresStore::open)) and
    /// checks schema `namespace` if it exists (creating nothing). Every call waits at most
    /// `timeout`. Call it within a tokio runtime: the connection is driven by a task on it.
    ///
    /// # Errors
    /// [`StoreError::Url`], [`StoreError::Namespace`], [`StoreError::Connect`],
    /// [`StoreError::Schema`].
    pub async fn open(
        url: &str,
        namespace: &str,
        timeout: StdDuration,
    ) -> Result<Self, StoreError> {
        let target = target(url, namespace, timeout)?;
        let store = AsyncPostgresStore {
            described: format!("{} namespace \"{namespace}\"", target.shown),
            target,
            schema: namespace.to_owned(),
            timeout,
            live: Mutex::new(Vec::new()),
            probe: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            connections: AtomicU64::new(0),
            installed: AtomicBool::new(false),
            upgrade: AtomicBool::new(false),
            walk: Mutex::new(CollectWalk::default()),
            seed_from_time: true,
        };
        match store.connection().await {
            Ok(_) | Err(StoreError::NoNamespace { .. }) => Ok(store),
            Err(e) => Err(e),
        }
    }

    /// Whether the first write that takes tokens on a server that is not the namespace's last
    /// authority (a promoted standby, a restarted or restored server) moves the tokens up to
    /// the server's time in microseconds (the default: tokens never repeat after a failover
    /// that lost writes), or tokens count from 1 (tests that expect tokens 1, 2, 3...).
    #[must_use]
    pub fn seed_from_time(mut self, seed: bool) -> Self {
        self.seed_from_time = seed;
        self
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Arc<Conn>)>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops connection `number` if it is still live.
    fn forget(&self, number: u64) {
        self.live().retain(|(n, _)| *n != number);
    }

    /// A live connection to use: an idle one, or (all busy) the least busy once
    /// [`CONNECTIONS`] are open; `None` if another should be opened.
    fn pick(&self) -> Option<(u64, Arc<Conn>)> {
        let live = self.live();
        let least = live
            .iter()
            .min_by_key(|(_, c)| c.busy.load(Ordering::Relaxed))?;
        let idle = least.1.busy.load(Ordering::Relaxed) == 0;
        (idle || live.len() >= CONNECTIONS).then(|| least.clone())
    }

    fn no_answer(&self) -> StoreError {
        crate::store::no_answer(self.described.clone(), self.timeout)
    }

    /// A new connection, its driver spawned on this runtime (connect, TLS and startup within
    /// the bound).
    async fn connect(&self) -> Result<(Client, JoinHandle<()>), StoreError> {
        let fail = |reason: String| StoreError::Connect {
            store: self.described.clone(),
            reason,
        };
        let config = &self.target.config;
        let connect = async {
            Ok::<_, tokio_postgres::Error>(match &self.target.tls {
                None => {
                    let (client, connection) = config.connect(NoTls).await?;
                    (client, tokio::spawn(async move { drop(connection.await) }))
                }
                Some(tls) => {
                    let (client, connection) = config.connect(tls.clone()).await?;
                    (client, tokio::spawn(async move { drop(connection.await) }))
                }
            })
        };
        match tokio::time::timeout(self.timeout, connect).await {
            Ok(Ok(connected)) => Ok(connected),
            Ok(Err(e)) => Err(fail(crate::tls::explain(super::reason(&e)))),
            Err(_) => Err(fail(format!("no answer within {:?}", self.timeout))),
        }
    }

    /// A connection to send a call on (see [`pick`](Self::pick)), a new one made (the schema
    /// looked for until it was seen once, the statements prepared) if that is better.
    async fn connection(&self) -> Result<(u64, Arc<Conn>), StoreError> {
        if let Some(live) = self.pick() {
            return Ok(live);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(live) = self.pick() {
            return Ok(live);
        }
        // A connection that found no schema last time looks again (a namespace not installed
        // yet is read without a new connection each time).
        let probe = self
            .probe
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let (client, driver) = match probe {
            Some((client, driver)) if !client.is_closed() => (client, driver),
            _ => self.connect().await?,
        };
        let ready = async {
            if !self.installed.load(Ordering::Relaxed) {
                match found(&client, &self.schema).await? {
                    Ok(Some(outdated)) => self.upgrade.store(outdated, Ordering::Relaxed),
                    Ok(None) => {
                        return Ok(Err(StoreError::NoNamespace {
                            store: self.described.clone(),
                        }))
                    }
                    Err(reason) => {
                        return Ok(Err(StoreError::Schema {
                            store: self.described.clone(),
                            reason,
                        }))
                    }
                }
                self.installed.store(true, Ordering::Relaxed);
            }
            prepare(&client, &self.schema).await.map(Ok)
        };
        let statements = match tokio::time::timeout(self.timeout, ready).await {
            Ok(Ok(Ok(statements))) => statements,
            Ok(Ok(Err(e))) => {
                if matches!(e, StoreError::NoNamespace { .. }) {
                    *self.probe.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some((client, driver));
                } else {
                    driver.abort();
                }
                return Err(e);
            }
            Ok(Err(e)) => {
                driver.abort();
                return Err(classify(self.described.clone(), &e, client.is_closed()).0);
            }
            Err(_) => {
                driver.abort();
                return Err(self.no_answer());
            }
        };
        let conn = Arc::new(Conn {
            client,
            driver,
            statements,
            busy: std::sync::atomic::AtomicUsize::new(0),
        });
        let number = self.connections.fetch_add(1, Ordering::Relaxed);
        self.live().push((number, Arc::clone(&conn)));
        Ok((number, conn))
    }

    /// Runs `call` on the live connection within the bound; a failure that may have broken the
    /// connection, no answer in time, or a caller that gives up drops it.
    async fn call<T, F>(&self, call: impl FnOnce(Arc<Conn>) -> F) -> Result<Answer<T>, StoreError>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let (number, conn) = self.connection().await?;
        let _busy = Busy::on(&conn);
        let answer = within(self.timeout, call(Arc::clone(&conn)), || {
            self.forget(number)
        })
        .await;
        match answer {
            Some(Ok(v)) => Ok(Answer::Done(v)),
            Some(Err(e)) if is_conflict(&e) => Ok(Answer::Conflict),
            Some(Err(e)) => {
                let (error, effect) = classify(self.described.clone(), &e, conn.client.is_closed());
                match effect {
                    Effect::None => {}
                    Effect::DropConnection => self.forget(number),
                    Effect::Uninstalled => {
                        self.installed.store(false, Ordering::Relaxed);
                        self.forget(number);
                    }
                }
                Err(error)
            }
            None => Err(self.no_answer()),
        }
    }

    /// [`call`](Self::call) of a statement that is never aborted as in a conflict.
    async fn run<T, F>(&self, call: impl FnOnce(Arc<Conn>) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        match self.call(call).await? {
            Answer::Done(v) => Ok(v),
            Answer::Conflict => Err(StoreError::Server {
                store: self.described.clone(),
                reason: "the statement was aborted by a deadlock or a lock wait".into(),
            }),
        }
    }

    async fn read_key(&self, key: &str) -> Result<Read, StoreError> {
        let row = self
            .run(|c| async move { c.client.query_one(&c.statements.read, &[&key]).await })
            .await?;
        read_row(key, &row)
    }

    /// Installs the schema on a connection of its own; the next call connects afresh.
    async fn install_schema(&self) -> Result<(), StoreError> {
        let (mut client, driver) = self.connect().await?;
        let result =
            tokio::time::timeout(self.timeout, install_on(&mut client, &self.schema)).await;
        let closed = client.is_closed();
        drop(client);
        driver.abort();
        match result {
            Ok(Ok(Ok(()))) => {
                self.installed.store(true, Ordering::Relaxed);
                self.live().clear();
                if let Some((_, driver)) = self
                    .probe
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                {
                    driver.abort();
                }
                Ok(())
            }
            Ok(Ok(Err(reason))) => Err(StoreError::Schema {
                store: self.described.clone(),
                reason,
            }),
            Ok(Err(e)) => match classify(self.described.clone(), &e, closed).0 {
                StoreError::Server { store, reason } => Err(StoreError::Schema { store, reason }),
                other => Err(other),
            },
            Err(_) => Err(self.no_answer()),
        }
    }

    /// One step of the collection walk, from the key after `after` (best effort).
    async fn collect(&self, after: String) {
        let limit = i64::from(CollectWalk::<String>::EVERY);
        let row = self
            .run(|c| async move {
                c.client
                    .query_one(&c.statements.collect, &[&after, &limit])
                    .await
            })
            .await;
        if let Ok(row) = row {
            let stopped = row.get::<_, Option<String>>(0);
            self.walk
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .stopped_at(stopped);
        }
    }
}

impl AsyncStore for AsyncPostgresStore {
    fn describe(&self) -> String {
        self.described.clone()
    }

    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Read> {
        Box::pin(self.read_key(key))
    }

    fn write<'a>(&'a self, key: &'a str, write: &'a Write<'a>) -> StoreFuture<'a, Written> {
        Box::pin(async move {
            self.connection().await?;
            if self.upgrade.swap(false, Ordering::Relaxed) {
                // Best effort: a role that may not change the schema writes without it.
                let _ = self.install_schema().await;
            }
            let answer = self
                .call(|c| async move {
                    cas(&c.client, &c.statements, key, write, self.seed_from_time).await
                })
                .await?;
            let due = self
                .walk
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .count_write();
            if let Some(after) = due {
                self.collect(after).await;
            }
            match answer {
                Answer::Done(Some(row)) => written(&self.describe(), &row),
                Answer::Done(None) | Answer::Conflict => {
                    Ok(Written::Conflict(self.read_key(key).await?))
                }
            }
        })
    }

    fn keys(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            let sql = step("keys", &self.schema);
            let rows = self
                .run(|c| async move { c.client.query(sql.as_str(), &[]).await })
                .await?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    fn last_fence(&self) -> StoreFuture<'_, Fence> {
        Box::pin(async move {
            let sql = step("last-fence", &self.schema);
            let row = self
                .run(|c| async move { c.client.query_one(sql.as_str(), &[]).await })
                .await?;
            Ok(Fence(row.get::<_, i64>(0).max(0) as u64))
        })
    }

    fn install(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.install_schema())
    }

    fn announce<'a>(&'a self, key: &'a str, owner: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let sql = step("announce", &self.schema);
            let (channel, payload) = (channel(&self.schema), notice(key, owner));
            self.run(|c| async move { c.client.execute(sql.as_str(), &[&channel, &payload]).await })
                .await
                .map(|_| ())
        })
    }

    fn bound(&self) -> Option<StdDuration> {
        Some(self.timeout)
    }

    fn watcher(&self) -> StoreFuture<'_, Option<OpenWatcher>> {
        let watcher = super::blocking::watcher(
            &self.target.config,
            self.target.tls.as_ref(),
            self.timeout,
            channel(&self.schema),
            self.described.clone(),
        );
        Box::pin(std::future::ready(Ok(Some(watcher))))
    }
}
