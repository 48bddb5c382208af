//! The SQLite store: records in a file that several processes on one machine share, with no
//! server. Time is this machine's clock (every client shares it). Each compare-and-set is one
//! `BEGIN IMMEDIATE` transaction, so writers take turns on the file.

use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use lock_core::Fence;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::store::{
    check_namespace, fences_from_text, fences_to_text, instant_to_sql, system_now,
    version_from_sql, version_to_sql, Read, Store, StoreError, Stored, Write, Written, MAX_FENCE,
};

/// The format of the tables this build writes (kept in `expiring_lock_meta`).
const FORMAT: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS expiring_lock_meta (
    namespace TEXT PRIMARY KEY,
    format INTEGER NOT NULL,
    last_fence INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS expiring_lock_records (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    record BLOB NOT NULL,
    fences TEXT NOT NULL,
    forget_at INTEGER,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
";

/// How long a call waits for another process that holds the file.
const BUSY_PATIENCE: StdDuration = StdDuration::from_secs(10);

/// Whether SQLite refused because another connection holds the file.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A record's row: version, bytes, fences.
type Row = (i64, Vec<u8>, String);

/// Records in a SQLite file.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    namespace: String,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the file at `path` and installs the namespace's tables.
    ///
    /// # Errors
    /// [`StoreError::Namespace`], [`StoreError::Connect`] (the file cannot be opened),
    /// [`StoreError::Schema`] (tables of another shape or format in the file).
    pub fn open(path: &Path, namespace: &str) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let shown = format!("sqlite://{} namespace \"{namespace}\"", path.display());
        let conn = Connection::open(path).map_err(|e| StoreError::Connect {
            store: shown.clone(),
            reason: e.to_string(),
        })?;
        let store = SqliteStore {
            conn,
            path: path.to_owned(),
            namespace: namespace.to_owned(),
        };
        store.install().map_err(|e| match e {
            StoreError::Server { store, reason } => StoreError::Schema { store, reason },
            other => other,
        })?;
        Ok(store)
    }

    fn fail(&self, e: &rusqlite::Error) -> StoreError {
        StoreError::Server {
            store: self.describe(),
            reason: e.to_string(),
        }
    }

    /// Installs, retrying while another process holds the file: replicas started together on a
    /// new file all convert it to WAL and create the tables at once, and SQLite answers "busy"
    /// at once (without waiting) to some of them.
    fn install(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        let mut pause = StdDuration::from_millis(2);
        loop {
            match self.install_once() {
                Err(e) if is_busy(&e) && started.elapsed() < BUSY_PATIENCE => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(StdDuration::from_millis(50));
                }
                Err(e) => return Err(self.fail(&e)),
                Ok(done) => return done,
            }
        }
    }

    /// One installation attempt: a SQLite error (perhaps "busy"), or what the file holds.
    fn install_once(&self) -> Result<Result<(), StoreError>, rusqlite::Error> {
        self.conn.busy_timeout(BUSY_PATIENCE)?;
        // WAL: readers never wait for the writer. The mode is the file's, set once.
        let _: String = self
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        self.conn.execute_batch(SCHEMA)?;
        for (table, columns) in [
            (
                "expiring_lock_meta",
                &["namespace", "format", "last_fence"][..],
            ),
            (
                "expiring_lock_records",
                &[
                    "namespace",
                    "key",
                    "version",
                    "record",
                    "fences",
                    "forget_at",
                ][..],
            ),
        ] {
            let mut stmt = (self.conn).prepare(&format!("PRAGMA table_info({table})"))?;
            let found: Vec<String> = stmt
                .query_map([], |r| r.get::<_, String>(1))?
                .collect::<Result<_, _>>()?;
            if found != columns {
                return Ok(Err(StoreError::Schema {
                    store: self.describe(),
                    reason: format!(
                        "table {table} is not ours: columns {found:?}, expected {columns:?}"
                    ),
                }));
            }
        }
        self.conn
            .execute(
                "INSERT OR IGNORE INTO expiring_lock_meta (namespace, format, last_fence) VALUES (?1, ?2, 0)",
                params![self.namespace, FORMAT],
            )
            ?;
        let format: i64 = self.conn.query_row(
            "SELECT format FROM expiring_lock_meta WHERE namespace = ?1",
            [&self.namespace],
            |r| r.get(0),
        )?;
        if format != FORMAT {
            return Ok(Err(StoreError::Schema {
                store: self.describe(),
                reason: format!("namespace has format {format}; this build reads {FORMAT}"),
            }));
        }
        Ok(Ok(()))
    }

    fn stored(&self, row: Option<Row>, key: &str) -> Result<Option<Stored>, StoreError> {
        row.map(|(version, bytes, fences)| {
            let fences = fences_from_text(&fences).ok_or_else(|| StoreError::Corrupt {
                key: key.to_owned(),
                error: lock_core::LockError::SnapshotCorrupt {
                    reason: lock_core::Corruption::LeaseFenceNotIssued,
                },
            })?;
            Ok(Stored {
                version: version_from_sql(version),
                bytes,
                fences,
            })
        })
        .transpose()
    }

    fn select(conn: &Connection, namespace: &str, key: &str) -> rusqlite::Result<Option<Row>> {
        conn.prepare_cached(
            "SELECT version, record, fences FROM expiring_lock_records WHERE namespace = ?1 AND key = ?2",
        )?
        .query_row([namespace, key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
    }
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        format!(
            "sqlite://{} namespace \"{}\"",
            self.path.display(),
            self.namespace
        )
    }

    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        let row = Self::select(&self.conn, &self.namespace, key).map_err(|e| self.fail(&e))?;
        Ok(Read {
            record: self.stored(row, key)?,
            now: system_now(),
        })
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        let namespace = self.namespace.clone();
        let shown = self.describe();
        let fail = |e: rusqlite::Error| StoreError::Server {
            store: shown.clone(),
            reason: e.to_string(),
        };
        let tx = (self.conn)
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        let now = system_now();
        let row = Self::select(&tx, &namespace, key);
        let outcome = (|| -> rusqlite::Result<Result<Vec<Fence>, Option<Row>>> {
            let row = row?;
            let replaced = match &row {
                None => write.expected == 0,
                Some(r) => version_from_sql(r.0) == write.expected && r.1 == write.replaces,
            };
            if !replaced || write.not_before.is_some_and(|t| now < t) {
                return Ok(Err(row));
            }
            let n = write.fresh_fences as i64;
            let last: i64 = tx
                .prepare_cached(
                    "UPDATE expiring_lock_meta SET last_fence = last_fence + ?2 WHERE namespace = ?1 RETURNING last_fence",
                )?
                .query_row(params![namespace, n], |r| r.get(0))?;
            let fences: Vec<Fence> = ((last - n + 1)..=last).map(|f| Fence(f as u64)).collect();
            match write.bytes {
                None => {
                    tx.prepare_cached(
                        "DELETE FROM expiring_lock_records WHERE namespace = ?1 AND key = ?2",
                    )?
                    .execute([&namespace, key])?;
                }
                Some(bytes) => {
                    tx.prepare_cached(
                        "INSERT OR REPLACE INTO expiring_lock_records \
                         (namespace, key, version, record, fences, forget_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )?
                    .execute(params![
                        namespace,
                        key,
                        version_to_sql(write.version),
                        bytes,
                        fences_to_text(&fences),
                        write.forget_at.map(instant_to_sql),
                    ])?;
                }
            }
            // Collect a few records that are free and forgotten.
            tx.prepare_cached(
                "DELETE FROM expiring_lock_records WHERE namespace = ?1 AND key IN \
                 (SELECT key FROM expiring_lock_records WHERE namespace = ?1 AND forget_at <= ?2 LIMIT 8)",
            )?
            .execute(params![namespace, instant_to_sql(now)])?;
            Ok(Ok(fences))
        })();
        match outcome.map_err(fail)? {
            Ok(fences) => {
                if fences.last().is_some_and(|f| f.0 > MAX_FENCE) {
                    return Err(StoreError::FencesExhausted { store: shown });
                }
                tx.commit().map_err(fail)?;
                Ok(Written::Done { fences })
            }
            Err(row) => {
                drop(tx);
                Ok(Written::Conflict(Read {
                    record: self.stored(row, key)?,
                    now,
                }))
            }
        }
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        let mut stmt = (self.conn)
            .prepare_cached(
                "SELECT key FROM expiring_lock_records WHERE namespace = ?1 AND length(record) > 8 ORDER BY CAST(key AS BLOB)",
            )
            .map_err(|e| self.fail(&e))?;
        let keys = stmt
            .query_map([&self.namespace], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        drop(stmt);
        keys.map_err(|e| self.fail(&e))
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        let last: i64 = (self.conn)
            .query_row(
                "SELECT last_fence FROM expiring_lock_meta WHERE namespace = ?1",
                [&self.namespace],
                |r| r.get(0),
            )
            .map_err(|e| self.fail(&e))?;
        Ok(Fence(last.max(0) as u64))
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        let ns = self.namespace.clone();
        let result = (self.conn).execute_batch("BEGIN IMMEDIATE").and_then(|()| {
            self.conn.execute(
                "DELETE FROM expiring_lock_records WHERE namespace = ?1",
                [&ns],
            )?;
            self.conn.execute(
                "UPDATE expiring_lock_meta SET last_fence = 0 WHERE namespace = ?1",
                [&ns],
            )?;
            self.conn.execute_batch("COMMIT")
        });
        result.map_err(|e| {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.fail(&e)
        })
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        self.clear()?;
        (self.conn)
            .execute(
                "DELETE FROM expiring_lock_meta WHERE namespace = ?1",
                [&self.namespace],
            )
            .map_err(|e| self.fail(&e))?;
        Ok(())
    }
}
