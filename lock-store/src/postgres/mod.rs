//! The PostgreSQL store. A namespace is a schema holding `records` (one row per key), the
//! `fences` sequence (never reissues a value, capped at 2^53 - 1), `meta` (format version, last
//! authority) and `take_over()` (moves the sequence up to the server's time in µs, once, when
//! the server is not the last authority: a promoted standby or a restored copy does not issue a
//! lost tail's tokens again; see `steps/postgres.sql`). The compare-and-set is one prepared
//! statement (an `UPDATE`, an `INSERT` or a `DELETE`): compare the version and the server's
//! clock (`clock_timestamp()`), write, allocate tokens with `nextval` for the row it writes, in
//! one round trip; a conflict then reads the row (see `Statements`). No lock rules are in SQL. The schema is installed by
//! `PostgresStore::open`, idempotently, under an advisory lock so that replicas starting
//! together do not race.
//!
//! Two clients run the same statements: `PostgresStore`, blocking (its own small runtime, one
//! connection), and (feature `tokio`) `AsyncPostgresStore`, whose one connection is shared by
//! every task of the caller's runtime (`tokio-postgres` pipelines their statements).

#[cfg(feature = "tokio")]
mod aio;
mod blocking;

#[cfg(feature = "tokio")]
pub use aio::AsyncPostgresStore;
pub use blocking::PostgresStore;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration as StdDuration;

use lock_core::{Fence, Instant};
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Row, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::steps;
use crate::store::{
    check_namespace, instant_to_sql, version_from_sql, version_to_sql, Read, StoreError, Stored,
    Write, Written, MAX_FENCE,
};

/// The schema format this build installs (in `<schema>.meta`).
pub(super) const FORMAT: &str = "1";

/// Step `name` of `steps/postgres.sql` for schema `ns`.
pub(super) fn step(name: &str, ns: &str) -> String {
    steps::step(steps::POSTGRES, name, &[("ns", ns), ("format", FORMAT)])
}

