//! A namespace as this crate lays it out on a Redis server, written once for the blocking and
//! the async client: the keys' names, every command sent (as `redis::Cmd`s and pipelines, and
//! the compare-and-set packed by hand for the blocking hot path), and what each reply means.
//! The clients only send these and keep their connection.

use lock_core::{Fence, Instant};
use redis::{Client, Cmd, Pipeline, Value};

use super::replicas::Replicas;
use crate::steps;
use crate::store::{
    fences_from_text, instant_to_sql, notice, Read, StoreError, Stored, Write, Written, TOMBSTONE,
};

/// The format this build writes, kept at `{el:<ns>}:format`.
pub(crate) const FORMAT: &str = "1";

/// The error Redis answers an `EVALSHA` of a script it does not have.
pub(crate) const NO_SCRIPT: redis::ErrorKind =
    redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);

/// A namespace on a Redis server: its keys' names and what the commands on them answer.
pub(crate) struct Space {
    pub(crate) namespace: String,
    /// What errors name: the URL without its password, and the namespace.
    pub(crate) described: String,
    /// `{el:<ns>}:k:`, the record keys' prefix (the strings of the hot path are made once).
    pub(crate) record_prefix: Vec<u8>,
    /// `{el:<ns>}:fence`, the token counter.
    pub(crate) counter: String,
    /// `{el:<ns>}:format`, the format marker.
    pub(crate) format_key: String,
    /// `{el:<ns>}:authority`, the server that last granted, and the recovery delay.
    pub(crate) authority: String,
    /// The compare-and-set (`steps/redis-cas.lua`).
    pub(crate) script: redis::Script,
    /// The replicas that must acknowledge each write (`wait_replicas`), if the URL asks.
    pub(crate) replicas: Option<Replicas>,
}

/// What a failed command means for the connection it was sent on.
pub(crate) struct Failure {
    pub(crate) error: StoreError,
    /// The connection may be broken or out of step (an IO error, no answer in time): drop it.
    pub(crate) drop_connection: bool,
}

