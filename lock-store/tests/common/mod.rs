//! Shared by the store test files: the vector harness, its list of table-wide scenarios a store
//! cannot have, and where the servers are.
#![allow(dead_code)]

pub mod postgres_server;
pub mod proxy;
#[cfg(feature = "redis")]
pub mod redis_server;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use lock_conformance::{load_file, run_loaded, vector_files, BackendDriver, Report};
use lock_store::{store::Decider, store::Native, store::Store, store::StoreTable};

/// Every vector file: the shared suite and the playground's guided scenarios.
pub fn vector_paths() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vector_files(&root.join("tests/vectors")).unwrap();
    files.extend(vector_files(&root.join("tests/vectors/kinds")).unwrap());
    files.push(root.join("web-demo/guides/guides.json"));
    files
}

/// The scenarios that test what only a single in-process table has, for every store. Each is
/// replaced by a store test of the nearest meaning, named here.
pub const TABLE_ONLY: &[(&str, &str, &str)] = &[
    ("fencing.json", "restoring an older snapshot never reissues a fence",
     "whole-table snapshots; replaced by store_semantics::a_new_client_sees_the_leases_and_continues_the_fences"),
    ("limits.json", "a full table refuses new keys but not existing ones",
     "max_keys: a namespace has no key count; replaced by store_semantics::free_keys_leave_no_record"),
    ("limits.json", "expired leases never count against max_keys, even before the expiry is reported",
     "max_keys, as above"),
    ("release.json", "at most max_expired_records expiries are remembered, oldest forgotten first",
     "the bound is per key in a store; replaced by store_semantics::expired_memory_is_bounded_per_key"),
    ("snapshot.json", "snapshot bytes follow the documented format exactly", "whole-table snapshots"),
    ("snapshot.json", "restoring pinned bytes into a fresh table gives the same table", "whole-table snapshots"),
    ("snapshot.json", "snapshot then restore in place changes nothing observable", "whole-table snapshots"),
    ("snapshot.json", "a snapshot taken late includes the changes up to its now", "whole-table snapshots"),
    ("snapshot.json", "restoring an older snapshot keeps the later clock and applies what ended meanwhile", "whole-table snapshots"),
    ("snapshot.json", "a restored fence counter continues where it was", "whole-table snapshots"),
    ("snapshot.json", "truncated, foreign and damaged bytes are refused and change nothing",
     "whole-table snapshots; corrupt records: faults::*_corrupt_record"),
    ("snapshot.json", "inconsistent contents behind a valid checksum are refused", "whole-table snapshots"),
    ("snapshot.json", "a snapshot over this table's limits is refused", "whole-table snapshots"),
    ("snapshot.json", "restoring pinned version-3 bytes keeps each lease's grant instant (version 1 above predates it)",
     "whole-table snapshots; grant instants in a record: kinds::kinds_survive_in_the_record"),
    ("grant-instant.json", "a snapshot keeps each lease's grant instant", "whole-table snapshots; as above"),
    ("shared.json", "shared leases survive a snapshot and restore exactly", "whole-table snapshots"),
    ("min-hold.json", "a kept lease survives a snapshot and restore",
     "whole-table snapshots; a kept lease in a record: kinds::kinds_survive_in_the_record"),
    ("lock-delay.json", "an expired lease's kept place survives a snapshot and restore",
     "whole-table snapshots; as above"),
    ("metadata.json", "metadata survives a snapshot and restore", "whole-table snapshots; as above"),
    ("recovery.json", "bounded timeout handling applies changes in slices, in order, and its clock stops at the last one",
     "a persisting host's recovery: a store has no table timer to slice (each key changes when touched)"),
    ("recovery.json", "a slice of zero changes nothing while changes are due", "as above"),
    ("recovery.json", "bounded handling of hand-offs: each slice is one key's change", "as above"),
    ("recovery.json", "a raised fence floor makes every later token greater, and never lowers it",
     "a persisting host's recovery: a store's fence counter lives in the store and is never restored from an older copy"),
    ("recovery.json", "a fence floor survives a snapshot", "as above, and whole-table snapshots"),
    ("recovery.json", "cancelling every wait empties every queue, keeps the leases and hands off to nobody",
     "a persisting host's recovery after a restart: a store's waiters are other live processes, each renewing its own wait"),
    ("recovery.json", "cancelling every wait applies time first", "as above"),
    ("waiting.json", "the table-wide waiter limit refuses with too-many-waiters",
     "max_waiters counts one key's queue in a store; replaced by store_semantics::max_waiters_bounds_each_queue"),
];

