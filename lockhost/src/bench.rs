//! The `lockhost bench` workloads: the same operations natively, through the component, through
//! a batch call, and beside the boundary floor (an exported call with the same argument shapes
//! that does nothing), measured in one run; each figure is the median of five timings, taken
//! interleaved across the workloads. Benchmarks, not tests: nothing asserts on time.

use std::time::{Duration as WallDuration, Instant as WallInstant};

use wasmtime::component::{Component, Linker, TypedFunc};
use wasmtime::{Engine, Store};

use host_wasmtime::component::sandbox_engine;
use host_wasmtime::{
    Batch, CacheOutcome, ComponentCache, ComponentTable, LockComponent, LockHost, ManualClock,
    SandboxLimits, LOCK_COMPONENT,
};
use lock_core::{
    AcquireOptions, AcquireOutcome, Call, Duration, Fence, Instant, LockBackend, Reply, Request,
    Response,
};

/// A component exporting `probe(key: string, owner: string, ttl: u64, now: u64) -> u64` that does
/// nothing: the cost of crossing the boundary with the arguments of `try-acquire`.
const FLOOR_WAT: &str = r#"
(component
  (core module $M
    (memory (export "memory") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024))
    (func (export "probe") (param i32 i32 i32 i32 i64 i64) (result i64) (i64.const 0)))
  (core instance $m (instantiate $M))
  (func $probe (param "key" string) (param "owner" string) (param "ttl" u64) (param "now" u64) (result u64)
    (canon lift (core func $m "probe") (memory (core memory $m "memory")) (realloc (core func $m "realloc"))))
  (export "probe" (func $probe)))
"#;

mod floor_bindings {
    wasmtime::component::bindgen!({
        path: "../examples/bench-floor/wit",
        world: "floor",
    });
}

/// The `bench-floor` component (built by the build script): a resource method with the shape of
/// `lock-table.try-acquire` that does nothing.
const BENCH_FLOOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bench-floor.component.wasm"));

/// `probe(key, owner, ttl, now) -> u64`.
type Probe = TypedFunc<(&'static str, &'static str, u64, u64), (u64,)>;

/// A store on an engine configured like the lock's ([`sandbox_engine`]), with no time bound.
fn sandbox_store() -> (Engine, Store<()>) {
    let engine = sandbox_engine().expect("engine");
    let mut store = Store::new(&engine, ());
    // No bound in practice; not `u64::MAX`, which wasmtime adds to the engine's current epoch
    // (a debug build panics on the overflow once the engine's epoch ticker has ticked).
    store.set_epoch_deadline(u64::MAX / 2);
    (engine, store)
}

/// The floor component, instantiated in a store configured like the lock's.
fn floor() -> (Store<()>, Probe) {
    let (engine, mut store) = sandbox_store();
    let floor = Component::new(&engine, FLOOR_WAT).expect("the floor component compiles");
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &floor)
        .expect("instantiates");
    let probe = instance
        .get_typed_func(&mut store, "probe")
        .expect("probe export");
    (store, probe)
}

/// The resource floor, in a store configured like the lock's.
fn resource_floor() -> (
    Store<()>,
    floor_bindings::Floor,
    wasmtime::component::ResourceAny,
) {
    let (engine, mut store) = sandbox_store();
    let component = Component::new(&engine, BENCH_FLOOR).expect("the floor component compiles");
    let bindings =
        floor_bindings::Floor::instantiate(&mut store, &component, &Linker::new(&engine))
            .expect("instantiates");
    let target = bindings
        .bench_floor_probe()
        .target()
        .call_constructor(&mut store)
        .expect("constructs");
    (store, bindings, target)
}

/// One measured workload.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// What was measured.
    pub name: String,
    /// Nanoseconds per operation.
    pub ns_per_op: f64,
}

/// Every workload is timed this many times; the median is reported (a VM's neighbours make
/// single timings differ by up to 10 %).
const REPEATS: usize = 5;

