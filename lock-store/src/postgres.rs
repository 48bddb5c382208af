//! The PostgreSQL store. A namespace is a schema holding `records` (one row per key), the
//! `fences` sequence (never reissues a value, capped at 2^53 - 1), `meta` (format version) and
//! the `cas` function: compare the version, write, allocate tokens with `nextval` while the row
//! is locked, or return the current row; all with `clock_timestamp()` and in one round trip. No
//! lock rules are in SQL. The schema is installed by [`PostgresStore::open`], idempotently, under
//! an advisory lock so that replicas starting together do not race.

use std::time::Duration as StdDuration;

use lock_core::{Fence, Instant};
use postgres::{Client, Config, NoTls, Row, Statement};

use crate::store::{
    check_namespace, instant_to_sql, version_from_sql, version_to_sql, Read, Store, StoreError,
    Stored, Write, Written, MAX_FENCE,
};

/// The schema format this build installs (in `<schema>.meta`).
const FORMAT: &str = "1";

/// The schema, for namespace `__NS__` (a checked identifier).
const SCHEMA: &str = r#"
CREATE SCHEMA IF NOT EXISTS __NS__;
CREATE TABLE IF NOT EXISTS __NS__.meta (name text PRIMARY KEY, value text NOT NULL);
INSERT INTO __NS__.meta VALUES ('format', '__FORMAT__') ON CONFLICT (name) DO NOTHING;
CREATE TABLE IF NOT EXISTS __NS__.records (
    key text PRIMARY KEY,
    version bigint NOT NULL,
    record bytea NOT NULL,
    fences bigint[] NOT NULL,
    forget_at bigint
);
CREATE INDEX IF NOT EXISTS records_forget_at ON __NS__.records (forget_at) WHERE forget_at IS NOT NULL;
CREATE SEQUENCE IF NOT EXISTS __NS__.fences MINVALUE 1 MAXVALUE 9007199254740991 NO CYCLE;
CREATE OR REPLACE FUNCTION __NS__.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
CREATE OR REPLACE FUNCTION __NS__.cas(
    p_key text, p_expected bigint, p_version bigint, p_record bytea, p_n int,
    p_not_before bigint, p_forget_at bigint)
RETURNS TABLE (done boolean, now_ms bigint, version bigint, record bytea, fences bigint[])
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    t bigint := __NS__.now_ms();
    f bigint[] := '{}';
    n_rows int := 0;
