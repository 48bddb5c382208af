//! The blocking PostgreSQL client: one connection driven by a small runtime of the store's
//! own, every statement bounded; the statements, the schema's checks and what errors mean are
//! the module's ([`super`]).

use std::time::Duration as StdDuration;

use std::future::Future;

use lock_core::Fence;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{
    cas, channel, classify, found, install_on, is_conflict, prepare, read_row, reason, step,
    target, written, Effect, Statements,
};
use crate::collect::CollectWalk;
use crate::steps;
use crate::store::{notice, OpenWatcher, Read, Store, StoreError, Watcher, Write, Written};

/// One live connection: the client, the task that drives its socket, its prepared statements.
struct Conn {
    client: Client,
    driver: JoinHandle<()>,
    statements: Statements,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Why a bounded call failed: the server's or the client's error, or no answer within the bound.
enum Failure {
    Sql(tokio_postgres::Error),
    TimedOut(StdDuration),
    /// The helper thread of a call made inside an async runtime could not start.
    Thread(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Sql(e)
    }
}

/// Runs the client's futures, each within the bound: a server or path that stops answering
/// fails the call (the connection is then dropped) instead of hanging the caller.
///
/// The runtime is this store's own. A caller that is itself inside a tokio runtime (async code
/// calling the blocking API) cannot block on another runtime in its thread (tokio panics):
/// there the call runs on a helper thread while the caller's thread waits for it, and the
/// runtime is shut down without blocking when the store is dropped.
struct Bound {
    /// Always `Some` until dropped.
    runtime: Option<Runtime>,
    timeout: StdDuration,
    /// The bound of the calls that follow, if less than `timeout` (see `Store::limit_calls`).
    limit: Option<StdDuration>,
}

impl Bound {
    fn new(runtime: Runtime, timeout: StdDuration) -> Self {
        Bound {
            runtime: Some(runtime),
            timeout,
            limit: None,
        }
    }

    fn runtime(&self) -> &Runtime {
        match &self.runtime {
            Some(runtime) => runtime,
            None => unreachable!("the runtime is only taken when the store is dropped"),
        }
    }

