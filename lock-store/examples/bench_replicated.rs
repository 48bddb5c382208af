//! The replicated modes' cost: a lock-store pair (acquire, release; distinct keys) on a single
//! server, on a primary with an asynchronous replica, and on one that waits for its replica,
//! side by side with what users would otherwise run on the same servers, in turns.
//!
//! ```text
//! cargo run --release -p lock-store --features all-stores --example bench_replicated -- [SECONDS_PER_CELL] [turns=N] [redis|postgres]...
//! ```
//!
//! Throwaway servers of its own (Debian's `redis-server` and PostgreSQL binaries, on ports
//! 17300-17320, data under the system's temporary directory, no fsync: the cost measured is the
//! replication's, not a disk's):
//!
//! - Redis: a server alone; a primary with one replica: lock-store, lock-store with
//!   `?wait_replicas=1`, a plain `SET NX PX` pair (redislock's: an owner-checked scripted `DEL`
//!   to release), and the same followed by `WAIT 1` in the same round trip (Redisson's
//!   `syncSlaves`).
//! - PostgreSQL: a cluster alone; a primary with an asynchronous standby; a primary with a
//!   synchronous standby (`synchronous_standby_names = '*'`): lock-store and a ShedLock-style
//!   table on each.
//!
//! Printed per cell (1 and 16 connections): pairs per second, p50 and p99 latency, the ratio
//! to the same contender on the single server, the ratio to the alternative on the same
//! servers, and this process's peak memory at the end.

#[path = "shared/cell.rs"]
mod cell;
#[path = "shared/pairs.rs"]
mod pairs;
#[allow(dead_code)]
#[path = "../tests/common/postgres_server.rs"]
mod postgres_server;
#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;
#[path = "shared/shedlock.rs"]
mod shedlock;

use std::time::{Duration, Instant};

use lock_store::{Lease, Locks};

use cell::Cell;
use pairs::{measure, MakePair, Pair};
use postgres_server::Cluster;
use redis_server::{Throwaway, NO_PERSISTENCE};
use shedlock::PgShedLock;

const TTL: Duration = Duration::from_secs(30);
const CONNECTIONS: [usize; 2] = [1, 16];

/// What the throwaway-server helpers need from their parent module.
fn unique_namespace(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{:x}",
        std::process::id(),
        lock_store::store::new_version() & 0xff_ffff
    )
}

/// Polls `f` every 10 ms until it answers `Some` (at most 30 s).
fn eventually<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    eventually_within(what, 30, f)
}

/// Polls `f` every 10 ms until it answers `Some` (at most `seconds`).
fn eventually_within<T>(what: &str, seconds: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what}: not within {seconds} s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Ours {
    locks: Locks,
    owner: String,
    held: Option<Lease>,
}

impl Pair for Ours {
    fn take(&mut self, key: &str) -> bool {
        self.held = self.locks.try_acquire(key, &self.owner, TTL).ok();
        self.held.is_some()
    }
    fn give(&mut self, _: &str) {
        if let Some(lease) = self.held.take() {
            lease.release().unwrap();
        }
    }
}

/// `SET key token NX PX ttl`, released by an owner-checked scripted `DEL` (`EVALSHA`); with
/// `wait`, each followed by `WAIT 1 1000` in the same round trip (pipelined).
struct SetNx {
    conn: redis::Connection,
    token: String,
    release: redis::Script,
    wait: bool,
}

impl SetNx {
    fn new(url: &str, i: usize, wait: bool) -> Self {
        let release = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        );
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: String = release.prepare_invoke().load(&mut conn).unwrap();
        SetNx {
            conn,
            token: format!("t{i}-{}", std::process::id()),
            release,
            wait,
        }
    }
}

impl Pair for SetNx {
    fn take(&mut self, key: &str) -> bool {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(key)
            .arg(&self.token)
            .arg("NX")
            .arg("PX")
            .arg(TTL.as_millis() as u64);
        if self.wait {
            pipe.cmd("WAIT").arg(1).arg(1000).ignore();
        }
        let (set,): (Option<String>,) = pipe.query(&mut self.conn).unwrap();
        set.is_some()
    }
    fn give(&mut self, key: &str) {
        let _: i64 = self
            .release
            .key(key)
            .arg(&self.token)
            .invoke(&mut self.conn)
            .unwrap();
        if self.wait {
            let _: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(1000)
                .query(&mut self.conn)
                .unwrap();
        }
    }
}

/// One contender: its store, topology and name, and how to make its connections.
struct Contender<'a> {
    store: &'static str,
    topology: &'static str,
    name: &'static str,
    make: Box<MakePair<'a>>,
}