/// A workload: `ops` operations per run of `run`, which owns its own table or instance.
struct Workload<'a> {
    name: String,
    ops: u64,
    run: Box<dyn FnMut() + 'a>,
}

impl<'a> Workload<'a> {
    fn new(name: impl Into<String>, ops: u64, run: impl FnMut() + 'a) -> Self {
        Workload {
            name: name.into(),
            ops,
            run: Box::new(run),
        }
    }
}

/// Times every workload `REPEATS` times, interleaved (all workloads once, then again), so that
/// a slow drift of the machine touches every workload alike instead of whichever ran during it;
/// reports each workload's median.
fn measure(mut workloads: Vec<Workload<'_>>) -> Vec<Measurement> {
    let mut samples = vec![Vec::with_capacity(REPEATS); workloads.len()];
    for _ in 0..REPEATS {
        for (w, samples) in workloads.iter_mut().zip(&mut samples) {
            let start = WallInstant::now();
            (w.run)();
            samples.push(start.elapsed().as_nanos() as f64 / w.ops as f64);
        }
    }
    workloads
        .iter()
        .zip(samples)
        .map(|(w, mut s)| {
            s.sort_by(f64::total_cmp);
            Measurement {
                name: w.name.clone(),
                ns_per_op: s[REPEATS / 2],
            }
        })
        .collect()
}

fn keys(n: usize, prefix: &str) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:06}")).collect()
}

/// A fresh component table; `held` is taken by someone else if given.
fn component_table(held: Option<&str>) -> ComponentTable {
    let component = LockComponent::embedded().expect("the embedded component loads");
    let mut table = component
        .instantiate(&lock_core::Limits::default(), 0, SandboxLimits::default())
        .expect("instantiates");
    if let Some(key) = held {
        let _ = table.try_acquire(key, "someone", Duration(60_000), Instant(0));
    }
    table
}

const OWNER: &str = "worker-1";
const TTL: u64 = 60_000;