    fn run<T: Send, E: Into<Failure> + Send>(
        &self,
        call: impl Future<Output = Result<T, E>> + Send,
    ) -> Result<T, Failure> {
        let bound = self.limit.unwrap_or(self.timeout);
        let runtime = self.runtime();
        let bounded = async { tokio::time::timeout(bound, call).await };
        let answer = if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|scope| {
                let helper = std::thread::Builder::new()
                    .name("lock-store-postgres".into())
                    .spawn_scoped(scope, || runtime.block_on(bounded));
                match helper.map(std::thread::ScopedJoinHandle::join) {
                    Ok(Ok(answer)) => Ok(answer),
                    Ok(Err(panic)) => std::panic::resume_unwind(panic),
                    Err(e) => Err(e),
                }
            })
        } else {
            Ok(runtime.block_on(bounded))
        };
        match answer {
            Ok(Ok(result)) => result.map_err(Into::into),
            Ok(Err(_)) => Err(Failure::TimedOut(bound)),
            Err(e) => Err(Failure::Thread(e.to_string())),
        }
    }

    /// A new connection (connect, TLS if `tls`, and startup bounded together), its driver
    /// spawned.
    fn connect(
        &self,
        config: &Config,
        tls: Option<&MakeRustlsConnect>,
    ) -> Result<(Client, JoinHandle<()>), Failure> {
        Ok(match tls {
            None => {
                let (client, connection) = self.run(config.connect(NoTls))?;
                let driver = self.runtime().spawn(async move {
                    let _ = connection.await;
                });
                (client, driver)
            }
            Some(tls) => {
                let (client, connection) = self.run(config.connect(tls.clone()))?;
                let driver = self.runtime().spawn(async move {
                    let _ = connection.await;
                });
                (client, driver)
            }
        })
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        // Never blocks (dropping a runtime does, which panics inside another runtime): the
        // connection's tasks are cancelled and the socket closed.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `$call` (an expression using `$conn`, the live connection) within the bound, mapping a
/// failure with [`PostgresStore::failed`].
macro_rules! on_connection {
    ($store:ident, $conn:ident => $call:expr) => {{
        $store.connection()?;
        let result = match &$store.conn {
            Some($conn) => $store.bound.run($call),
            None => unreachable_connection(),
        };
        result.map_err(|e| $store.failed(&e))
    }};
}

/// Records in PostgreSQL.
pub struct PostgresStore {
    config: Config,
    /// TLS (`sslmode=require`, `verify-ca`, `verify-full`), or plain TCP.
    tls: Option<MakeRustlsConnect>,
    conn: Option<Conn>,
    /// A connection kept from a look that found no schema (no statements prepared on it).
    probe: Option<(Client, JoinHandle<()>)>,
    bound: Bound,
    shown: String,
    schema: String,
    /// The collection of forgotten records.
    walk: CollectWalk<String>,
    /// Whether the schema was seen to exist: until then each new connection looks for it, and
    /// calls answer [`StoreError::NoNamespace`] without it.
    installed: bool,
    /// The schema holds objects of an earlier build (see `steps/postgres.sql`): the next write installs
    /// again first, which removes them (reads change nothing).
    upgrade: bool,
    /// Tokens start at the server's time on a new authority (see
    /// [`set_seed_from_time`](Self::set_seed_from_time)).
    seed_from_time: bool,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`) and checks schema
    /// `namespace` if it exists (creating nothing: the first write installs it, see
    /// [`Store::install`]). Every call is bounded by `timeout` on this side (connect and
    /// startup together, then each statement: past it the call fails with
    /// [`StoreError::Lost`] or [`StoreError::Connect`] and the connection is dropped), and on
    /// the server's side (`statement_timeout`, `lock_timeout`).
    ///
    /// # Errors
    /// [`StoreError::Url`], [`StoreError::Namespace`], [`StoreError::Connect`],
    /// [`StoreError::Schema`] (a foreign table in the schema, another format, no permission).
    pub fn open(url: &str, namespace: &str, timeout: StdDuration) -> Result<Self, StoreError> {
        let super::Target { config, tls, shown } = target(url, namespace, timeout)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Connect {
                store: format!("{shown} namespace \"{namespace}\""),
                reason: format!("cannot start the client's runtime: {e}"),
            })?;
        let mut store = PostgresStore {
            config,
            tls,
            conn: None,
            probe: None,
            bound: Bound::new(runtime, timeout),
            shown,
            schema: namespace.to_owned(),
            walk: CollectWalk::default(),
            installed: false,
            upgrade: false,
            seed_from_time: true,
        };
        match store.connection() {
            Ok(_) | Err(StoreError::NoNamespace { .. }) => Ok(store),
            Err(e) => Err(e),
        }
    }

    /// A new connection and its driver, within the bound.
    fn new_connection(&self) -> Result<(Client, JoinHandle<()>), StoreError> {
        self.bound
            .connect(&self.config, self.tls.as_ref())
            .map_err(|e| StoreError::Connect {
                store: self.describe(),
                reason: crate::tls::explain(failure_reason(&e)),
            })
    }

    /// The live connection, made (and its statements prepared) if there is none.
    fn connection(&mut self) -> Result<&Conn, StoreError> {
        if self.conn.is_none() {
            // A connection that found no schema last time looks again (a namespace not
            // installed yet is read without a new connection each time).
            let (client, driver) = match self.probe.take() {
                Some((client, driver)) if !client.is_closed() => (client, driver),
                _ => self.new_connection()?,
            };
            if !self.installed {
                let ns = self.schema.clone();
                let found = self.bound.run(found(&client, &ns));
                let missing = match found {
                    Ok(Ok(Some(outdated))) => {
                        self.upgrade = outdated;
                        None
                    }
                    Ok(Ok(None)) => Some(StoreError::NoNamespace {
                        store: self.describe(),
                    }),
                    Ok(Err(reason)) => Some(StoreError::Schema {
                        store: self.describe(),
                        reason,
                    }),
                    Err(e) => Some(self.failed(&e)),
                };
                if let Some(e) = missing {
                    if matches!(e, StoreError::NoNamespace { .. }) {
                        self.probe = Some((client, driver));
                    } else {
                        driver.abort();
                    }
                    return Err(e);
                }
                self.installed = true;
            }
            self.adopt(client, driver)?;
        }
        self.conn.as_ref().ok_or_else(|| StoreError::Connect {
            store: self.describe(),
            reason: "no connection".into(),
        })
    }

    /// Prepares the hot path's statements on a new connection and makes it the live one.
    fn adopt(&mut self, client: Client, driver: JoinHandle<()>) -> Result<(), StoreError> {
        let prepared = self.bound.run(prepare(&client, &self.schema));
        match prepared {
            Ok(statements) => {
                self.conn = Some(Conn {
                    client,
                    driver,
                    statements,
                });
                Ok(())
            }
            Err(e) => {
                driver.abort();
                Err(self.failed(&e))
            }
        }
    }

    /// Maps an error: a broken connection or no answer within the bound drops it (the next
    /// call reconnects) and is [`StoreError::Lost`]; permissions are [`StoreError::Schema`].
    fn failed(&mut self, e: &Failure) -> StoreError {
        let store = self.describe();
        let e = match e {
            Failure::TimedOut(_) | Failure::Thread(_) => {
                self.conn = None;
                return StoreError::Lost {
                    store,
                    reason: failure_reason(e),
                };
            }
            Failure::Sql(e) => e,
        };
        let closed = self.conn.as_ref().is_some_and(|c| c.client.is_closed());
        let (error, effect) = classify(store, e, closed);
        match effect {
            Effect::None => {}
            Effect::DropConnection => self.conn = None,
            Effect::Uninstalled => {
                self.installed = false;
                self.conn = None;
            }
        }
        error
    }

    /// Whether the first write that takes tokens on a server that is not the namespace's last
    /// authority (a promoted standby, a restarted or restored server) moves the tokens up to
    /// the server's time in microseconds (the default: tokens never repeat after a failover
    /// that lost writes), or tokens count from 1 (tests that expect tokens 1, 2, 3...).
    pub fn set_seed_from_time(&mut self, seed: bool) {
        self.seed_from_time = seed;
    }

    fn install(&mut self) -> Result<(), StoreError> {
        let ns = self.schema.clone();
        // The hot path's statements are prepared on the same connection once the schema
        // exists: the store is connected when it is opened, and its first call does not
        // connect.
        let (mut client, driver) = self.new_connection()?;
        let result = self.bound.run(install_on(&mut client, &ns));
        let installed = match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(StoreError::Schema {
                store: self.describe(),
                reason,
            }),
            Err(e) => match self.failed(&e) {
                StoreError::Server { store, reason } => Err(StoreError::Schema { store, reason }),
                other => Err(other),
            },
        };
        match installed {
            Ok(()) => {
                self.installed = true;
                self.conn = None;
                self.probe = None;
                self.adopt(client, driver)
            }
            Err(e) => {
                drop(client);
                driver.abort();
                Err(e)
            }
        }
    }
}

impl PostgresStore {
    /// One step of the collection walk, from the key after `after` (best effort: a failure
    /// only delays it).
    fn collect(&mut self, after: &str) -> Result<(), StoreError> {
        let limit = i64::from(CollectWalk::<String>::EVERY);
        let row = on_connection!(self, c => c.client.query_one(&c.statements.collect, &[&after, &limit]))?;
        self.walk.stopped_at(row.get::<_, Option<String>>(0));
        Ok(())
    }
}

/// Never happens: [`PostgresStore::connection`] just made the connection. Answered as a lost
/// connection rather than a panic.
fn unreachable_connection<T>() -> Result<T, Failure> {
    Err(Failure::TimedOut(StdDuration::ZERO))
}

/// A failure's words.
fn failure_reason(e: &Failure) -> String {
    match e {
        Failure::Sql(e) => reason(e),
        Failure::TimedOut(bound) => format!("no answer within {bound:?}"),
        Failure::Thread(e) => format!("cannot start a helper thread: {e}"),
    }
}

impl Store for PostgresStore {
    fn describe(&self) -> String {
        format!("{} namespace \"{}\"", self.shown, self.schema)
    }

    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        let row = on_connection!(self, c => c.client.query_one(&c.statements.read, &[&key]))?;
        read_row(key, &row)
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        self.connection()?;
        if self.upgrade {
            // Best effort: a role that may not change the schema writes without it.
            self.upgrade = false;
            let _ = PostgresStore::install(self);
            self.connection()?;
        }
        let result = match &self.conn {
            Some(c) => self.bound.run(cas(
                &c.client,
                &c.statements,
                key,
                write,
                self.seed_from_time,
            )),
            None => unreachable_connection(),
        };
        let row = match result {
            Ok(row) => row,
            Err(Failure::Sql(e)) if is_conflict(&e) => {
                return Ok(Written::Conflict(self.read(key)?));
            }
            Err(e) => return Err(self.failed(&e)),
        };
        if let Some(after) = self.walk.count_write() {
            let _ = self.collect(&after);
        }
        match row {
            Some(row) => written(&self.describe(), &row),
            None => Ok(Written::Conflict(self.read(key)?)),
        }
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        let sql = step("keys", &self.schema);
        let rows = on_connection!(self, c => c.client.query(sql.as_str(), &[]))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        let sql = step("last-fence", &self.schema);
        let row = on_connection!(self, c => c.client.query_one(sql.as_str(), &[]))?;
        Ok(Fence(row.get::<_, i64>(0).max(0) as u64))
    }

    fn install(&mut self) -> Result<(), StoreError> {
        PostgresStore::install(self)
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        let sql = step("clear", &self.schema);
        match on_connection!(self, c => c.client.batch_execute(&sql)) {
            Err(StoreError::NoNamespace { .. }) => Ok(()),
            other => other,
        }
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        let sql = step("uninstall", &self.schema);
        let (client, driver) = self.new_connection()?;
        let dropped = self.bound.run(client.batch_execute(&sql));
        driver.abort();
        self.installed = false;
        self.conn = None;
        dropped.map_err(|e| self.failed(&e))
    }

    fn announce(&mut self, key: &str, owner: &str) -> Result<(), StoreError> {
        let channel = self.channel();
        let payload = notice(key, owner);
        let sql = step("announce", &self.schema);
        on_connection!(self, c => c.client.execute(sql.as_str(), &[&channel, &payload])).map(|_| ())
    }

    fn bound(&self) -> Option<StdDuration> {
        Some(self.bound.timeout)
    }

    fn limit_calls(&mut self, left: Option<StdDuration>) {
        self.bound.limit = left.filter(|&left| left < self.bound.timeout);
    }

    fn watcher(&self) -> Option<OpenWatcher> {
        Some(watcher(
            &self.config,
            self.tls.as_ref(),
            self.bound.timeout,
            self.channel(),
            self.describe(),
        ))
    }
}

/// Opens a [`PostgresWatcher`] of `channel` on a connection of its own.
pub(super) fn watcher(
    config: &Config,
    tls: Option<&MakeRustlsConnect>,
    timeout: StdDuration,
    channel: String,
    shown: String,
) -> OpenWatcher {
    let listen = Listen {
        config: config.clone(),
        tls: tls.cloned(),
        timeout,
        channel,
        shown,
    };
    Box::new(move || PostgresWatcher::open(listen).map(|w| Box::new(w) as Box<dyn Watcher>))
}

/// A listening connection of its own, driven by a runtime of its own while it is read: its
/// driver forwards each notice of the namespace's channel.
struct PostgresWatcher {
    bound: Bound,
    notices: tokio::sync::mpsc::UnboundedReceiver<String>,
    _client: Client,
    driver: JoinHandle<()>,
    shown: String,
}

/// What a [`PostgresWatcher`] needs to connect, taken from its store.
struct Listen {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    timeout: StdDuration,
    channel: String,
    shown: String,
}

/// Drives a listening connection, passing each notice's payload on to `tx` until either end
/// is gone.
async fn forward<S, T>(
    mut connection: tokio_postgres::Connection<S, T>,
    tx: tokio::sync::mpsc::UnboundedSender<String>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
        match message {
            Ok(AsyncMessage::Notification(n)) => {
                if tx.send(n.payload().to_owned()).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

impl PostgresWatcher {
    fn open(store: Listen) -> Result<Self, StoreError> {
        let shown = store.shown;
        let fail = |e: &Failure| StoreError::Connect {
            store: shown.clone(),
            reason: failure_reason(e),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Connect {
                store: shown.clone(),
                reason: format!("cannot start the client's runtime: {e}"),
            })?;
        let bound = Bound::new(runtime, store.timeout);
        let (tx, notices) = tokio::sync::mpsc::unbounded_channel();
        let (client, driver) = match &store.tls {
            None => {
                let (client, connection) = bound
                    .run(store.config.connect(NoTls))
                    .map_err(|e| fail(&e))?;
                (client, bound.runtime().spawn(forward(connection, tx)))
            }
            Some(tls) => {
                let (client, connection) = bound
                    .run(store.config.connect(tls.clone()))
                    .map_err(|e| fail(&e))?;
                (client, bound.runtime().spawn(forward(connection, tx)))
            }
        };
        let listen = steps::step(steps::POSTGRES, "listen", &[("channel", &store.channel)]);
        if let Err(e) = bound.run(client.batch_execute(&listen)) {
            driver.abort();
            return Err(fail(&e));
        }
        Ok(PostgresWatcher {
            bound,
            notices,
            _client: client,
            driver,
            shown,
        })
    }
}

impl Watcher for PostgresWatcher {
    fn next(&mut self, timeout: StdDuration) -> Result<Option<String>, StoreError> {
        let notices = &mut self.notices;
        let heard = self
            .bound
            .runtime()
            .block_on(async { tokio::time::timeout(timeout, notices.recv()).await });
        match heard {
            Ok(Some(payload)) => Ok(Some(payload)),
            Err(_) => Ok(None),
            Ok(None) => Err(StoreError::Lost {
                store: self.shown.clone(),
                reason: "the notice connection closed".into(),
            }),
        }
    }
}

impl Drop for PostgresWatcher {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl PostgresStore {
    /// Where hand-off notices of the namespace are sent (`NOTIFY`): the schema's name and
    /// `_handoff`.
    fn channel(&self) -> String {
        channel(&self.schema)
    }

    /// The bound on each statement.
    #[must_use]
    pub fn timeout(&self) -> StdDuration {
        self.bound.timeout
    }
}
