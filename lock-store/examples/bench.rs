//! The shared-store benchmark: lock-store against what users would otherwise use, side by side
//! in one run on the same servers.
//!
//! ```text
//! cargo run --release -p lock-store --features all-stores --example bench -- [SECONDS_PER_CELL] [redis|postgres|mariadb]... [turns=N] [aims|kinds]
//! ```
//!
//! `turns=N` splits each contender's time in a cell into N turns (default 4); `aims` measures
//! only the cells the performance aims speak of (distinct keys, 1 and 16 connections), which
//! with many turns is how to tell whether an aim is met on a machine whose speed drifts;
//! `kinds` measures only the lock kinds' rows (below).
//!
//! For each store and each of 1, 16 and 64 connections (one thread each), two workloads:
//! *distinct* (each connection takes and releases its own key: the uncontended pair) and *hot*
//! (every connection tries one key and releases it when it got it). Printed per cell: operations
//! per second (a pair for distinct; an attempt for hot), p50 and p99 latency, and the ratio to
//! each alternative measured in the same run, in turns (lock-store and the alternatives take
//! turns, four each by default, so that the machine's drift touches them alike):
//!
//! - Redis: redislock-style `SET key token NX PX ttl` + an owner-checked scripted `DEL`, and
//!   the design's floor (on distinct keys): the store-side work a pair needs in this design
//!   (the store's clock, a version compared, a token, a record written), with no decision and
//!   no client library, which shows what the design costs apart from what lock-store adds.
//! - PostgreSQL: `pg_try_advisory_lock`/`pg_advisory_unlock` (nothing durable), a
//!   ShedLock-style table (`UPDATE ... WHERE lock_until <= now()`), and the design's floor (on
//!   distinct keys): the same store-side work as on Redis, as one bare prepared statement
//!   through the same blocking client as the ShedLock-style table.
//! - MariaDB: `GET_LOCK`/`RELEASE_LOCK` (nothing durable), a ShedLock-style table, and the
//!   design's floor (on distinct keys): lock-store's common write (one `UPDATE` comparing the
//!   version and the clock, the acquire's token from a `NOCACHE` sequence), bare, through the
//!   same blocking client as the ShedLock-style table.
//!
//! The lock kinds, lock-store alone (no alternative offers them all): one key taken by 1 and 16
//! connections exclusive, shared, and as one of 4 permits, in turns against each other (not
//! with `aims`).
//!
//! It also times the decision alone (decode, transition, encode of a record) per pair, native
//! and (built with `--features all-stores,component`) through the lock component, and reports
//! the larger as a share of lock-store's pair. The headline ratios (1 and 16 connections,
//! distinct keys) are given twice: over the whole cell, and turn by turn (lock-store's turn
//! against the alternative's turn of the same round: the median and the range), which shows how far
//! the machine's drift moves them. Server URLs: `LOCK_STORE_REDIS_URL`,
//! `LOCK_STORE_POSTGRES_URL`, `LOCK_STORE_MYSQL_URL` (defaults: the local servers).

#[path = "shared/cell.rs"]
mod cell;
#[path = "shared/pairs.rs"]
mod pairs;
#[path = "shared/shedlock.rs"]
mod shedlock;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{Duration as Ms, Fence, Instant as At, KeyRecord, Limits, Request};
use lock_store::{AcquireOptions, Locks};
use mysql::prelude::Queryable;

use cell::Cell;
use pairs::{measure, MakePair, Pair};
use shedlock::PgShedLock;

const TTL: Duration = Duration::from_secs(30);
const CONNECTIONS: [usize; 3] = [1, 16, 64];

/// What lock-store is measured against: its name, how to make its connections, and whether
/// the hot-key workload means anything for it.
type Alternative<'a> = (&'a str, &'a MakePair<'a>, bool);

struct Ours {
    locks: Locks,
    owner: String,
    held: Option<lock_store::Lease>,
}

impl Pair for Ours {
    fn take(&mut self, key: &str) -> bool {
        take_into(
            &mut self.held,
            self.locks.try_acquire(key, &self.owner, TTL),
        )
    }
    fn give(&mut self, _: &str) {
        if let Some(lease) = self.held.take() {
            lease.release().unwrap();
        }
    }
}

/// A lease taken or refused: kept in `held` if taken.
fn take_into(
    held: &mut Option<lock_store::Lease>,
    taken: Result<lock_store::Lease, lock_store::Error>,
) -> bool {
    match taken {
        Ok(lease) => {
            *held = Some(lease);
            true
        }
        Err(lock_store::Error::Lock(_)) => false,
        Err(e) => panic!("{e}"),
    }
}

/// lock-store with a lock kind: every take asks with `options`, on the key plus `suffix` (so
/// that kinds measured in turns never share a key).
struct OursKind {
    locks: Locks,
    owner: String,
    options: AcquireOptions<'static>,
    suffix: &'static str,
    held: Option<lock_store::Lease>,
    /// Takes that gave up on a record other writers kept changing (`StoreError::Contention`):
    /// counted as failed attempts, not hidden.
    contended: Arc<AtomicU64>,
}