BEGIN
    IF p_not_before IS NULL OR t >= p_not_before THEN
        -- Tokens are taken in the statement that writes, after the writer read the version it
        -- replaces (so after that version's own tokens): a key's tokens increase in the order of
        -- its writes. Only a write that races another one can burn tokens (a gap, never a repeat).
        IF p_expected = 0 THEN
            INSERT INTO __NS__.records AS r (key, version, record, fences, forget_at)
            SELECT p_key, p_version, p_record,
                CASE WHEN p_n > 0
                    THEN ARRAY(SELECT nextval('__NS__.fences') FROM generate_series(1, p_n))
                    ELSE '{}'::bigint[] END,
                p_forget_at
            WHERE NOT EXISTS (SELECT 1 FROM __NS__.records AS e WHERE e.key = p_key)
            ON CONFLICT (key) DO NOTHING
            RETURNING r.fences INTO f;
        ELSIF p_record IS NULL THEN
            DELETE FROM __NS__.records AS r WHERE r.key = p_key AND r.version = p_expected;
        ELSE
            UPDATE __NS__.records AS r
            SET version = p_version, record = p_record, forget_at = p_forget_at,
                fences = CASE WHEN p_n > 0
                    THEN ARRAY(SELECT nextval('__NS__.fences') FROM generate_series(1, p_n))
                    ELSE '{}'::bigint[] END
            WHERE r.key = p_key AND r.version = p_expected
            RETURNING r.fences INTO f;
        END IF;
        GET DIAGNOSTICS n_rows = ROW_COUNT;
        f := coalesce(f, '{}');
    END IF;
    IF n_rows = 1 THEN
        RETURN QUERY SELECT true, t, p_version, NULL::bytea, f;
    ELSE
        RETURN QUERY SELECT false, t, r.version, r.record, r.fences
        FROM (SELECT 1) AS one LEFT JOIN __NS__.records AS r ON r.key = p_key;
    END IF;
END
$$;
-- Collects records that are free and forgotten (called now and then by writers).
CREATE OR REPLACE FUNCTION __NS__.collect(p_limit int) RETURNS int LANGUAGE sql VOLATILE AS $$
    WITH gone AS (
        DELETE FROM __NS__.records WHERE key IN (
            SELECT key FROM __NS__.records WHERE forget_at <= __NS__.now_ms() LIMIT p_limit
            FOR UPDATE SKIP LOCKED)
        RETURNING 1)
    SELECT count(*)::int FROM gone
$$;
"#;

/// The two statements of the hot path, prepared once per connection.
struct Statements {
    read: Statement,
    cas: Statement,
}

const COLUMNS: [&str; 5] = ["fences", "forget_at", "key", "record", "version"];

/// Records in PostgreSQL.
pub struct PostgresStore {
    config: Config,
    client: Option<(Client, Statements)>,
    shown: String,
    schema: String,
    timeout: StdDuration,
    writes: u32,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`) and installs (or
    /// checks) schema `namespace`. Every statement is bounded by `timeout` (server side
    /// `statement_timeout` and `lock_timeout`, plus the connect and TCP timeouts).
    ///
    /// # Errors
    /// [`StoreError::Url`], [`StoreError::Namespace`], [`StoreError::Connect`],
    /// [`StoreError::Schema`] (a foreign table in the schema, another format, no permission).
    pub fn open(url: &str, namespace: &str, timeout: StdDuration) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let shown = crate::url::without_password(url);
        let mut config: Config = url.parse().map_err(|e: postgres::Error| StoreError::Url {
            url: shown.clone(),
            reason: e.to_string(),
        })?;
        let ms = timeout.as_millis();
        config
            .connect_timeout(timeout)
            .tcp_user_timeout(timeout)
            .keepalives(true)
            .keepalives_idle(StdDuration::from_secs(10))
            .application_name(&format!("lock-store:{namespace}"))
            .options(&format!(
                "-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={}",
                ms * 2
            ));
        let mut store = PostgresStore {
            config,
            client: None,
            shown,
            schema: namespace.to_owned(),
            timeout,
            writes: 0,
        };
        store.install()?;
        Ok(store)
    }

    fn client(&mut self) -> Result<&mut Client, StoreError> {
        Ok(&mut self.connection()?.0)
    }

    fn connection(&mut self) -> Result<&mut (Client, Statements), StoreError> {
        if self.client.is_none() {
            let store = self.describe();
            let mut client = self
                .config
                .connect(NoTls)
                .map_err(|e| StoreError::Connect {
                    store: store.clone(),
                    reason: reason(&e),
                })?;
            let ns = &self.schema;
            let read = format!(
                "SELECT {ns}.now_ms(), r.version, r.record, r.fences \
                 FROM (SELECT 1) AS one LEFT JOIN {ns}.records AS r ON r.key = $1"
            );
            let cas = format!("SELECT * FROM {ns}.cas($1, $2, $3, $4, $5, $6, $7)");
            let prepared = client.prepare(&read).and_then(|read| {
                let cas = client.prepare(&cas)?;
                Ok(Statements { read, cas })
            });
            match prepared {
                Ok(statements) => self.client = Some((client, statements)),
                Err(e) => return Err(self.failed(&e)),
            }
        }
        let store = self.describe();
        self.client.as_mut().ok_or(StoreError::Connect {
            store,
            reason: "no connection".into(),
        })
    }

    /// Maps an error: a broken connection drops it (the next call reconnects) and is
    /// [`StoreError::Lost`]; permissions are [`StoreError::Schema`].
    fn failed(&mut self, e: &postgres::Error) -> StoreError {
        let store = self.describe();
        let lost = e.is_closed()
            || e.as_db_error().is_none()
            || self.client.as_ref().is_some_and(|c| c.0.is_closed())
            || e.code()
                .is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57P"));
        if lost {
            self.client = None;
            return StoreError::Lost {
                store,
                reason: reason(e),
            };
        }
        if e.code() == Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) {
            return StoreError::Schema {
                store,
                reason: reason(e),
            };
        }
        if e.code() == Some(&postgres::error::SqlState::SEQUENCE_GENERATOR_LIMIT_EXCEEDED) {
            return StoreError::FencesExhausted { store };
        }
        StoreError::Server {
            store,
            reason: reason(e),
        }
    }

    fn install(&mut self) -> Result<(), StoreError> {
        let ns = self.schema.clone();
        let sql = SCHEMA.replace("__NS__", &ns).replace("__FORMAT__", FORMAT);
        let mut client = self
            .config
            .connect(NoTls)
            .map_err(|e| StoreError::Connect {
                store: self.describe(),
                reason: reason(&e),
            })?;
        let result = (|| -> Result<Result<(), String>, postgres::Error> {
            let mut tx = client.transaction()?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext('expiring-locks install ' || $1))",
                &[&ns],
            )?;
            let columns: Vec<String> = tx
                .query(
                    "SELECT column_name::text FROM information_schema.columns \
                     WHERE table_schema = $1 AND table_name = 'records' ORDER BY column_name",
                    &[&ns],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            if !columns.is_empty() && columns != COLUMNS {
                return Ok(Err(format!(
                    "table {ns}.records is not ours: columns {columns:?}, expected {COLUMNS:?}"
                )));
            }
            tx.batch_execute(&sql)?;
            let format: String = tx
                .query_one(
                    &format!("SELECT value FROM {ns}.meta WHERE name = 'format'"),
                    &[],
                )?
                .get(0);
            if format != FORMAT {
                return Ok(Err(format!(
                    "schema {ns} has format {format}; this build reads {FORMAT}"
                )));
            }
            tx.commit()?;
            Ok(Ok(()))
        })();
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(StoreError::Schema {
                store: self.describe(),
                reason,
            }),
            Err(e) => match self.failed(&e) {
                StoreError::Server { store, reason } => Err(StoreError::Schema { store, reason }),
                other => Err(other),
            },
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

    fn read_row(&self, key: &str, row: &Row, first: usize) -> Result<Read, StoreError> {
        let now: i64 = row.get(first);
        Ok(Read {
            record: self.stored(
                key,
                row.get(first + 1),
                row.get(first + 2),
                row.get(first + 3),
            )?,
            now: Instant(now.max(0) as u64),
        })
    }
}

/// The error's own words and its cause (the sync client's `Display` hides the server's message).
fn reason(e: &postgres::Error) -> String {
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
        let (client, statements) = self.connection()?;
        let row = match client.query_one(&statements.read, &[&key]) {
            Ok(row) => row,
            Err(e) => return Err(self.failed(&e)),
        };
        self.read_row(key, &row, 0)
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        let n = i32::try_from(write.fresh_fences).unwrap_or(i32::MAX);
        let expected = version_to_sql(write.expected);
        let version = version_to_sql(write.version);
        let not_before = write.not_before.map(instant_to_sql);
        let forget_at = write.forget_at.map(instant_to_sql);
        let (client, statements) = self.connection()?;
        let result = client.query_one(
            &statements.cas,
            &[
                &key,
                &expected,
                &version,
                &write.bytes,
                &n,
                &not_before,
                &forget_at,
            ],
        );
        let row = match result {
            Ok(row) => row,
            // A deadlock, a serialization failure or a lock wait past `lock_timeout` aborted the
            // statement: nothing happened, as in a conflict. Decide again from the record.
            Err(e)
                if e.code()
                    .is_some_and(|c| matches!(c.code(), "40P01" | "40001" | "55P03")) =>
            {
                return Ok(Written::Conflict(self.read(key)?));
            }
            Err(e) => return Err(self.failed(&e)),
        };
        self.writes = self.writes.wrapping_add(1);
        if self.writes.is_multiple_of(64) {
            let collect = format!("SELECT {}.collect(16)", self.schema);
            if let Ok(client) = self.client() {
                let _ = client.execute(collect.as_str(), &[]);
            }
        }
        if row.get::<_, bool>(0) {
            let fences: Vec<i64> = row.get(4);
            Ok(Written::Done {
                fences: fences.into_iter().map(|f| Fence(f.max(0) as u64)).collect(),
            })
        } else {
            Ok(Written::Conflict(self.read_row(key, &row, 1)?))
        }
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        let sql = format!(
            "SELECT key FROM {}.records ORDER BY convert_to(key, 'UTF8')",
            self.schema
        );
        let client = self.client()?;
        match client.query(sql.as_str(), &[]) {
            Ok(rows) => Ok(rows.iter().map(|r| r.get(0)).collect()),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        let sql = format!(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {}.fences",
            self.schema
        );
        let client = self.client()?;
        match client.query_one(sql.as_str(), &[]) {
            Ok(row) => Ok(Fence(row.get::<_, i64>(0).max(0) as u64)),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        let sql = format!(
            "DELETE FROM {ns}.records; ALTER SEQUENCE {ns}.fences RESTART WITH 1;",
            ns = self.schema
        );
        let client = self.client()?;
        match client.batch_execute(&sql) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        let client = self.client()?;
        match client.batch_execute(&sql) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed(&e)),
        }
    }
}

impl PostgresStore {
    /// The bound on each statement.
    #[must_use]
    pub fn timeout(&self) -> StdDuration {
        self.timeout
    }
}
