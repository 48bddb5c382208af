//! Real processes on every store: several OS processes × threads contending on one hot key and
//! on many keys with short TTLs (some leases expire mid-work), checked afterwards, on healthy
//! paths and through the tests' fault proxy cycling gray failures (silent paths, answers held
//! back past a TTL, delays, connections reset); a holder killed with SIGKILL; a waiter killed
//! with SIGKILL. One worker process of every contention run uses the async face
//! (`lock_store::aio`, feature `tokio`): the checker then judges a history of both faces.
//!
//! The worker processes are this test binary run again with `LOCKSTORE_WORKER` set (see
//! [`worker`]).
#[path = "../../lock-store/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as LocalInstant};

use common::proxy::{Fault, Proxy};
use lock_core::LockError;
use lock_store::{Error, Locks};

const PROCESSES: usize = 3;
const THREADS: usize = 3;
const KEYS: usize = 4;
const TTL_MS: u64 = 120;
/// How long the workers contend (`LOCK_CONTENTION_MS` for longer soaks).
fn run_ms() -> u64 {
    std::env::var("LOCK_CONTENTION_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(2500)
}

/// One grant as a worker logged it.
#[derive(Debug, Clone)]
struct Grant {
    key: String,
    owner: String,
    fence: u64,
    /// Store time the lease began (its deadline minus the TTL it was granted with).
    start: u64,
    /// Store time it ended: its release, or its deadline if it was lost.
    end: u64,
    /// The fenced resource accepted this holder's write.
    accepted: bool,
    /// The holder thought it still held the lease when it wrote.
    live_at_write: bool,
    /// The release succeeded (the lease was never lost).
    released: bool,
    /// The release answered at its first attempt (`end` is then when it took effect; after a
    /// failed attempt, a release found done took effect at an unknown time before `end`).
    end_known: bool,
    /// This machine's monotonic clock (shared by every process) when the acquire returned and
    /// when the holder wrote to the resource, in nanoseconds.
    got_at: u128,
    wrote_at: u128,
    /// The monotonic clock when the holder sent its (first) release.
    release_sent_at: u128,
}

/// This machine's monotonic clock in nanoseconds: one clock for every process of the test.
fn monotonic() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// The worker: when `LOCKSTORE_WORKER` is set, contends until its time is up and logs each
/// grant; otherwise does nothing.
#[test]
fn worker() {
    let Ok(spec) = std::env::var("LOCKSTORE_WORKER") else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [url, ns, log, resource, id, gray, face] = parts[..] else {
        panic!("bad worker spec {spec}");
    };
    let gray = gray == "gray";
    let until = LocalInstant::now() + Duration::from_millis(run_ms());
    // The async face: the worker's threads share one `aio::Locks` on one runtime.
    let runtime = (face == "async").then(|| common::runtime(2));
    let shared = runtime.as_ref().map(|rt| {
        let locks = loop {
            match rt.block_on(lock_store::aio::Locks::open(url, ns)) {
                Ok(locks) => break locks,
                Err(_) if gray => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => panic!("p{id}: {e}"),
            }
        };
        (locks, rt.handle().clone())
    });
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (url, ns, resource) = (url.to_owned(), ns.to_owned(), PathBuf::from(resource));
            let owner = format!("p{id}t{t}");
            let shared = shared.clone();
            std::thread::spawn(move || {
                let face = match shared {
                    Some((locks, handle)) => Face::Async(locks, handle),
                    None => Face::blocking(&url, &ns, &owner, gray),
                };
                contend(&face, &owner, &resource, until, gray)
            })
        })
        .collect();
    let mut out = std::fs::File::create(log).unwrap();
    for t in threads {
        for g in t.join().unwrap() {
            writeln!(
                out,
                "{} {} {} {} {} {} {} {} {} {} {} {}",
                g.key,
                g.owner,
                g.fence,
                g.start,
                g.end,
                g.accepted,
                g.live_at_write,
                g.released,
                g.end_known,
                g.got_at,
                g.wrote_at,
                g.release_sent_at
            )
            .unwrap();
        }
    }
}

/// A worker thread's way to the store: the blocking face, or the async one driven from the
/// thread (`block_on` on the worker's runtime).
enum Face {
    Blocking(Locks),
    Async(lock_store::aio::Locks, tokio::runtime::Handle),
}

/// A lease of either face.
enum AnyLease {
    Blocking(lock_store::Lease),
    Async(lock_store::aio::Lease, tokio::runtime::Handle),
}

impl Face {
    fn blocking(url: &str, ns: &str, owner: &str, gray: bool) -> Face {
        loop {
            match Locks::open(url, ns) {
                Ok(locks) => return Face::Blocking(locks),
                Err(_) if gray => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => panic!("{owner}: {e}"),
            }
        }
    }