/// The update or insert step for schema `ns`: calling `take_over(from_time)` and
/// `hold_for(ms)` when the schema has them, else `num_nulls`, which answers 0 and does nothing
/// (a namespace installed before they existed; see `steps/postgres.sql`).
fn writing_step(name: &str, ns: &str, take_over: bool) -> String {
    let [take, hold] = match take_over {
        true => [format!("{ns}.take_over"), format!("{ns}.hold_for")],
        false => [
            "pg_catalog.num_nulls".to_owned(),
            "pg_catalog.num_nulls".to_owned(),
        ],
    };
    steps::fill(
        &step(name, ns),
        &[("take_over", &take), ("hold_for", &hold)],
    )
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
pub(super) struct Statements {
    pub(super) read: Statement,
    pub(super) update: Statement,
    pub(super) insert: Statement,
    pub(super) delete: Statement,
    pub(super) collect: Statement,
    /// The longest `holds_for` this connection wrote to the namespace's `longest` (see
    /// [`cas`]): shorter ones need not be sent.
    pub(super) longest: AtomicU64,
}

impl Statements {
    /// The texts of the read, the three compare-and-sets and the collection step for schema
    /// `ns` (`steps/postgres.sql` says what each does); `take_over`: whether the schema has
    /// `take_over(boolean)`.
    pub(super) fn texts(ns: &str, take_over: bool) -> [String; 5] {
        [
            step("read", ns),
            writing_step("update", ns, take_over),
            writing_step("insert", ns, take_over),
            step("delete", ns),
            step("collect", ns),
        ]
    }
}

pub(super) const COLUMNS: [&str; 5] = ["fences", "forget_at", "key", "record", "version"];

/// The URL's TLS parameters (libpq's names) taken out of it: the URL the client parses, and
/// TLS if `sslmode` asks for it. `require` and `verify-full` check the server's certificate
/// (its chain up to `sslrootcert`, or to the system's roots, and the host name); `verify-ca`
/// its chain only; `disable` (and no `sslmode`) is plain TCP. Stricter than libpq's `require`,
/// which checks nothing without a root file: an unchecked certificate stops no one in the
/// middle. `sslcert` and `sslkey` are the client's certificate and key, for servers that ask.
pub(super) fn tls_of(url: &str) -> Result<(String, Option<MakeRustlsConnect>), String> {
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
pub(super) async fn found(
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
pub(super) fn instant_to_timestamp(at: Instant) -> std::time::SystemTime {
    /// 9999-12-31T23:59:59.999Z in milliseconds since the Unix epoch.
    const LAST: u64 = 253_402_300_799_999;
    std::time::UNIX_EPOCH + StdDuration::from_millis(at.0.min(LAST))
}

/// The error's own words and its cause (the client's `Display` hides the server's message).
pub(super) fn reason(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// How a store opens connections to a server: the parsed URL with this crate's settings (the
/// bound on connecting and on the server's side, the connection's name) and TLS.
pub(super) struct Target {
    pub(super) config: Config,
    pub(super) tls: Option<MakeRustlsConnect>,
    /// The URL without its password, for messages.
    pub(super) shown: String,
}

/// The [`Target`] of `url` for schema `namespace`, every call bounded by `timeout`.
pub(super) fn target(
    url: &str,
    namespace: &str,
    timeout: StdDuration,
) -> Result<Target, StoreError> {
    check_namespace(namespace)?;
    let shown = crate::url::without_password(url);
    let (url, tls) = tls_of(url).map_err(|reason| StoreError::Url {
        url: shown.clone(),
        reason,
    })?;
    let mut config: Config = url
        .parse()
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
    Ok(Target { config, tls, shown })
}

/// What an error from the server or the client means for the store's state.
pub(super) enum Effect {
    /// Nothing changes.
    None,
    /// The connection may be broken: drop it (the next call reconnects).
    DropConnection,
    /// The schema was dropped while the store had it: drop the connection, and the next write
    /// installs it again.
    Uninstalled,
}

/// The [`StoreError`] of `e` on `store`, and what it means for the store's state. `closed`:
/// the connection is known to be closed.
pub(super) fn classify(
    store: String,
    e: &tokio_postgres::Error,
    closed: bool,
) -> (StoreError, Effect) {
    let lost = closed
        || e.is_closed()
        || e.as_db_error().is_none()
        || e.code()
            .is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57P"));
    if lost {
        let reason = reason(e);
        return (StoreError::Lost { store, reason }, Effect::DropConnection);
    }
    if e.code() == Some(&SqlState::UNDEFINED_TABLE)
        || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME)
    {
        // Dropped while this store had it (`lockstore uninstall`).
        return (StoreError::NoNamespace { store }, Effect::Uninstalled);
    }
    if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
        let reason = reason(e);
        return (StoreError::Schema { store, reason }, Effect::None);
    }
    if e.code() == Some(&SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED) {
        return (StoreError::FencesExhausted { store }, Effect::None);
    }
    let reason = reason(e);
    (StoreError::Server { store, reason }, Effect::None)
}

/// A deadlock, a serialization failure or a lock wait past `lock_timeout` aborted the
/// compare-and-set: nothing happened, as in a conflict (the store reads the record).
pub(super) fn is_conflict(e: &tokio_postgres::Error) -> bool {
    e.code()
        .is_some_and(|c| matches!(c.code(), "40P01" | "40001" | "55P03"))
}

/// Prepares the hot path's statements for schema `ns` on `client`.
pub(super) async fn prepare(
    client: &Client,
    ns: &str,
) -> Result<Statements, tokio_postgres::Error> {
    let take_over: bool = client
        .query_one(&step("take-over-exists", ns), &[])
        .await?
        .get(0);
    let [read, update, insert, delete, collect] = Statements::texts(ns, take_over);
    // Every statement of the store looks up one row by its key, which a generic plan does as
    // well as a custom one; left to choose, PostgreSQL plans the compare-and-set anew at every
    // call (measured with `pgbench -M prepared`: ~140 µs per write instead of ~100 µs).
    // Servers before 12 lack the setting.
    let _ = client.batch_execute(&step("plan-cache", "")).await;
    Ok(Statements {
        read: client.prepare(&read).await?,
        update: client.prepare(&update).await?,
        insert: client.prepare(&insert).await?,
        delete: client.prepare(&delete).await?,
        collect: client.prepare(&collect).await?,
        longest: AtomicU64::new(0),
    })
}

/// Installs schema `ns` in one transaction, under an advisory lock (replicas starting
/// together do not race): `Ok(Err(reason))` if what is there is not ours or of another format.
pub(super) async fn install_on(
    client: &mut Client,
    ns: &str,
) -> Result<Result<(), String>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute(&step("install-lock", ns), &[&ns]).await?;
    let columns: Vec<String> = tx
        .query(&step("columns", ns), &[&ns])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !columns.is_empty() && columns != COLUMNS {
        return Ok(Err(format!(
            "table {ns}.records is not ours: columns {columns:?}, expected {COLUMNS:?}"
        )));
    }
    tx.batch_execute(&step("schema", ns)).await?;
    let format: String = tx.query_one(&step("format", ns), &[]).await?.get(0);
    if format != FORMAT {
        return Ok(Err(format!(
            "schema {ns} has format {format}; this build reads {FORMAT}"
        )));
    }
    tx.commit().await?;
    Ok(Ok(()))
}

/// Sends the compare-and-set `write` of `key`: its row (the fresh tokens) if it wrote, none if
/// it did not (see [`Statements`]). `from_time`: tokens start at the server's time on a new
/// authority (see `set_seed_from_time`).
pub(super) async fn cas(
    client: &Client,
    s: &Statements,
    key: &str,
    write: &Write<'_>,
    from_time: bool,
) -> Result<Option<Row>, tokio_postgres::Error> {
    // How long the new record holds a lease's place, for the namespace's `longest` (the
    // recovery delay); 0 when this connection already wrote as long.
    let holds = write.holds_for.as_millis();
    let sent = s.longest.load(Ordering::Relaxed) < holds;
    let holds_sql = if sent {
        i64::try_from(holds).unwrap_or(i64::MAX)
    } else {
        0
    };
    let n = i32::try_from(write.fresh_fences).unwrap_or(i32::MAX);
    let expected = version_to_sql(write.expected);
    let version = version_to_sql(write.version);
    let not_before = write.not_before.map(instant_to_timestamp);
    let forget_at = write.forget_at.map(instant_to_sql);
    let (bytes, replaces) = (write.bytes, write.replaces);
    let (statement, params): (&Statement, Vec<&(dyn ToSql + Sync)>) = match (bytes, write.expected)
    {
        (Some(_), 0) => (
            &s.insert,
            vec![
                &key,
                &version,
                &bytes,
                &n,
                &forget_at,
                &not_before,
                &from_time,
                &holds_sql,
            ],
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
                &from_time,
                &holds_sql,
            ],
        ),
        (None, _) => (&s.delete, vec![&key, &expected, &not_before, &replaces]),
    };
    let answer = client.query_opt(statement, &params).await;
    // Raised only by a write that was made (hold_for runs for the row written).
    let made = matches!(&answer, Ok(Some(row)) if row.get::<_, Option<Vec<i64>>>(0).is_some());
    if sent && made {
        s.longest.fetch_max(holds, Ordering::Relaxed);
    }
    answer
}