/// Runs every vector scenario on a fresh (cleared) namespace of `open()`, with the caller's
/// clock; `stale` starts every call from an outdated record. Panics unless exactly the
/// [`TABLE_ONLY`] scenarios fail (an unexpected pass is an error too: the list must stay true).
pub fn check_vectors<S: Store + 'static>(
    label: &str,
    open: impl FnMut() -> S + 'static,
    stale: bool,
) {
    check_vectors_with(label, open, || Native, stale);
}

/// [`check_vectors`] on a server store: in a namespace of its own, uninstalled at the end;
/// `open(namespace)` connects (the first connection is used first, later ones are new).
#[allow(dead_code)] // used by the server stores' vector tests
pub fn check_vectors_on_server<S: Store + 'static>(store: &str, open: fn(&str) -> S, stale: bool) {
    let ns = unique_namespace(if stale { "vec_stale" } else { "vec" });
    let _cleanup = Cleanup({
        let ns = ns.clone();
        move || open(&ns).uninstall().unwrap()
    });
    let label = if stale {
        format!("{store}, stale")
    } else {
        store.to_owned()
    };
    let mut first = Some(open(&ns));
    check_vectors(
        &label,
        move || first.take().unwrap_or_else(|| open(&ns)),
        stale,
    );
}

/// [`check_vectors`] with another decider (a fresh one per scenario).
pub fn check_vectors_with<S: Store + 'static, D: Decider + 'static>(
    label: &str,
    open: impl FnMut() -> S + 'static,
    decider: impl FnMut() -> D + 'static,
    stale: bool,
) {
    let report = run_vectors(open, decider, stale);
    let failed: BTreeSet<(String, String)> = (report.failures.iter())
        .map(|f| (f.file.clone(), f.scenario.clone()))
        .collect();
    let listed: BTreeSet<(String, String)> = (TABLE_ONLY.iter())
        .map(|(f, s, _)| ((*f).to_owned(), (*s).to_owned()))
        .collect();
    let unexpected: Vec<_> = report
        .failures
        .iter()
        .filter(|f| !listed.contains(&(f.file.clone(), f.scenario.clone())))
        .map(ToString::to_string)
        .collect();
    let passing_listed: Vec<_> = listed.difference(&failed).collect();
    assert!(
        report.scenarios >= 100,
        "{label}: only {} scenarios ran",
        report.scenarios
    );
    assert!(
        unexpected.is_empty(),
        "{label}: {}\n{report}",
        unexpected.join("\n")
    );
    assert!(
        passing_listed.is_empty(),
        "{label}: listed as table-only but passed: {passing_listed:?}"
    );
    println!(
        "{label}: {} scenarios, {} steps; {} table-only scenarios refused as listed",
        report.scenarios,
        report.steps,
        failed.len()
    );
}

fn run_vectors<S: Store + 'static, D: Decider + 'static>(
    mut open: impl FnMut() -> S + 'static,
    mut decider: impl FnMut() -> D + 'static,
    stale: bool,
) -> Report {
    let mut driver = BackendDriver::new(move |limits| {
        let mut store = open();
        store.clear().map_err(|e| e.to_string())?;
        let mut table = StoreTable::with_decider(store, decider(), limits.clone())
            .map_err(|e| e.to_string())?;
        table.engine_mut().set_stale(stale);
        Ok(table)
    });
    let mut total = Report::default();
    for path in vector_paths() {
        total.merge(run_loaded(&mut driver, &load_file(&path).unwrap()));
    }
    total
}

/// A namespace no other test run uses: the prefix, the process id and a random part.
pub fn unique_namespace(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{:x}",
        std::process::id(),
        lock_store::store::new_version() & 0xff_ffff
    )
}