    fn acquire(
        &self,
        key: &str,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<AnyLease, Error> {
        match self {
            Face::Blocking(locks) => locks.acquire(key, owner, ttl, wait).map(AnyLease::Blocking),
            Face::Async(locks, rt) => rt
                .block_on(locks.acquire(key, owner, ttl, wait))
                .map(|lease| AnyLease::Async(lease, rt.clone())),
        }
    }
}

impl AnyLease {
    fn deadline(&self) -> lock_store::Instant {
        match self {
            AnyLease::Blocking(l) => l.deadline(),
            AnyLease::Async(l, _) => l.deadline(),
        }
    }
    fn fence(&self) -> lock_store::Fence {
        match self {
            AnyLease::Blocking(l) => l.fence(),
            AnyLease::Async(l, _) => l.fence(),
        }
    }
    fn is_lost(&self) -> bool {
        match self {
            AnyLease::Blocking(l) => l.is_lost(),
            AnyLease::Async(l, _) => l.is_lost(),
        }
    }
    fn release(&self) -> Result<(), Error> {
        match self {
            AnyLease::Blocking(l) => l.release(),
            AnyLease::Async(l, rt) => rt.block_on(l.release()),
        }
    }
    fn released_at(&self) -> Option<lock_store::Instant> {
        match self {
            AnyLease::Blocking(l) => l.released_at(),
            AnyLease::Async(l, _) => l.released_at(),
        }
    }
}

/// One worker thread: acquires, works, writes to the fenced resource, releases, until `until`.
/// With `gray` (a path that fails), a store error is tried again: an acquire until the time is
/// up, a release until it answers (as a service would do).
fn contend(
    locks: &Face,
    owner: &str,
    resource: &Path,
    until: LocalInstant,
    gray: bool,
) -> Vec<Grant> {
    let mut grants = Vec::new();
    let mut n = 0u64;
    while LocalInstant::now() < until {
        n += 1;
        let r = lock_store::store::new_version();
        let key = if r.is_multiple_of(2) {
            "hot".to_owned()
        } else {
            format!("k{}", (r >> 8) % KEYS as u64)
        };
        let lease = match locks.acquire(
            &key,
            owner,
            Duration::from_millis(TTL_MS),
            Duration::from_secs(8),
        ) {
            Ok(lease) => lease,
            Err(Error::Store(_)) if gray => continue,
            Err(e) => panic!("{owner}: acquire {key}: {e}"),
        };
        let got_at = monotonic();
        let start = lease.deadline().0 - TTL_MS;
        // Work: usually well inside the TTL, one time in six past it (the lease expires mid-work).
        let work = if n.is_multiple_of(6) {
            TTL_MS + 40
        } else {
            r % (TTL_MS / 3)
        };
        std::thread::sleep(Duration::from_millis(work));
        let live_at_write = !lease.is_lost();
        let wrote_at = monotonic();
        let accepted = common::fenced_write(&resource.join(&key), lease.fence().0, false);
        let release_sent_at = monotonic();
        let mut attempts = 0;
        let released = loop {
            attempts += 1;
            match lease.release() {
                Err(Error::Store(_)) if gray && attempts < 100 => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                answer => break answer.is_ok(),
            }
        };
        let end = lease.released_at().map_or(lease.deadline().0, |t| t.0);
        grants.push(Grant {
            key,
            owner: owner.to_owned(),
            fence: lease.fence().0,
            start,
            end,
            accepted,
            live_at_write,
            released,
            end_known: attempts == 1 || !released,
            got_at,
            wrote_at,
            release_sent_at,
        });
    }
    grants
}

fn read_log(path: &Path) -> Vec<Grant> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Grant {
                key: f[0].into(),
                owner: f[1].into(),
                fence: f[2].parse().unwrap(),
                start: f[3].parse().unwrap(),
                end: f[4].parse().unwrap(),
                accepted: f[5] == "true",
                live_at_write: f[6] == "true",
                released: f[7] == "true",
                end_known: f[8] == "true",
                got_at: f[9].parse().unwrap(),
                wrote_at: f[10].parse().unwrap(),
                release_sent_at: f[11].parse().unwrap(),
            }
        })
        .collect()
}

/// Runs the workers on `url` and checks their logs.
fn contention(label: &str, url: &str) {
    contention_through(label, url, None);
}

/// Runs the workers on `url`, each through a proxy of its own if `faults` is given (the faults
/// are then cycled on them until the workers end), and checks their logs.
fn contention_through(label: &str, url: &str, faults: Option<&[Fault]>) {
    let ns = common::unique_namespace("contention");
    let _cleanup = common::Cleanup(|| common::uninstall(url, &ns));
    let dir = std::env::temp_dir().join(&ns);
    let resource = dir.join("resource");
    std::fs::create_dir_all(&resource).unwrap();
    // Install once before the workers start together.
    drop(Locks::open(url, &ns).unwrap());
    let me = std::env::current_exe().unwrap();
    let node = node_worker(label, faults.is_some());
    let proxies: Vec<Proxy> = match faults {
        Some(_) => (0..PROCESSES).map(|_| Proxy::for_url(url)).collect(),
        None => Vec::new(),
    };
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let log = dir.join(format!("worker{p}.log"));
            let (via, gray) = match proxies.get(p) {
                Some(proxy) => (proxy.url(url), "gray"),
                None => (url.to_owned(), "healthy"),
            };
            // The second worker process uses the async face; the third is a Node process (the
            // npm package's store client) where it has that store.
            let face = match p {
                1 => "async",
                2 if node => "node",
                _ => "blocking",
            };
            let spec = format!(
                "{via}|{ns}|{}|{}|{p}|{gray}|{face}",
                log.display(),
                resource.display()
            );
            let child = if face == "node" {
                Command::new("node")
                    .arg(node_worker_script())
                    .arg(&spec)
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            } else {
                Command::new(&me)
                    .args(["--exact", "worker", "--nocapture", "--test-threads=1"])
                    .env("LOCKSTORE_WORKER", spec)
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            };
            (child, log)
        })
        .collect();
    let injected = faults.map(|faults| inject(&proxies, faults));
    let label = if node {
        format!("{label} (the third process is Node)")
    } else {
        label.to_owned()
    };
    let label = label.as_str();
    let mut grants = Vec::new();
    for (mut child, log) in children {
        assert!(child.wait().unwrap().success(), "{label}: a worker failed");
        grants.extend(read_log(&log));
    }
    if let Some((stop, injector)) = injected {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let injected = injector.join().unwrap();
        println!("{label}: faults injected: {injected}");
    }
    check(label, &grants);
}

