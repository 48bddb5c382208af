//! The PostgreSQL store. A namespace is a schema holding `records` (one row per key), the
//! `fences` sequence (never reissues a value, capped at 2^53 - 1) and `meta` (format version).
//! The compare-and-set is one prepared statement (an `UPDATE`, an `INSERT` or a `DELETE`):
//! compare the version and the server's clock (`clock_timestamp()`), write, allocate tokens with
//! `nextval` for the row it writes, in one round trip; a conflict then reads the row (see
//! [`Statements`]). No lock rules are in SQL. The schema is installed by
//! [`PostgresStore::open`], idempotently, under an advisory lock so that replicas starting
//! together do not race.

use std::time::Duration as StdDuration;

use lock_core::{Fence, Instant};
use std::future::Future;

use crate::collect::CollectWalk;
use crate::steps;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Row, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::store::{
    check_namespace, instant_to_sql, notice, version_from_sql, version_to_sql, OpenWatcher, Read,
    Store, StoreError, Stored, Watcher, Write, Written, MAX_FENCE,
};

/// The schema format this build installs (in `<schema>.meta`).
const FORMAT: &str = "1";

/// Step `name` of `steps/postgres.sql` for schema `ns`.
fn step(name: &str, ns: &str) -> String {
    steps::step(steps::POSTGRES, name, &[("ns", ns), ("format", FORMAT)])
}

/// The statements of the hot path, prepared once per connection: the read, the three
/// compare-and-sets (replace a row, insert one, delete one) and a step of the collection. A
/// compare-and-set answers the fresh tokens if it wrote, and no row if it did not (the version differs, or the server's clock is
/// behind the decision): the store then reads the row as it is now, a second round trip that
/// only a conflict pays. Plain statements rather than one `WITH` that also answers the row on a
/// conflict: measured with `pgbench -M prepared` and `synchronous_commit = off`, ~95-110 µs
/// against ~110-120 µs per write, both with generic plans (see `PostgresStore::connection`),
/// and the reply of a conflict is a fresh read, not the statement's snapshot.
///
/// Tokens are taken in the statement that writes, for the row it writes, after the writer read
/// the version it replaces (so after that version's own tokens): a key's tokens increase in the
/// order of its writes. A write that loses a race for an existing row takes none (the row is
/// locked before its tokens are taken); only two writers creating the same new key at once
/// can burn the loser's tokens (a gap, never a repeat).
///
/// A write's `not_before` is a `timestamptz` compared with `clock_timestamp()` as it is: the
/// same test as the milliseconds of the read's time (a whole number of milliseconds against the
/// clock's microseconds), without its `numeric` arithmetic at every write (measured: ~4 % more
/// pairs per second at 16 connections).
struct Statements {
    read: Statement,
    update: Statement,
    insert: Statement,
    delete: Statement,
    collect: Statement,
}

impl Statements {
    /// The texts of the read, the three compare-and-sets and the collection step for schema
    /// `ns` (`steps/postgres.sql` says what each does).
    fn texts(ns: &str) -> [String; 5] {
        ["read", "update", "insert", "delete", "collect"].map(|name| step(name, ns))
    }
}

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

const COLUMNS: [&str; 5] = ["fences", "forget_at", "key", "record", "version"];