/// The test servers' URLs: from the environment, defaulting to the local services.
pub fn redis_url() -> String {
    std::env::var("LOCK_STORE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// PostgreSQL's test URL.
pub fn postgres_url() -> String {
    std::env::var("LOCK_STORE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// MariaDB's test URL.
pub fn mysql_url() -> String {
    std::env::var("LOCK_STORE_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// Removes namespace `ns` of the store at `url` (a test's cleanup: whatever fails is ignored,
/// as the namespace may never have been created).
pub fn uninstall(url: &str, ns: &str) {
    let _ = lock_store::store::open(url, ns, lock_store::store::DEFAULT_BOUND)
        .and_then(|mut s| s.uninstall());
}

/// Removes a namespace this run created when dropped (even if the test failed).
pub struct Cleanup<F: FnMut()>(pub F);

impl<F: FnMut()> Drop for Cleanup<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Every store this build has, as (label, URL): SQLite in a fresh file and memory always, the
/// servers with their features.
pub fn store_urls() -> Vec<(&'static str, String)> {
    let dir = std::env::temp_dir().join(unique_namespace("lockstore"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut urls = vec![(
        "sqlite",
        format!("sqlite://{}", dir.join("locks.db").display()),
    )];
    if cfg!(feature = "redis") {
        urls.push(("redis", redis_url()));
    }
    if cfg!(feature = "postgres") {
        urls.push(("postgres", postgres_url()));
    }
    if cfg!(feature = "mysql") {
        urls.push(("mysql", mysql_url()));
    }
    urls
}

/// A store just opened, its namespace installed (a raw store's reads answer `NoNamespace`
/// until a write or `install` creates it).
pub fn installed<S: Store>(opened: Result<S, lock_store::StoreError>) -> S {
    let mut store = opened.unwrap();
    store.install().unwrap();
    store
}

/// Runs `check` on a fresh namespace (named after `purpose`) of each store of [`store_urls`],
/// which `open()` opens (each call another connection, the namespace installed); the namespace is
/// uninstalled afterwards.
pub fn each_store(purpose: &str, check: impl Fn(&str, &dyn Fn() -> Box<dyn Store>)) {
    each_store_with(purpose, false, check);
}

/// [`each_store`] with tokens counted from 1 (no floor at the server's time on Redis, no move
/// to it on PostgreSQL and MariaDB), for the tests that count the tokens a namespace issued: under the
/// floor, tokens skip ahead with the clock, so a token taken by a write that did not happen
/// would not show. Calls are bounded at 30 s rather than the default 5 s: a call that gives up
/// leaves unknown whether its write was made, which a count of tokens cannot tell from a burnt
/// one, and a store that stalls for seconds on a loaded machine is not what these tests attack
/// (a lock wait that never ends still fails them).
pub fn each_store_counting_from_one(
    purpose: &str,
    check: impl Fn(&str, &dyn Fn() -> Box<dyn Store>),
) {
    each_store_with(purpose, true, check);
}

fn each_store_with(
    purpose: &str,
    from_one: bool,
    check: impl Fn(&str, &dyn Fn() -> Box<dyn Store>),
) {
    for (label, url) in store_urls() {
        let ns = unique_namespace(purpose);
        let open = || -> Box<dyn Store> {
            let bound = match from_one {
                true => std::time::Duration::from_secs(30),
                false => lock_store::store::DEFAULT_BOUND,
            };
            #[cfg(feature = "redis")]
            if from_one && label == "redis" {
                let store = lock_store::store::RedisStore::open(&url, &ns, bound);
                let mut store = installed(store);
                store.set_seed_from_time(false);
                return Box::new(store);
            }
            #[cfg(feature = "postgres")]
            if from_one && label == "postgres" {
                let store = lock_store::store::PostgresStore::open(&url, &ns, bound);
                let mut store = installed(store);
                store.set_seed_from_time(false);
                return Box::new(store);
            }
            #[cfg(feature = "mysql")]
            if from_one && label == "mysql" {
                let store = lock_store::store::MysqlStore::open(&url, &ns, bound);
                let mut store = installed(store);
                store.set_seed_from_time(false);
                return Box::new(store);
            }
            installed(lock_store::store::open(&url, &ns, bound))
        };
        let _cleanup = Cleanup(|| uninstall(&url, &ns));
        check(label, &open);
    }
}

/// A store for tests that passes every call on to `inner`, except that it runs `before_write`
/// once, just before the first write it is asked for (another client acts between this
/// client's read and its compare-and-set), answers `watcher` with `watcher` when set, and
/// holds every answer of a read or a write back for `reply_delay` after the store gave it (a
/// slow path back: the store's clock was read that long before the answer arrives), and
/// counts the reads in `reads`. Gray failures: `lose_answer` runs once after a write reached
/// the store, whose answer is then lost (`Lost`); `fail_reads` reads fail with `Lost`.
/// A test's action at a chosen moment.
pub type Hook = Box<dyn FnOnce() + Send>;

pub struct Wrapped {
    pub inner: Box<dyn Store>,
    pub before_write: Option<Box<dyn FnOnce() + Send>>,
    /// Set by the test at a chosen moment: runs after the next write reached the store, whose
    /// answer is then lost (`Lost`).
    pub lose_answer: std::sync::Arc<std::sync::Mutex<Option<Hook>>>,
    /// How many of the next reads fail with `Lost` (set by the test at a chosen moment).
    pub fail_reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub watcher: Option<Box<dyn Fn() -> lock_store::store::OpenWatcher + Send>>,
    pub reply_delay: std::time::Duration,
    pub reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Wrapped {
    /// `inner` passed through as it is: no hook, its own watcher, no delay.
    pub fn around(inner: Box<dyn Store>) -> Self {
        Wrapped {
            inner,
            before_write: None,
            lose_answer: Default::default(),
            fail_reads: Default::default(),
            watcher: None,
            reply_delay: std::time::Duration::ZERO,
            reads: Default::default(),
        }
    }
}

impl Store for Wrapped {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn read(&mut self, key: &str) -> Result<lock_store::store::Read, lock_store::StoreError> {
        use std::sync::atomic::Ordering::SeqCst;
        let fail = self
            .fail_reads
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1));
        if fail.is_ok() {
            return Err(lock_store::StoreError::Lost {
                store: self.describe(),
                reason: "read failed by the test".into(),
            });
        }
        let read = self.inner.read(key);
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(self.reply_delay);
        read
    }
    fn write(
        &mut self,
        key: &str,
        write: &lock_store::store::Write<'_>,
    ) -> Result<lock_store::store::Written, lock_store::StoreError> {
        if let Some(hook) = self.before_write.take() {
            hook();
        }
        let written = self.inner.write(key, write);
        std::thread::sleep(self.reply_delay);
        let lose = self.lose_answer.lock().unwrap().take();
        if let Some(hook) = lose {
            hook();
            return Err(lock_store::StoreError::Lost {
                store: self.describe(),
                reason: "answer lost by the test".into(),
            });
        }
        written
    }
    fn keys(&mut self) -> Result<Vec<String>, lock_store::StoreError> {
        self.inner.keys()
    }
    fn last_fence(&mut self) -> Result<lock_core::Fence, lock_store::StoreError> {
        self.inner.last_fence()
    }
    fn install(&mut self) -> Result<(), lock_store::StoreError> {
        self.inner.install()
    }
    fn clear(&mut self) -> Result<(), lock_store::StoreError> {
        self.inner.clear()
    }
    fn uninstall(&mut self) -> Result<(), lock_store::StoreError> {
        self.inner.uninstall()
    }
    fn announce(&mut self, key: &str, owner: &str) -> Result<(), lock_store::StoreError> {
        self.inner.announce(key, owner)
    }
    fn bound(&self) -> Option<std::time::Duration> {
        self.inner.bound()
    }
    fn limit_calls(&mut self, left: Option<std::time::Duration>) {
        self.inner.limit_calls(left);
    }
    fn watcher(&self) -> Option<lock_store::store::OpenWatcher> {
        match &self.watcher {
            Some(open) => Some(open()),
            None => self.inner.watcher(),
        }
    }
}

/// Polls `f` every 10 ms until it answers `Some` (at most 10 s: a liveness margin, not a
/// timing).
pub fn eventually<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    eventually_within(what, 10, f)
}

/// [`eventually`] within `seconds`.
pub fn eventually_within<T>(what: &str, seconds: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(seconds),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The server stores this build has, as (label, URL).
pub fn server_urls() -> Vec<(&'static str, String)> {
    store_urls()
        .into_iter()
        .filter(|(label, _)| *label != "sqlite")
        .collect()
}

/// Polls the async `f` every 10 ms until it answers `Some` (at most `limit`: a liveness margin,
/// not a timing).
#[cfg(feature = "tokio")]
pub async fn eventually_async<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    limit: std::time::Duration,
    mut f: impl FnMut() -> F,
) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A tokio runtime with `workers` worker threads, for the tests' async callers.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// The protected resource of the process tests: a file holding the highest fence it took; a
/// write with a lower fence is refused, and with the same fence too unless `again` (a leader
/// writing many times in one term). Writers take turns with a guard file `<resource>.lock`
/// created exclusively (`O_EXCL`), which the Node workers (`tests/js/lib/contend-worker.mjs`)
/// take the same way. Answers whether the write was taken. A writer killed between creating
/// and removing the guard would leave it behind: the tests that kill writers mid-write
/// (`lockstore/tests/election.rs`) use their own resource, locked with `flock`.
pub fn fenced_write(resource: &std::path::Path, fence: u64, again: bool) -> bool {
    let guard = std::path::PathBuf::from(format!("{}.lock", resource.display()));
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&guard)
        {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            Err(e) => panic!("{}: {e}", guard.display()),
        }
    }
    let seen: u64 = std::fs::read_to_string(resource)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let taken = fence > seen || (again && fence == seen);
    if taken {
        std::fs::write(resource, fence.to_string()).unwrap();
    }
    std::fs::remove_file(&guard).unwrap();
    taken
}

/// Reads `child`'s stdout until the whole line `line` (at most 10 s; fails if the output ends
/// first).
pub fn wait_for_line(child: &mut std::process::Child, line: &str) {
    use std::io::BufRead;
    let out = child.stdout.as_mut().unwrap();
    let mut reader = std::io::BufReader::new(out);
    let mut text = String::new();
    let start = std::time::Instant::now();
    while !text.lines().any(|l| l == line) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "no {line:?}: {text:?}"
        );
        let mut l = String::new();
        if reader.read_line(&mut l).unwrap() == 0 {
            panic!("output ended before {line:?}: {text:?}");
        }
        text.push_str(&l);
    }
}