/// Whether the third worker of a contention run on `label` is a Node process: on every store
/// the npm package's store client has (all but `memory:`), on healthy paths, when
/// `LOCKSTORE_NODE_WORKERS` is set (`scripts/test.sh` sets it after building the npm engine; a
/// run without says so).
fn node_worker(label: &str, gray: bool) -> bool {
    if !matches!(label, "redis" | "postgres" | "mysql" | "sqlite") || gray {
        return false;
    }
    let wanted = std::env::var_os("LOCKSTORE_NODE_WORKERS").is_some();
    if !wanted {
        println!("{label}: no Node worker (LOCKSTORE_NODE_WORKERS is not set)");
    }
    wanted
}

/// The Node worker's script (the npm engine must be built: `scripts/build-npm.sh`).
fn node_worker_script() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let engine = root.join("lock-wasm/js/engine/lock_wasm_bg.wasm");
    assert!(
        engine.exists(),
        "LOCKSTORE_NODE_WORKERS is set but the npm engine is not built (scripts/build-npm.sh)"
    );
    root.join("tests/js/lib/contend-worker.mjs")
}

/// Cycles `faults` on the proxies until told to stop: each in turn, on one proxy picked at
/// random, for 50-400 ms (a TTL is 120 ms), then a healthy gap. Answers what it injected.
fn inject(
    proxies: &[Proxy],
    faults: &[Fault],
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<String>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (proxies, faults, stopped) = (proxies.to_vec(), faults.to_vec(), stop.clone());
    let injector = std::thread::spawn(move || {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut i = 0;
        while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
            let r = lock_store::store::new_version();
            let proxy = &proxies[(r % proxies.len() as u64) as usize];
            let fault = faults[i % faults.len()];
            i += 1;
            let name = match fault {
                Fault::None => {
                    proxy.reset();
                    "reset".to_owned()
                }
                other => {
                    proxy.set(other);
                    format!("{other:?}")
                }
            };
            *counts.entry(name).or_default() += 1;
            std::thread::sleep(Duration::from_millis(50 + (r >> 8) % 350));
            proxy.set(Fault::None);
            std::thread::sleep(Duration::from_millis(100 + (r >> 16) % 200));
        }
        format!("{counts:?}")
    });
    (stop, injector)
}

/// The history's checks: no fence twice; per key, a lease that ran out and the next never
/// overlap in the store's time, the next holder of a released lease learned of its grant after
/// the release was sent, and a holder never wrote believing in its lease after the next was
/// granted; a live holder's write is never refused by the fenced resource; a refused write comes
/// from a holder whose lease was lost. Answers how many keys it saw.
fn check_history(label: &str, grants: &[Grant]) -> usize {
    let mut by_key: BTreeMap<&str, Vec<&Grant>> = BTreeMap::new();
    for g in grants {
        by_key.entry(&g.key).or_default().push(g);
    }
    let mut fences: Vec<u64> = grants.iter().map(|g| g.fence).collect();
    fences.sort_unstable();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "{label}: a fence was issued twice"
    );
    for (key, list) in &mut by_key {
        list.sort_by_key(|g| g.fence);
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            // By the holders' own clocks (one monotonic clock on this machine): a holder that
            // believed its lease live when it wrote did so before the next one was granted.
            assert!(
                !a.live_at_write || a.wrote_at < b.got_at,
                "{label}: {key}: {} (fence {}) wrote believing its lease live after {} (fence \
                 {}) was granted",
                a.owner,
                a.fence,
                b.owner,
                b.fence
            );
            // A lease that ran out ends at its deadline, and the next begins at or after it in
            // the store's time: the core grants only once the lower bound of the store's clock
            // has reached it. A released lease's end and the next lease's start are both
            // decision instants, lower bounds of the store's clock that two clients drew from
            // their own reads (one may lag the store by a round trip more than the other): their
            // order is the compare-and-set's, which this machine's clock shows instead. The
            // next holder learned of its grant after this one sent its release.
            if a.released && a.end_known {
                assert!(
                    b.got_at > a.release_sent_at,
                    "{label}: {key}: {} (fence {}) was granted before {} (fence {}) sent its release",
                    b.owner,
                    b.fence,
                    a.owner,
                    a.fence
                );
                continue;
            }
            assert!(
                !a.end_known || b.start >= a.end,
                "{label}: {key}: {} (fence {}) held [{}, {}) overlaps {} (fence {}) from {}",
                a.owner,
                a.fence,
                a.start,
                a.end,
                b.owner,
                b.fence,
                b.start
            );
        }
    }
    for g in grants {
        if g.released {
            assert!(
                g.accepted,
                "{label}: the resource refused live holder {g:?}"
            );
        }
        if !g.accepted {
            assert!(
                !g.released,
                "{label}: a refused write by a lease that was never lost: {g:?}"
            );
        }
        if g.live_at_write && !g.released {
            // The holder thought it was live, but its release found the lease gone: only
            // possible if it ran out between the check and the release.
            assert!(g.end >= g.start, "{label}: {g:?}");
        }
    }
    by_key.len()
}

