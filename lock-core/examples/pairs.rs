//! The native side of the JS benchmark (`node scripts/bench-js.mjs`): the same workload as the
//! JS and component benchmarks (1024 rotating keys, one owner, 60 s TTL), printed as JSON so the
//! script can put native and JS figures side by side from one run.
//!
//! `cargo run --release -p lock-core --example pairs -- 1000000`

use std::hint::black_box;
use std::time::Instant as WallInstant;

use lock_core::{AcquireOutcome, Duration, Instant, LockTable};

fn main() {
    let pairs: usize = std::env::args()
        .nth(1)
        .map_or(Ok(1_000_000), |n| n.parse())
        .unwrap_or_else(|_| {
            eprintln!("usage: pairs [PAIRS]");
            std::process::exit(2)
        });
    let keys: Vec<String> = (0..1024).map(|i| format!("fresh-{i:06}")).collect();
    let (owner, ttl) = ("worker-1", Duration(60_000));
    let mut table = LockTable::default();
    let _ = table.try_acquire("held", "someone", ttl, Instant(0));

    let start = WallInstant::now();
    for i in 0..pairs {
        let k = &keys[i & 1023];
        let Ok(AcquireOutcome::Acquired(g)) = table.try_acquire(k, owner, ttl, Instant(1)) else {
            panic!("the key is free")
        };
        table
            .release(k, owner, g.fence, Instant(1))
            .expect("the holder releases");
    }
    let pair_ns = start.elapsed().as_nanos() as f64 / pairs as f64;

    let start = WallInstant::now();
    for _ in 0..pairs {
        black_box(table.try_acquire("held", owner, ttl, Instant(1)).is_err());
    }
    let contended_ns = start.elapsed().as_nanos() as f64 / pairs as f64;
    println!("{{\"pair_ns\": {pair_ns:.1}, \"contended_ns\": {contended_ns:.1}}}");
}
