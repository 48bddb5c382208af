//! The async face (`lock_store::aio`): the lease API, cancellation at every step of an acquire,
//! the loss signal, `with_lock` cancelling its work on loss, and a drop that releases.
//! Over the memory store here (the server stores in `aio_servers.rs`); real time, short TTLs.
mod common;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_store::aio::{self, AsyncStore, Pooled, StoreFuture};
use lock_store::store::{MemoryStore, OpenWatcher, Read, Store, Write, Written};
use lock_store::{Error, Fence, KeyInfo, LockError, Options, StoreError};

fn runtime() -> tokio::runtime::Runtime {
    common::runtime(2)
}

fn memory(ns: &str) -> Pooled {
    let memory = MemoryStore::new(ns).unwrap();
    let more = memory.clone();
    Pooled::new(
        Box::new(memory),
        Some(Box::new(move || {
            Ok(Box::new(more.clone()) as Box<dyn Store>)
        })),
        4,
    )
}

const S: Duration = Duration::from_secs(1);

/// Waits (at most 5 s) until `f` answers `Some`.
async fn eventually<T, F: Future<Output = Option<T>>>(what: &str, f: impl FnMut() -> F) -> T {
    common::eventually_async(what, 5 * S, f).await
}

#[test]
fn leases_are_taken_refused_extended_released_and_inspected() {
    runtime().block_on(async {
        let locks = aio::Locks::open("memory:", "aio_basics").await.unwrap();
        let a = locks.try_acquire("job", "a", 30 * S).await.unwrap();
        assert!(a.fence() > Fence(0));
        let held = locks.try_acquire("job", "b", 30 * S).await.unwrap_err();
        assert!(
            matches!(held, Error::Lock(LockError::Held { deadline }) if deadline == a.deadline())
        );
        let before = a.deadline();
        tokio::time::sleep(Duration::from_millis(5)).await;
        a.extend(60 * S).await.unwrap();
        assert!(a.deadline() > before);
        let info: KeyInfo = locks.inspect("job").await.unwrap().unwrap();
        assert_eq!(
            (
                info.holder().unwrap().owner.as_str(),
                info.holder().unwrap().fence
            ),
            ("a", a.fence())
        );
        assert_eq!(locks.keys().await.unwrap(), vec!["job".to_string()]);
        a.release().await.unwrap();
        a.release().await.unwrap(); // idempotent
        assert!(a.released_at().is_some());
        assert_eq!(locks.inspect("job").await.unwrap(), None);
        let b = locks.try_acquire("job", "b", 30 * S).await.unwrap();
        assert!(b.fence() > a.fence());
        assert_eq!(locks.last_fence().await.unwrap(), b.fence());
        // Bad input is a typed error and changes nothing.
        let bad = locks.try_acquire("", "b", S).await.unwrap_err();
        assert_eq!(bad, Error::Lock(LockError::KeyEmpty));
        // A dropped lease is released (in a task).
        drop(b);
        eventually("the dropped lease's release", || async {
            locks.inspect("job").await.unwrap().is_none().then_some(())
        })
        .await;
    });
}

#[test]
fn waiters_are_served_in_order_and_a_kept_alive_lease_outlives_its_ttl() {
    runtime().block_on(async {
        let locks = aio::Locks::open("memory:", "aio_order").await.unwrap();
        let holder = locks
            .try_acquire("job", "h", 300 * Duration::from_millis(1))
            .await
            .unwrap();
        holder.keep_alive();
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (waiter, served) = (locks.clone(), Arc::clone(&served));
            tasks.push(tokio::spawn(async move {
                let owner = format!("w{i}");
                let lease = waiter.acquire("job", &owner, 30 * S, 20 * S).await.unwrap();
                served.lock().unwrap().push(owner);
                lease.release().await.unwrap();
            }));
            let n = i + 1;
            eventually("the waiter queued", || async {
                let info = locks.inspect("job").await.unwrap()?;
                (info.waiters.len() == n).then_some(())
            })
            .await;
        }
        // Kept alive past three TTLs: still held, same fence.
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert!(!holder.is_lost());
        let info = locks.inspect("job").await.unwrap().unwrap();
        assert_eq!(
            (
                info.holder().unwrap().owner.as_str(),
                info.holder().unwrap().fence
            ),
            ("h", holder.fence())
        );
        holder.release().await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*served.lock().unwrap(), ["w0", "w1", "w2", "w3", "w4"]);
    });
}

