//! Benchmarks of the lock table (release build only: `cargo bench -p lock-core`).
//!
//! Prints, for 1k, 100k and 1M live leases: acquire+release pairs per second on free keys,
//! contended try-acquires per second, the cost of `handle_timeout` when k of n leases expire at
//! once, and the memory per live lease (measured with a counting allocator: the bytes requested,
//! the key and owner included, and the number of live heap blocks, each of which also costs the
//! allocator's own header and rounding).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration as WallDuration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use lock_core::{Duration, Instant, Limits, LockTable};

/// Counts the bytes and blocks currently allocated through the global allocator.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SIZES: [(usize, &str); 3] = [(1_000, "1k"), (100_000, "100k"), (1_000_000, "1M")];
const OWNER: &str = "worker-1";
const TTL: Duration = Duration(3_600_000);

fn key(i: usize) -> String {
    format!("key-{i:08}")
}

/// A table holding `n` live leases on `key(0..n)`, expiring one hour from 0.
fn filled(n: usize) -> LockTable {
    let mut table = LockTable::new(Limits {
        max_keys: 2_000_000,
        ..Limits::default()
    })
    .unwrap();
    for i in 0..n {
        let _ = table.try_acquire(&key(i), OWNER, TTL, Instant(0)).unwrap();
    }
    table
}

fn report_memory() {
    println!(
        "memory per live lease (counting allocator: bytes requested, key and owner included; \
         live heap blocks):"
    );
    for (n, label) in SIZES {
        let (bytes, blocks) = (
            ALLOCATED.load(Ordering::Relaxed),
            BLOCKS.load(Ordering::Relaxed),
        );
        let table = filled(n);
        let bytes = (ALLOCATED.load(Ordering::Relaxed) - bytes) as f64 / n as f64;
        let blocks = (BLOCKS.load(Ordering::Relaxed) - blocks) as f64 / n as f64;
        println!("  {label:>5} live leases: {bytes:6.1} bytes/lease, {blocks:5.3} blocks/lease");
        drop(black_box(table));
    }
}

fn acquire_release(c: &mut Criterion) {
    let mut group = c.benchmark_group("acquire_release_pair");
    group.throughput(Throughput::Elements(1));
    let fresh: Vec<String> = (0..1024).map(|i| format!("fresh-{i}")).collect();
    for (n, label) in SIZES {
        let mut table = filled(n);
        let mut i = 0usize;
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                let k = &fresh[i & 1023];
                i += 1;
                let fence = match table.try_acquire(k, OWNER, TTL, Instant(1)) {
                    Ok(lock_core::AcquireOutcome::Acquired(g)) => g.fence,
                    other => panic!("{other:?}"),
                };
                table.release(k, OWNER, fence, Instant(1)).unwrap();
            });
        });
    }
    group.finish();
}

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended_try_acquire");
    group.throughput(Throughput::Elements(1));
    for (n, label) in SIZES {
        let mut table = filled(n);
        let keys: Vec<String> = (0..1024).map(|i| key(i * (n / 1024).max(1) % n)).collect();
        let mut i = 0usize;
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                i += 1;
                black_box(table.try_acquire(&keys[i & 1023], "worker-2", TTL, Instant(1)))
                    .unwrap_err();
            });
        });
    }
    group.finish();
}

/// `handle_timeout` when `k` of `n` leases expire at the same instant (the others much later).
fn expiry(c: &mut Criterion) {
    let mut group = c.benchmark_group("handle_timeout_k_of_n");
    for (n, label) in SIZES {
        for k in [1usize, 100, 1_000] {
            let mut table = filled(n - k);
            for j in 0..k {
                let _ = table
                    .try_acquire(&format!("expiring-{j}"), OWNER, Duration(10), Instant(0))
                    .unwrap();
            }
            group.throughput(Throughput::Elements(k as u64));
            group.bench_with_input(BenchmarkId::new(label, format!("k={k}")), &k, |b, _| {
                b.iter_batched_ref(
                    || table.clone(),
                    |t| {
                        t.handle_timeout(Instant(10));
                        t.drain_events().count()
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();
}

fn main() {
    report_memory();
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .warm_up_time(WallDuration::from_millis(500))
        .measurement_time(WallDuration::from_secs(2));
    acquire_release(&mut c);
    contended(&mut c);
    expiry(&mut c);
    c.final_summary();
}