impl Pair for OursKind {
    fn take(&mut self, key: &str) -> bool {
        let key = format!("{key}{}", self.suffix);
        let taken =
            (self.locks).acquire_with(&key, &self.owner, TTL, Duration::ZERO, &self.options);
        match taken {
            Err(lock_store::Error::Store(e)) if e.code() == "contention" => {
                self.contended.fetch_add(1, Ordering::Relaxed);
                false
            }
            taken => take_into(&mut self.held, taken),
        }
    }
    fn give(&mut self, _: &str) {
        if let Some(lease) = self.held.take() {
            // A release that gives up on contention is sent again (as a caller would: the
            // lease would otherwise hold its place until its TTL); each is counted.
            loop {
                match lease.release() {
                    Err(lock_store::Error::Store(e)) if e.code() == "contention" => {
                        self.contended.fetch_add(1, Ordering::Relaxed);
                    }
                    done => break done.unwrap(),
                }
            }
        }
    }
}

/// The lock kinds on one store: one key taken by `n` connections exclusive (today's lock),
/// shared (every taker granted beside the others), and as one of 4 permits, measured in turns
/// against each other. Ops/s counts attempts (a refused exclusive take is one; so is a take
/// that gave up on contention, counted in its row: every shared take and release writes the one
/// record of the key, where most exclusive attempts only read it).
fn kinds_table(store: &str, url: &str, ns: &str, plan: &Plan) {
    let counters: [Arc<AtomicU64>; 3] = Default::default();
    let kind =
        |options: AcquireOptions<'static>, suffix: &'static str, contended: &Arc<AtomicU64>| {
            let contended = Arc::clone(contended);
            move |i: usize| -> Box<dyn Pair> {
                Box::new(OursKind {
                    locks: Locks::open(url, ns).unwrap(),
                    owner: format!("o{i}"),
                    options,
                    suffix,
                    held: None,
                    contended: Arc::clone(&contended),
                })
            }
        };
    let exclusive = kind(AcquireOptions::default(), "x", &counters[0]);
    let shared = kind(AcquireOptions::shared(), "s", &counters[1]);
    let permits = kind(AcquireOptions::shared().permits(4), "p", &counters[2]);
    let makers: [&MakePair<'_>; 3] = [&exclusive, &shared, &permits];
    let names = [
        "one key, exclusive",
        "one key, shared",
        "one key, 4 permits (shared)",
    ];
    for n in [1, 16] {
        let tag = if store == "mariadb" {
            "mykinds"
        } else {
            "kinds"
        };
        let cells = measure_in_turns(&makers, n, true, plan.seconds, plan.turns, tag);
        let base = &cells[0].all;
        for ((name, cell), contended) in names.iter().zip(&cells).zip(&counters) {
            let all = &cell.all;
            let gave_up = contended.swap(0, Ordering::Relaxed);
            let gave_up = if gave_up == 0 {
                String::new()
            } else {
                format!("; {gave_up} takes or releases gave up on contention")
            };
            let vs = if std::ptr::eq(cell, &cells[0]) {
                gave_up
            } else {
                let ops = Spread::of(&cell.turns, &cells[0].turns, |c| c.ops_per_s);
                format!(
                    "vs exclusive on one key: {:.2}x ops/s, {:.2}x p50 (turn by turn: {ops}){gave_up}",
                    all.ops_per_s / base.ops_per_s,
                    all.p50_us / base.p50_us
                )
            };
            println!(
                "| {store} | {name} | {n} | {:.0} | {:.0} | {:.0} | {vs} |",
                all.ops_per_s, all.p50_us, all.p99_us
            );
        }
    }
}

struct RedisLock {
    conn: redis::Connection,
    /// `bench_<pid>:redislock:`, so that benchmarks running at once never share a key.
    prefix: String,
    token: String,
    release: redis::Script,
}

impl Pair for RedisLock {
    fn take(&mut self, key: &str) -> bool {
        let r: Option<String> = redis::cmd("SET")
            .arg(format!("{}{key}", self.prefix))
            .arg(&self.token)
            .arg("NX")
            .arg("PX")
            .arg(TTL.as_millis() as u64)
            .query(&mut self.conn)
            .unwrap();
        r.is_some()
    }
    fn give(&mut self, key: &str) {
        let _: i64 = self
            .release
            .key(format!("{}{key}", self.prefix))
            .arg(&self.token)
            .invoke(&mut self.conn)
            .unwrap();
    }
}

/// The design's floor on Redis: the store-side work this design needs for a pair, with no
/// decision and no client library around it. Acquire: the store's clock (`TIME`), the version
/// compared, a token taken in the same step (`INCR`), a record of lock-store's size written;
/// release: the clock, the version compared, the record written. lock-store's own script does
/// this and a little more (the not-before check, the store's expiry of the record).
/// Distinct keys only: it keeps no lock state, so a hot key would mean nothing.
struct CasFloor {
    conn: redis::Connection,
    acquire: redis::Script,
    release: redis::Script,
    /// `bench_<pid>:floor:`: the records' prefix.
    prefix: String,
    /// `bench_<pid>:floor:fence`: the tokens' counter.
    counter: String,
    /// The record's key, made at the first take (each connection has one key) and deleted when
    /// the pair is dropped, so that the next turn's pair starts from version 0.
    record: Option<String>,
    version: u64,
    bytes: Vec<u8>,
}

/// The floor's compare-and-set, acquire and release (see [`CasFloor`]).
const FLOOR_ACQUIRE: &str = "local t = redis.call('TIME') \
    if (redis.call('HGET', KEYS[1], 'v') or '0') ~= ARGV[1] then return {t[1], t[2]} end \
    local f = redis.call('INCR', KEYS[2]) \
    redis.call('HSET', KEYS[1], 'v', ARGV[2], 'r', ARGV[3], 'f', f) return f";
const FLOOR_RELEASE: &str = "local t = redis.call('TIME') \
    if (redis.call('HGET', KEYS[1], 'v') or '0') ~= ARGV[1] then return {t[1], t[2]} end \
    redis.call('HSET', KEYS[1], 'v', ARGV[2], 'r', ARGV[3], 'f', '') return ''";

impl CasFloor {
    /// One compare-and-set on `key`'s record; true if it wrote (no conflict).
    fn write(&mut self, release: bool, key: &str) -> bool {
        let prefix = &self.prefix;
        let record = self.record.get_or_insert_with(|| format!("{prefix}{key}"));
        let script = if release {
            &self.release
        } else {
            &self.acquire
        };
        let next = self.version + 1;
        let reply: redis::Value = script
            .key(record.as_str())
            .key(self.counter.as_str())
            .arg(self.version)
            .arg(next)
            .arg(&self.bytes)
            .invoke(&mut self.conn)
            .unwrap();
        self.version = next;
        !matches!(reply, redis::Value::Array(_))
    }
}

impl Pair for CasFloor {
    fn take(&mut self, key: &str) -> bool {
        self.write(false, key)
    }
    fn give(&mut self, key: &str) {
        assert!(self.write(true, key), "the floor's record is its own");
    }
}

impl Drop for CasFloor {
    fn drop(&mut self) {
        if let Some(record) = &self.record {
            let _: Result<(), _> = redis::cmd("DEL").arg(record).query(&mut self.conn);
        }
    }
}

/// The design's floor on PostgreSQL: the store-side work a pair needs in this design, with no
/// decision and no lock-store around it, through the blocking client the ShedLock-style table
/// uses. Acquire: a record of lock-store's size replaced where the version matches and the
/// server's clock has reached the decision's instant, a token taken from a sequence in the same
/// statement and returned; release: the same without a token. Distinct keys only.
struct PgFloor {
    client: postgres::Client,
    write: postgres::Statement,
    /// `<ns>_floor`: the records' table.
    table: String,
    /// The key's row, inserted at the first take (each connection has one key) and deleted
    /// when the pair is dropped, so that the next turn's pair starts from version 0.
    key: Option<String>,
    version: i64,
    bytes: Vec<u8>,
}

/// The floor's compare-and-set on table `t` with sequence `t_fences` (see [`PgFloor`]): $1 key,
/// $2 expected version, $3 new version, $4 record, $5 whether to take a token, $6 the instant
/// the server's clock must have reached.
fn pg_floor_write(t: &str) -> String {
    format!(
        "UPDATE {t} SET version = $3, record = $4, \
         fences = CASE WHEN $5 THEN ARRAY[nextval('{t}_fences')] ELSE '{{}}'::bigint[] END \
         WHERE key = $1 AND version = $2 AND clock_timestamp() >= $6 RETURNING fences"
    )
}

impl PgFloor {
    /// One compare-and-set on `key`'s row; true if it wrote (no conflict).
    fn write(&mut self, token: bool, key: &str) -> bool {
        if self.key.is_none() {
            self.client
                .execute(
                    &format!("INSERT INTO {} VALUES ($1, 0, '', '{{}}')", self.table),
                    &[&key],
                )
                .unwrap();
            self.key = Some(key.to_owned());
        }
        let next = self.version + 1;
        // A decision made a second ago, on the store's clock.
        let decided = std::time::SystemTime::now() - Duration::from_secs(1);
        let row = self
            .client
            .query_opt(
                &self.write,
                &[&key, &self.version, &next, &self.bytes, &token, &decided],
            )
            .unwrap();
        self.version = next;
        row.is_some()
    }
}

impl Pair for PgFloor {
    fn take(&mut self, key: &str) -> bool {
        self.write(true, key)
    }
    fn give(&mut self, key: &str) {
        assert!(self.write(false, key), "the floor's row is its own");
    }
}

impl Drop for PgFloor {
    fn drop(&mut self) {
        if let Some(key) = &self.key {
            let sql = format!("DELETE FROM {} WHERE key = $1", self.table);
            let _ = self.client.execute(&sql, &[key]);
        }
    }
}

struct Advisory {
    client: postgres::Client,
    take: postgres::Statement,
    give: postgres::Statement,
}

impl Pair for Advisory {
    fn take(&mut self, key: &str) -> bool {
        self.client.query_one(&self.take, &[&key]).unwrap().get(0)
    }
    fn give(&mut self, key: &str) {
        let _ = self.client.query_one(&self.give, &[&key]).unwrap();
    }
}

struct GetLock {
    conn: mysql::Conn,
}

impl Pair for GetLock {
    fn take(&mut self, key: &str) -> bool {
        let got: Option<i64> = self
            .conn
            .exec_first("SELECT GET_LOCK(?, 0)", (key,))
            .unwrap();
        got == Some(1)
    }
    fn give(&mut self, key: &str) {
        let _: Option<i64> = self
            .conn
            .exec_first("SELECT RELEASE_LOCK(?)", (key,))
            .unwrap();
    }
}

/// The design's floor on MariaDB: the store-side work a pair needs in this design, with no
/// decision and no lock-store around it, through the blocking client the ShedLock-style table
/// uses, as lock-store's common write does it. Acquire: a record of lock-store's size replaced
/// where the version matches and the server's clock has reached the decision's instant, a token
/// taken from a `NOCACHE` sequence in the same statement and returned in the OK packet
/// (`LAST_INSERT_ID`); release: the same without a token. Distinct keys only.
struct MyFloor {
    conn: mysql::Conn,
    /// The acquire's statement (with a token) and the release's (without).
    write: [mysql::Statement; 2],
    /// `<ns>_floor`: the records' table.
    table: String,
    /// The key's row, inserted at the first take (each connection has one key) and deleted
    /// when the pair is dropped, so that the next turn's pair starts from version 0.
    key: Option<String>,
    version: u64,
    bytes: Vec<u8>,
}

/// The floor's compare-and-set on table `t` with sequence `t_fences` (see [`MyFloor`]), with a
/// token or without: new version, record, key, expected version, the instant (ms) the server's
/// clock must have reached.
fn my_floor_write(t: &str, token: bool) -> String {
    let fences = if token {
        format!("LAST_INSERT_ID(NEXTVAL(`{t}_fences`))")
    } else {
        "''".to_owned()
    };
    format!(
        "UPDATE `{t}` SET version = ?, record = ?, fences = {fences} \
         WHERE k = ? AND version = ? AND FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000) >= ?"
    )
}

impl MyFloor {
    /// One compare-and-set on `key`'s row; true if it wrote (no conflict).
    fn write(&mut self, token: bool, key: &str) -> bool {
        if self.key.is_none() {
            self.conn
                .exec_drop(
                    format!("INSERT INTO `{}` VALUES (?, 0, '', '')", self.table),
                    (key,),
                )
                .unwrap();
            self.key = Some(key.to_owned());
        }
        let next = self.version + 1;
        // A decision made a second ago, on the store's clock.
        let decided = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
            - 1000;
        self.conn
            .exec_drop(
                &self.write[usize::from(!token)],
                (next, &self.bytes, key, self.version, decided),
            )
            .unwrap();
        self.version = next;
        self.conn.affected_rows() == 1
    }
}

impl Pair for MyFloor {
    fn take(&mut self, key: &str) -> bool {
        self.write(true, key)
    }
    fn give(&mut self, key: &str) {
        assert!(self.write(false, key), "the floor's row is its own");
    }
}

impl Drop for MyFloor {
    fn drop(&mut self) {
        if let Some(key) = &self.key {
            let sql = format!("DELETE FROM `{}` WHERE k = ?", self.table);
            let _ = self.conn.exec_drop(sql, (key,));
        }
    }
}

struct MyTable {
    conn: mysql::Conn,
    owner: String,
    table: String,
}

impl Pair for MyTable {
    fn take(&mut self, key: &str) -> bool {
        self.conn
            .exec_drop(
                format!(
                    "UPDATE {} SET lock_until = NOW(3) + INTERVAL 30 SECOND, locked_at = NOW(3), locked_by = ? \
                     WHERE name = ? AND lock_until <= NOW(3)",
                    self.table
                ),
                (&self.owner, key),
            )
            .unwrap();
        self.conn.affected_rows() == 1
    }
    fn give(&mut self, key: &str) {
        self.conn
            .exec_drop(
                format!(
                    "UPDATE {} SET lock_until = NOW(3) WHERE name = ? AND locked_by = ?",
                    self.table
                ),
                (key, &self.owner),
            )
            .unwrap();
    }
}

/// A contender's cell: all its turns together, and each turn alone (in the order run).
struct Measured {
    all: Cell,
    turns: Vec<Cell>,
}

/// How many turns each contender of a cell takes unless the command line says (`turns=N`):
/// lock-store and the alternatives run in turns (all once, then all again, the first moving to
/// the back each time), so that a drift of the machine (this VM's speed moves by 20-50 %
/// within minutes) touches them alike.
const TURNS: usize = 4;

/// Measures each of `makers` for `seconds` in all, in `turns` turns each.
fn measure_in_turns(
    makers: &[&MakePair<'_>],
    connections: usize,
    hot: bool,
    seconds: f64,
    turns: usize,
    tag: &str,
) -> Vec<Measured> {
    let per_turn = seconds / turns as f64;
    let mut latencies: Vec<Vec<Vec<Duration>>> = vec![Vec::new(); makers.len()];
    for turn in 0..turns {
        for i in 0..makers.len() {
            let who = (i + turn) % makers.len();
            latencies[who].push(measure(makers[who], connections, hot, per_turn, tag));
        }
    }
    latencies
        .into_iter()
        .map(|turns| Measured {
            all: Cell::of(turns.concat(), seconds),
            turns: turns.into_iter().map(|l| Cell::of(l, per_turn)).collect(),
        })
        .collect()
}

/// Ratios turn by turn: their median, the lowest and the highest; shown as `1.11x (1.04x-1.27x)`.
struct Spread {
    median: f64,
    low: f64,
    high: f64,
}

impl Spread {
    /// The ratios of `ours` to `theirs`, turn by turn (each turn of one ran in the same round as
    /// the same turn of the other, a few seconds apart, so the machine's drift mostly cancels).
    fn of(ours: &[Cell], theirs: &[Cell], value: impl Fn(&Cell) -> f64) -> Spread {
        let mut r: Vec<f64> = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| value(a) / value(b))
            .collect();
        r.sort_by(f64::total_cmp);
        let mid = r.len() / 2;
        Spread {
            median: if r.len() % 2 == 1 {
                r[mid]
            } else {
                (r[mid - 1] + r[mid]) / 2.0
            },
            low: r[0],
            high: r[r.len() - 1],
        }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2}x ({:.2}x-{:.2}x)",
            self.median, self.low, self.high
        )
    }
}