/// Records in PostgreSQL.
pub struct PostgresStore {
    config: Config,
    /// TLS (`sslmode=require`, `verify-ca`, `verify-full`), or plain TCP.
    tls: Option<MakeRustlsConnect>,
    conn: Option<Conn>,
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
        check_namespace(namespace)?;
        let shown = crate::url::without_password(url);
        let (url, tls) = tls_of(url).map_err(|reason| StoreError::Url {
            url: shown.clone(),
            reason,
        })?;
        let mut config: Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| StoreError::Url {
                    url: shown.clone(),
                    reason: e.to_string(),
                })?;
        if tls.is_some() {
            config.ssl_mode(SslMode::Require);
        }
        let ms = timeout.as_millis();
        config
            .connect_timeout(timeout)
            .tcp_user_timeout(timeout)
            .keepalives(true)
            .keepalives_idle(StdDuration::from_secs(10))
            .application_name(format!("lock-store:{namespace}"))
            .options(format!(
                "-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={}",
                ms * 2
            ));
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
            bound: Bound::new(runtime, timeout),
            shown,
            schema: namespace.to_owned(),
            walk: CollectWalk::default(),
            installed: false,
            upgrade: false,
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
            let (client, driver) = self.new_connection()?;
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
                    driver.abort();
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
        let [read, update, insert, delete, collect] = Statements::texts(&self.schema);
        let prepared = self.bound.run(async {
            // Every statement of the store looks up one row by its key, which a generic
            // plan does as well as a custom one; left to choose, PostgreSQL plans the
            // compare-and-set anew at every call (measured with `pgbench -M prepared`:
            // ~140 µs per write instead of ~100 µs). Servers before 12 lack the setting.
            let _ = client.batch_execute(&step("plan-cache", "")).await;
            Ok::<_, tokio_postgres::Error>(Statements {
                read: client.prepare(&read).await?,
                update: client.prepare(&update).await?,
                insert: client.prepare(&insert).await?,
                delete: client.prepare(&delete).await?,
                collect: client.prepare(&collect).await?,
            })
        });
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
        let lost = e.is_closed()
            || e.as_db_error().is_none()
            || self.conn.as_ref().is_some_and(|c| c.client.is_closed())
            || e.code()
                .is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57P"));
        if lost {
            self.conn = None;
            return StoreError::Lost {
                store,
                reason: reason(e),
            };
        }
        if e.code() == Some(&SqlState::UNDEFINED_TABLE)
            || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME)
        {
            // Dropped while this store had it (`lockstore uninstall`): the next write
            // installs it again.
            self.installed = false;
            self.conn = None;
            return StoreError::NoNamespace { store };
        }
        if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
            return StoreError::Schema {
                store,
                reason: reason(e),
            };
        }
        if e.code() == Some(&SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED) {
            return StoreError::FencesExhausted { store };
        }
        StoreError::Server {
            store,
            reason: reason(e),
        }
    }

    fn install(&mut self) -> Result<(), StoreError> {
        let ns = self.schema.clone();
        let sql = step("schema", &ns);
        // The hot path's statements are prepared on the same connection once the schema
        // exists: the store is connected when it is opened, and its first call does not
        // connect.
        let (mut client, driver) = self.new_connection()?;
        let result = self.bound.run(async {
            let tx = client.transaction().await?;
            tx.execute(&step("install-lock", &ns), &[&ns]).await?;
            let columns: Vec<String> = tx
                .query(&step("columns", &ns), &[&ns])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            if !columns.is_empty() && columns != COLUMNS {
                return Ok(Err(format!(
                    "table {ns}.records is not ours: columns {columns:?}, expected {COLUMNS:?}"
                )));
            }
            tx.batch_execute(&sql).await?;
            let format: String = tx.query_one(&step("format", &ns), &[]).await?.get(0);
            if format != FORMAT {
                return Ok(Err(format!(
                    "schema {ns} has format {format}; this build reads {FORMAT}"
                )));
            }
            tx.commit().await?;
            Ok::<_, tokio_postgres::Error>(Ok(()))
        });
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
                self.adopt(client, driver)
            }
            Err(e) => {
                drop(client);
                driver.abort();
                Err(e)
            }
        }
    }

    fn stored(
        &self,
        key: &str,
        version: Option<i64>,
        record: Option<Vec<u8>>,
        fences: Option<Vec<i64>>,
    ) -> Result<Option<Stored>, StoreError> {
        let (Some(version), Some(bytes), Some(fences)) = (version, record, fences) else {
            return Ok(None);
        };
        let fences: Option<Vec<Fence>> = fences
            .into_iter()
            .map(|f| {
                u64::try_from(f)
                    .ok()
                    .filter(|&f| f > 0 && f <= MAX_FENCE)
                    .map(Fence)
            })
            .collect();
        let fences = fences.ok_or_else(|| StoreError::Corrupt {
            key: key.to_owned(),
            error: lock_core::LockError::SnapshotCorrupt {
                reason: lock_core::Corruption::LeaseFenceNotIssued,
            },
        })?;
        Ok(Some(Stored {
            version: version_from_sql(version),
            bytes,
            fences,
        }))
    }

    /// A read's row: the server's time, then the record's version, bytes and tokens.
    fn read_row(&self, key: &str, row: &Row) -> Result<Read, StoreError> {
        let now: i64 = row.get(0);
        Ok(Read {
            record: self.stored(key, row.get(1), row.get(2), row.get(3))?,
            now: Instant(now.max(0) as u64),
        })
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

/// The URL's TLS parameters (libpq's names) taken out of it: the URL the client parses, and
/// TLS if `sslmode` asks for it. `require` and `verify-full` check the server's certificate
/// (its chain up to `sslrootcert`, or to the system's roots, and the host name); `verify-ca`
/// its chain only; `disable` (and no `sslmode`) is plain TCP. Stricter than libpq's `require`,
/// which checks nothing without a root file: an unchecked certificate stops no one in the
/// middle. `sslcert` and `sslkey` are the client's certificate and key, for servers that ask.
fn tls_of(url: &str) -> Result<(String, Option<MakeRustlsConnect>), String> {
    let (rest, params) =
        crate::tls::take_params(url, &["sslmode", "sslrootcert", "sslcert", "sslkey"]);
    let get = |name: &str| {
        params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let files = get("sslrootcert").is_some() || get("sslcert").is_some();
    let check = match get("sslmode") {
        Some("disable") => return Ok((rest, None)),
        None if !files => return Ok((rest, None)),
        None | Some("require" | "verify-full" | "prefer" | "allow") => crate::tls::Check::Full,
        Some("verify-ca") => crate::tls::Check::ChainOnly,
        Some(other) => {
            return Err(format!(
                "sslmode={other}: use disable, require, verify-ca or verify-full"
            ))
        }
    };
    let client = match (get("sslcert"), get("sslkey")) {
        (Some(cert), Some(key)) => Some((std::path::Path::new(cert), std::path::Path::new(key))),
        (None, None) => None,
        _ => return Err("sslcert and sslkey go together".into()),
    };
    let config =
        crate::tls::client_config(get("sslrootcert").map(std::path::Path::new), client, check)?;
    Ok((rest, Some(MakeRustlsConnect::new(config))))
}

/// What schema `ns` holds: `None` (no such schema or no `meta` table), this store's current
/// tables (`Some(false)`), or its tables with objects an earlier build made that installing
/// again removes (`Some(true)`); a reason if what is there is not ours or of another format.
/// Reads only.
async fn found(
    client: &Client,
    ns: &str,
) -> Result<Result<Option<bool>, String>, tokio_postgres::Error> {
    let meta: Option<String> = client
        .query_one(&step("meta-exists", ns), &[&format!("{ns}.meta")])
        .await?
        .get(0);
    if meta.is_none() {
        return Ok(Ok(None));
    }
    let columns: Vec<String> = client
        .query(&step("columns", ns), &[&ns])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if columns != COLUMNS {
        return Ok(Err(format!(
            "table {ns}.records is not ours: columns {columns:?}, expected {COLUMNS:?}"
        )));
    }
    let format: Option<String> = client
        .query_opt(&step("format", ns), &[])
        .await?
        .map(|r| r.get(0));
    let outdated: bool = client
        .query_one(
            &step("outdated", ns),
            &[&format!("{ns}.records_forget_at"), &ns],
        )
        .await?
        .get(0);
    match format.as_deref() {
        Some(FORMAT) => Ok(Ok(Some(outdated))),
        other => Ok(Err(format!(
            "schema {ns} has format {other:?}; this build reads {FORMAT}"
        ))),
    }
}

/// `at` (milliseconds since the Unix epoch on the store's clock) as a `timestamptz`, for a
/// `not_before`. Past the year 9999 (no server clock gets there) it stays at the year 9999, so
/// that the client's conversion never wraps: the test against the clock then fails, as it did
/// for the instant itself.
fn instant_to_timestamp(at: Instant) -> std::time::SystemTime {
    /// 9999-12-31T23:59:59.999Z in milliseconds since the Unix epoch.
    const LAST: u64 = 253_402_300_799_999;
    std::time::UNIX_EPOCH + StdDuration::from_millis(at.0.min(LAST))
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

/// The error's own words and its cause (the client's `Display` hides the server's message).
fn reason(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

impl Store for PostgresStore {
    fn describe(&self) -> String {
        format!("{} namespace \"{}\"", self.shown, self.schema)
    }

    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        let row = on_connection!(self, c => c.client.query_one(&c.statements.read, &[&key]))?;
        self.read_row(key, &row)
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        let n = i32::try_from(write.fresh_fences).unwrap_or(i32::MAX);
        let expected = version_to_sql(write.expected);
        let version = version_to_sql(write.version);
        let not_before = write.not_before.map(instant_to_timestamp);
        let forget_at = write.forget_at.map(instant_to_sql);
        self.connection()?;
        if self.upgrade {
            // Best effort: a role that may not change the schema writes without it.
            self.upgrade = false;
            let _ = PostgresStore::install(self);
            self.connection()?;
        }
        let result = match &self.conn {
            Some(c) => {
                let s = &c.statements;
                let bytes = write.bytes;
                let replaces = write.replaces;
                let (statement, params): (&Statement, Vec<&(dyn ToSql + Sync)>) =
                    match (bytes, write.expected) {
                        (Some(_), 0) => (
                            &s.insert,
                            vec![&key, &version, &bytes, &n, &forget_at, &not_before],
                        ),
                        (Some(_), _) => (
                            &s.update,
                            vec![
                                &key,
                                &expected,
                                &version,
                                &bytes,
                                &n,
                                &forget_at,
                                &not_before,
                                &replaces,
                            ],
                        ),
                        (None, _) => (&s.delete, vec![&key, &expected, &not_before, &replaces]),
                    };
                self.bound.run(c.client.query_opt(statement, &params))
            }
            None => unreachable_connection(),
        };
        let row = match result {
            Ok(row) => row,
            // A deadlock, a serialization failure or a lock wait past `lock_timeout` aborted the
            // statement: nothing happened, as in a conflict. Decide again from the record.
            Err(Failure::Sql(e))
                if e.code()
                    .is_some_and(|c| matches!(c.code(), "40P01" | "40001" | "55P03")) =>
            {
                return Ok(Written::Conflict(self.read(key)?));
            }
            Err(e) => return Err(self.failed(&e)),
        };
        if let Some(after) = self.walk.count_write() {
            let _ = self.collect(&after);
        }
        match row {
            Some(row) => Ok(Written::Done {
                fences: (row.get::<_, Vec<i64>>(0).into_iter())
                    .map(|f| Fence(f.max(0) as u64))
                    .collect(),
            }),
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
        let listen = Listen {
            config: self.config.clone(),
            tls: self.tls.clone(),
            timeout: self.bound.timeout,
            channel: self.channel(),
            shown: self.describe(),
        };
        Some(Box::new(move || {
            PostgresWatcher::open(listen).map(|w| Box::new(w) as Box<dyn Watcher>)
        }))
    }
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
        format!("{}_handoff", self.schema)
    }

    /// The bound on each statement.
    #[must_use]
    pub fn timeout(&self) -> StdDuration {
        self.bound.timeout
    }
}