/// The checker: [`check_history`], and the run attacked what it should: every thread got the
/// lock, some leases expired mid-work.
fn check(label: &str, grants: &[Grant]) {
    let keys = check_history(label, grants);
    let owners: std::collections::BTreeSet<&str> =
        grants.iter().map(|g| g.owner.as_str()).collect();
    assert_eq!(
        owners.len(),
        PROCESSES * THREADS,
        "{label}: a thread never got the lock"
    );
    let lost = grants.iter().filter(|g| !g.released).count();
    let refused = grants.iter().filter(|g| !g.accepted).count();
    assert!(
        lost > 0,
        "{label}: no lease expired mid-work: the test did not attack expiry"
    );
    println!(
        "{label}: {} grants on {} keys by {} threads in {} processes (one on the async face); \
         {lost} expired mid-work, \
         {refused} stale writes refused by the resource; no overlap, no fence twice",
        grants.len(),
        keys,
        PROCESSES * THREADS,
        PROCESSES
    );
}

/// The checker itself: a history with each kind of violation fails it, a sound one passes.
#[test]
fn the_contention_checker_catches_each_violation() {
    let grant = |owner: &str, fence: u64, start: u64, end: u64, times: [u128; 3]| Grant {
        key: "hot".into(),
        owner: owner.into(),
        fence,
        start,
        end,
        accepted: true,
        live_at_write: true,
        released: true,
        end_known: true,
        got_at: times[0],
        wrote_at: times[1],
        release_sent_at: times[2],
    };
    let sound = vec![
        grant("a", 1, 100, 150, [10, 20, 30]),
        // Granted after a sent its release, at an instant its own read placed 2 ms earlier.
        grant("b", 2, 148, 200, [40, 50, 60]),
    ];
    check_history("sound", &sound);
    let fails = |name: &str, history: Vec<Grant>| {
        let caught = std::panic::catch_unwind(|| check_history(name, &history));
        assert!(caught.is_err(), "the checker let {name} pass");
    };
    // b was told of its grant before a sent its release.
    fails(
        "a grant before the release",
        vec![
            grant("a", 1, 100, 150, [10, 20, 45]),
            grant("b", 2, 150, 200, [40, 50, 60]),
        ],
    );
    // a ran out (lost) and b began before a's deadline.
    let mut lost = grant("a", 1, 100, 150, [10, 20, 30]);
    lost.released = false;
    lost.accepted = true;
    lost.live_at_write = false;
    fails(
        "an overlap with a lease that ran out",
        vec![lost, grant("b", 2, 149, 200, [40, 50, 60])],
    );
    // a wrote believing in its lease after b was granted.
    fails(
        "a write after the next grant",
        vec![
            grant("a", 1, 100, 150, [10, 45, 46]),
            grant("b", 2, 150, 200, [40, 50, 60]),
        ],
    );
    fails(
        "a fence twice",
        vec![
            grant("a", 1, 100, 150, [10, 20, 30]),
            grant("b", 1, 150, 200, [40, 50, 60]),
        ],
    );
}

#[test]
fn processes_contend_on_every_store() {
    for (label, url) in common::store_urls() {
        contention(label, &url);
    }
}

/// The same contention and checker on every server store, each worker process through a proxy
/// of its own on which gray failures are cycled: a silent path, answers held back (the request
/// reaches the server, its answer does not come), delays, connections reset.
#[test]
fn processes_contend_through_gray_failures_on_every_server_store() {
    let faults = [
        Fault::Blackhole,
        Fault::StallReplies,
        Fault::Delay(Duration::from_millis(30)),
        Fault::None, // a reset of every connection
    ];
    for (label, url) in common::server_urls() {
        contention_through(label, &url, Some(&faults));
    }
}

fn lockstore() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockstore"))
}

