//! The Redis store. A namespace's keys share one hash tag (`{el:<namespace>}`), so a namespace
//! lives on one node of a cluster: one authority per namespace. Each record is a hash
//! (`v` version, `r` record bytes, `f` fences); the counter is a string. Reads are one pipeline
//! (`TIME` + `HMGET`); the compare-and-set is one Lua script that compares the version, allocates
//! tokens with `INCRBY` and writes, or returns the current record and the server's time. The
//! script has no lock rules. A writer that hands a key to a waiter publishes a notice
//! (`key` newline `owner`) on `{el:<ns>}:handoff`; waiting clients subscribe to it on a connection
//! of their own.
//!
//! Redis may lose its data (many run it without persistence). A counter that is missing when a
//! token is needed restarts at the server's time in microseconds, above every token issued
//! before it as long as the namespace issued fewer than one token per microsecond on average and
//! the server's clock did not step back (see `docs/stores.md`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use lock_core::{Fence, Instant};
use redis::{Client, Connection, ConnectionLike, Value};

use crate::steps;
use crate::store::{
    check_namespace, fences_from_text, instant_to_sql, notice, OpenWatcher, Read, Store,
    StoreError, Stored, Watcher, Write, Written, TOMBSTONE,
};

/// The format this build writes, kept at `{el:<ns>}:format`.
const FORMAT: &str = "1";

/// The error Redis answers an `EVALSHA` of a script it does not have.
const NO_SCRIPT: redis::ErrorKind = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);

/// Never happens: [`RedisStore::connect`] just made the connection. Answered as an error
/// rather than a panic.
fn no_connection(store: &str) -> StoreError {
    StoreError::Connect {
        store: store.to_owned(),
        reason: "no connection".into(),
    }
}

/// Records in Redis.
pub struct RedisStore {
    client: Client,
    conn: Option<Connection>,
    namespace: String,
    /// What errors name: the URL without its password, and the namespace.
    described: String,
    /// `{el:<ns>}:k:`, the record keys' prefix (the strings of the hot path are made once).
    record_prefix: Vec<u8>,
    /// `{el:<ns>}:fence`, the token counter.
    counter: String,
    /// `{el:<ns>}:format`, the format marker.
    format_key: String,
    timeout: StdDuration,
    /// The bound of the calls that follow, if less than `timeout` (see `Store::limit_calls`).
    limit: Option<StdDuration>,
    /// The socket timeouts of the live connection.
    applied: StdDuration,
    seed_from_time: bool,
    /// Whether the namespace was seen to exist (its format marker or its counter): until then
    /// every call looks first, and reads answer [`StoreError::NoNamespace`].
    installed: bool,
    script: redis::Script,
    /// The compare-and-set's command as sent, reused from call to call (see [`pack_cas`]).
    packed: Vec<u8>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// A Redis string or bulk value as bytes.
fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// The CA and client certificate files of a `rediss://` URL (`cacert`, `cert`, `key`, as
/// `redis-cli` names them), read.
fn tls_files(params: &[(String, String)]) -> Result<redis::TlsCertificates, String> {
    let get = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let read = |path: &String| std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"));
    let client_tls = match (get("cert"), get("key")) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert)?,
            client_key: read(key)?,
        }),
        (None, None) => None,
        _ => return Err("cert and key go together".into()),
    };
    Ok(redis::TlsCertificates {
        client_tls,
        root_cert: get("cacert").map(read).transpose()?,
    })
}

