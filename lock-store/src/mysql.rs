//! The MariaDB/MySQL store. A namespace is a set of objects named `<namespace>_...` in the URL's
//! database: `_records` (one row per key), `_fences` (a sequence, `NOCACHE` so the last issued
//! token is exact; MariaDB 10.3+), `_meta` (format version, last authority) and the `_cas`
//! procedure: one transaction that compares the version, writes, takes tokens with `NEXTVAL`
//! while the row is locked (first moving the sequence up to the server's time in µs when the
//! server id is not the namespace's last authority: a promoted replica does not issue a lost
//! tail's tokens again), or returns the current row, with `SYSDATE(6)`; one round trip. The
//! common write (a record replaced, at most one fresh token) skips the procedure: one `UPDATE`
//! that compares the version (and, taking a token, that this server is the authority: else the
//! procedure) and takes its token with `LAST_INSERT_ID(NEXTVAL(...))`, so that the token comes
//! back in the server's OK packet (measured: a pair of them costs ~1.1x a ShedLock-style pair,
//! the procedure ~1.6x); if it changed no row, a read gives the record as it is. No lock rules
//! in SQL.

use std::time::Duration as StdDuration;

use lock_core::{Fence, Instant};
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder, Row, Value};

use crate::collect::CollectWalk;
use crate::steps;
use crate::store::{
    check_namespace, fences_from_text, instant_to_sql, Read, Store, StoreError, Stored, Write,
    Written,
};

/// The format this build installs (in `<ns>_meta`).
const FORMAT: &str = "1";

/// The install's steps, in order (`steps/mysql.sql`).
const INSTALL: [&str; 8] = [
    "create-meta",
    "insert-format",
    "insert-longest",
    "create-records",
    "create-fences",
    "create-cas",
    "mark-take-over",
    "forget-authority",
];

/// The uninstall's steps, in order.
const UNINSTALL: [&str; 4] = ["drop-cas", "drop-fences", "drop-records", "drop-meta"];

const COLUMNS: [&str; 5] = ["fences", "forget_at", "k", "record", "version"];

/// Records in MariaDB or MySQL.
pub struct MysqlStore {
    /// One per host of the URL, tried in order.
    hosts: Vec<Opts>,
    /// `target_session_attrs=read-write`: a host must accept writes (`@@read_only` off).
    read_write: bool,
    conn: Option<Conn>,
    /// Each call's bound (the socket's connect, read and write timeouts).
    timeout: StdDuration,
    /// The bound of the calls that follow, if less than `timeout` (see `Store::limit_calls`):
    /// a connection made then has it as its timeouts (a live one keeps its own).
    limit: Option<StdDuration>,
    shown: String,
    namespace: String,
    /// The collection of forgotten records.
    walk: CollectWalk<Vec<u8>>,
    /// The hot path's statement texts for this namespace, made once.
    hot: HotSql,
    /// Whether the namespace's tables were seen: until then every call looks for them first,
    /// and calls answer [`StoreError::NoNamespace`] without them.
    installed: bool,
    /// The namespace has objects of an earlier build: the next write installs again first,
    /// which removes them.
    upgrade: bool,
    /// The namespace's procedure moves tokens on a new authority (installed by this build or
    /// a later one; see `steps/mysql.sql`).
    takes_over: bool,
    /// Tokens move up to the server's time on a new authority (see
    /// [`set_seed_from_time`](MysqlStore::set_seed_from_time)).
    seed_from_time: bool,
    /// The longest `holds_for` this connection sent to the namespace's `longest` (the recovery
    /// delay): a write that holds longer goes through the procedure, which raises it.
    longest: u64,
}