/// The client for `url` (`redis://` or `rediss://` with `cacert`, `cert`, `key`) and the URL
/// without its password, for messages.
pub(crate) fn client(url: &str) -> Result<(Client, String), StoreError> {
    let shown = crate::url::without_password(url);
    let bad_url = |e: redis::RedisError| StoreError::Url {
        url: shown.clone(),
        reason: e.to_string(),
    };
    // Without the client's own setup (`CLIENT SETINFO`, twice): its replies would each wait a
    // whole bound on a server that stopped answering. The connection is named instead
    // (`CLIENT SETNAME`, within the same bound as connecting).
    let (url, tls) = crate::tls::take_params(url, &["cacert", "cert", "key"]);
    let info = redis::IntoConnectionInfo::into_connection_info(url.as_str()).map_err(bad_url)?;
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
    Ok((client, shown))
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

/// A Redis string or bulk value as bytes.
pub(crate) fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
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

impl Space {
    /// Namespace `namespace` (already checked) of the server shown as `shown`.
    pub(crate) fn new(shown: &str, namespace: &str) -> Self {
        let prefix = format!("{{el:{namespace}}}");
        Space {
            namespace: namespace.to_owned(),
            described: format!("{shown} namespace \"{namespace}\""),
            record_prefix: format!("{prefix}:k:").into_bytes(),
            counter: format!("{prefix}:fence"),
            format_key: format!("{prefix}:format"),
            authority: format!("{prefix}:authority"),
            script: redis::Script::new(steps::REDIS_CAS),
            replicas: None,
        }
    }

    /// `{el:<ns>}`, the hash tag every key of the namespace shares.
    pub(crate) fn prefix(&self) -> String {
        format!("{{el:{}}}", self.namespace)
    }

    pub(crate) fn record_key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.record_prefix.len() + key.len());
        k.extend_from_slice(&self.record_prefix);
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// Where hand-off notices of the namespace are published.
    pub(crate) fn channel(&self) -> String {
        format!("{}:handoff", self.prefix())
    }

    /// Names a new connection, so that operators see whose it is (`CLIENT LIST`).
    pub(crate) fn set_name(&self) -> Cmd {
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("SETNAME")
            .arg(format!("lock-store:{}", self.namespace));
        cmd
    }

    #[cfg(feature = "tokio")]
    /// Names a new connection as [`Space::set_name`] does, and asks
    /// which server it reached (`INFO server`): its reply goes to [`Space::server_id`].
    pub(crate) fn greeting(&self) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("CLIENT")
            .arg("SETNAME")
            .arg(format!("lock-store:{}", self.namespace))
            .ignore()
            .cmd("INFO")
            .arg("server");
        pipe
    }

    /// The `run_id` of the server a connection reached, from the greeting's `INFO server`: the
    /// compare-and-set passes it, and a server that finds it differs from the namespace's
    /// authority looks again (see `steps/redis-cas.lua`). Empty if the reply has none.
    pub(crate) fn server_id(info: &str) -> String {
        (info.lines())
            .find_map(|line| line.strip_prefix("run_id:"))
            .map(|id| id.trim().to_owned())
            .unwrap_or_default()
    }

    /// What a failed command means: no answer in time (`bound`) or a broken connection is
    /// [`StoreError::Lost`] and drops the connection; anything else is the server's answer.
    pub(crate) fn failure(&self, e: &redis::RedisError, bound: std::time::Duration) -> Failure {
        let (error, drop_connection) = if e.is_timeout() {
            (crate::store::no_answer(self.described.clone(), bound), true)
        } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
            let lost = StoreError::Lost {
                store: self.described.clone(),
                reason: e.to_string(),
            };
            (lost, true)
        } else if e.to_string().contains("EXHAUSTED") {
            let store = self.described.clone();
            (StoreError::FencesExhausted { store }, false)
        } else if let Some(recovering) = self.recovering(e) {
            (recovering, false)
        } else {
            let server = StoreError::Server {
                store: self.described.clone(),
                reason: e.to_string(),
            };
            (server, false)
        };
        Failure {
            error,
            drop_connection,
        }
    }

    /// Whether the namespace exists: its format marker, or its counter (which a server that
    /// lost its data recreates at the next grant). Its reply goes to [`Space::presence`].
    pub(crate) fn presence_query(&self) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("GET")
            .arg(&self.format_key)
            .cmd("EXISTS")
            .arg(&self.counter);
        pipe
    }

    /// The verdict on [`Space::presence_query`]'s reply: `Ok(true)` present (ours),
    /// `Ok(false)` absent, or why what is there is not ours; `Err` a failed query.
    pub(crate) fn presence(
        &self,
        found: redis::RedisResult<(Value, i64)>,
    ) -> Result<Result<bool, StoreError>, redis::RedisError> {
        match found {
            Ok((Value::Nil, 0)) => Ok(Ok(false)),
            Ok((Value::Nil, _)) => Ok(Ok(true)),
            Ok((v, _)) => self.marker(Ok(v)),
            Err(e) => self.marker(Err(e)),
        }
    }

    /// Installs the format marker unless one is there; its reply goes to [`Space::marker`].
    pub(crate) fn install_marker(&self) -> Cmd {
        let mut cmd = redis::cmd("SET");
        cmd.arg(&self.format_key).arg(FORMAT).arg("NX").arg("GET");
        cmd
    }

    /// The verdict on the format marker found (nothing: installed now; this build's format;
    /// another's; not a string at all): `Ok(Ok(true))` once it is ours.
    pub(crate) fn marker(
        &self,
        found: redis::RedisResult<Value>,
    ) -> Result<Result<bool, StoreError>, redis::RedisError> {
        let key = &self.format_key;
        match found {
            Ok(Value::Nil) => Ok(Ok(true)),
            Ok(v) if bytes(&v) == Some(FORMAT.as_bytes()) => Ok(Ok(true)),
            Ok(v) => Ok(Err(StoreError::Schema {
                store: self.described.clone(),
                reason: format!("{key} holds {}, not this build's format {FORMAT}", text(&v)),
            })),
            Err(e) if e.to_string().contains("WRONGTYPE") => Ok(Err(StoreError::Schema {
                store: self.described.clone(),
                reason: format!("{key} is not ours (a value of another type)"),
            })),
            Err(e) => Err(e),
        }
    }

    /// A read: the server's time and the record, in one round trip, with whether the namespace
    /// is still there (another client may have uninstalled it).
    pub(crate) fn read_query(&self, key: &str) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("TIME")
            .cmd("HMGET")
            .arg(self.record_key(key))
            .arg("v")
            .arg("r")
            .arg("f")
            .cmd("EXISTS")
            .arg(&self.format_key)
            .arg(&self.counter);
        pipe
    }

    /// What [`Space::read_query`] answered ([`StoreError::NoNamespace`] if it is gone).
    pub(crate) fn read(&self, key: &str, reply: &Value) -> Result<Read, StoreError> {
        match reply {
            Value::Array(parts) if parts.len() == 3 => match (&parts[0], &parts[1], &parts[2]) {
                (_, Value::Array(rec), Value::Int(0)) if rec.first() == Some(&Value::Nil) => {
                    Err(StoreError::NoNamespace {
                        store: self.described.clone(),
                    })
                }
                (Value::Array(t), Value::Array(rec), _) if t.len() == 2 && rec.len() == 3 => {
                    Ok(Read {
                        record: self.stored(key, &rec[0], &rec[1], &rec[2])?,
                        now: self.time(&t[0], &t[1])?,
                    })
                }
                _ => Err(self.unexpected("a read", reply)),
            },
            _ => Err(self.unexpected("a read", reply)),
        }
    }

    #[cfg(feature = "tokio")]
    /// The compare-and-set as a `redis::Cmd` (the async client's; the blocking one sends the
    /// same bytes packed by [`pack_cas`]).
    pub(crate) fn cas(
        &self,
        key: &str,
        write: &Write<'_>,
        seed_from_time: bool,
        server_id: &str,
    ) -> Cmd {
        cas_cmd(
            self.script.get_hash().as_bytes(),
            &self.record_key(key),
            [self.counter.as_bytes(), self.authority.as_bytes()],
            write,
            seed_from_time,
            server_id,
        )
    }

    /// What the compare-and-set answered, given the reply to the `WAIT` sent after it (with
    /// `wait_replicas`; see [`Replicas::verdict`]).
    pub(crate) fn written_and_kept(
        &self,
        key: &str,
        reply: &Value,
        acked: Option<&Value>,
    ) -> Result<Written, StoreError> {
        let written = self.written(key, reply)?;
        match (&self.replicas, acked) {
            (Some(replicas), Some(acked)) => replicas.verdict(written, acked, &self.described),
            _ => Ok(written),
        }
    }

    /// What the compare-and-set answered: its fresh tokens, or the record now (a conflict).
    pub(crate) fn written(&self, key: &str, reply: &Value) -> Result<Written, StoreError> {
        match reply {
            Value::BulkString(_) | Value::SimpleString(_) => {
                let fences = std::str::from_utf8(bytes(reply).unwrap_or_default())
                    .ok()
                    .and_then(fences_from_text)
                    .ok_or_else(|| self.unexpected("a compare-and-set", reply))?;
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
                _ => Err(self.unexpected("a compare-and-set", reply)),
            },
            _ => Err(self.unexpected("a compare-and-set", reply)),
        }
    }

    /// The `SCAN` pattern of the namespace's records.
    pub(crate) fn records_pattern(&self) -> String {
        format!(
            "{}*",
            glob_escape(&String::from_utf8_lossy(&self.record_prefix))
        )
    }

    /// The `SCAN` pattern of every key of the namespace.
    pub(crate) fn namespace_pattern(&self) -> String {
        format!("{}:*", glob_escape(&self.prefix()))
    }

    /// One page of `SCAN` from `cursor`.
    pub(crate) fn scan(pattern: &str, cursor: u64) -> Cmd {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000);
        cmd
    }

    /// The keys of the record keys `found` by [`Space::records_pattern`], sorted, once each.
    pub(crate) fn keys_of(&self, found: Vec<Vec<u8>>) -> Vec<String> {
        let prefix = self.record_prefix.as_slice();
        let mut keys: Vec<String> = found
            .into_iter()
            .filter_map(|k| k.strip_prefix(prefix).map(<[u8]>::to_vec))
            .filter_map(|k| String::from_utf8(k).ok())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The length of each key's record, to tell tombstones (kept for their version) from keys.
    pub(crate) fn lengths_query(&self, keys: &[String]) -> Pipeline {
        let mut lengths = redis::pipe();
        for key in keys {
            lengths.cmd("HSTRLEN").arg(self.record_key(key)).arg("r");
        }
        lengths
    }

    /// `keys` without the tombstones, given their records' `lengths`.
    pub(crate) fn live(keys: Vec<String>, lengths: Vec<i64>) -> Vec<String> {
        keys.into_iter()
            .zip(lengths)
            .filter(|(_, len)| *len > TOMBSTONE.len() as i64)
            .map(|(key, _)| key)
            .collect()
    }

    /// Reads the token counter; its reply goes to [`Space::last_fence`].
    pub(crate) fn counter_query(&self) -> Cmd {
        let mut cmd = redis::cmd("GET");
        cmd.arg(&self.counter);
        cmd
    }

    /// The last token issued, from the counter's value.
    pub(crate) fn last_fence(&self, v: &Value) -> Result<Fence, StoreError> {
        match v {
            Value::Nil => Ok(Fence::ZERO),
            v => int(v)
                .and_then(|i| u64::try_from(i).ok())
                .map(Fence)
                .ok_or_else(|| self.unexpected("GET counter", v)),
        }
    }

    /// Tells the namespace's listeners that `key` was handed to `owner`.
    pub(crate) fn announce(&self, key: &str, owner: &str) -> Cmd {
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.channel()).arg(notice(key, owner));
        cmd
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
                store: self.described.clone(),
                reason: format!("unexpected TIME reply {sec:?} {usec:?}"),
            }),
        }
    }

    /// The script's refusal of a grant while the server recovers: `RECOVERING <until> <now>`.
    fn recovering(&self, e: &redis::RedisError) -> Option<StoreError> {
        if e.code() != Some("RECOVERING") {
            return None;
        }
        let mut instants = e.detail()?.split(' ').map(str::parse::<u64>);
        let (Some(Ok(until)), Some(Ok(at))) = (instants.next(), instants.next()) else {
            return None;
        };
        Some(StoreError::Recovering {
            store: self.described.clone(),
            until: Instant(until),
            at: Instant(at),
        })
    }

    fn unexpected(&self, what: &str, v: &Value) -> StoreError {
        StoreError::Server {
            store: self.described.clone(),
            reason: format!("unexpected reply to {what}: {v:?}"),
        }
    }
}