#[test]
fn the_loss_signal_comes_before_another_holder_and_with_lock_cancels_its_work() {
    runtime().block_on(async {
        let locks = aio::Locks::open("memory:", "aio_loss").await.unwrap();
        let ttl = Duration::from_millis(300);
        let a = locks.try_acquire("job", "a", ttl).await.unwrap();
        let b = locks.acquire("job", "b", 30 * S, 10 * S).await.unwrap();
        // The holder's view ended before the store handed the key on.
        assert!(a.is_lost());
        let lost = tokio::time::timeout(Duration::from_millis(100), a.lost())
            .await
            .unwrap();
        assert_eq!((lost.owner.as_str(), lost.fence), ("a", a.fence()));
        assert!(matches!(
            a.release().await,
            Err(Error::Lock(LockError::Expired { .. }))
        ));
        b.release().await.unwrap();

        // A released lease is never lost.
        let c = locks.try_acquire("job", "c", ttl).await.unwrap();
        c.release().await.unwrap();
        assert!(tokio::time::timeout(2 * ttl, c.lost()).await.is_err());

        // with_lock: the work is dropped at the loss, and the answer is `expired`.
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let flag = Flag(Arc::clone(&dropped));
        let locks2 = locks.clone();
        // Spawned: the future of with_lock is `Send`.
        let answer = tokio::spawn(async move {
            locks2
                .with_lock("job", "d", ttl, S, async move |_lease| {
                    let _flag = flag;
                    tokio::time::sleep(10 * S).await;
                    "finished"
                })
                .await
        })
        .await
        .unwrap();
        assert!(
            matches!(answer, Err(Error::Lock(LockError::Expired { .. }))),
            "{answer:?}"
        );
        assert!(dropped.load(Ordering::SeqCst));
        assert!(started.elapsed() < 5 * S);
        // The work that finishes is answered, and the key released.
        let value = locks
            .with_lock("job", "e", 30 * S, S, async |lease| lease.fence())
            .await
            .unwrap();
        assert!(value > Fence(0));
        assert_eq!(locks.inspect("job").await.unwrap(), None);
    });
}

/// Where the gated store stops: before or after its `n`th read or write.
struct Gate {
    calls: AtomicUsize,
    /// How many writes were sent.
    writes: AtomicUsize,
    /// Stop the next write until `open` (whatever `stop_at` says).
    hold_write: AtomicBool,
    /// Stop the next read until `open`.
    hold_read: AtomicBool,
    /// The point to stop at (2n: before call n, 2n + 1: after it); `usize::MAX`: none.
    stop_at: AtomicUsize,
    reached: tokio::sync::mpsc::UnboundedSender<usize>,
    open: tokio::sync::watch::Sender<bool>,
}

impl Gate {
    async fn pass(&self, point: usize) {
        if self.stop_at.load(Ordering::SeqCst) != point {
            return;
        }
        let mut open = self.open.subscribe();
        let _ = self.reached.send(point);
        let _ = open.wait_for(|open| *open).await;
    }
}

/// A store that passes every call to `inner` and can stop before or after any read or write.
struct Gated {
    inner: Pooled,
    gate: Arc<Gate>,
}

impl AsyncStore for Gated {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn read<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Read> {
        Box::pin(async move {
            let n = self.gate.calls.fetch_add(1, Ordering::SeqCst);
            if self.gate.hold_read.swap(false, Ordering::SeqCst) {
                let mut open = self.gate.open.subscribe();
                let _ = open.wait_for(|open| *open).await;
            }
            self.gate.pass(2 * n).await;
            let read = self.inner.read(key).await;
            self.gate.pass(2 * n + 1).await;
            read
        })
    }
    fn write<'a>(&'a self, key: &'a str, write: &'a Write<'a>) -> StoreFuture<'a, Written> {
        Box::pin(async move {
            let n = self.gate.calls.fetch_add(1, Ordering::SeqCst);
            self.gate.writes.fetch_add(1, Ordering::SeqCst);
            if self.gate.hold_write.swap(false, Ordering::SeqCst) {
                let mut open = self.gate.open.subscribe();
                let _ = open.wait_for(|open| *open).await;
            }
            self.gate.pass(2 * n).await;
            let written = self.inner.write(key, write).await;
            self.gate.pass(2 * n + 1).await;
            written
        })
    }
    fn keys(&self) -> StoreFuture<'_, Vec<String>> {
        self.inner.keys()
    }
    fn last_fence(&self) -> StoreFuture<'_, Fence> {
        self.inner.last_fence()
    }
    fn install(&self) -> StoreFuture<'_, ()> {
        self.inner.install()
    }
    fn announce<'a>(&'a self, key: &'a str, owner: &'a str) -> StoreFuture<'a, ()> {
        self.inner.announce(key, owner)
    }
    fn bound(&self) -> Option<Duration> {
        self.inner.bound()
    }
    fn watcher(&self) -> StoreFuture<'_, Option<OpenWatcher>> {
        self.inner.watcher()
    }
}

/// Whether `owner` holds or waits for `key`.
fn present(info: Option<KeyInfo>, owner: &str) -> bool {
    info.is_some_and(|i| {
        i.holder().unwrap().owner == owner || i.waiters.iter().any(|w| w.owner == owner)
    })
}

