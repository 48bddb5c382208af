//! The async face against the blocking one, side by side in one run on the same servers.
//!
//! ```text
//! cargo run --release -p lock-store --features all-stores,tokio --example bench_async -- [SECONDS_PER_CELL] [redis|postgres|mariadb]... [turns=N]
//! ```
//!
//! For each store and each of 1 and 64 concurrent callers, the uncontended pair (each caller
//! takes and releases a key of its own, `try_acquire` + `release`), two ways:
//!
//! - *blocking*: one thread per caller, each with a `Locks` of its own (one connection each:
//!   the most a blocking service can get out of threads);
//! - *async*: one task per caller on a tokio runtime with two worker threads, all sharing one
//!   `aio::Locks` (over Redis and PostgreSQL one native connection, pipelined; over MariaDB the
//!   blocking client on blocking threads, `Pooled`).
//!
//! Printed per cell: pairs per second, p50 and p99 latency, the threads the face ran on, and the
//! ratio async / blocking over the whole cell and turn by turn (the faces take turns, three each
//! by default, so that the machine's drift touches both alike). The aims (issue 29): at one
//! caller the async face is at least 0.9x the blocking one; at 64 it has more throughput.
//! Server URLs: `LOCK_STORE_REDIS_URL`, `LOCK_STORE_POSTGRES_URL`, `LOCK_STORE_MYSQL_URL`.

#[path = "shared/cell.rs"]
mod cell;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use lock_store::{aio, store, Locks};

use cell::Cell;

const TTL: Duration = Duration::from_secs(30);
const CALLERS: [usize; 2] = [1, 64];
const TURNS: usize = 3;

/// One pair on `key`: its latency.
fn blocking_pair(locks: &Locks, key: &str) -> Duration {
    let start = Instant::now();
    let lease = locks
        .try_acquire(key, "bench", TTL)
        .expect("the key is free");
    lease.release().expect("released");
    start.elapsed()
}

/// `callers` threads, each with its own `Locks`, for `seconds`.
fn blocking_turn(url: &str, ns: &str, callers: usize, seconds: f64) -> Vec<Duration> {
    let barrier = Arc::new(Barrier::new(callers));
    let threads: Vec<_> = (0..callers)
        .map(|i| {
            let (url, ns, barrier) = (url.to_owned(), ns.to_owned(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let locks = Locks::open(&url, &ns).expect("open");
                let key = format!("b{i}");
                blocking_pair(&locks, &key); // warm: connected, statements prepared
                barrier.wait();
                let until = Instant::now() + Duration::from_secs_f64(seconds);
                let mut latencies = Vec::new();
                while Instant::now() < until {
                    latencies.push(blocking_pair(&locks, &key));
                }
                latencies
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().expect("a bench thread"))
        .collect()
}

/// `callers` tasks sharing `locks`, for `seconds`.
async fn async_turn(locks: &aio::Locks, callers: usize, seconds: f64) -> Vec<Duration> {
    let tasks: Vec<_> = (0..callers)
        .map(|i| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let key = format!("a{i}");
                let pair = async |locks: &aio::Locks| {
                    let start = Instant::now();
                    let lease = locks.try_acquire(&key, "bench", TTL).await.expect("free");
                    lease.release().await.expect("released");
                    start.elapsed()
                };
                pair(&locks).await;
                let until = Instant::now() + Duration::from_secs_f64(seconds);
                let mut latencies = Vec::new();
                while Instant::now() < until {
                    latencies.push(pair(&locks).await);
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a bench task"));
    }
    all
}

/// The threads this process runs now (Linux), to show what each face costs in threads.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count)
}

fn main() {
    let mut seconds = 2.0;
    let mut turns = TURNS;
    let mut stores = Vec::new();
    for arg in std::env::args().skip(1) {
        if let Some(n) = arg.strip_prefix("turns=") {
            turns = n.parse().expect("turns=N");
        } else if let Ok(s) = arg.parse::<f64>() {
            seconds = s;
        } else if ["redis", "postgres", "mariadb"].contains(&arg.as_str()) {
            stores.push(arg);
        } else {
            eprintln!(
                "unknown argument {arg:?}: SECONDS_PER_CELL, redis, postgres, mariadb, turns=N"
            );
            std::process::exit(2);
        }
    }
    if stores.is_empty() {
        stores = vec!["redis".into(), "postgres".into(), "mariadb".into()];
    }
    let env = |var: &str, default: &str| std::env::var(var).unwrap_or_else(|_| default.into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    println!("| store | callers | face | pairs/s | p50 µs | p99 µs | threads | async / blocking |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for name in &stores {
        let url = match name.as_str() {
            "redis" => env("LOCK_STORE_REDIS_URL", "redis://127.0.0.1:6379"),
            "postgres" => env(
                "LOCK_STORE_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            _ => env("LOCK_STORE_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
        };
        let ns = format!("bench_async_{}", std::process::id());
        let _ = store::open(&url, &ns, store::DEFAULT_BOUND).and_then(|mut s| s.install());
        let locks = runtime
            .block_on(aio::Locks::open(&url, &ns))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for callers in CALLERS {
            let per_turn = seconds / turns as f64;
            let (mut blocking, mut asynchronous) = (Vec::new(), Vec::new());
            let mut async_threads = 0;
            for turn in 0..turns {
                // The faces alternate which goes first.
                for face in [turn % 2, 1 - turn % 2] {
                    if face == 0 {
                        blocking.push(blocking_turn(&url, &ns, callers, per_turn));
                    } else {
                        asynchronous.push(runtime.block_on(async_turn(&locks, callers, per_turn)));
                        // The runtime's workers, its blocking threads and listeners (not main).
                        async_threads = async_threads.max(threads().saturating_sub(1));
                    }
                }
            }
            let turn_ratios: Vec<f64> = blocking
                .iter()
                .zip(&asynchronous)
                .map(|(b, a)| a.len() as f64 / b.len().max(1) as f64)
                .collect();
            let b = Cell::of(blocking.concat(), seconds);
            let a = Cell::of(asynchronous.concat(), seconds);
            let (low, high) = turn_ratios
                .iter()
                .fold((f64::MAX, 0.0_f64), |(l, h), r| (l.min(*r), h.max(*r)));
            println!(
                "| {name} | {callers} | blocking | {:.0} | {:.0} | {:.0} | {} | |",
                b.ops_per_s, b.p50_us, b.p99_us, callers
            );
            println!(
                "| {name} | {callers} | async | {:.0} | {:.0} | {:.0} | {} | {:.2}x (turns {low:.2}x-{high:.2}x) |",
                a.ops_per_s,
                a.p50_us,
                a.p99_us,
                async_threads,
                a.ops_per_s / b.ops_per_s.max(f64::MIN_POSITIVE)
            );
        }
        drop(locks);
        let _ = store::open(&url, &ns, store::DEFAULT_BOUND).and_then(|mut s| s.uninstall());
    }
}