/// What a compare-and-set's row says: its fresh tokens, or (`NULL`, until, the server's time)
/// while the server recovers after a change of authority, which refuses it.
pub(super) fn written(store: &str, row: &Row) -> Result<Written, StoreError> {
    if let Some(fences) = row.get::<_, Option<Vec<i64>>>(0) {
        return Ok(Written::Done {
            fences: fences.into_iter().map(|f| Fence(f.max(0) as u64)).collect(),
        });
    }
    let (until, at): (Option<i64>, Option<i64>) = (row.get(1), row.get(2));
    Err(StoreError::Recovering {
        store: store.to_owned(),
        until: Instant(until.unwrap_or(0).max(0) as u64),
        at: Instant(at.unwrap_or(0).max(0) as u64),
    })
}

/// A read's row: the server's time, then the record's version, bytes and tokens.
pub(super) fn read_row(key: &str, row: &Row) -> Result<Read, StoreError> {
    let now: i64 = row.get(0);
    Ok(Read {
        record: stored(key, row.get(1), row.get(2), row.get(3))?,
        now: Instant(now.max(0) as u64),
    })
}

fn stored(
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

/// Where hand-off notices of schema `ns` are sent (`NOTIFY`): its name and `_handoff`.
pub(super) fn channel(ns: &str) -> String {
    format!("{ns}_handoff")
}