/// Whether the performance aims speak of a cell: distinct keys at 1 and 16 connections.
fn aim_cell(hot: bool, connections: usize) -> bool {
    !hot && (connections == 1 || connections == 16)
}

fn url(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// The decision alone per pair (decode, decide, encode, twice), native.
fn decision_us() -> f64 {
    let limits = Limits::default();
    let rounds = 100_000u64;
    let start = Instant::now();
    let mut bytes = KeyRecord::new().encode();
    let mut fence = Fence(1);
    for i in 0..rounds {
        let now = At(1_000_000 + i);
        let mut r = KeyRecord::decode(&bytes, &[fence], &limits).unwrap();
        let step = r.handle(
            Request::TryAcquire {
                key: "k",
                owner: "a",
                ttl: Ms(30_000),
                now,
            },
            &limits,
        );
        assert!(step.changed);
        r.settle(&[fence]);
        bytes = r.encode();
        let mut r = KeyRecord::decode(&bytes, &[fence], &limits).unwrap();
        let _ = r.handle(
            Request::Release {
                key: "k",
                owner: "a",
                fence,
                now,
            },
            &limits,
        );
        bytes = r.encode();
        fence = Fence(fence.0 + 1);
    }
    start.elapsed().as_secs_f64() * 1e6 / rounds as f64
}

/// The decision alone per pair through the lock component (one instance call per request),
/// when built with the `component` feature.
#[cfg(feature = "component")]
fn component_decision_us() -> Option<f64> {
    use lock_store::{store::Component, store::Decider};
    let mut c = Component::embedded().ok()?;
    let limits = Limits::default();
    let rounds = 20_000u64;
    let mut record = c.empty();
    let start = Instant::now();
    for i in 0..rounds {
        let now = At(1_000_000 + i);
        let fence = Fence(i + 1);
        let d = c
            .handle(
                &record,
                Request::TryAcquire {
                    key: "k",
                    owner: "a",
                    ttl: Ms(30_000),
                    now,
                },
                &limits,
            )
            .ok()?;
        let mut held = d.after;
        c.settle(&mut held, &[fence]);
        let d = c
            .handle(
                &held,
                Request::Release {
                    key: "k",
                    owner: "a",
                    fence,
                    now,
                },
                &limits,
            )
            .ok()?;
        record = d.after;
    }
    Some(start.elapsed().as_secs_f64() * 1e6 / rounds as f64)
}

#[cfg(not(feature = "component"))]
fn component_decision_us() -> Option<f64> {
    None
}

fn main() {
    let (plan, only) = match Plan::from_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(word) => {
            eprintln!("bench: cannot use {word:?}\nusage: bench [SECONDS_PER_CELL] [redis|postgres|mariadb]... [turns=N] [aims|kinds]");
            std::process::exit(2);
        }
    };
    // The stores to measure (default: all).
    let run = |store: &str| only.is_empty() || only.iter().any(|o| o == store);
    let redis_url = url("LOCK_STORE_REDIS_URL", "redis://127.0.0.1:6379");
    let pg_url = url(
        "LOCK_STORE_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    );
    let my_url = url("LOCK_STORE_MYSQL_URL", "mysql://root@127.0.0.1:3306/test");
    let ns = format!("bench_{}", std::process::id());
    let decide = decision_us();
    println!("decision alone (native decode + transition + encode), per pair: {decide:.2} us");
    let component = component_decision_us();
    match component {
        Some(us) => {
            println!("decision alone through the lock component (wasmtime), per pair: {us:.2} us")
        }
        None => println!(
            "(build with --features all-stores,component to time the component's decision too)"
        ),
    }
    let decide = component.unwrap_or(decide).max(decide);
    println!(
        "{} s per cell and contender, in {} turns; ops/s counts pairs (distinct) or attempts (hot){}\n",
        plan.seconds,
        plan.turns,
        if plan.aims {
            "; only the aims' cells (distinct keys, 1 and 16 connections)"
        } else {
            ""
        }
    );
    println!("| store | workload | conns | ops/s | p50 us | p99 us | vs |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");

    let mut ratios = Vec::new();
    // Redis.
    if run("redis") {
        let redis_client = redis::Client::open(redis_url.as_str()).unwrap();
        let release = redis::Script::new("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end");
        let ours_redis = |i: usize| -> Box<dyn Pair> {
            Box::new(Ours {
                locks: Locks::open(&redis_url, &ns).unwrap(),
                owner: format!("o{i}"),
                held: None,
            })
        };
        let redislock = |i: usize| -> Box<dyn Pair> {
            Box::new(RedisLock {
                conn: redis_client.get_connection().unwrap(),
                token: format!("t{i}"),
                prefix: format!("{ns}:redislock:"),
                release: release.clone(),
            })
        };
        let floor = |_: usize| -> Box<dyn Pair> {
            Box::new(CasFloor {
                conn: redis_client.get_connection().unwrap(),
                acquire: redis::Script::new(FLOOR_ACQUIRE),
                release: redis::Script::new(FLOOR_RELEASE),
                prefix: format!("{ns}:floor:"),
                counter: format!("{ns}:floor:fence"),
                record: None,
                version: 0,
                bytes: vec![b'r'; 90],
            })
        };
        // The floor keeps no lock state: distinct keys only.
        let alternatives: Vec<Alternative<'_>> = vec![
            ("redislock-style", &redislock, true),
            ("the design's floor", &floor, false),
        ];
        table(
            "redis",
            &ours_redis,
            &alternatives,
            &plan,
            decide,
            &mut ratios,
        );
        if !plan.aims {
            kinds_table("redis", &redis_url, &ns, &plan);
        }
    }

    // PostgreSQL.
    let shed = format!("{ns}_shedlock");
    if run("postgres") {
        let floor_table = format!("{ns}_floor");
        let mut admin = postgres::Client::connect(&pg_url, postgres::NoTls).unwrap();
        admin
        .batch_execute(&format!(
            "{}; \
             CREATE TABLE {floor_table} (key text PRIMARY KEY, version bigint NOT NULL, record bytea NOT NULL, fences bigint[] NOT NULL) WITH (fillfactor = 90); \
             CREATE SEQUENCE {floor_table}_fences",
            shedlock::create_table(&shed)
        ))
        .unwrap();
        let ours_pg = |i: usize| -> Box<dyn Pair> {
            Box::new(Ours {
                locks: Locks::open(&pg_url, &ns).unwrap(),
                owner: format!("o{i}"),
                held: None,
            })
        };
        let advisory = |_: usize| -> Box<dyn Pair> {
            let mut client = postgres::Client::connect(&pg_url, postgres::NoTls).unwrap();
            let take = client
                .prepare("SELECT pg_try_advisory_lock(hashtext($1))")
                .unwrap();
            let give = client
                .prepare("SELECT pg_advisory_unlock(hashtext($1))")
                .unwrap();
            Box::new(Advisory { client, take, give })
        };
        let pg_table = |i: usize| -> Box<dyn Pair> {
            Box::new(PgShedLock::connect(&pg_url, &shed, format!("o{i}")))
        };
        let pg_floor = |_: usize| -> Box<dyn Pair> {
            let mut client = postgres::Client::connect(&pg_url, postgres::NoTls).unwrap();
            let write = client.prepare(&pg_floor_write(&floor_table)).unwrap();
            Box::new(PgFloor {
                client,
                write,
                table: floor_table.clone(),
                key: None,
                version: 0,
                bytes: vec![b'r'; 90],
            })
        };
        // The floor keeps no lock state: distinct keys only.
        let alternatives: Vec<Alternative<'_>> = vec![
            ("ShedLock-style table", &pg_table, true),
            ("advisory locks", &advisory, true),
            ("the design's floor", &pg_floor, false),
        ];
        table(
            "postgres",
            &ours_pg,
            &alternatives,
            &plan,
            decide,
            &mut ratios,
        );
        if !plan.aims {
            kinds_table("postgres", &pg_url, &ns, &plan);
        }
        admin
            .batch_execute(&format!(
                "DROP TABLE {shed}; DROP TABLE {floor_table}; DROP SEQUENCE {floor_table}_fences; \
                 DROP SCHEMA IF EXISTS {ns} CASCADE"
            ))
            .unwrap();
    }

    // MariaDB.
    if run("mariadb") {
        let opts = mysql::Opts::from_url(&my_url).unwrap();
        let mut admin = mysql::Conn::new(opts.clone()).unwrap();
        admin
        .query_drop(format!(
            "CREATE TABLE {shed} (name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL, locked_by VARCHAR(255) NOT NULL)"
        ))
        .unwrap();
        // The floor's table and sequence, as lock-store's (`mysql.rs`).
        let floor_table = format!("{ns}_floor");
        admin
            .query_drop(format!(
                "CREATE TABLE `{floor_table}` (k VARBINARY(3072) NOT NULL PRIMARY KEY, version BIGINT UNSIGNED NOT NULL, record LONGBLOB NOT NULL, fences TEXT NOT NULL) ENGINE=InnoDB"
            ))
            .unwrap();
        admin
            .query_drop(format!(
                "CREATE SEQUENCE `{floor_table}_fences` START WITH 1 MINVALUE 1 MAXVALUE 9007199254740991 INCREMENT BY 1 NOCACHE NOCYCLE"
            ))
            .unwrap();
        for i in 0..CONNECTIONS[2] {
            admin
                .exec_drop(
                    format!("INSERT INTO {shed} VALUES (?, NOW(3), NOW(3), '')"),
                    (format!("myk{i}"),),
                )
                .unwrap();
        }
        admin
            .exec_drop(
                format!("INSERT INTO {shed} VALUES ('myhot', NOW(3), NOW(3), '')"),
                (),
            )
            .unwrap();
        let ours_my = |i: usize| -> Box<dyn Pair> {
            Box::new(Ours {
                locks: Locks::open(&my_url, &ns).unwrap(),
                owner: format!("o{i}"),
                held: None,
            })
        };
        let get_lock = |_: usize| -> Box<dyn Pair> {
            Box::new(GetLock {
                conn: mysql::Conn::new(opts.clone()).unwrap(),
            })
        };
        let my_table = |i: usize| -> Box<dyn Pair> {
            Box::new(MyTable {
                conn: mysql::Conn::new(opts.clone()).unwrap(),
                owner: format!("o{i}"),
                table: shed.clone(),
            })
        };
        let my_floor = |_: usize| -> Box<dyn Pair> {
            let mut conn = mysql::Conn::new(opts.clone()).unwrap();
            // As lock-store's connections: row locks only.
            conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                .unwrap();
            let write =
                [true, false].map(|token| conn.prep(my_floor_write(&floor_table, token)).unwrap());
            Box::new(MyFloor {
                conn,
                write,
                table: floor_table.clone(),
                key: None,
                version: 0,
                bytes: vec![b'r'; 90],
            })
        };
        // The floor keeps no lock state: distinct keys only.
        let alternatives: Vec<Alternative<'_>> = vec![
            ("ShedLock-style table", &my_table, true),
            ("GET_LOCK", &get_lock, true),
            ("the design's floor", &my_floor, false),
        ];
        table(
            "mariadb",
            &ours_my,
            &alternatives,
            &plan,
            decide,
            &mut ratios,
        );
        if !plan.aims {
            kinds_table("mariadb", &my_url, &ns, &plan);
        }
        admin.query_drop(format!("DROP TABLE {shed}")).unwrap();
        admin
            .query_drop(format!("DROP TABLE `{floor_table}`"))
            .unwrap();
        admin
            .query_drop(format!("DROP SEQUENCE `{floor_table}_fences`"))
            .unwrap();
        if let Ok(mut store) =
            lock_store::store::open(&my_url, &ns, lock_store::store::DEFAULT_BOUND)
        {
            let _ = lock_store::store::Store::uninstall(&mut store);
        }
    }
    if run("redis") {
        if let Ok(mut store) =
            lock_store::store::open(&redis_url, &ns, lock_store::store::DEFAULT_BOUND)
        {
            let _ = lock_store::store::Store::uninstall(&mut store);
        }
        // The floor's counter (each floor pair deletes its record when dropped).
        if let Ok(mut conn) =
            redis::Client::open(redis_url.as_str()).and_then(|c| c.get_connection())
        {
            let _: Result<(), _> = redis::cmd("DEL")
                .arg(format!("{ns}:floor:fence"))
                .query(&mut conn);
        }
    }
    println!();
    for line in ratios {
        println!("{line}");
    }
}