/// TLS from the URL's parameters, as the `mysql` client names them (`ssl-mode`, `ssl-ca`,
/// `ssl-cert`, `ssl-key`; `_` for `-` too): `REQUIRED` and `VERIFY_IDENTITY` check the server's
/// certificate (its chain up to the CA file, or to the public roots built in, and the host
/// name), `VERIFY_CA` its chain only, `DISABLED` (and no `ssl-mode`) is plain TCP. `PREFERRED` is
/// `REQUIRED` here (a silent fall back to plain text is what TLS is there to prevent); MySQL's
/// `REQUIRED` does not check the certificate, which stops no one in the middle.
fn ssl_opts(params: &[(String, String)]) -> Result<Option<mysql::SslOpts>, String> {
    let get = |name: &str| {
        let other = name.replace('-', "_");
        params
            .iter()
            .find(|(n, _)| *n == name || *n == other)
            .map(|(_, v)| v.as_str())
    };
    let files = get("ssl-ca").is_some() || get("ssl-cert").is_some();
    let mode = get("ssl-mode").map(str::to_ascii_uppercase);
    let chain_only = match mode.as_deref() {
        Some("DISABLED") => return Ok(None),
        None if !files => return Ok(None),
        None | Some("REQUIRED" | "PREFERRED" | "VERIFY_IDENTITY") => false,
        Some("VERIFY_CA") => true,
        Some(other) => {
            return Err(format!(
                "ssl-mode={other}: use DISABLED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"
            ))
        }
    };
    let identity = match (get("ssl-cert"), get("ssl-key")) {
        (Some(cert), Some(key)) => Some(mysql::ClientIdentity::new(
            std::path::PathBuf::from(cert),
            std::path::PathBuf::from(key),
        )),
        (None, None) => None,
        _ => return Err("ssl-cert and ssl-key go together".into()),
    };
    Ok(Some(
        mysql::SslOpts::default()
            .with_root_cert_path(get("ssl-ca").map(std::path::PathBuf::from))
            .with_danger_skip_domain_validation(chain_only)
            .with_client_identity(identity),
    ))
}

/// A deadlock or a lock wait past its bound: the server rolled the write back, so nothing
/// happened, as in a conflict.
fn rolled_back(e: &mysql::Error) -> bool {
    matches!(e, mysql::Error::MySqlError(m) if m.code == 1213 || m.code == 1205)
}

/// `url` (`mysql://[credentials@]host[:port][,host[:port]...]/db...`) as one URL per host.
fn split_hosts(url: &str) -> Vec<String> {
    let Some(rest) = url.strip_prefix("mysql://") else {
        return vec![url.to_owned()];
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
        None => (String::new(), authority),
    };
    hosts
        .split(',')
        .map(|host| format!("mysql://{credentials}{host}{tail}"))
        .collect()
}

/// Step `name` of `steps/mysql.sql` for namespace `namespace`.
fn sql(name: &str, namespace: &str) -> String {
    steps::step(steps::MYSQL, name, &[("ns", namespace), ("format", FORMAT)])
}

/// The texts of the statements every call uses, for one namespace.
struct HotSql {
    read: String,
    cas: String,
    /// The procedure's call in a namespace of an earlier build (without `p_holds`).
    cas_before_take_over: String,
    /// The single-`UPDATE` write without a token, with one, and with one only while this
    /// server is the namespace's authority.
    replace: [String; 3],
}

impl HotSql {
    fn new(sql: impl Fn(&str) -> String) -> Self {
        HotSql {
            read: sql("read"),
            cas: sql("cas"),
            cas_before_take_over: sql("cas-before-take-over"),
            replace: [
                sql("replace"),
                sql("replace-with-token"),
                sql("replace-with-token-here"),
            ],
        }
    }
}

impl std::fmt::Debug for MysqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

fn reason(e: &mysql::Error) -> String {
    // The driver's own `Display` wraps each kind in its Rust name (`CodecError { .. }`).
    match e {
        mysql::Error::IoError(io) => io.to_string(),
        mysql::Error::CodecError(codec) => {
            let text = codec.to_string();
            // An I/O error of the codec reads "IO error: `...'".
            match text
                .strip_prefix("IO error: `")
                .and_then(|t| t.strip_suffix('\''))
            {
                Some(io) => io.to_owned(),
                None => text,
            }
        }
        mysql::Error::MySqlError(server) => server.to_string(),
        mysql::Error::DriverError(driver) => driver.to_string(),
        other => other.to_string(),
    }
}