/// Drops an acquire of `job` by `b` at every point of its store calls in turn (before and
/// after each read and write), after `setup` put the key in a state; each time, once the call
/// it stopped in goes on, `b` must be neither holder nor waiter, and stay so. Returns how many
/// points were tried (the acquire that was never stopped ended the enumeration).
async fn drop_at_every_point<F: Future<Output = ()>>(
    label: &str,
    wait: Duration,
    setup: impl Fn(aio::Locks) -> F,
) -> usize {
    for point in 0.. {
        let (reached, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let gate = Arc::new(Gate {
            calls: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
            hold_write: AtomicBool::new(false),
            hold_read: AtomicBool::new(false),
            stop_at: AtomicUsize::new(usize::MAX),
            reached,
            open: tokio::sync::watch::Sender::new(false),
        });
        let ns = common::unique_namespace("aio_cancel");
        let store = Gated {
            inner: memory(&ns),
            gate: Arc::clone(&gate),
        };
        let locks = Options::new().over_async(store).unwrap();
        setup(locks.clone()).await;
        gate.calls.store(0, Ordering::SeqCst);
        gate.stop_at.store(point, Ordering::SeqCst);
        let mut acquiring = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.acquire("job", "b", 30 * S, wait).await })
        };
        tokio::select! {
            stopped = heard.recv() => {
                assert_eq!(stopped, Some(point));
                // Drops the acquire's future where it waits, then lets the store call go on.
                acquiring.abort();
                let _ = acquiring.await;
                gate.open.send_replace(true);
            }
            done = &mut acquiring => {
                // Never stopped: every point was tried.
                gate.stop_at.store(usize::MAX, Ordering::SeqCst);
                let lease = done.unwrap().unwrap_or_else(|e| panic!("{label}: {e}"));
                lease.release().await.unwrap();
                return point;
            }
        }
        eventually(
            &format!("{label}: nothing left of b (point {point})"),
            || async { (!present(locks.inspect("job").await.unwrap(), "b")).then_some(()) },
        )
        .await;
        // And nothing comes back later (a write that was still in flight, say).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let info = locks.inspect("job").await.unwrap();
        assert!(
            !present(info.clone(), "b"),
            "{label}: b came back after point {point}: {info:?}"
        );
    }
    unreachable!()
}

#[test]
fn a_dropped_acquire_leaves_nothing_behind_at_every_step() {
    runtime().block_on(async {
        // A free key: read, grant.
        let free = drop_at_every_point("free key", S, |_| async {}).await;
        assert!(free >= 4, "only {free} points");
        // A key held for 400 ms: read, queue, looks, the grant at the expiry, by b's own call.
        let held = drop_at_every_point("held key", 10 * S, |locks| async move {
            let a = locks
                .try_acquire("job", "a", Duration::from_millis(400))
                .await
                .unwrap();
            std::mem::forget(a); // expires by itself
        })
        .await;
        assert!(held >= 8, "only {held} points");
    });
}

#[test]
fn an_acquire_dropped_while_it_naps_leaves_the_queue_at_once() {
    runtime().block_on(async {
        let locks = aio::Locks::open("memory:", "aio_nap").await.unwrap();
        let a = locks.try_acquire("job", "a", 30 * S).await.unwrap();
        let waiting = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.acquire("job", "b", 30 * S, 20 * S).await })
        };
        // The place as the store keeps it: kept alive until this instant, on the store's clock
        // (the memory store's is this machine's), unless renewed.
        let kept_until = eventually("b queued", || async {
            let info = locks.inspect("job").await.unwrap()?;
            let b = info.waiters.iter().find(|w| w.owner == "b")?;
            Some(b.wait_deadline)
        })
        .await;
        waiting.abort();
        eventually("b gone", || async {
            (!present(locks.inspect("job").await.unwrap(), "b")).then_some(())
        })
        .await;
        // It left: its place was removed before it could have run out on the store's clock.
        let now = lock_store::Instant(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64,
        );
        assert!(
            now < kept_until,
            "b's place ran out ({now:?} >= {kept_until:?}): it did not leave"
        );
        a.release().await.unwrap();
        assert_eq!(locks.inspect("job").await.unwrap(), None);
    });
}

/// A gate open until told to hold a write: it counts the store's calls.
fn counting() -> Arc<Gate> {
    Arc::new(Gate {
        calls: AtomicUsize::new(0),
        writes: AtomicUsize::new(0),
        hold_write: AtomicBool::new(false),
        hold_read: AtomicBool::new(false),
        stop_at: AtomicUsize::new(usize::MAX),
        reached: tokio::sync::mpsc::unbounded_channel().0,
        open: tokio::sync::watch::Sender::new(true),
    })
}