/// What to measure: seconds per cell and contender, turns per cell, and whether only the
/// cells the aims speak of ([`aim_cell`]).
struct Plan {
    seconds: f64,
    turns: usize,
    aims: bool,
    /// Only the lock kinds' rows.
    kinds: bool,
}

/// The stores a run can measure.
const STORES: [&str; 3] = ["redis", "postgres", "mariadb"];

impl Plan {
    /// The plan and the stores named by the command line (`[SECONDS] [store]... [turns=N]
    /// [aims]`); a word it does not know (a misspelt store, `turns=0`) is answered as an error
    /// rather than ignored, so that a typo never measures what was not asked for.
    fn from_args(args: impl Iterator<Item = String>) -> Result<(Plan, Vec<String>), String> {
        let mut plan = Plan {
            seconds: 2.0,
            turns: TURNS,
            aims: false,
            kinds: false,
        };
        let mut stores = Vec::new();
        for (i, word) in args.enumerate() {
            if let (0, Ok(seconds)) = (i, word.parse::<f64>()) {
                plan.seconds = seconds;
            } else if word == "aims" {
                plan.aims = true;
            } else if word == "kinds" {
                plan.kinds = true;
            } else if let Some(n) = word.strip_prefix("turns=") {
                plan.turns = n.parse().ok().filter(|&t| t > 0).ok_or(word.clone())?;
            } else if STORES.contains(&word.as_str()) {
                stores.push(word);
            } else {
                return Err(word);
            }
        }
        Ok((plan, stores))
    }
}

