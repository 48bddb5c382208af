//! The SQLite store: records in a file that several processes on one machine share, with no
//! server. Time is this machine's clock (every client shares it). Each compare-and-set is one
//! `BEGIN IMMEDIATE` transaction, so writers take turns on the file.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration as StdDuration;

use lock_core::Fence;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::steps;
use crate::store::{
    check_namespace, fences_from_text, fences_to_text, instant_to_sql, system_now,
    version_from_sql, version_to_sql, Read, Store, StoreError, Stored, Write, Written, MAX_FENCE,
};

/// The format of the tables this build writes (kept in `expiring_lock_meta`).
const FORMAT: i64 = 1;

/// Step `name` of `steps/sqlite.sql` (no placeholders: each is parsed once).
fn sql(name: &str) -> &'static str {
    static STEPS: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    let found = STEPS
        .get_or_init(|| steps::all(steps::SQLITE))
        .iter()
        .find(|(n, _)| *n == name);
    debug_assert!(found.is_some(), "no step {name:?} in steps/sqlite.sql");
    found.map_or("", |(_, text)| text.as_str())
}

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
    /// The file, once it exists (reads never create it).
    conn: Option<Connection>,
    path: PathBuf,
    namespace: String,
    /// Whether the namespace was seen in the file: until then every call looks first, and
    /// calls answer [`StoreError::NoNamespace`] without it.
    installed: bool,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl SqliteStore {
    /// Opens the file at `path` and checks the namespace if the file holds it. Creates nothing:
    /// a missing file or namespace is created by the first write (see [`Store::install`]).
    ///
    /// # Errors
    /// [`StoreError::Namespace`], [`StoreError::Connect`] (the file cannot be opened),
    /// [`StoreError::Schema`] (tables of another shape or format in the file).
    pub fn open(path: &Path, namespace: &str) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let shown = format!("sqlite://{} namespace \"{namespace}\"", path.display());
        let _ = shown;
        let mut store = SqliteStore {
            conn: None,
            path: path.to_owned(),
            namespace: namespace.to_owned(),
            installed: false,
        };
        match store.present() {
            Ok(()) | Err(StoreError::NoNamespace { .. }) => Ok(store),
            Err(e) => Err(e),
        }
    }

    /// The connection to the file, opened (and created if `create`) if there is none; `None`
    /// if the file does not exist and `create` is false.
    fn connect(&mut self, create: bool) -> Result<Option<&mut Connection>, StoreError> {
        if self.conn.is_none() && (create || self.path.exists()) {
            let flags = if create {
                OpenFlags::default()
            } else {
                OpenFlags::default() - OpenFlags::SQLITE_OPEN_CREATE
            };
            let conn = Connection::open_with_flags(&self.path, flags).map_err(|e| {
                StoreError::Connect {
                    store: self.describe(),
                    reason: e.to_string(),
                }
            })?;
            conn.busy_timeout(BUSY_PATIENCE)
                .map_err(|e| self.fail(&e))?;
            #[cfg(test)]
            tests::trace(&conn);
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut())
    }

    /// Whether the namespace is in the file (looked up until it was seen once).
    fn present(&mut self) -> Result<(), StoreError> {
        if self.installed {
            return Ok(());
        }
        let shown = self.describe();
        let missing = || StoreError::NoNamespace {
            store: shown.clone(),
        };
        let namespace = self.namespace.clone();
        let Some(conn) = self.connect(false)? else {
            return Err(missing());
        };
        let format: rusqlite::Result<Option<i64>> = conn
            .query_row(sql("format"), [&namespace], |r| r.get(0))
            .optional();
        match format {
            Ok(Some(FORMAT)) => {
                self.installed = true;
                Ok(())
            }
            Ok(None) => Err(missing()),
            Err(e) if e.to_string().contains("no such table") => Err(missing()),
            Ok(Some(format)) => Err(StoreError::Schema {
                store: self.describe(),
                reason: format!("namespace has format {format}; this build reads {FORMAT}"),
            }),
            Err(e) => Err(self.fail(&e)),
        }
    }

    /// The open file of an installed namespace.
    fn db(&mut self) -> Result<&mut Connection, StoreError> {
        self.present()?;
        match self.conn.as_mut() {
            Some(conn) => Ok(conn),
            None => Err(StoreError::NoNamespace {
                store: format!(
                    "sqlite://{} namespace \"{}\"",
                    self.path.display(),
                    self.namespace
                ),
            }),
        }
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
    fn install_namespace(&mut self) -> Result<(), StoreError> {
        self.connect(true)?;
        let Some(conn) = self.conn.as_ref() else {
            return Err(StoreError::Connect {
                store: self.describe(),
                reason: "the file did not open".into(),
            });
        };
        let started = std::time::Instant::now();
        let mut pause = StdDuration::from_millis(2);
        loop {
            match self.install_once(conn) {
                Err(e) if is_busy(&e) && started.elapsed() < BUSY_PATIENCE => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(StdDuration::from_millis(50));
                }
                Err(e) => {
                    return Err(StoreError::Schema {
                        store: self.describe(),
                        reason: e.to_string(),
                    })
                }
                Ok(done) => {
                    self.installed = done.is_ok();
                    return done;
                }
            }
        }
    }

    /// One installation attempt: a SQLite error (perhaps "busy"), or what the file holds.
    fn install_once(&self, conn: &Connection) -> Result<Result<(), StoreError>, rusqlite::Error> {
        conn.busy_timeout(BUSY_PATIENCE)?;
        // WAL: readers never wait for the writer. The mode is the file's, set once.
        let _: String = conn.query_row(sql("wal"), [], |r| r.get(0))?;
        conn.execute_batch(sql("schema"))?;
        for (table, step, columns) in [
            (
                "expiring_lock_meta",
                "meta-columns",
                &["namespace", "format", "last_fence"][..],
            ),
            (
                "expiring_lock_records",
                "records-columns",
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
            let mut stmt = conn.prepare(sql(step))?;
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
        conn.execute(sql("insert-namespace"), params![self.namespace, FORMAT])?;
        let format: i64 = conn.query_row(sql("format"), [&self.namespace], |r| r.get(0))?;
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
        conn.prepare_cached(sql("select"))?
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
        let namespace = self.namespace.clone();
        let row = Self::select(self.db()?, &namespace, key).map_err(|e| self.fail(&e))?;
        if row.is_none() {
            // No record: is the namespace itself still there (another process may have
            // uninstalled it)? Only a miss pays this lookup.
            self.installed = false;
            self.present()?;
        }
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
        let tx = (self.db()?)
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
                .prepare_cached(sql("take-fences"))?
                .query_row(params![namespace, n], |r| r.get(0))?;
            let fences: Vec<Fence> = ((last - n + 1)..=last).map(|f| Fence(f as u64)).collect();
            match write.bytes {
                None => {
                    tx.prepare_cached(sql("delete"))?
                        .execute([&namespace, key])?;
                }
                Some(bytes) => {
                    tx.prepare_cached(sql("upsert"))?.execute(params![
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
            tx.prepare_cached(sql("collect"))?
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
        let namespace = self.namespace.clone();
        let shown = self.describe();
        let fail = |e: rusqlite::Error| StoreError::Server {
            store: shown.clone(),
            reason: e.to_string(),
        };
        let mut stmt = (self.db()?).prepare_cached(sql("keys")).map_err(fail)?;
        let keys = stmt
            .query_map([&namespace], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        drop(stmt);
        keys.map_err(fail)
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        let namespace = self.namespace.clone();
        let last: i64 = (self.db()?)
            .query_row(sql("last-fence"), [&namespace], |r| r.get(0))
            .map_err(|e| self.fail(&e))?;
        Ok(Fence(last.max(0) as u64))
    }

    fn install(&mut self) -> Result<(), StoreError> {
        self.install_namespace()
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        let ns = self.namespace.clone();
        let conn = match self.db() {
            Ok(conn) => conn,
            Err(StoreError::NoNamespace { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let result = conn.execute_batch("BEGIN IMMEDIATE").and_then(|()| {
            conn.execute(sql("clear-records"), [&ns])?;
            conn.execute(sql("clear-fences"), [&ns])?;
            conn.execute_batch("COMMIT")
        });
        if result.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        result.map_err(|e| self.fail(&e))
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        self.clear()?;
        let namespace = self.namespace.clone();
        self.installed = false;
        if let Some(conn) = self.conn.as_mut() {
            let deleted = conn.execute(sql("uninstall"), [&namespace]);
            deleted.map_err(|e| self.fail(&e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use rusqlite::trace::{TraceEvent, TraceEventCodes};

    use super::*;
    use crate::{Error, LockError, Locks};

    /// Every statement this test binary's SQLite connections ran, as prepared.
    static RAN: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn record(event: TraceEvent<'_>) {
        if let TraceEvent::Stmt(stmt, _) = event {
            RAN.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(stmt.sql().into_owned());
        }
    }

    /// Traces every statement of `conn` (each connection a store makes, in tests).
    pub(super) fn trace(conn: &Connection) {
        conn.trace_v2(TraceEventCodes::SQLITE_TRACE_STMT, Some(record));
    }

    /// As `tests/steps.rs` does for the server stores: every statement the SQLite store ran
    /// through every call is a step of `steps/sqlite.sql` (or transaction control).
    #[test]
    fn every_statement_the_store_runs_is_a_step_of_the_shared_file() {
        const MS: Duration = Duration::from_millis(1);
        let dir = std::env::temp_dir().join(format!("steps-sqlite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("locks.db");
        let mut raw = SqliteStore::open(&path, "steps").unwrap();
        assert!(matches!(
            raw.read("job"),
            Err(StoreError::NoNamespace { .. })
        ));
        let locks = Locks::new(SqliteStore::open(&path, "steps").unwrap());
        let lease = locks.try_acquire("job", "a", 5000 * MS).unwrap();
        lease.extend(5000 * MS).unwrap();
        assert!(matches!(
            locks.try_acquire("job", "b", 5000 * MS),
            Err(Error::Lock(LockError::Held { .. }))
        ));
        assert!(locks.inspect("job").unwrap().is_some());
        lease.release().unwrap();
        for i in 0..20 {
            let _ = locks
                .try_acquire(&format!("k{i}"), "a", MS)
                .map(|l| l.release());
        }
        locks.keys().unwrap();
        locks.last_fence().unwrap();
        raw.clear().unwrap();
        raw.uninstall().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let steps: Vec<String> = steps::all(steps::SQLITE)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        let ran = RAN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert!(ran.len() > 20, "the trace saw {ran:?}");
        let strangers: Vec<&String> = ran.iter().filter(|t| !steps::is_step(t, &steps)).collect();
        assert!(
            strangers.is_empty(),
            "not steps of steps/sqlite.sql: {strangers:#?}"
        );
    }
}