/// The compare-and-set's `EVALSHA` (see `steps/redis-cas.lua` for its keys and arguments) as a
/// `redis::Cmd`.
#[cfg(any(feature = "tokio", test))]
fn cas_cmd(
    sha: &[u8],
    record_key: &[u8],
    [counter, authority]: [&[u8]; 2],
    write: &Write<'_>,
    seed_from_time: bool,
    server_id: &str,
) -> Cmd {
    let mut call = redis::cmd("EVALSHA");
    call.arg(sha)
        .arg(3)
        .arg(record_key)
        .arg(counter)
        .arg(authority)
        .arg(write.expected)
        .arg(write.version)
        .arg(u8::from(write.bytes.is_none()))
        .arg(write.bytes.unwrap_or_default())
        .arg(write.fresh_fences)
        .arg(write.not_before.map_or(-1, instant_to_sql))
        .arg(write.forget_at.map_or(-1, instant_to_sql))
        .arg(u8::from(seed_from_time))
        .arg(write.replaces)
        .arg(write.holds_for.as_millis())
        .arg(server_id);
    call
}

/// Packs the compare-and-set's `EVALSHA` (the same command as [`cas_cmd`]) as RESP into `out`,
/// replacing what it held. Written out rather than built as a `redis::Cmd`, which measured
/// (callgrind, a loop of pairs) ~10 000 client instructions per pair more: two vectors grown
/// argument by argument, every number formatted through `fmt`, the command copied once more to
/// be sent. Once `out` has grown to a record's size, a write allocates nothing here.
pub(crate) fn pack_cas(
    out: &mut Vec<u8>,
    sha: &[u8],
    record_key: &[&[u8]],
    [counter, authority]: [&[u8]; 2],
    write: &Write<'_>,
    seed_from_time: bool,
    server_id: &str,
) {
    out.clear();
    out.extend_from_slice(b"*17\r\n");
    resp_arg(out, &[b"EVALSHA"]);
    resp_arg(out, &[sha]);
    resp_arg(out, &[b"3"]);
    resp_arg(out, record_key);
    resp_arg(out, &[counter]);
    resp_arg(out, &[authority]);
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
    resp_arg(
        out,
        &[digits.format(write.holds_for.as_millis()).as_bytes()],
    );
    resp_arg(out, &[server_id.as_bytes()]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn as_cmd_packs(write: &Write<'_>, seed: bool) -> Vec<u8> {
        cas_cmd(
            b"0123abcd",
            b"{el:ns}:k:job",
            [b"{el:ns}:fence", b"{el:ns}:authority"],
            write,
            seed,
            "abc123",
        )
        .get_packed_command()
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
                holds_for: lock_core::Duration(30_000),
            },
            Write {
                expected: 9_007_199_254_740_993,
                replaces: b"LOCKTOMB",
                version: 10,
                bytes: None,
                fresh_fences: 0,
                not_before: None,
                forget_at: Some(Instant(u64::MAX)),
                holds_for: lock_core::Duration(0),
            },
            Write {
                expected: 1,
                replaces: &record,
                version: 9,
                bytes: Some(b""),
                fresh_fences: 12,
                not_before: Some(Instant(0)),
                forget_at: Some(Instant(60_000)),
                holds_for: lock_core::Duration(u64::MAX),
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
                    [b"{el:ns}:fence", b"{el:ns}:authority"],
                    write,
                    seed,
                    "abc123",
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
                holds_for: lock_core::Duration(n),
            };
            pack_cas(
                &mut packed,
                b"0123abcd",
                &[b"{el:ns}:k:", b"job"],
                [b"{el:ns}:fence", b"{el:ns}:authority"],
                &write,
                true,
                "abc123",
            );
            assert_eq!(
                String::from_utf8_lossy(&packed),
                String::from_utf8_lossy(&as_cmd_packs(&write, true)),
                "{write:?}"
            );
        }
    }
}