/// Measures lock-store and each alternative on one store, prints the rows and collects the
/// headline ratios (with the median and range of the ratios turn by turn).
fn table(
    store: &str,
    ours: &MakePair<'_>,
    alternatives: &[Alternative<'_>],
    plan: &Plan,
    decide_us: f64,
    ratios: &mut Vec<String>,
) {
    for hot in [false, true] {
        if plan.kinds {
            break;
        }
        let workload = if hot { "hot key" } else { "distinct keys" };
        for n in CONNECTIONS {
            if plan.aims && !aim_cell(hot, n) {
                continue;
            }
            // The key prefix differs per workload so lock-store's and the alternatives' keys
            // never meet.
            let tag = if store == "mariadb" { "my" } else { "" };
            let alternatives: Vec<(&str, &MakePair<'_>)> = alternatives
                .iter()
                .filter(|(_, _, on_hot_key)| *on_hot_key || !hot)
                .map(|&(name, make, _)| (name, make))
                .collect();
            let makers: Vec<&MakePair<'_>> = std::iter::once(ours)
                .chain(alternatives.iter().map(|(_, make)| *make))
                .collect();
            let cells = measure_in_turns(&makers, n, hot, plan.seconds, plan.turns, tag);
            let mine = &cells[0].all;
            let mut vs = Vec::new();
            for ((name, _), theirs) in alternatives.iter().zip(&cells[1..]) {
                let all = &theirs.all;
                vs.push(format!(
                    "{name}: {:.0} ops/s, p50 {:.0} us (ours {:.2}x p50, {:.2}x ops/s)",
                    all.ops_per_s,
                    all.p50_us,
                    mine.p50_us / all.p50_us,
                    mine.ops_per_s / all.ops_per_s
                ));
                if aim_cell(hot, n) {
                    let p50 = Spread::of(&cells[0].turns, &theirs.turns, |c| c.p50_us);
                    let ops = Spread::of(&cells[0].turns, &theirs.turns, |c| c.ops_per_s);
                    ratios.push(format!(
                        "{store}, {n} conn, distinct keys, vs {name}: p50 {:.2}x, throughput {:.2}x; \
                         turn by turn ({} turns): p50 {p50}, throughput {ops}",
                        mine.p50_us / all.p50_us,
                        mine.ops_per_s / all.ops_per_s,
                        plan.turns,
                    ));
                }
            }
            if !hot && n == 1 && !plan.kinds {
                ratios.push(format!(
                    "{store}: the decision is {:.1} % of a pair ({decide_us:.2} of {:.0} us)",
                    100.0 * decide_us / mine.p50_us,
                    mine.p50_us
                ));
            }
            println!(
                "| {store} | {workload} | {n} | {:.0} | {:.0} | {:.0} | {} |",
                mine.ops_per_s,
                mine.p50_us,
                mine.p99_us,
                vs.join("; ")
            );
        }
    }
}