/// Replicas started together on a SQLite file nobody created yet (cron on one machine): each
/// `lockstore run` opens it (SQLite answers some of them "busy" at once while another converts
/// the file); each runs its command or is told the key is held (exit 3), none fails.
#[test]
fn processes_opening_a_new_sqlite_file_at_once() {
    let dir = std::env::temp_dir().join(format!("lockstore-new-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for round in 0..6 {
        let url = format!(
            "sqlite://{}",
            dir.join(format!("round-{round}.db")).display()
        );
        let children: Vec<_> = (0..4)
            .map(|i| {
                lockstore()
                    .args(["run", "--store", &url, "--key", "cron", "--ttl", "30s"])
                    .args(["--owner", &format!("replica-{i}"), "--", "true"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut ran = 0;
        for child in children {
            let out = child.wait_with_output().unwrap();
            match out.status.code() {
                Some(0) => ran += 1,
                Some(3) => {}
                _ => panic!(
                    "round {round}: {:?} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
        // Each ran command released the key at once: later ones in this round may run too.
        assert!(ran >= 1, "round {round}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A holder process killed with SIGKILL (its keep-alive dies with it): the next waiter gets the
/// key at the lease's deadline, never before.
#[test]
fn a_killed_holder_frees_the_key_at_its_deadline() {
    for ((label, url), face) in faces(common::store_urls()) {
        let label = format!("{label} ({face})");
        let ns = common::unique_namespace("killed");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let locks = Locks::open(&url, &ns).unwrap();
        let mut holder = victim(face, &url, &ns, "victim", 800, None);
        common::eventually("the holder", || {
            locks
                .inspect("job")
                .ok() // "does not exist" until the holder's first write installs it
                .flatten()
                .filter(|i| i.holder().unwrap().owner == "victim")
        });
        std::thread::sleep(Duration::from_millis(300)); // let keep-alive extend at least once
        holder.kill().unwrap();
        holder.wait().unwrap();
        let deadline = locks
            .inspect("job")
            .unwrap()
            .expect("still held")
            .holder()
            .unwrap()
            .deadline;
        let lease = locks
            .acquire(
                "job",
                "next",
                Duration::from_secs(5),
                Duration::from_secs(5),
            )
            .unwrap();
        let start = lease.deadline().0 - 5000;
        assert!(
            start >= deadline.0,
            "{label}: granted at {start}, before the deadline {}",
            deadline.0
        );
        assert!(
            start < deadline.0 + 1000,
            "{label}: granted {} ms after the deadline",
            start - deadline.0
        );
        println!(
            "{label}: killed holder's key handed over {} ms after its deadline",
            start - deadline.0
        );
    }
}

/// Each store with each face a victim process can use: `lockstore run` (blocking) and the
/// async face (this binary run again, see [`aio_victim`]).
fn faces(stores: Vec<(&'static str, String)>) -> Vec<((&'static str, String), &'static str)> {
    stores
        .into_iter()
        .flat_map(|store| [(store.clone(), "blocking"), (store, "async")])
        .collect()
}

/// A process that takes `job` on namespace `ns` as `owner` with a TTL of `ttl_ms`, waiting
/// `wait_ms` for it if given, keeps the lease alive and holds it until killed: `lockstore run`
/// (face `blocking`: its command sleeps 2 s), or the async face.
fn victim(
    face: &str,
    url: &str,
    ns: &str,
    owner: &str,
    ttl_ms: u64,
    wait_ms: Option<u64>,
) -> Child {
    if face == "async" {
        let spec = format!("{url}|{ns}|{owner}|{ttl_ms}|{}", wait_ms.unwrap_or(0));
        return Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "aio_victim", "--nocapture", "--test-threads=1"])
            .env("LOCKSTORE_AIO_VICTIM", spec)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    }
    let ttl = format!("{ttl_ms}ms");
    let mut run = lockstore();
    run.args([
        "run",
        "--store",
        url,
        "--namespace",
        ns,
        "--key",
        "job",
        "--ttl",
        &ttl,
    ]);
    if let Some(wait) = wait_ms {
        run.args(["--wait", &format!("{wait}ms")]);
    }
    run.args(["--owner", owner, "--", "sleep", "2"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// One queue holding a Rust blocking waiter (`lockstore run`), a Rust async waiter and a Node
/// waiter, in that order, on every store the Node client has: after the holder's release each is
/// handed the key in the order it queued, with increasing fences (the async one is killed while
/// it holds, so the Node one is handed the key at its deadline).
#[test]
fn one_queue_of_blocking_async_and_node_waiters_is_served_in_order() {
    if std::env::var_os("LOCKSTORE_NODE_WORKERS").is_none() {
        println!("no Node waiter (LOCKSTORE_NODE_WORKERS is not set)");
        return;
    }
    let script = node_worker_script().with_file_name("wait-worker.mjs");
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("mixedq");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let locks = Locks::open(&url, &ns).unwrap();
        let lease = locks
            .try_acquire("job", "holder", Duration::from_secs(30))
            .unwrap();
        let queued = |n: usize| {
            common::eventually("the waiter in the queue", || {
                locks
                    .inspect("job")
                    .unwrap()
                    .filter(|i| i.waiters.len() == n)
            })
        };
        let mut blocking = victim("blocking", &url, &ns, "w1-blocking", 600, Some(20_000));
        queued(1);
        let mut aio = victim("async", &url, &ns, "w2-async", 600, Some(20_000));
        queued(2);
        let node = Command::new("node")
            .arg(&script)
            .args([
                url.as_str(),
                ns.as_str(),
                "job",
                "w3-node",
                "600",
                "20000",
                "500",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let info = queued(3);
        let order: Vec<&str> = info.waiters.iter().map(|w| w.owner.as_str()).collect();
        assert_eq!(order, ["w1-blocking", "w2-async", "w3-node"], "{label}");
        lease.release().unwrap();
        // Each is handed the key in turn: the blocking one's command ends after 2 s and it
        // releases; the async one is killed while it holds; the Node one holds 500 ms.
        let mut holders: Vec<(String, u64)> = Vec::new();
        let started = LocalInstant::now();
        while holders.len() < 3 && started.elapsed() < Duration::from_secs(20) {
            if let Some(held) = locks.inspect("job").unwrap() {
                let now = (
                    held.holder().unwrap().owner.clone(),
                    held.holder().unwrap().fence.0,
                );
                if holders.last() != Some(&now) {
                    if now.0 == "w2-async" {
                        aio.kill().unwrap();
                        aio.wait().unwrap();
                    }
                    holders.push(now);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Killed already if it held; otherwise now, before any assertion can leave it running.
        let _ = aio.kill();
        let _ = aio.wait();
        let owners: Vec<&str> = holders.iter().map(|(o, _)| o.as_str()).collect();
        assert_eq!(owners, ["w1-blocking", "w2-async", "w3-node"], "{label}");
        assert!(
            holders.windows(2).all(|w| w[0].1 < w[1].1),
            "{label}: fences {holders:?}"
        );
        assert!(blocking.wait().unwrap().success(), "{label}: lockstore run");
        let out = node.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{label}: the Node waiter: {said}");
        assert!(
            said.contains(&format!("granted {}", holders[2].1)) && said.contains("released true"),
            "{label}: the Node waiter said {said}"
        );
        println!("{label}: one queue of a blocking, an async and a Node waiter, served in order: {holders:?}");
    }
}

/// The async victim: when `LOCKSTORE_AIO_VICTIM` is set (see [`victim`]), takes or waits for
/// `job` through `lock_store::aio`, keeps the lease alive and waits to be killed.
#[test]
fn aio_victim() {
    let Ok(spec) = std::env::var("LOCKSTORE_AIO_VICTIM") else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [url, ns, owner, ttl, wait] = parts[..] else {
        panic!("bad victim spec {spec}");
    };
    let ms = |n: &str| Duration::from_millis(n.parse().unwrap());
    let runtime = common::runtime(2);
    runtime.block_on(async {
        let locks = lock_store::aio::Locks::open(url, ns).await.unwrap();
        let lease = locks
            .acquire("job", owner, ms(ttl), ms(wait))
            .await
            .unwrap();
        lease.keep_alive();
        std::future::pending::<()>().await;
    });
}

/// A waiter process killed with SIGKILL: the queue moves on. Waiters keep their place alive
/// (`renew-wait`), so the dead one leaves the queue within `WAIT_ALIVE` and the next live waiter
/// is handed the key at the release itself.
#[test]
fn a_killed_waiter_does_not_stop_the_queue() {
    for ((label, url), face) in faces(common::store_urls()) {
        let label = format!("{label} ({face})");
        let ns = common::unique_namespace("ghost");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let locks = Locks::open(&url, &ns).unwrap();
        let lease = locks
            .try_acquire("job", "holder", Duration::from_secs(30))
            .unwrap();
        let mut ghost = victim(face, &url, &ns, "ghost", 600, Some(20_000));
        common::eventually("the ghost in the queue", || {
            locks
                .inspect("job")
                .unwrap()
                .filter(|i| i.waiters.iter().any(|w| w.owner == "ghost"))
        });
        ghost.kill().unwrap();
        ghost.wait().unwrap();
        let killed = LocalInstant::now();
        // It renews its place no more: it leaves the queue within WAIT_ALIVE (its 20 s wait
        // notwithstanding), before the holder is done, and is never handed the key.
        common::eventually("the dead waiter to leave the queue", || {
            locks
                .inspect("job")
                .unwrap()
                .filter(|i| !i.waiters.iter().any(|w| w.owner == "ghost"))
        });
        let gone_after = killed.elapsed();
        assert!(
            gone_after < lock_store::WAIT_ALIVE + Duration::from_secs(2),
            "{label}: the dead waiter stayed {gone_after:?}"
        );
        let next = {
            let locks = locks.clone();
            std::thread::spawn(move || {
                locks.acquire(
                    "job",
                    "next",
                    Duration::from_secs(5),
                    Duration::from_secs(10),
                )
            })
        };
        common::eventually("next in the queue", || {
            locks
                .inspect("job")
                .unwrap()
                .filter(|i| i.waiters.iter().any(|w| w.owner == "next"))
        });
        lease.release().unwrap();
        let released = lease.released_at().unwrap().0;
        let next = next.join().unwrap().unwrap();
        let start = next.deadline().0 - 5000;
        assert_eq!(
            start, released,
            "{label}: the next live waiter was not handed the key at the release"
        );
        assert!(matches!(
            locks.try_acquire("job", "other", Duration::from_secs(1)),
            Err(Error::Lock(LockError::Held { .. }))
        ));
        println!("{label}: the dead waiter left the queue {gone_after:?} after its kill");
    }
}

/// `lockstore run` with a command that says when it starts and when it is asked to stop
/// (SIGTERM: prints "stopping" and exits 7, or ignores it), over a fresh SQLite file.
fn supervised(ignore_term: bool, extra: &[&str]) -> (Child, String, String, PathBuf) {
    let ns = common::unique_namespace("signals");
    let (dir, url) = sqlite_in_temp(&ns);
    let trap = if ignore_term {
        "trap '' TERM"
    } else {
        "trap 'echo stopping; exit 7' TERM"
    };
    let script = format!("{trap}; echo started; while :; do sleep 0.02; done");
    let child = lockstore()
        .args(["run", "--store", &url, "--namespace", &ns, "--key", "job"])
        .args(["--ttl", "600ms"])
        .args(extra)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, url, ns, dir)
}

/// Asserts that `job` is free at once (released, not expired at its TTL).
fn assert_released(url: &str, ns: &str) {
    let locks = Locks::open(url, ns).unwrap();
    assert_eq!(
        locks.inspect("job").unwrap(),
        None,
        "the key was not released"
    );
}

/// A fresh directory in the temp directory named `name`, and the URL of a SQLite file in it.
fn sqlite_in_temp(name: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("locks.db").display());
    (dir, url)
}

fn lose_the_lock(url: &str, ns: &str) {
    lock_store::store::open(url, ns, lock_store::store::DEFAULT_BOUND)
        .unwrap()
        .clear()
        .unwrap();
}

/// The lock is lost while the command runs: the command gets SIGTERM (its cleanup runs) and
/// `lockstore` exits 4.
#[test]
fn a_lost_lock_stops_the_command_with_sigterm() {
    let (mut child, url, ns, dir) = supervised(false, &["--grace", "10s"]);
    common::wait_for_line(&mut child, "started");
    lose_the_lock(&url, &ns);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        stdout.contains("stopping"),
        "SIGTERM did not reach the command: {out:?}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("lost \"job\""));
    let _ = std::fs::remove_dir_all(dir);
}

/// A command that ignores SIGTERM is killed once the grace period is over.
#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let (mut child, url, ns, dir) = supervised(true, &["--grace", "300ms"]);
    common::wait_for_line(&mut child, "started");
    lose_the_lock(&url, &ns);
    let start = LocalInstant::now();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(start.elapsed() < Duration::from_secs(10), "never killed");
    let _ = std::fs::remove_dir_all(dir);
}

/// SIGTERM sent to `lockstore` reaches the command; `lockstore` keeps the lock until the command
/// has finished, then releases it (the key is free at once, not at its TTL) and exits with the
/// command's status.
#[test]
fn a_signal_to_lockstore_reaches_the_command_and_the_key_is_released() {
    let (mut child, url, ns, dir) = supervised(false, &["--ttl", "30s"]);
    common::wait_for_line(&mut child, "started");
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("stopping"));
    assert_released(&url, &ns);
    let _ = std::fs::remove_dir_all(dir);
}

/// `SIGTERM` sent to `lockstore` the moment it says it holds the key, before its guard has
/// started the command, still reaches the command (`lockstore` passes it on only once the
/// command is in its tree): the command stops (by its trap, or by the signal if it came before
/// the trap was set), the key is released, and `lockstore` exits with the command's status.
/// Five rounds; a signal that reached nobody would leave the command running until the
/// watchdog kills it.
#[test]
fn a_signal_right_after_the_key_is_taken_reaches_the_command() {
    use std::io::BufRead;
    for round in 0..5 {
        let (mut child, url, ns, dir) = supervised(false, &["--ttl", "30s", "--grace", "60s"]);
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut printed = String::new();
        while !printed.contains(" holds \"job\"") {
            assert!(
                stderr.read_line(&mut printed).unwrap() > 0,
                "round {round}: {printed}"
            );
        }
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let Ok(out) = rx.recv_timeout(Duration::from_secs(20)) else {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("round {round}: the SIGTERM did not stop the command within 20 s");
        };
        let out = out.unwrap();
        // 7: its trap ran; 143: the signal came before the shell set its trap.
        assert!(
            matches!(out.status.code(), Some(7 | 143)),
            "round {round}: {out:?}"
        );
        assert_released(&url, &ns);
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Ctrl-C at a terminal: the terminal sends SIGINT to its whole foreground process group, so
/// the command already gets it; `lockstore` must not pass it on a second time. (A signal sent
/// by a process is passed on: the test above.) Runs `lockstore` on a pseudo-terminal of its own
/// (`script`) and types Ctrl-C into it; the command counts the SIGINTs it receives.
#[test]
fn ctrl_c_at_a_terminal_reaches_the_command_once() {
    use std::io::{BufRead, Write};
    let ns = common::unique_namespace("ctrlc");
    let (dir, url) = sqlite_in_temp(&ns);
    // The command: notes each SIGINT in a file; it waits for the first, then gives a second
    // one (which lockstore would pass on within milliseconds) time to arrive. It spins in shell
    // builtins rather than sleeping, so the shell runs its trap at once for each signal (two
    // signals during one `sleep` would run the trap once).
    let noted = dir.join("sigints");
    let command = format!(
        "trap 'echo int >> {f}' INT; echo started; \
         while [ ! -s {f} ]; do :; done; \
         i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo finished",
        f = noted.display()
    );
    let inner = format!(
        "exec {} run --store '{url}' --namespace {ns} --key job --ttl 30s -- sh -c \"{}\"",
        env!("CARGO_BIN_EXE_lockstore"),
        command.replace('"', "\\\"").replace('$', "\\$"),
    );
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines_tx
                .send(line.trim_end_matches('\r').to_owned())
                .is_err()
            {
                return;
            }
        }
    });
    let next_line = |what: &str| loop {
        match lines.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if line.contains(what) => return line,
            Ok(_) => {}
            Err(e) => panic!("no {what:?}: {e}"),
        }
    };
    next_line("started");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\x03").unwrap();
    stdin.flush().unwrap();
    next_line("finished");
    let sigints = std::fs::read_to_string(&noted).unwrap();
    assert_eq!(
        sigints.lines().count(),
        1,
        "the command got Ctrl-C more than once"
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_released(&url, &ns);
    let _ = std::fs::remove_dir_all(dir);
}

/// The processes that carry `EXPIRING_LOCK_OWNER=owner` in their environment: the command
/// `lockstore run` started for `owner`, everything it started, and its guard.
fn tree_of(owner: &str) -> Vec<String> {
    let marker = format!("EXPIRING_LOCK_OWNER={owner}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == marker.as_bytes()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("cmdline")).ok())
        .map(|cmd| cmd.replace('\0', " "))
        .collect()
}

/// Waits until the tree of [`tree_under_lockstore`] is up: the guard, the shell and its two
/// background processes (their `fork` and `exec` may still be under way when the shell says
/// "started", and `/proc` then shows a process without its environment for an instant).
fn tree_is_up(owner: &str) {
    common::eventually("the command's tree", || {
        (tree_of(owner).len() >= 4).then_some(())
    });
}

/// `lockstore run` as `owner` over a fresh SQLite file, with a command that starts a process
/// tree (a background subshell, a process in a session of its own, a loop) and prints
/// "started"; with `ignore_term`, every process of it ignores SIGTERM.
fn tree_under_lockstore(
    owner: &str,
    ignore_term: bool,
    extra: &[&str],
) -> (Child, PathBuf, String) {
    let (dir, url) = sqlite_in_temp(owner);
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    let script = format!(
        "{trap}(sleep 1000) & setsid sleep 1000 & echo started; while :; do sleep 0.02; done"
    );
    let child = lockstore()
        .args([
            "run",
            "--store",
            &url,
            "--namespace",
            "tree",
            "--key",
            "job",
        ])
        .args(["--owner", owner])
        .args(extra)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, dir, url)
}

/// `lockstore run` killed with SIGKILL at chosen points (before its command can have started,
/// while the command runs, while the tree ignores the SIGTERM passed on to it):
/// the command's whole tree (background and `setsid` processes included) is gone soon after,
/// long before the lease could be handed to anyone else.
#[cfg(target_os = "linux")]
#[test]
fn a_killed_lockstore_takes_the_commands_whole_tree_with_it() {
    for moment in ["at once", "while it runs", "while it is stopped"] {
        let owner = common::unique_namespace("killed");
        let ignore = moment == "while it is stopped";
        let (mut child, dir, _) =
            tree_under_lockstore(&owner, ignore, &["--ttl", "30s", "--grace", "60s"]);
        match moment {
            "at once" => {}
            "while it runs" => common::wait_for_line(&mut child, "started"),
            _ => {
                common::wait_for_line(&mut child, "started");
                // Being stopped: a SIGTERM sent to lockstore is passed on to the tree, which
                // ignores it; lockstore waits for it to finish (a long grace).
                let pid = rustix::process::Pid::from_child(&child);
                rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if moment != "at once" {
            tree_is_up(&owner);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        common::eventually(&format!("the tree to be gone ({moment})"), || {
            tree_of(&owner).is_empty().then_some(())
        });
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A lost lock stops the whole tree, not only the command's own process: nothing it started
/// is still running when `lockstore` exits (4: lost).
#[test]
fn a_lost_lock_stops_the_commands_whole_tree() {
    let owner = common::unique_namespace("losttree");
    let (mut child, dir, url) = tree_under_lockstore(&owner, false, &["--ttl", "600ms"]);
    common::wait_for_line(&mut child, "started");
    tree_is_up(&owner);
    lose_the_lock(&url, "tree");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(4));
    assert_eq!(tree_of(&owner), Vec::<String>::new(), "left running");
    let _ = std::fs::remove_dir_all(dir);
}

/// A command that exits and leaves processes running in the background: they are stopped
/// before the lock is released, and `lockstore` exits with the command's status.
#[test]
fn what_the_command_leaves_running_is_stopped_before_the_release() {
    let owner = common::unique_namespace("leftover");
    let (dir, url) = sqlite_in_temp(&owner);
    let status = lockstore()
        .args([
            "run",
            "--store",
            &url,
            "--namespace",
            "tree",
            "--key",
            "job",
        ])
        .args(["--owner", &owner, "--ttl", "30s"])
        .args(["--", "sh", "-c", "sleep 1000 & setsid sleep 1000 & exit 5"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(5));
    assert_eq!(tree_of(&owner), Vec::<String>::new(), "left running");
    assert_released(&url, "tree");
    let _ = std::fs::remove_dir_all(dir);
}
