//! The blocking Redis client: one connection, bounded by socket timeouts; the commands and
//! what their replies mean are [`Space`]'s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use lock_core::Fence;
use redis::{Connection, ConnectionLike, Value};

use super::replicas::Replicas;
use super::space::{pack_cas, Space, NO_SCRIPT};
use super::target::Target;
use crate::store::{
    check_namespace, OpenWatcher, Read, Store, StoreError, Watcher, Write, Written,
};

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
    target: Target,
    conn: Option<Connection>,
    space: Space,
    timeout: StdDuration,
    /// The bound of the calls that follow, if less than `timeout` (see `Store::limit_calls`).
    limit: Option<StdDuration>,
    /// The socket timeouts of the live connection.
    applied: StdDuration,
    seed_from_time: bool,
    /// The `run_id` of the server the connection reached (see [`Space::server_id`]).
    server_id: String,
    /// Whether the namespace was seen to exist (its format marker or its counter): until then
    /// every call looks first, and reads answer [`StoreError::NoNamespace`].
    installed: bool,
    /// The compare-and-set's command as sent, reused from call to call (see [`pack_cas`]).
    packed: Vec<u8>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS:
    /// the server's certificate checked against the system's roots, or the CA file of
    /// `?cacert=PATH`, and its host name; `&cert=PATH&key=PATH` for a server that asks for a
    /// client certificate) and checks the
    /// namespace's format marker if it has one (creating nothing: the first write installs it).
    /// Every call waits at most `timeout`. With `?wait_replicas=N[&wait_timeout_ms=T]`, each
    /// write waits until `N` replicas acknowledged it (`WAIT`; `T` shorter than `timeout`), and a
    /// write made that they did not is [`StoreError::Unreplicated`].
    ///
    /// # Errors
    /// [`StoreError::Url`], [`StoreError::Namespace`], [`StoreError::Connect`],
    /// [`StoreError::Schema`] (a foreign value at the namespace's format key).
    pub fn open(url: &str, namespace: &str, timeout: StdDuration) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let (url, replicas) = Replicas::take(url, timeout)?;
        let (target, shown) = Target::of(&url)?;
        let mut space = Space::new(&shown, namespace);
        space.replicas = replicas;
        let mut store = RedisStore {
            target,
            conn: None,
            space,
            timeout,
            limit: None,
            applied: timeout,
            seed_from_time: true,
            server_id: String::new(),
            installed: false,
            packed: Vec::new(),
        };
        store.connect()?;
        match store.present() {
            Ok(()) | Err(StoreError::NoNamespace { .. }) => Ok(store),
            Err(e) => Err(e),
        }
    }

    /// Whether every token is also at least the server's time in microseconds (the default:
    /// tokens never repeat after a data loss or a failover) or counts from 1 (tests that expect
    /// tokens 1, 2, 3...).
    pub fn set_seed_from_time(&mut self, seed: bool) {
        self.seed_from_time = seed;
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
                    store: self.space.described.clone(),
                    reason,
                }
            };
            // Connecting (with the client's own setup) and naming the connection share the
            // bound.
            let until = std::time::Instant::now() + bound;
            let client = self
                .target
                .client(bound)
                .map_err(|reason| StoreError::Connect {
                    store: self.space.described.clone(),
                    reason,
                })?;
            let left = until.saturating_duration_since(std::time::Instant::now());
            let mut conn = client
                .get_connection_with_timeout(left.max(StdDuration::from_millis(1)))
                .map_err(fail)?;
            let left = until.saturating_duration_since(std::time::Instant::now());
            let left = Some(left.max(StdDuration::from_millis(1)));
            conn.set_read_timeout(left).map_err(fail)?;
            conn.set_write_timeout(left).map_err(fail)?;
            self.space.set_name().query::<()>(&mut conn).map_err(fail)?;
            // Which server this is (the script's authority check), in what is left of the bound.
            let left = until.saturating_duration_since(std::time::Instant::now());
            let left = Some(left.max(StdDuration::from_millis(1)));
            conn.set_read_timeout(left).map_err(fail)?;
            conn.set_write_timeout(left).map_err(fail)?;
            let info: String = redis::cmd("INFO")
                .arg("server")
                .query(&mut conn)
                .map_err(fail)?;
            self.server_id = Space::server_id(&info);
            conn.set_read_timeout(Some(bound)).map_err(fail)?;
            conn.set_write_timeout(Some(bound)).map_err(fail)?;
            self.applied = bound;
            self.conn = Some(conn);
        }
        match self.conn.as_mut() {
            Some(conn) => Ok(conn),
            None => Err(no_connection(&self.space.described)),
        }
    }

    /// Maps a failed call (see [`Space::failure`]), dropping the connection if it may be
    /// broken (the next call reconnects).
    fn failed(&mut self, e: &redis::RedisError) -> StoreError {
        let failure = self.space.failure(e, self.applied);
        if failure.drop_connection {
            self.conn = None;
        }
        failure.error
    }

    /// Maps a verdict of [`Space::marker`] or [`Space::presence`]: `installed` once the
    /// namespace is seen to be ours.
    fn verdict(
        &mut self,
        verdict: Result<Result<bool, StoreError>, redis::RedisError>,
    ) -> Result<(), StoreError> {
        match verdict {
            Ok(Ok(true)) => {
                self.installed = true;
                Ok(())
            }
            Ok(Ok(false)) => Err(StoreError::NoNamespace {
                store: self.describe(),
            }),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(self.failed(&e)),
        }
    }

    /// Whether the namespace exists: looked up until it was seen once.
    fn present(&mut self) -> Result<(), StoreError> {
        if self.installed {
            return Ok(());
        }
        let query = self.space.presence_query();
        let found = query.query(self.connect()?);
        let verdict = self.space.presence(found);
        self.verdict(verdict)
    }
}

