//! What the store benchmarks (`bench`, `bench_replicated`) measure: a connection's way to take
//! and give back a key, and threads doing so for a while.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// One connection's way to take and give back a key.
pub trait Pair: Send {
    /// Tries to take `key`; true if taken.
    fn take(&mut self, key: &str) -> bool;
    /// Gives `key` back (only called after a successful take).
    fn give(&mut self, key: &str);
}

/// Makes connection `i`'s way to take and give back keys.
pub type MakePair<'a> = dyn Fn(usize) -> Box<dyn Pair> + Sync + 'a;

/// Runs `connections` threads for `seconds`: distinct keys (pairs) or one hot key (attempts).
/// Answers every operation's latency.
pub fn measure(
    make: &MakePair<'_>,
    connections: usize,
    hot: bool,
    seconds: f64,
    tag: &str,
) -> Vec<Duration> {
    let pairs: Vec<Box<dyn Pair>> = (0..connections).map(make).collect();
    let barrier = Arc::new(Barrier::new(connections));
    let run_for = Duration::from_secs_f64(seconds);
    let threads: Vec<_> = pairs
        .into_iter()
        .enumerate()
        .map(|(i, mut pair)| {
            let barrier = Arc::clone(&barrier);
            let key = if hot {
                format!("{tag}hot")
            } else {
                format!("{tag}k{i}")
            };
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(4096);
                // One untimed pair first, for every contender alike: its connection made and
                // its statements prepared, lock-store's cache of the record filled.
                if pair.take(&key) {
                    pair.give(&key);
                }
                barrier.wait();
                let start = Instant::now();
                while start.elapsed() < run_for {
                    let t = Instant::now();
                    if pair.take(&key) {
                        pair.give(&key);
                    }
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

impl Pair for super::shedlock::PgShedLock {
    fn take(&mut self, key: &str) -> bool {
        super::shedlock::PgShedLock::take(self, key)
    }
    fn give(&mut self, key: &str) {
        super::shedlock::PgShedLock::give(self, key);
    }
}