/// Peak resident memory of this process (`VmHWM`), in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let turns: usize = (args.iter())
        .find_map(|a| a.strip_prefix("turns=")?.parse().ok())
        .unwrap_or(4);
    let stores: Vec<&str> = (args.iter())
        .filter(|a| *a == "redis" || *a == "postgres")
        .map(String::as_str)
        .collect();
    let run = |store: &str| stores.is_empty() || stores.contains(&store);
    let ns = unique_namespace("replbench");
    let mut contenders: Vec<Contender<'_>> = Vec::new();

    // Redis: a server alone; a primary and its replica.
    let base = 17300 + (std::process::id() % 2) as u16 * 10;
    let (_alone, _primary, _replica);
    if run("redis") {
        let no_delay = || vec!["--repl-diskless-sync-delay".to_owned(), "0".to_owned()];
        let alone = Throwaway::at(base, NO_PERSISTENCE, no_delay());
        let primary = Throwaway::at(base + 1, NO_PERSISTENCE, no_delay());
        let replica = Throwaway::replica_at(base + 2, &primary);
        let (single, replicated) = (alone.url(), primary.url());
        let waiting = format!("{replicated}?wait_replicas=1");
        for (topology, url, name, wait) in [
            ("alone", single.clone(), "lock-store", None),
            ("alone", single.clone(), "SET NX PX", Some(false)),
            ("primary + replica", replicated.clone(), "lock-store", None),
            (
                "primary + replica",
                replicated.clone(),
                "SET NX PX",
                Some(false),
            ),
            (
                "primary + replica",
                waiting.clone(),
                "lock-store wait_replicas=1",
                None,
            ),
            (
                "primary + replica",
                replicated.clone(),
                "SET NX PX + WAIT 1",
                Some(true),
            ),
        ] {
            let ns = ns.clone();
            let make: Box<MakePair<'_>> = match wait {
                None => Box::new(move |i| {
                    Box::new(Ours {
                        locks: Locks::open(&url, &ns).unwrap(),
                        owner: format!("o{i}"),
                        held: None,
                    })
                }),
                Some(wait) => Box::new(move |i| Box::new(SetNx::new(&url, i, wait))),
            };
            contenders.push(Contender {
                store: "redis",
                topology,
                name,
                make,
            });
        }
        (_alone, _primary, _replica) = (Some(alone), Some(primary), Some(replica));
    } else {
        (_alone, _primary, _replica) = (None, None, None);
    }

    // PostgreSQL: a cluster alone; a primary with an asynchronous standby; one with a
    // synchronous standby.
    let mut clusters = Vec::new();
    if run("postgres") {
        let pg = base + 5;
        let alone = Cluster::init("replbench_alone", pg);
        let async_primary = Cluster::init("replbench_async", pg + 1);
        let async_standby = Cluster::standby_of(&async_primary, "replbench_async_standby", pg + 2);
        let sync_primary = Cluster::init("replbench_sync", pg + 3);
        let sync_standby = Cluster::standby_of(&sync_primary, "replbench_sync_standby", pg + 4);
        sync_primary.make_synchronous();
        let table = format!("{ns}_shedlock");
        for (topology, cluster) in [
            ("alone", &alone),
            ("primary + async standby", &async_primary),
            ("primary + sync standby", &sync_primary),
        ] {
            cluster.query(&shedlock::create_table(&table));
            let url = cluster.url();
            let (ours_url, ours_ns) = (url.clone(), ns.clone());
            contenders.push(Contender {
                store: "postgres",
                topology,
                name: "lock-store",
                make: Box::new(move |i| {
                    Box::new(Ours {
                        locks: Locks::open(&ours_url, &ours_ns).unwrap(),
                        owner: format!("o{i}"),
                        held: None,
                    })
                }),
            });
            let table = table.clone();
            contenders.push(Contender {
                store: "postgres",
                topology,
                name: "ShedLock-style table",
                make: Box::new(move |i| {
                    Box::new(PgShedLock::connect(&url, &table, format!("o{i}")))
                }),
            });
        }
        clusters.extend([
            alone,
            async_primary,
            async_standby,
            sync_primary,
            sync_standby,
        ]);
    }

    println!("Replicated modes, distinct keys, {seconds} s per cell in {turns} turns (pairs: acquire + release)\n");
    println!("| store | servers | contender | connections | pairs/s | p50 us | p99 us | vs alone (same contender) | vs the alternative (same servers) |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for connections in CONNECTIONS {
        for store in ["redis", "postgres"] {
            let mine: Vec<&Contender<'_>> =
                contenders.iter().filter(|c| c.store == store).collect();
            if mine.is_empty() {
                continue;
            }
            // In turns: each contender once per round, the first moving to the back each round.
            let per_turn = seconds / turns as f64;
            let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); mine.len()];
            for turn in 0..turns {
                for i in 0..mine.len() {
                    let who = (i + turn) % mine.len();
                    let tag = format!("{ns}:{who}:{turn}:");
                    latencies[who].extend(measure(
                        &mine[who].make,
                        connections,
                        false,
                        per_turn,
                        &tag,
                    ));
                }
            }
            let cells: Vec<Cell> = latencies
                .into_iter()
                .map(|l| Cell::of(l, seconds))
                .collect();
            for (i, c) in mine.iter().enumerate() {
                let alone = mine
                    .iter()
                    .position(|o| {
                        o.topology == "alone"
                            && (o.name == c.name
                                || (c.name.starts_with("lock-store") && o.name == "lock-store")
                                || (c.name.starts_with("SET NX") && o.name == "SET NX PX"))
                    })
                    .map_or(String::new(), |a| {
                        format!("{:.2}x", cells[i].ops_per_s / cells[a].ops_per_s)
                    });
                // The alternative on the same servers: the next contender (ours) or the one
                // before (theirs).
                let pair = if i % 2 == 0 { i + 1 } else { i - 1 };
                let versus = if i % 2 == 0 {
                    format!(
                        "{:.2}x {}",
                        cells[i].ops_per_s / cells[pair].ops_per_s,
                        mine[pair].name
                    )
                } else {
                    String::new()
                };
                println!(
                    "| {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} |",
                    c.store,
                    c.topology,
                    c.name,
                    connections,
                    cells[i].ops_per_s,
                    cells[i].p50_us,
                    cells[i].p99_us,
                    alone,
                    versus
                );
            }
        }
    }
    println!("\npeak memory of this process: {:.1} MiB", peak_mib());
    drop(contenders);
    drop(clusters);
}