/// Whether a socket timeout (no answer within the bound) caused `e`: the driver wraps it in an
/// I/O or a codec error.
fn timed_out(e: &mysql::Error) -> bool {
    // (The driver's error names no source: its codec error is looked into by hand.)
    let mut cause: Option<&(dyn std::error::Error + 'static)> = match e {
        mysql::Error::CodecError(codec) => Some(codec),
        other => Some(other),
    };
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            );
        }
        cause = error.source();
    }
    false
}

impl MysqlStore {
    /// Whether the connection speaks TLS without a client certificate.
    fn tls_without_identity(&self) -> bool {
        self.hosts[0]
            .get_ssl_opts()
            .is_some_and(|ssl| ssl.client_identity().is_none())
    }

    /// Connects to `url` (`mysql://user[:password]@host[:port]/database`, or `mariadb://...`)
    /// and checks the namespace's objects in that database if they exist (creating nothing:
    /// the first write installs them, see [`Store::install`]). Every call waits at most `timeout`
    /// (connect, read and write timeouts of the socket).
    ///
    /// # Errors
    /// [`StoreError::Url`], [`StoreError::Namespace`], [`StoreError::Connect`],
    /// [`StoreError::Schema`] (a foreign table, another format, no permission).
    pub fn open(url: &str, namespace: &str, timeout: StdDuration) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let shown = crate::url::without_password(url);
        // The driver knows `mysql://` only; messages show the URL as it was given.
        let as_mysql = match url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => url.to_owned(),
        };
        let (as_mysql, tls) = crate::tls::take_params(
            &as_mysql,
            &[
                "ssl-mode", "ssl_mode", "ssl-ca", "ssl_ca", "ssl-cert", "ssl_cert", "ssl-key",
                "ssl_key",
            ],
        );
        let (as_mysql, target) = crate::tls::take_params(&as_mysql, &["target_session_attrs"]);
        let read_write = match target.first().map(|(_, v)| v.as_str()) {
            None | Some("any") => false,
            Some("read-write") => true,
            Some(other) => {
                return Err(StoreError::Url {
                    url: shown,
                    reason: format!("target_session_attrs={other}: use any or read-write"),
                })
            }
        };
        let ssl = ssl_opts(&tls).map_err(|reason| StoreError::Url {
            url: shown.clone(),
            reason,
        })?;
        let mut hosts = Vec::new();
        for url in split_hosts(&as_mysql) {
            let opts = Opts::from_url(&url).map_err(|e| StoreError::Url {
                url: shown.clone(),
                reason: e.to_string(),
            })?;
            if opts.get_db_name().is_none() {
                return Err(StoreError::Url {
                    url: shown,
                    reason: "no database: add /DATABASE to the URL".into(),
                });
            }
            let mut opts = OptsBuilder::from_opts(opts);
            if let Some(ssl) = ssl.clone() {
                crate::tls::use_ring();
                opts = opts.ssl_opts(Some(ssl));
            }
            hosts.push(
                opts.prefer_socket(false)
                    .tcp_connect_timeout(Some(timeout))
                    .read_timeout(Some(timeout))
                    .write_timeout(Some(timeout))
                    .into(),
            );
        }
        let mut store = MysqlStore {
            hosts,
            read_write,
            conn: None,
            timeout,
            limit: None,
            shown,
            namespace: namespace.to_owned(),
            walk: CollectWalk::default(),
            hot: HotSql::new(|t| sql(t, namespace)),
            installed: false,
            upgrade: false,
            takes_over: false,
            seed_from_time: true,
            longest: 0,
        };
        match store.present() {
            Ok(()) | Err(StoreError::NoNamespace { .. }) => Ok(store),
            Err(e) => Err(e),
        }
    }

    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self.conn.is_none() {
            let mut conn = self.connect_first()?;
            // Row locks only: no gap locks between writers of different keys. And the tests'
            // tokens from 1, if asked (the procedure reads the session's variable).
            let from_time = (!self.seed_from_time).then(|| sql("from-time", &self.namespace));
            conn.query_drop(sql("isolation", &self.namespace))
                .and_then(|()| match &from_time {
                    Some(set) => conn.exec_drop(set, (0,)),
                    None => Ok(()),
                })
                .map_err(|e| StoreError::Connect {
                    store: format!("{} namespace \"{}\"", self.shown, self.namespace),
                    reason: reason(&e),
                })?;
            self.conn = Some(conn);
            self.longest = 0;
        }
        if self.conn.is_none() {
            return Err(self.connection_missing());
        }
        // Not `describe()` on every call: the error is built only if it happens.
        self.conn.as_mut().ok_or_else(|| StoreError::Connect {
            store: String::new(),
            reason: "no connection".into(),
        })
    }

    /// Maps an error: a broken connection drops it (the next call reconnects) and is
    /// [`StoreError::Lost`]; access denied is [`StoreError::Schema`].
    fn failed(&mut self, e: &mysql::Error) -> StoreError {
        let store = self.describe();
        if timed_out(e) {
            self.conn = None;
            return crate::store::no_answer(store, self.limit.unwrap_or(self.timeout));
        }
        match e {
            // A read or write timeout of the socket surfaces as a codec I/O error.
            mysql::Error::IoError(_)
            | mysql::Error::DriverError(_)
            | mysql::Error::CodecError(_) => {
                self.conn = None;
                StoreError::Lost {
                    store,
                    reason: reason(e),
                }
            }
            mysql::Error::MySqlError(m) => match m.code {
                // Connection killed, server shutting down, gone away, lost during query.
                1053 | 1927 | 2006 | 2013 | 1317 => {
                    self.conn = None;
                    StoreError::Lost {
                        store,
                        reason: reason(e),
                    }
                }
                1044 | 1045 | 1142 | 1143 | 1227 | 1370 => StoreError::Schema {
                    store,
                    reason: reason(e),
                },
                4084 | 4135 => StoreError::FencesExhausted { store },
                // No such table or procedure: never installed, or dropped since (`lockstore
                // uninstall`); the next write installs it again.
                1146 | 1305 => {
                    self.installed = false;
                    StoreError::NoNamespace { store }
                }
                _ => StoreError::Server {
                    store,
                    reason: reason(e),
                },
            },
            _ => StoreError::Server {
                store,
                reason: reason(e),
            },
        }
    }

    fn sql(&self, name: &str) -> String {
        sql(name, &self.namespace)
    }

    /// The error for a connection that [`conn`](Self::conn) has just made but is not there
    /// (never happens; answered rather than a panic).
    /// A connection to the first of the URL's hosts that answers (and, with
    /// `target_session_attrs=read-write`, accepts writes); the hosts share the call's bound.
    fn connect_first(&self) -> Result<Conn, StoreError> {
        let bound = self.limit.unwrap_or(self.timeout);
        let deadline = std::time::Instant::now() + bound;
        let store = || format!("{} namespace \"{}\"", self.shown, self.namespace);
        let mut reasons = Vec::new();
        for host in &self.hosts {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                reasons.push(format!("no answer within {bound:?}"));
                break;
            }
            // The hosts share the bound: a silent host costs what is left of it, not a whole
            // bound each. The connection keeps what was left as its socket timeouts (the mysql
            // client sets them once), as one made under a request's bound does: after a silent
            // host, its calls may fail typed sooner and the next one connects again.
            let opts: Opts = OptsBuilder::from_opts(host.clone())
                .tcp_connect_timeout(Some(left))
                .read_timeout(Some(left))
                .write_timeout(Some(left))
                .into();
            let mut conn = match Conn::new(opts) {
                Ok(conn) => conn,
                Err(e) => {
                    reasons.push(self.connect_reason(&e, bound));
                    continue;
                }
            };
            if self.read_write {
                match conn.query_first::<i64, _>(sql("read-only", &self.namespace)) {
                    Ok(Some(0)) => {}
                    Ok(_) => {
                        let (host, port) = (host.get_ip_or_hostname(), host.get_tcp_port());
                        reasons.push(format!(
                            "{host}:{port} does not accept writes (target_session_attrs=read-write)"
                        ));
                        continue;
                    }
                    Err(e) => {
                        reasons.push(reason(&e));
                        continue;
                    }
                }
            }
            return Ok(conn);
        }
        Err(StoreError::Connect {
            store: store(),
            reason: reasons.join("; "),
        })
    }

    /// Why a connect failed, in words.
    fn connect_reason(&self, e: &mysql::Error, bound: StdDuration) -> String {
        if timed_out(e) {
            return format!("no answer within {bound:?}");
        }
        let reason = crate::tls::explain(reason(e));
        match e {
            // Over TLS without a client certificate, a user that must present one
            // (`REQUIRE X509`) is refused like a wrong password: say so.
            mysql::Error::MySqlError(m) if m.code == 1045 && self.tls_without_identity() => {
                format!(
                    "{reason} (if this user must present a client certificate, name it and its \
                     key in the URL: ssl-cert=PATH&ssl-key=PATH)"
                )
            }
            _ => reason,
        }
    }

    fn connection_missing(&self) -> StoreError {
        StoreError::Connect {
            store: self.describe(),
            reason: "no connection".into(),
        }
    }

    /// Whether the namespace's tables exist (looked up until they were seen once).
    fn present(&mut self) -> Result<(), StoreError> {
        if self.installed {
            return Ok(());
        }
        let meta = self.sql("format");
        let old_index = self.sql("old-index");
        let take_over = self.sql("take-over-exists");
        let table = format!("{}_records", self.namespace);
        let conn = self.conn()?;
        match conn.query_first::<String, _>(meta) {
            Ok(Some(format)) if format == FORMAT => {
                // An index of earlier builds, which installing again removes (at the next
                // write: reads change nothing).
                let old_index = conn.exec_first::<String, _, _>(old_index, (&table,));
                let takes_over = conn.query_first::<i64, _>(take_over);
                self.takes_over = matches!(takes_over, Ok(Some(n)) if n > 0);
                self.upgrade = matches!(old_index, Ok(Some(_))) || !self.takes_over;
                self.installed = true;
                Ok(())
            }
            // The table without its row: another replica is installing it right now (MariaDB's
            // DDL is not transactional). The write that needs it installs too, and waits for it.
            Ok(None) => Err(StoreError::NoNamespace {
                store: self.describe(),
            }),
            Ok(Some(format)) => Err(StoreError::Schema {
                store: self.describe(),
                reason: format!("namespace has format {format}; this build reads {FORMAT}"),
            }),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn install(&mut self) -> Result<(), StoreError> {
        let lock = format!("expiring-locks install {}", self.namespace);
        let statements = INSTALL.map(|name| self.sql(name));
        let table = format!("{}_records", self.namespace);
        let [meta, take, give, columns_of, old_index, drop_old_index] = [
            "format",
            "install-lock",
            "install-unlock",
            "columns",
            "old-index",
            "drop-old-index",
        ]
        .map(|name| self.sql(name));
        let conn = self.conn()?;
        let result = (|| -> Result<Result<(), String>, mysql::Error> {
            let got: Option<i64> = conn.exec_first(&take, (&lock,))?;
            if got != Some(1) {
                return Ok(Err("timed out waiting for another installer".into()));
            }
            let columns: Vec<String> = conn.exec(&columns_of, (&table,))?;
            if !columns.is_empty() && columns != COLUMNS {
                return Ok(Err(format!(
                    "table {table} is not ours: columns {columns:?}, expected {COLUMNS:?}"
                )));
            }
            for statement in &statements {
                conn.query_drop(statement)?;
            }
            // Namespaces made by earlier builds had an index on forget_at, which every write
            // had to update; collection now walks the primary key instead.
            let old_index: Option<String> = conn.exec_first(&old_index, (&table,))?;
            if old_index.is_some() {
                conn.query_drop(&drop_old_index)?;
            }
            let format: Option<String> = conn.query_first(&meta)?;
            if format.as_deref() != Some(FORMAT) {
                return Ok(Err(format!(
                    "namespace has format {format:?}; this build reads {FORMAT}"
                )));
            }
            Ok(Ok(()))
        })();
        if let Some(conn) = self.conn.as_mut() {
            let _ = conn.exec_drop(&give, (&lock,));
        }
        match result {
            Ok(Ok(())) => {
                self.installed = true;
                self.takes_over = true;
                Ok(())
            }
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

    /// A record from `version, record, fences` values (all NULL: none).
    fn stored(
        &self,
        key: &str,
        v: &Value,
        r: &Value,
        f: &Value,
    ) -> Result<Option<Stored>, StoreError> {
        if *v == Value::NULL {
            return Ok(None);
        }
        let corrupt = || StoreError::Corrupt {
            key: key.to_owned(),
            error: lock_core::LockError::SnapshotCorrupt {
                reason: lock_core::Corruption::BodyEndsEarly,
            },
        };
        let version = mysql::from_value_opt::<u64>(v.clone()).map_err(|_| corrupt())?;
        let bytes = mysql::from_value_opt::<Vec<u8>>(r.clone()).map_err(|_| corrupt())?;
        let text = mysql::from_value_opt::<String>(f.clone()).map_err(|_| corrupt())?;
        let fences = fences_from_text(&text).ok_or_else(corrupt)?;
        Ok(Some(Stored {
            version,
            bytes,
            fences,
        }))
    }

    fn now(&self, v: &Value) -> Result<Instant, StoreError> {
        mysql::from_value_opt::<i64>(v.clone())
            .ok()
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Instant)
            .ok_or_else(|| StoreError::Server {
                store: self.describe(),
                reason: format!("unexpected server time {v:?}"),
            })
    }

    fn read_row(&self, key: &str, row: &Row, first: usize) -> Result<Read, StoreError> {
        let nil = Value::NULL;
        let get = |i: usize| row.as_ref(first + i).unwrap_or(&nil);
        Ok(Read {
            record: self.stored(key, get(1), get(2), get(3))?,
            now: self.now(get(0))?,
        })
    }
}

impl MysqlStore {
    /// The common write: one `UPDATE` of the row at the expected version, at most one fresh
    /// token (returned in the OK packet by `LAST_INSERT_ID`); if no row changed, the record as
    /// it is (a conflict).
    fn replace(
        &mut self,
        key: &str,
        write: &Write<'_>,
        bytes: &[u8],
    ) -> Result<Written, StoreError> {
        let not_before = write.not_before.map(instant_to_sql);
        let params = (
            write.version,
            bytes,
            write.forget_at.map(instant_to_sql),
            key.as_bytes(),
            write.expected,
            write.replaces,
            not_before,
            not_before,
        );
        self.conn()?;
        let (Some(conn), hot) = (self.conn.as_mut(), &self.hot) else {
            return Err(self.connection_missing());
        };
        // With a token: only while this server is the authority and does not recover, if the
        // procedure moves tokens (else through it, below).
        let here = write.fresh_fences == 1 && self.takes_over;
        let sql = &hot.replace[usize::from(write.fresh_fences == 1) + usize::from(here)];
        let done = match conn.exec_drop(sql, params) {
            Ok(()) => (conn.affected_rows() == 1).then(|| conn.last_insert_id()),
            // A deadlock or a lock wait that timed out: nothing happened, as in a conflict.
            Err(ref e) if rolled_back(e) => None,
            Err(e) => return Err(self.failed(&e)),
        };
        match done {
            Some(_) if write.fresh_fences == 0 => Ok(Written::Done { fences: Vec::new() }),
            Some(fence) if fence > 0 && fence <= crate::store::MAX_FENCE => Ok(Written::Done {
                fences: vec![Fence(fence)],
            }),
            Some(fence) => Err(StoreError::Server {
                store: self.describe(),
                reason: format!("unexpected fencing token {fence}"),
            }),
            // Not written: a conflict, or (checking the authority) a server that is not the
            // namespace's authority: the procedure moves the tokens first, or answers the row.
            None if here => self.call_cas(key, write),
            None => Ok(Written::Conflict(self.read(key)?)),
        }
    }

    /// Whether the first write that takes tokens on a server that is not the namespace's last
    /// authority (a promoted replica: another `server_id`) moves the tokens up to the server's
    /// time in microseconds (the default: tokens never repeat after a failover that lost
    /// writes), or tokens count from 1 (tests that expect tokens 1, 2, 3...). Drops the
    /// connection: the next one tells the server.
    pub fn set_seed_from_time(&mut self, seed: bool) {
        self.seed_from_time = seed;
        self.conn = None;
    }

    /// Any write through the `_cas` procedure (one transaction, one round trip); it raises the
    /// namespace's `longest` when the write holds longer than this connection sent before.
    fn call_cas(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        self.conn()?;
        let holds = write.holds_for.as_millis();
        let raise = (holds > self.longest).then_some(holds);
        let params = (
            key.as_bytes(),
            write.expected,
            write.version,
            write.bytes,
            i64::try_from(write.fresh_fences).unwrap_or(i64::MAX),
            write.not_before.map(instant_to_sql),
            write.forget_at.map(instant_to_sql),
            write.replaces,
        );
        let (Some(conn), hot) = (self.conn.as_mut(), &self.hot) else {
            return Err(self.connection_missing());
        };
        let answer: Result<Option<Row>, mysql::Error> = match self.takes_over {
            true => {
                let raise = i64::try_from(raise.unwrap_or(0)).unwrap_or(i64::MAX);
                let (a, b, c, d, e, f, g, h) = params;
                conn.exec_first(&hot.cas, (a, b, c, d, e, f, g, h, raise))
            }
            false => conn.exec_first(&hot.cas_before_take_over, params),
        };
        // Raised only by a write that was made (status 1).
        let made = matches!(&answer, Ok(Some(row)) if row.get::<i64, _>(0) == Some(1));
        if let (true, Some(raised)) = (made, raise) {
            self.longest = raised;
        }
        let row: Option<Row> = match answer {
            Ok(row) => row,
            // A deadlock or a lock wait that timed out rolled the whole transaction back:
            // nothing happened, as in a conflict. Decide again from the record as it is.
            Err(ref e) if rolled_back(e) => {
                return Ok(Written::Conflict(self.read(key)?));
            }
            Err(e) => return Err(self.failed(&e)),
        };
        let row = row.ok_or_else(|| StoreError::Server {
            store: self.describe(),
            reason: "the compare-and-set returned no row".into(),
        })?;
        let done: i64 = row.get(0).unwrap_or(0);
        if done == 2 {
            let instant = |i: usize| row.get::<i64, _>(i).unwrap_or(0).max(0) as u64;
            return Err(StoreError::Recovering {
                store: self.describe(),
                until: Instant(instant(2)),
                at: Instant(instant(1)),
            });
        }
        if done == 1 {
            let text: String = row.get(4).unwrap_or_default();
            let fences = fences_from_text(&text).ok_or_else(|| StoreError::Server {
                store: self.describe(),
                reason: format!("unexpected fences {text:?}"),
            })?;
            Ok(Written::Done { fences })
        } else {
            Ok(Written::Conflict(self.read_row(key, &row, 1)?))
        }
    }

    /// One step of the collection walk: looks at the next keys after `after`, deletes those
    /// that are free and forgotten (best effort: a failure only delays it).
    fn collect(&mut self, after: &[u8]) -> Result<(), StoreError> {
        let next = self.sql("collect-next");
        let delete = self.sql("collect-delete");
        let conn = self.conn()?;
        let seen: Vec<Vec<u8>> = match conn.exec(&next, (after, CollectWalk::<Vec<u8>>::EVERY)) {
            Ok(seen) => seen,
            Err(e) => return Err(self.failed(&e)),
        };
        let Some(last) = seen.last() else {
            self.walk.stopped_at(None);
            return Ok(());
        };
        if let Err(e) = conn.exec_drop(&delete, (after, last)) {
            return Err(self.failed(&e));
        }
        self.walk.stopped_at(seen.into_iter().last());
        Ok(())
    }
}

impl Store for MysqlStore {
    fn describe(&self) -> String {
        format!("{} namespace \"{}\"", self.shown, self.namespace)
    }

    fn bound(&self) -> Option<StdDuration> {
        Some(self.timeout)
    }

    fn limit_calls(&mut self, left: Option<StdDuration>) {
        self.limit = left.filter(|&left| left < self.timeout);
    }

    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        self.present()?;
        self.conn()?;
        let (Some(conn), hot) = (self.conn.as_mut(), &self.hot) else {
            return Err(self.connection_missing());
        };
        let row: Option<Row> = match conn.exec_first(&hot.read, (key.as_bytes(),)) {
            Ok(row) => row,
            Err(e) => return Err(self.failed(&e)),
        };
        let row = row.ok_or_else(|| StoreError::Server {
            store: self.describe(),
            reason: "a read returned no row".into(),
        })?;
        self.read_row(key, &row, 0)
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        self.present()?;
        if self.upgrade {
            // Best effort: a role that may not alter the table writes without it.
            self.upgrade = false;
            let _ = MysqlStore::install(self);
        }
        // A write that holds a lease's place longer than this connection told the namespace
        // goes through the procedure, which raises the namespace's `longest`.
        let told = write.holds_for.as_millis() <= self.longest || !self.takes_over;
        let written = match write.bytes {
            Some(bytes) if write.expected != 0 && write.fresh_fences <= 1 && told => {
                self.replace(key, write, bytes)?
            }
            _ => self.call_cas(key, write)?,
        };
        if let Some(after) = self.walk.count_write() {
            let _ = self.collect(&after);
        }
        Ok(written)
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        self.present()?;
        let sql = self.sql("keys");
        let conn = self.conn()?;
        match conn.query::<Vec<u8>, _>(sql) {
            Ok(keys) => Ok(keys
                .into_iter()
                .filter_map(|k| String::from_utf8(k).ok())
                .collect()),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        self.present()?;
        let sql = self.sql("last-fence");
        let conn = self.conn()?;
        match conn.query_first::<i64, _>(sql) {
            Ok(last) => Ok(Fence(last.unwrap_or(0).max(0) as u64)),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn install(&mut self) -> Result<(), StoreError> {
        MysqlStore::install(self)
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        match self.present() {
            Err(StoreError::NoNamespace { .. }) => return Ok(()),
            other => other?,
        }
        let statements = [
            "clear-records",
            "clear-fences",
            "clear-authority",
            "clear-longest",
        ]
        .map(|name| self.sql(name));
        let conn = self.conn()?;
        for s in statements {
            if let Err(e) = conn.query_drop(s) {
                return Err(self.failed(&e));
            }
        }
        Ok(())
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        self.installed = false;
        let statements = UNINSTALL.map(|name| self.sql(name));
        let conn = self.conn()?;
        for s in statements {
            if let Err(e) = conn.query_drop(s) {
                return Err(self.failed(&e));
            }
        }
        Ok(())
    }
}