/// A value for a message: its text if it is a string, else its shape.
fn text(v: &Value) -> String {
    match bytes(v) {
        Some(b) => format!("\"{}\"", String::from_utf8_lossy(b)),
        None => format!("{v:?}"),
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        other => std::str::from_utf8(bytes(other)?).ok()?.parse().ok(),
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS:
    /// the server's certificate checked against the system's roots, or the CA file of
    /// `?cacert=PATH`, and its host name; `&cert=PATH&key=PATH` for a server that asks for a
    /// client certificate) and checks the
    /// namespace's format marker if it has one (creating nothing: the first write installs it).
    /// Every call waits at most `timeout`.
    ///
    /// # Errors
    /// [`StoreError::Url`], [`StoreError::Namespace`], [`StoreError::Connect`],
    /// [`StoreError::Schema`] (a foreign value at the namespace's format key).
    pub fn open(url: &str, namespace: &str, timeout: StdDuration) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let shown = crate::url::without_password(url);
        let bad_url = |e: redis::RedisError| StoreError::Url {
            url: shown.clone(),
            reason: e.to_string(),
        };
        // Without the client's own setup (`CLIENT SETINFO`, twice): its replies would each wait
        // a whole bound on a server that stopped answering. The connection is named instead
        // (`CLIENT SETNAME`, within the same bound as connecting).
        let (url, tls) = crate::tls::take_params(url, &["cacert", "cert", "key"]);
        let info =
            redis::IntoConnectionInfo::into_connection_info(url.as_str()).map_err(bad_url)?;
        let redis_info = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(redis_info);
        let client = if url.starts_with("rediss://") {
            let certificates = tls_files(&tls).map_err(|reason| StoreError::Url {
                url: shown.clone(),
                reason,
            })?;
            crate::tls::use_ring();
            Client::build_with_tls(info, certificates).map_err(bad_url)?
        } else if tls.is_empty() {
            Client::open(info).map_err(bad_url)?
        } else {
            return Err(StoreError::Url {
                url: shown,
                reason: "cacert, cert and key are for rediss:// (TLS)".into(),
            });
        };
        let prefix = format!("{{el:{namespace}}}");
        let mut store = RedisStore {
            client,
            conn: None,
            namespace: namespace.to_owned(),
            described: format!("{shown} namespace \"{namespace}\""),
            record_prefix: format!("{prefix}:k:").into_bytes(),
            counter: format!("{prefix}:fence"),
            format_key: format!("{prefix}:format"),
            timeout,
            limit: None,
            applied: timeout,
            seed_from_time: true,
            installed: false,
            script: redis::Script::new(steps::REDIS_CAS),
            packed: Vec::new(),
        };
        store.connect()?;
        match store.present() {
            Ok(()) | Err(StoreError::NoNamespace { .. }) => Ok(store),
            Err(e) => Err(e),
        }
    }

    /// Whether a missing counter restarts at the server's time in microseconds (the default)
    /// or at 0 (tests that expect tokens 1, 2, 3...).
    pub fn set_seed_from_time(&mut self, seed: bool) {
        self.seed_from_time = seed;
    }

    fn prefix(&self) -> String {
        format!("{{el:{}}}", self.namespace)
    }

    fn record_key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.record_prefix.len() + key.len());
        k.extend_from_slice(&self.record_prefix);
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// Where hand-off notices of the namespace are published.
    fn channel(&self) -> String {
        format!("{}:handoff", self.prefix())
    }

    fn connect(&mut self) -> Result<&mut Connection, StoreError> {
        let bound = self.limit.unwrap_or(self.timeout);
        if let Some(conn) = self.conn.as_mut().filter(|_| bound != self.applied) {
            // A request's later calls get what is left of its bound (and the next request
            // the whole bound again): two `setsockopt`s, only then.
            let set = conn
                .set_read_timeout(Some(bound))
                .and_then(|()| conn.set_write_timeout(Some(bound)));
            if set.is_err() {
                self.conn = None;
            }
            self.applied = bound;
        }
        if self.conn.is_none() {
            let fail = |e: redis::RedisError| {
                let reason = if e.is_timeout() {
                    format!("no answer within {bound:?}")
                } else {
                    crate::tls::explain(e.to_string())
                };
                StoreError::Connect {
                    store: self.described.clone(),
                    reason,
                }
            };
            // Connecting (with the client's own setup) and naming the connection share the
            // bound.
            let until = std::time::Instant::now() + bound;
            let mut conn = (self.client)
                .get_connection_with_timeout(bound)
                .map_err(fail)?;
            let left = until.saturating_duration_since(std::time::Instant::now());
            let left = Some(left.max(StdDuration::from_millis(1)));
            conn.set_read_timeout(left).map_err(fail)?;
            conn.set_write_timeout(left).map_err(fail)?;
            // Named, so that operators see whose connection it is (`CLIENT LIST`).
            redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(format!("lock-store:{}", self.namespace))
                .query::<()>(&mut conn)
                .map_err(fail)?;
            conn.set_read_timeout(Some(bound)).map_err(fail)?;
            conn.set_write_timeout(Some(bound)).map_err(fail)?;
            self.applied = bound;
            self.conn = Some(conn);
        }
        match self.conn.as_mut() {
            Some(conn) => Ok(conn),
            None => Err(no_connection(&self.described)),
        }
    }

    /// Maps a failed call: a connection problem drops the connection (the next call
    /// reconnects) and is [`StoreError::Lost`]; anything else is the server's answer.
    fn failed(&mut self, e: &redis::RedisError) -> StoreError {
        if e.is_timeout() {
            self.conn = None;
            return crate::store::no_answer(self.describe(), self.applied);
        }
        if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
            self.conn = None;
            return StoreError::Lost {
                store: self.describe(),
                reason: e.to_string(),
            };
        }
        if e.to_string().contains("EXHAUSTED") {
            return StoreError::FencesExhausted {
                store: self.describe(),
            };
        }
        StoreError::Server {
            store: self.describe(),
            reason: e.to_string(),
        }
    }

    /// Whether the namespace exists: looked up (its format marker, or its counter, which a
    /// server that lost its data recreates at the next grant) until it was seen once.
    fn present(&mut self) -> Result<(), StoreError> {
        if self.installed {
            return Ok(());
        }
        let key = format!("{}:format", self.prefix());
        let counter = self.counter.clone();
        let conn = self.connect()?;
        let found: Result<(Value, i64), _> = redis::pipe()
            .cmd("GET")
            .arg(&key)
            .cmd("EXISTS")
            .arg(&counter)
            .query(conn);
        match found {
            Ok((Value::Nil, 0)) => Err(StoreError::NoNamespace {
                store: self.describe(),
            }),
            Ok((Value::Nil, _)) => {
                self.installed = true;
                Ok(())
            }
            Ok((v, _)) => self.marker(&key, Ok(v)),
            Err(e) => self.marker(&key, Err(e)),
        }
    }

    /// The verdict on the format marker found at `key` (present: this build's format, or
    /// another's; or not a string at all); `installed` once it is ours.
    fn marker(&mut self, key: &str, found: redis::RedisResult<Value>) -> Result<(), StoreError> {
        match found {
            Ok(v) if bytes(&v) == Some(FORMAT.as_bytes()) => {
                self.installed = true;
                Ok(())
            }
            Ok(v) => Err(StoreError::Schema {
                store: self.describe(),
                reason: format!("{key} holds {}, not this build's format {FORMAT}", text(&v)),
            }),
            Err(e) if e.to_string().contains("WRONGTYPE") => Err(StoreError::Schema {
                store: self.describe(),
                reason: format!("{key} is not ours (a value of another type)"),
            }),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn install_marker(&mut self) -> Result<(), StoreError> {
        let key = format!("{}:format", self.prefix());
        let conn = self.connect()?;
        let found: Result<Value, _> = redis::cmd("SET")
            .arg(&key)
            .arg(FORMAT)
            .arg("NX")
            .arg("GET")
            .query(conn);
        match found {
            // Nothing was there: ours now.
            Ok(Value::Nil) => {
                self.installed = true;
                Ok(())
            }
            other => self.marker(&key, other),
        }
    }

    /// A record from `HMGET v r f` values; `None` if absent.
    fn stored(
        &self,
        key: &str,
        v: &Value,
        r: &Value,
        f: &Value,
    ) -> Result<Option<Stored>, StoreError> {
        if matches!(v, Value::Nil) {
            return Ok(None);
        }
        let corrupt = || StoreError::Corrupt {
            key: key.to_owned(),
            error: lock_core::LockError::SnapshotCorrupt {
                reason: lock_core::Corruption::BodyEndsEarly,
            },
        };
        let version = std::str::from_utf8(bytes(v).ok_or_else(corrupt)?)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(corrupt)?;
        let record = bytes(r).ok_or_else(corrupt)?.to_vec();
        let fences = std::str::from_utf8(bytes(f).unwrap_or_default())
            .ok()
            .and_then(fences_from_text)
            .ok_or_else(corrupt)?;
        Ok(Some(Stored {
            version,
            bytes: record,
            fences,
        }))
    }

    fn time(&self, sec: &Value, usec: &Value) -> Result<Instant, StoreError> {
        match (int(sec), int(usec)) {
            (Some(s), Some(us)) if s >= 0 && us >= 0 => {
                Ok(Instant(s as u64 * 1000 + us as u64 / 1000))
            }
            _ => Err(StoreError::Server {
                store: self.describe(),
                reason: format!("unexpected TIME reply {sec:?} {usec:?}"),
            }),
        }
    }

    fn unexpected(&self, what: &str, v: &Value) -> StoreError {
        StoreError::Server {
            store: self.describe(),
            reason: format!("unexpected reply to {what}: {v:?}"),
        }
    }
}

impl Store for RedisStore {
    fn describe(&self) -> String {
        self.described.clone()
    }

    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        self.present()?;
        let rk = self.record_key(key);
        let mut pipe = redis::pipe();
        pipe.cmd("TIME")
            .cmd("HMGET")
            .arg(&rk)
            .arg("v")
            .arg("r")
            .arg("f")
            // Whether the namespace is still there (another client may have uninstalled it):
            // one more lookup of two keys in the same round trip.
            .cmd("EXISTS")
            .arg(&self.format_key)
            .arg(&self.counter);
        let conn = self.connect()?;
        let reply: Value = match pipe.query(conn) {
            Ok(v) => v,
            Err(e) => return Err(self.failed(&e)),
        };
        match &reply {
            Value::Array(parts) if parts.len() == 3 => match (&parts[0], &parts[1], &parts[2]) {
                (_, Value::Array(rec), Value::Int(0)) if rec.first() == Some(&Value::Nil) => {
                    self.installed = false;
                    Err(StoreError::NoNamespace {
                        store: self.describe(),
                    })
                }
                (Value::Array(t), Value::Array(rec), _) if t.len() == 2 && rec.len() == 3 => {
                    Ok(Read {
                        record: self.stored(key, &rec[0], &rec[1], &rec[2])?,
                        now: self.time(&t[0], &t[1])?,
                    })
                }
                _ => Err(self.unexpected("a read", &reply)),
            },
            _ => Err(self.unexpected("a read", &reply)),
        }
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        self.present()?;
        self.connect()?;
        let RedisStore {
            conn: Some(conn),
            script,
            packed,
            record_prefix,
            counter,
            seed_from_time,
            ..
        } = self
        else {
            return Err(no_connection(&self.described));
        };
        let sha = script.get_hash().as_bytes();
        let record_key: [&[u8]; 2] = [record_prefix, key.as_bytes()];
        pack_cas(
            packed,
            sha,
            &record_key,
            counter.as_bytes(),
            write,
            *seed_from_time,
        );
        let send = |conn: &mut Connection, packed: &[u8]| {
            conn.req_packed_command(packed)
                .and_then(Value::extract_error)
        };
        let mut reply = send(conn, packed);
        if matches!(&reply, Err(e) if e.kind() == NO_SCRIPT) {
            // The server does not have the script (a restart, `SCRIPT FLUSH`): nothing ran.
            reply = script.load(conn).and_then(|_| send(conn, packed));
        }
        let reply = match reply {
            Ok(v) => v,
            Err(e) => return Err(self.failed(&e)),
        };
        match &reply {
            Value::BulkString(_) | Value::SimpleString(_) => {
                let fences = std::str::from_utf8(bytes(&reply).unwrap_or_default())
                    .ok()
                    .and_then(fences_from_text)
                    .ok_or_else(|| self.unexpected("a compare-and-set", &reply))?;
                Ok(Written::Done { fences })
            }
            Value::Array(parts) => match parts.as_slice() {
                [sec, usec, rest @ ..] => {
                    let nil = Value::Nil;
                    let get = |i: usize| rest.get(i).unwrap_or(&nil);
                    Ok(Written::Conflict(Read {
                        record: self.stored(key, get(0), get(1), get(2))?,
                        now: self.time(sec, usec)?,
                    }))
                }
                _ => Err(self.unexpected("a compare-and-set", &reply)),
            },
            _ => Err(self.unexpected("a compare-and-set", &reply)),
        }
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        self.present()?;
        let prefix = self.record_prefix.clone();
        let pattern = format!("{}*", glob_escape(&String::from_utf8_lossy(&prefix)));
        let found = self.scan(&pattern)?;
        let mut keys: Vec<String> = found
            .into_iter()
            .filter_map(|k| k.strip_prefix(prefix.as_slice()).map(<[u8]>::to_vec))
            .filter_map(|k| String::from_utf8(k).ok())
            .collect();
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            return Ok(keys);
        }
        // Tombstones (kept for their version) are not keys.
        let mut lengths = redis::pipe();
        for key in &keys {
            lengths.cmd("HSTRLEN").arg(self.record_key(key)).arg("r");
        }
        let conn = self.connect()?;
        let lengths: Vec<i64> = match lengths.query(conn) {
            Ok(l) => l,
            Err(e) => return Err(self.failed(&e)),
        };
        Ok(keys
            .into_iter()
            .zip(lengths)
            .filter(|(_, len)| *len > TOMBSTONE.len() as i64)
            .map(|(key, _)| key)
            .collect())
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        self.present()?;
        let key = self.counter.clone();
        let conn = self.connect()?;
        match redis::cmd("GET").arg(&key).query::<Value>(conn) {
            Ok(Value::Nil) => Ok(Fence::ZERO),
            Ok(v) => int(&v)
                .and_then(|i| u64::try_from(i).ok())
                .map(Fence)
                .ok_or_else(|| self.unexpected("GET counter", &v)),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn install(&mut self) -> Result<(), StoreError> {
        self.install_marker()
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        self.delete_namespace(false)
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        self.installed = false;
        self.delete_namespace(true)
    }

    fn announce(&mut self, key: &str, owner: &str) -> Result<(), StoreError> {
        let channel = self.channel();
        let conn = self.connect()?;
        match redis::cmd("PUBLISH")
            .arg(channel)
            .arg(notice(key, owner))
            .query::<i64>(conn)
        {
            Ok(_) => Ok(()),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn bound(&self) -> Option<StdDuration> {
        Some(self.timeout)
    }

    fn limit_calls(&mut self, left: Option<StdDuration>) {
        self.limit = left.filter(|&left| left < self.timeout);
    }

    fn watcher(&self) -> Option<OpenWatcher> {
        let listen = Listen {
            client: self.client.clone(),
            timeout: self.timeout,
            namespace: self.namespace.clone(),
            channel: self.channel(),
            shown: self.described.clone(),
        };
        Some(Box::new(move || {
            RedisWatcher::open(listen).map(|w| Box::new(w) as Box<dyn Watcher>)
        }))
    }
}

/// A subscribed connection of its own, read by a thread that forwards each notice; the thread
/// ends within a second of the watcher being dropped, or when the connection fails.
struct RedisWatcher {
    notices: Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
    shown: String,
}

/// What a [`RedisWatcher`] needs to connect, taken from its store.
struct Listen {
    client: Client,
    timeout: StdDuration,
    namespace: String,
    channel: String,
    shown: String,
}

impl RedisWatcher {
    fn open(store: Listen) -> Result<Self, StoreError> {
        let shown = store.shown;
        let fail = |e: redis::RedisError| StoreError::Connect {
            store: shown.clone(),
            reason: e.to_string(),
        };
        let mut conn = (store.client)
            .get_connection_with_timeout(store.timeout)
            .map_err(fail)?;
        conn.set_write_timeout(Some(store.timeout)).map_err(fail)?;
        conn.set_read_timeout(Some(store.timeout)).map_err(fail)?;
        redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(format!("lock-store:{}", store.namespace))
            .query::<()>(&mut conn)
            .map_err(fail)?;
        let channel = store.channel;
        let (tx, notices) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready) = mpsc::channel();
        let stopped = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("lock-store-watch".into())
            .spawn(move || {
                let mut pubsub = conn.as_pubsub();
                let subscribed = pubsub
                    .subscribe(&channel)
                    .and_then(|()| pubsub.set_read_timeout(Some(StdDuration::from_secs(1))));
                let ok = subscribed.is_ok();
                let _ = ready_tx.send(subscribed);
                if !ok {
                    return;
                }
                while !stopped.load(Ordering::SeqCst) {
                    match pubsub.get_message() {
                        Ok(msg) => {
                            if tx.send(msg.get_payload_bytes().to_vec()).is_err() {
                                return;
                            }
                        }
                        Err(e) if e.is_timeout() => {}
                        Err(_) => return,
                    }
                }
            })
            .map_err(|e| StoreError::Connect {
                store: shown.clone(),
                reason: e.to_string(),
            })?;
        match ready.recv_timeout(store.timeout) {
            Ok(Ok(())) => Ok(RedisWatcher {
                notices,
                stop,
                shown,
            }),
            Ok(Err(e)) => Err(fail(e)),
            Err(_) => {
                stop.store(true, Ordering::SeqCst);
                Err(StoreError::Connect {
                    store: shown.clone(),
                    reason: "no answer to SUBSCRIBE in time".into(),
                })
            }
        }
    }
}

impl Watcher for RedisWatcher {
    fn next(&mut self, timeout: StdDuration) -> Result<Option<String>, StoreError> {
        match self.notices.recv_timeout(timeout) {
            Ok(payload) => Ok(Some(String::from_utf8_lossy(&payload).into_owned())),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(StoreError::Lost {
                store: self.shown.clone(),
                reason: "the notice connection closed".into(),
            }),
        }
    }
}

impl Drop for RedisWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl RedisStore {
    /// Deletes every key of the namespace, the format marker too if `all`.
    fn delete_namespace(&mut self, all: bool) -> Result<(), StoreError> {
        let pattern = format!("{}:*", glob_escape(&self.prefix()));
        let format_key = format!("{}:format", self.prefix()).into_bytes();
        let keys: Vec<Vec<u8>> = (self.scan(&pattern)?)
            .into_iter()
            .filter(|k| all || *k != format_key)
            .collect();
        for chunk in keys.chunks(256) {
            let conn = self.connect()?;
            if let Err(e) = redis::cmd("DEL").arg(chunk).query::<Value>(conn) {
                return Err(self.failed(&e));
            }
        }
        Ok(())
    }

    /// Every key matching `pattern`, by `SCAN` (never `KEYS`, which blocks the server).
    fn scan(&mut self, pattern: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut cursor: u64 = 0;
        let mut found = Vec::new();
        loop {
            let conn = self.connect()?;
            let reply: (u64, Vec<Vec<u8>>) = match redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(conn)
            {
                Ok(r) => r,
                Err(e) => return Err(self.failed(&e)),
            };
            found.extend(reply.1);
            cursor = reply.0;
            if cursor == 0 {
                return Ok(found);
            }
        }
    }
}

/// Packs the compare-and-set's `EVALSHA` (see `steps/redis-cas.lua` for its keys and arguments) as RESP into
/// `out`, replacing what it held. Written out rather than built as a `redis::Cmd`, which
/// measured (callgrind, a loop of pairs) ~10 000 client instructions per pair more: two vectors
/// grown argument by argument, every number formatted through `fmt`, the command copied once
/// more to be sent. Once `out` has grown to a record's size, a write allocates nothing here.
fn pack_cas(
    out: &mut Vec<u8>,
    sha: &[u8],
    record_key: &[&[u8]],
    counter: &[u8],
    write: &Write<'_>,
    seed_from_time: bool,
) {
    out.clear();
    out.extend_from_slice(b"*14\r\n");
    resp_arg(out, &[b"EVALSHA"]);
    resp_arg(out, &[sha]);
    resp_arg(out, &[b"2"]);
    resp_arg(out, record_key);
    resp_arg(out, &[counter]);
    let mut digits = itoa::Buffer::new();
    for n in [write.expected, write.version] {
        resp_arg(out, &[digits.format(n).as_bytes()]);
    }
    resp_arg(out, &[if write.bytes.is_none() { b"1" } else { b"0" }]);
    resp_arg(out, &[write.bytes.unwrap_or_default()]);
    resp_arg(out, &[digits.format(write.fresh_fences).as_bytes()]);
    for at in [write.not_before, write.forget_at] {
        match at {
            Some(at) => resp_arg(out, &[digits.format(instant_to_sql(at)).as_bytes()]),
            None => resp_arg(out, &[b"-1"]),
        }
    }
    resp_arg(out, &[if seed_from_time { b"1" } else { b"0" }]);
    resp_arg(out, &[write.replaces]);
}

/// Appends one RESP bulk string made of `parts`, one after the other.
fn resp_arg(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    out.extend_from_slice(b"\r\n");
    for part in parts {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

/// `s` with Redis glob characters escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same `EVALSHA` as `redis::Cmd` packs it (which the hot path no longer uses).
    fn as_cmd_packs(write: &Write<'_>, seed: bool) -> Vec<u8> {
        let mut call = redis::cmd("EVALSHA");
        call.arg("0123abcd")
            .arg(2)
            .arg("{el:ns}:k:job")
            .arg("{el:ns}:fence")
            .arg(write.expected)
            .arg(write.version)
            .arg(u8::from(write.bytes.is_none()))
            .arg(write.bytes.unwrap_or_default())
            .arg(write.fresh_fences)
            .arg(write.not_before.map_or(-1, instant_to_sql))
            .arg(write.forget_at.map_or(-1, instant_to_sql))
            .arg(u8::from(seed))
            .arg(write.replaces);
        call.get_packed_command()
    }

    #[test]
    fn the_packed_compare_and_set_is_the_command_redis_rs_would_send() {
        let record = [0u8, 1, 2, 255, b'\r', b'\n', 7];
        let writes = [
            Write {
                expected: 0,
                replaces: b"",
                version: u64::MAX,
                bytes: Some(&record),
                fresh_fences: 1,
                not_before: Some(Instant(1_764_000_000_123)),
                forget_at: None,
            },
            Write {
                expected: 9_007_199_254_740_993,
                replaces: b"LOCKTOMB",
                version: 10,
                bytes: None,
                fresh_fences: 0,
                not_before: None,
                forget_at: Some(Instant(u64::MAX)),
            },
            Write {
                expected: 1,
                replaces: &record,
                version: 9,
                bytes: Some(b""),
                fresh_fences: 12,
                not_before: Some(Instant(0)),
                forget_at: Some(Instant(60_000)),
            },
        ];
        let mut packed = vec![b'x'; 3];
        for write in &writes {
            for seed in [false, true] {
                let prefix: &[u8] = b"{el:ns}:k:";
                pack_cas(
                    &mut packed,
                    b"0123abcd",
                    &[prefix, b"job"],
                    b"{el:ns}:fence",
                    write,
                    seed,
                );
                assert_eq!(
                    String::from_utf8_lossy(&packed),
                    String::from_utf8_lossy(&as_cmd_packs(write, seed)),
                    "{write:?}"
                );
            }
        }
    }

    #[test]
    fn numbers_of_every_width_are_packed_as_redis_rs_would() {
        let record = [b'r'; 90];
        let mut packed = Vec::new();
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let write = Write {
                expected: n,
                replaces: &record[..usize::try_from(n % 90).unwrap()],
                version: n.max(1),
                bytes: Some(&record),
                fresh_fences: usize::try_from(n % 1000).unwrap(),
                not_before: Some(Instant(n)),
                forget_at: Some(Instant(n / 3)),
            };
            pack_cas(
                &mut packed,
                b"0123abcd",
                &[b"{el:ns}:k:", b"job"],
                b"{el:ns}:fence",
                &write,
                true,
            );
            assert_eq!(
                String::from_utf8_lossy(&packed),
                String::from_utf8_lossy(&as_cmd_packs(&write, true)),
                "{write:?}"
            );
        }
    }
}
