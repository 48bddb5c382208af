//! What a benchmark cell measured, shared by the store benchmarks (`bench`, `bench_async`).

use std::time::Duration;

/// Operations per second and latency percentiles of one cell.
pub struct Cell {
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Cell {
    /// The cell of `latencies` (one per operation), measured over `seconds`.
    pub fn of(mut latencies: Vec<Duration>, seconds: f64) -> Cell {
        latencies.sort_unstable();
        let pct = |p: f64| {
            latencies
                .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1e6)
        };
        Cell {
            ops_per_s: latencies.len() as f64 / seconds,
            p50_us: pct(0.50),
            p99_us: pct(0.99),
        }
    }
}