/// One call on any backend; a fault ends the benchmark.
fn call<B: LockBackend>(table: &mut B, call: Call<'_>) -> Reply
where
    B::Fault: std::fmt::Debug,
{
    table.call(call).expect("the backend answers")
}

/// Sends `acquire` (granted at once), then the release of what it was granted.
fn acquire_release<B: LockBackend>(table: &mut B, acquire: Request<'_>)
where
    B::Fault: std::fmt::Debug,
{
    let (key, owner, now) = match acquire {
        Request::TryAcquire {
            key, owner, now, ..
        }
        | Request::AcquireWith {
            key, owner, now, ..
        } => (key, owner, now),
        other => panic!("not an acquire: {other:?}"),
    };
    let reply = call(table, Call::Request(acquire));
    let Reply::Response(Response::Acquire(Ok(AcquireOutcome::Acquired(g)))) = reply else {
        panic!("unexpected {reply:?}")
    };
    let release = Request::Release {
        key,
        owner,
        fence: g.fence,
        now,
    };
    let reply = call(table, Call::Request(release));
    assert_eq!(
        reply,
        Reply::Response(Response::Release(Ok(lock_core::ReleaseOutcome::Released)))
    );
}

/// `pairs` try-acquire + release pairs over 1024 keys on `table`.
fn pair_workload<'a, B: LockBackend + 'a>(
    runtime: &str,
    mut table: B,
    keys: &'a [String],
    pairs: u64,
) -> Workload<'a>
where
    B::Fault: std::fmt::Debug,
{
    Workload::new(
        format!("{runtime}: try-acquire + release pair"),
        pairs,
        move || {
            for i in 0..pairs as usize {
                let key = &keys[i & 1023];
                let (owner, now) = (OWNER, Instant(1));
                let acquire = Request::TryAcquire {
                    key,
                    owner,
                    ttl: Duration(TTL),
                    now,
                };
                acquire_release(&mut table, acquire);
            }
        },
    )
}

/// `pairs` acquire + release pairs over 1024 keys that another owner already holds with the
/// same `options` (shared, or one of N permits): each acquire is granted beside that lease,
/// the lock kinds' grant path (`acquire-with`, no wait).
fn kind_pair_workload<'a, B: LockBackend + 'a>(
    runtime: &str,
    kind: &str,
    mut table: B,
    keys: &'a [String],
    options: AcquireOptions<'static>,
    pairs: u64,
) -> Workload<'a>
where
    B::Fault: std::fmt::Debug,
{
    let (ttl, now) = (Duration(TTL), Instant(1));
    for key in keys {
        let holder = Request::AcquireWith {
            key,
            owner: "someone",
            ttl,
            wait_deadline: Instant(0),
            options,
            now: Instant(0),
        };
        let reply = call(&mut table, Call::Request(holder));
        assert!(
            matches!(reply, Reply::Response(Response::Acquire(Ok(_)))),
            "{reply:?}"
        );
    }
    Workload::new(
        format!("{runtime}: {kind} acquire + release pair, beside a holder"),
        pairs,
        move || {
            for i in 0..pairs as usize {
                let key = &keys[i & 1023];
                let acquire = Request::AcquireWith {
                    key,
                    owner: OWNER,
                    ttl,
                    wait_deadline: now,
                    options,
                    now,
                };
                acquire_release(&mut table, acquire);
            }
        },
    )
}

/// `pairs` try-acquires of a key someone else holds.
fn contended_workload<'a, B: LockBackend + 'a>(
    runtime: &str,
    mut table: B,
    pairs: u64,
) -> Workload<'a>
where
    B::Fault: std::fmt::Debug,
{
    Workload::new(
        format!("{runtime}: contended try-acquire"),
        pairs,
        move || {
            for _ in 0..pairs {
                let request = Request::TryAcquire {
                    key: "held",
                    owner: OWNER,
                    ttl: Duration(TTL),
                    now: Instant(1),
                };
                let reply = call(&mut table, Call::Request(request));
                assert!(matches!(reply, Reply::Response(Response::Acquire(Err(_)))));
            }
        },
    )
}

/// Runs every workload with `pairs` acquire+release pairs (and as many contended calls).
///
/// # Panics
/// If the component cannot be loaded (a broken build), or the lock answers unexpectedly.
#[must_use]
pub fn run(pairs: u64) -> Vec<Measurement> {
    let fresh = keys(1024, "fresh");
    let fresh = &fresh;
    let (owner, ttl) = (OWNER, TTL);
    let mut workloads = Vec::new();

    // Native lock-core and the component, through the same calls.
    let mut held = lock_core::LockTable::default();
    let _ = held.try_acquire("held", "someone", Duration(ttl), Instant(0));
    workloads.push(pair_workload(
        "native",
        lock_core::LockTable::default(),
        fresh,
        pairs,
    ));
    workloads.push(contended_workload("native", held, pairs));
    workloads.push(pair_workload(
        "component",
        component_table(None),
        fresh,
        pairs,
    ));
    workloads.push(contended_workload(
        "component",
        component_table(Some("held")),
        pairs,
    ));

    // The lock kinds' grant path, native and through the component, same calls: a shared
    // lease beside another, one of 4 permits beside another.
    let kinds = [
        ("shared", AcquireOptions::shared()),
        ("4-permit", AcquireOptions::shared().permits(4)),
    ];
    for (kind, options) in kinds {
        let table = lock_core::LockTable::default();
        workloads.push(kind_pair_workload(
            "native", kind, table, fresh, options, pairs,
        ));
        let table = component_table(None);
        workloads.push(kind_pair_workload(
            "component",
            kind,
            table,
            fresh,
            options,
            pairs,
        ));
    }

    // The batch call: 32 pairs (64 requests) per crossing. Fences are predictable: a fresh
    // table issues 1, 2, 3, ... to the acquires in order.
    let batch_pairs = 32u64;
    let mut batch = Batch::new();
    let rounds = (pairs / batch_pairs).max(1);
    let mut table = component_table(None);
    let mut next_fence = 1;
    workloads.push(Workload::new(
        "component: batch of 64 requests, per pair",
        rounds * batch_pairs,
        move || {
            for round in 0..rounds {
                batch.clear();
                for j in 0..batch_pairs {
                    let key = &fresh[((round * batch_pairs + j) & 1023) as usize];
                    batch.try_acquire(key, owner, Duration(ttl), Instant(1));
                    batch.release(key, owner, Fence(next_fence + j), Instant(1));
                }
                let responses = table.batch(&batch).unwrap();
                assert_eq!(responses.len(), 64);
                assert!(matches!(
                    responses[63],
                    lock_core::wire::Response::Release(Ok(lock_core::ReleaseOutcome::Released))
                ));
                next_fence += batch_pairs;
            }
        },
    ));

    // The floors: the same argument shapes, no work.
    let (mut rstore, floor_bindings, target) = resource_floor();
    workloads.push(Workload::new(
        "floor: empty resource method, try-acquire's shape, x2 per pair",
        pairs,
        move || {
            let probe = floor_bindings.bench_floor_probe().target();
            for i in 0..pairs as usize {
                let k = &fresh[i & 1023];
                probe
                    .call_try_acquire(&mut rstore, target, k, owner, ttl, 1)
                    .unwrap()
                    .unwrap();
                probe
                    .call_try_acquire(&mut rstore, target, k, owner, ttl, 1)
                    .unwrap()
                    .unwrap();
            }
        },
    ));
    let (mut store, probe) = floor();
    workloads.push(Workload::new(
        "floor: empty call (2 strings, 2 u64, no resource), x2",
        pairs,
        move || {
            for i in 0..pairs as usize {
                let k = &fresh[i & 1023];
                probe.call(&mut store, (k, owner, ttl, 1)).unwrap();
                probe.call(&mut store, (k, owner, ttl, 1)).unwrap();
            }
        },
    ));

    // The host API, from several threads.
    for threads in [1usize, 2, 8] {
        let host = LockHost::builder()
            .clock(ManualClock::at(0))
            .build()
            .expect("host");
        let per_thread = pairs / threads as u64;
        workloads.push(Workload::new(
            format!("host API: try_acquire + release, {threads} thread(s), per pair"),
            per_thread * threads as u64,
            move || {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let host = host.clone();
                        let keys = keys(256, &format!("t{t}"));
                        std::thread::spawn(move || {
                            for i in 0..per_thread as usize {
                                let lease = host
                                    .try_acquire(
                                        &keys[i & 255],
                                        "worker",
                                        WallDuration::from_secs(60),
                                    )
                                    .unwrap();
                                lease.release().unwrap();
                            }
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().unwrap();
                }
            },
        ));
    }
    measure(workloads)
}

/// Prints the measurements with ops/s and the ratios that matter.
pub fn report(results: &[Measurement]) {
    println!("{:<58} {:>12} {:>14}", "workload", "ns/op", "ops/s");
    for m in results {
        println!(
            "{:<58} {:>12.1} {:>14.0}",
            m.name,
            m.ns_per_op,
            1e9 / m.ns_per_op
        );
    }
    let get = |prefix: &str| {
        results
            .iter()
            .find(|m| m.name.starts_with(prefix))
            .map(|m| m.ns_per_op)
    };
    let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map_or(f64::NAN, |(a, b)| a / b);
    let pair = get("component: try-acquire");
    let resource_floor = get("floor: empty resource");
    println!();
    for kind in ["shared", "4-permit"] {
        for runtime in ["native", "component"] {
            println!(
                "{:<38}{:6.2}x",
                format!("{runtime} {kind} pair / {runtime} plain pair:"),
                ratio(
                    get(&format!("{runtime}: {kind}")),
                    get(&format!("{runtime}: try-acquire"))
                )
            );
        }
    }
    println!(
        "component pair / native pair:        {:6.1}x",
        ratio(pair, get("native: try-acquire"))
    );
    println!(
        "component pair / floor (2 calls):    {:6.2}x",
        ratio(pair, get("floor: empty call"))
    );
    println!(
        "component pair / resource floor:      {:6.2}x",
        ratio(pair, resource_floor)
    );
    println!(
        "component contended / resource floor: {:6.2}x",
        ratio(get("component: contended"), resource_floor.map(|f| f / 2.0))
    );
    println!(
        "component contended / native:        {:6.1}x",
        ratio(get("component: contended"), get("native: contended"))
    );
    println!(
        "component contended / floor (1 call):{:6.2}x",
        ratio(
            get("component: contended"),
            get("floor: empty call").map(|f| f / 2.0)
        )
    );
    println!(
        "batch pair / native pair:            {:6.1}x",
        ratio(get("component: batch"), get("native: try-acquire"))
    );
}

/// One start-up path, timed.
#[derive(Clone, Debug)]
pub struct Startup {
    /// What was timed.
    pub name: &'static str,
    /// Median of five runs, in milliseconds.
    pub ms: f64,
}

/// The median wall time of `REPEATS` runs of `run`, in milliseconds.
fn median_ms(mut run: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..REPEATS)
        .map(|_| {
            let start = WallInstant::now();
            run();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[REPEATS / 2]
}

/// How long a host takes to start: compiling the component, loading it from a warm cache
/// (what a new process does once the cache holds it), and a host over a component the process
/// already holds (every host after the first).
///
/// # Panics
/// If the component cannot be loaded (a broken build).
#[must_use]
pub fn startup() -> Vec<Startup> {
    let dir = std::env::temp_dir().join(format!("lockhost-bench-cache-{}", std::process::id()));
    let cache = ComponentCache::Dir(dir.clone());
    let load = |cache: &ComponentCache| {
        LockComponent::from_bytes_cached(LOCK_COMPONENT, cache).expect("the component loads")
    };
    let (_, first) = load(&cache);
    assert_eq!(first, CacheOutcome::Miss, "a fresh cache directory");
    let compile = median_ms(|| drop(load(&ComponentCache::Off)));
    let warm = median_ms(|| {
        let (_, outcome) = load(&cache);
        assert_eq!(outcome, CacheOutcome::Hit);
    });
    let (component, _) = load(&cache);
    let host = || {
        LockHost::builder()
            .component(component.clone())
            .clock(ManualClock::at(0))
            .build()
            .expect("host")
    };
    let shared = median_ms(|| drop(host()));
    let process = median_ms(|| {
        let (component, _) = load(&cache);
        drop(
            LockHost::builder()
                .component(component)
                .clock(ManualClock::at(0))
                .build()
                .expect("host"),
        );
    });
    let _ = std::fs::remove_dir_all(dir);
    vec![
        Startup {
            name: "compile the component (no cache)",
            ms: compile,
        },
        Startup {
            name: "load the compiled component from a warm cache",
            ms: warm,
        },
        Startup {
            name: "new process: warm cache load + LockHost::build",
            ms: process,
        },
        Startup {
            name: "LockHost::build over the process's loaded component",
            ms: shared,
        },
    ]
}

/// Prints the start-up times and the ratio the cache buys.
pub fn report_startup(results: &[Startup]) {
    println!("{:<58} {:>12}", "start-up", "ms");
    for s in results {
        println!("{:<58} {:>12.2}", s.name, s.ms);
    }
    if let [compile, warm, ..] = results {
        println!(
            "compile / warm cache load:           {:6.1}x",
            compile.ms / warm.ms
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_resource_floor_answers() {
        let (mut store, bindings, target) = super::resource_floor();
        let answer = bindings
            .bench_floor_probe()
            .target()
            .call_try_acquire(&mut store, target, "k", "o", 1, 2);
        assert!(answer.unwrap().is_ok());
    }

    #[test]
    fn the_floor_component_answers() {
        let (mut store, probe) = super::floor();
        assert_eq!(
            probe.call(&mut store, ("key", "owner", 1, 2)).unwrap(),
            (0,)
        );
    }
}