impl Store for RedisStore {
    fn describe(&self) -> String {
        self.space.described.clone()
    }

    fn read(&mut self, key: &str) -> Result<Read, StoreError> {
        self.present()?;
        let query = self.space.read_query(key);
        let reply: Value = match query.query(self.connect()?) {
            Ok(v) => v,
            Err(e) => return Err(self.failed(&e)),
        };
        let read = self.space.read(key, &reply);
        if let Err(StoreError::NoNamespace { .. }) = read {
            self.installed = false;
        }
        read
    }

    fn write(&mut self, key: &str, write: &Write<'_>) -> Result<Written, StoreError> {
        self.present()?;
        self.connect()?;
        let RedisStore {
            conn: Some(conn),
            space,
            packed,
            seed_from_time,
            server_id,
            ..
        } = self
        else {
            return Err(no_connection(&self.space.described));
        };
        let sha = space.script.get_hash().as_bytes();
        let record_key: [&[u8]; 2] = [&space.record_prefix, key.as_bytes()];
        pack_cas(
            packed,
            sha,
            &record_key,
            [space.counter.as_bytes(), space.authority.as_bytes()],
            write,
            *seed_from_time,
            server_id,
        );
        // With `wait_replicas`, the `WAIT` follows in the same round trip.
        let wait = space.replicas.map(|r| r.command().get_packed_command());
        if let Some(wait) = &wait {
            packed.extend_from_slice(wait);
        }
        let send = |conn: &mut Connection, packed: &[u8]| -> redis::RedisResult<(Value, _)> {
            if wait.is_none() {
                let reply = conn.req_packed_command(packed)?.extract_error()?;
                return Ok((reply, None));
            }
            let mut replies = conn.req_packed_commands(packed, 0, 2)?;
            let acked = replies.pop();
            let reply = replies.pop().unwrap_or(Value::Nil).extract_error()?;
            Ok((reply, acked))
        };
        let mut reply = send(conn, packed);
        if matches!(&reply, Err(e) if e.kind() == NO_SCRIPT) {
            // The server does not have the script (a restart, `SCRIPT FLUSH`): nothing ran.
            reply = space.script.load(conn).and_then(|_| send(conn, packed));
        }
        match reply {
            Ok((v, acked)) => self.space.written_and_kept(key, &v, acked.as_ref()),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        self.present()?;
        let found = self.scan(&self.space.records_pattern())?;
        let keys = self.space.keys_of(found);
        if keys.is_empty() {
            return Ok(keys);
        }
        let lengths = self.space.lengths_query(&keys);
        match lengths.query(self.connect()?) {
            Ok(lengths) => Ok(Space::live(keys, lengths)),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn last_fence(&mut self) -> Result<Fence, StoreError> {
        self.present()?;
        let query = self.space.counter_query();
        match query.query::<Value>(self.connect()?) {
            Ok(v) => self.space.last_fence(&v),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn install(&mut self) -> Result<(), StoreError> {
        let cmd = self.space.install_marker();
        let found = cmd.query(self.connect()?);
        let verdict = self.space.marker(found);
        self.verdict(verdict)
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        self.delete_namespace(false)
    }

    fn uninstall(&mut self) -> Result<(), StoreError> {
        self.installed = false;
        self.delete_namespace(true)
    }

    fn announce(&mut self, key: &str, owner: &str) -> Result<(), StoreError> {
        let cmd = self.space.announce(key, owner);
        match cmd.query::<i64>(self.connect()?) {
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
        Some(watcher(&self.target, &self.space, self.timeout))
    }
}

/// Opens a [`RedisWatcher`] of `space`'s notices, on a connection of its own.
pub(crate) fn watcher(target: &Target, space: &Space, timeout: StdDuration) -> OpenWatcher {
    let listen = Listen {
        target: target.clone(),
        timeout,
        space_name: space.set_name(),
        channel: space.channel(),
        shown: space.described.clone(),
    };
    Box::new(move || RedisWatcher::open(listen).map(|w| Box::new(w) as Box<dyn Watcher>))
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
    target: Target,
    timeout: StdDuration,
    /// Its `CLIENT SETNAME`.
    space_name: redis::Cmd,
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
        let client =
            (store.target)
                .client(store.timeout)
                .map_err(|reason| StoreError::Connect {
                    store: shown.clone(),
                    reason,
                })?;
        let mut conn = client
            .get_connection_with_timeout(store.timeout)
            .map_err(fail)?;
        conn.set_write_timeout(Some(store.timeout)).map_err(fail)?;
        conn.set_read_timeout(Some(store.timeout)).map_err(fail)?;
        store.space_name.query::<()>(&mut conn).map_err(fail)?;
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
        let format_key = self.space.format_key.clone().into_bytes();
        let keys: Vec<Vec<u8>> = (self.scan(&self.space.namespace_pattern())?)
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
            let page = Space::scan(pattern, cursor);
            let reply: (u64, Vec<Vec<u8>>) = match page.query(self.connect()?) {
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