/// A held key of a fresh namespace over a counting gate, and `n` tasks queued for it (`w0`
/// first), each waiting up to a minute for a 1 s lease.
async fn queued_behind_a_holder(
    purpose: &str,
    n: usize,
) -> (
    Arc<Gate>,
    aio::Locks,
    aio::Lease,
    Vec<tokio::task::JoinHandle<Result<aio::Lease, Error>>>,
) {
    let gate = counting();
    let store = Gated {
        inner: memory(&common::unique_namespace(purpose)),
        gate: Arc::clone(&gate),
    };
    let locks = Options::new().over_async(store).unwrap();
    let a = locks.try_acquire("job", "a", 60 * S).await.unwrap();
    let waiting = (0..n)
        .map(|i| {
            let locks = locks.clone();
            tokio::spawn(async move { locks.acquire("job", &format!("w{i}"), S, 60 * S).await })
        })
        .collect();
    eventually("every waiter queued", || async {
        let info = locks.inspect("job").await.unwrap()?;
        (info.waiters.len() == n).then_some(())
    })
    .await;
    (gate, locks, a, waiting)
}

/// All `n` waiters still hold their places, and the first to queue is handed the key when `a`
/// releases it.
async fn still_in_order(
    locks: &aio::Locks,
    a: aio::Lease,
    waiting: Vec<tokio::task::JoinHandle<Result<aio::Lease, Error>>>,
    n: usize,
) {
    let info = locks.inspect("job").await.unwrap().unwrap();
    assert_eq!(info.waiters.len(), n, "{info:?}");
    a.release().await.unwrap();
    let first = waiting.into_iter().next().unwrap().await.unwrap().unwrap();
    assert_eq!(first.owner(), "w0");
    assert_eq!(
        locks
            .inspect("job")
            .await
            .unwrap()
            .unwrap()
            .holder()
            .unwrap()
            .owner,
        "w0"
    );
}

#[test]
fn renewals_that_queue_behind_a_slow_write_are_decided_by_one_write() {
    const WAITERS: usize = 20;
    runtime().block_on(async {
        let (gate, locks, a, waiting) = queued_behind_a_holder("aio_renewals", WAITERS).await;
        // The next write is a renewal (looks only read): it stalls, holding the key's turn,
        // for a whole renewal period (WAIT_ALIVE / 3), so every other waiter's renewal
        // comes due and queues behind it.
        gate.open.send_replace(false);
        gate.hold_write.store(true, Ordering::SeqCst);
        tokio::time::sleep(lock_store::WAIT_ALIVE / 3 + Duration::from_millis(200)).await;
        assert!(
            !gate.hold_write.load(Ordering::SeqCst),
            "no renewal was sent"
        );
        let before = gate.writes.load(Ordering::SeqCst);
        gate.open.send_replace(true);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let writes = gate.writes.load(Ordering::SeqCst) - before;
        // One each would be 19 or more: the queued renewals are one batch, so one
        // compare-and-set (two if one came due just as the batch was taken).
        assert!(
            (1..=2).contains(&writes),
            "{writes} compare-and-sets for the renewals queued by {WAITERS} waiters"
        );
        // Renewed, not lost: every place is kept, in the order they queued.
        still_in_order(&locks, a, waiting, WAITERS).await;
    });
}

#[test]
fn looks_that_queue_behind_a_slow_read_are_answered_by_one_read() {
    const WAITERS: usize = 20;
    runtime().block_on(async {
        let (gate, locks, a, waiting) = queued_behind_a_holder("aio_looks", WAITERS).await;
        // The memory store sends no notices: each waiter looks at least every 50 ms. The next
        // read (a look) stalls for 200 ms holding the key's turn; every waiter's next look
        // queues behind it meanwhile.
        gate.open.send_replace(false);
        gate.hold_read.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!gate.hold_read.load(Ordering::SeqCst), "no look was sent");
        let reads = || gate.calls.load(Ordering::SeqCst) - gate.writes.load(Ordering::SeqCst);
        let before = reads();
        gate.open.send_replace(true);
        tokio::time::sleep(Duration::from_millis(30)).await;
        let after = reads() - before;
        // One each would be 19 or more within these 30 ms: the queued looks are one read
        // (a few more if a waiter's next look came due meanwhile).
        assert!(
            after <= 5,
            "{after} reads for the looks queued by {WAITERS} waiters"
        );
        // Still waiting, in order.
        still_in_order(&locks, a, waiting, WAITERS).await;
    });
}

#[test]
fn opening_outside_a_runtime_is_a_typed_error() {
    let outside = Options::new()
        .over_async(memory("aio_outside"))
        .unwrap_err();
    assert!(
        matches!(outside, Error::Store(StoreError::Server { .. })),
        "{outside}"
    );
}
