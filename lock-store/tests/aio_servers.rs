//! The async face on every store this build has (SQLite and the servers): leases, hand-offs
//! heard from the store, one queue shared by blocking threads and async tasks (served in
//! order), and 1,000 tasks waiting for one key on a runtime with one worker thread, served in
//! order with one listening connection (Redis).
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_store::{aio, Error, Limits, LockError, Locks, Options};

const S: Duration = Duration::from_secs(1);

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    common::runtime(workers)
}

/// Runs `check` on a fresh namespace of each store, uninstalled afterwards.
fn each_store(purpose: &str, check: impl Fn(&str, &str, &str)) {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace(purpose);
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        check(label, &url, &ns);
    }
}

#[test]
fn leases_and_hand_offs_on_every_store() {
    each_store("aio_store", |label, url, ns| {
        runtime(2).block_on(async {
            let one = aio::Locks::open(url, ns).await.unwrap();
            let two = aio::Locks::open(url, ns).await.unwrap();
            let a = one.try_acquire("job", "a", 30 * S).await.unwrap();
            let held = two.try_acquire("job", "b", 30 * S).await.unwrap_err();
            assert!(
                matches!(held, Error::Lock(LockError::Held { .. })),
                "{label}: {held}"
            );
            // A waiter on another `Locks` is handed the key at the release (Redis and
            // PostgreSQL tell it; the others look every 50 ms).
            let waiting = {
                let two = two.clone();
                tokio::spawn(async move { two.acquire("job", "b", 30 * S, 20 * S).await })
            };
            while one
                .inspect("job")
                .await
                .unwrap()
                .unwrap()
                .waiters
                .is_empty()
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let released = Instant::now();
            a.release().await.unwrap();
            let b = waiting.await.unwrap().unwrap();
            let handed = released.elapsed();
            assert!(b.fence() > a.fence(), "{label}");
            eprintln!("{label}: handed over {handed:?} after the release");
            drop(b);
            let start = Instant::now();
            while one.inspect("job").await.unwrap().is_some() {
                assert!(
                    start.elapsed() < 5 * S,
                    "{label}: the dropped lease was not released"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    });
}

#[test]
fn blocking_threads_and_async_tasks_share_one_queue_in_order() {
    each_store("aio_mixed", |label, url, ns| {
        let rt = runtime(2);
        let blocking = Locks::open(url, ns).unwrap();
        let asynchronous = rt.block_on(aio::Locks::open(url, ns)).unwrap();
        let holder = blocking.try_acquire("job", "h", 30 * S).unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|scope| {
            let mut tasks = Vec::new();
            for i in 0..6 {
                let owner = format!("w{i}");
                let served = Arc::clone(&served);
                if i % 2 == 0 {
                    let blocking = blocking.clone();
                    scope.spawn(move || {
                        let lease = blocking.acquire("job", &owner, 30 * S, 30 * S).unwrap();
                        served.lock().unwrap().push(owner);
                        lease.release().unwrap();
                    });
                } else {
                    let asynchronous = asynchronous.clone();
                    tasks.push(rt.spawn(async move {
                        let lease = asynchronous
                            .acquire("job", &owner, 30 * S, 30 * S)
                            .await
                            .unwrap();
                        served.lock().unwrap().push(owner);
                        lease.release().await.unwrap();
                    }));
                }
                let start = Instant::now();
                while blocking.inspect("job").unwrap().unwrap().waiters.len() < i + 1 {
                    assert!(start.elapsed() < 5 * S, "{label}: w{i} did not queue");
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            holder.release().unwrap();
            for task in tasks {
                rt.block_on(task).unwrap();
            }
        });
        let served = served.lock().unwrap().clone();
        assert_eq!(served, ["w0", "w1", "w2", "w3", "w4", "w5"], "{label}");
    });
}

/// How many tasks wait (`LOCK_STORE_AIO_WAITERS`, default 1 000).
fn waiters() -> usize {
    std::env::var("LOCK_STORE_AIO_WAITERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
}

#[test]
fn a_thousand_waiting_tasks_on_one_worker_thread_are_served_in_order_on_one_connection() {
    let n = waiters();
    let url = common::redis_url();
    let ns = common::unique_namespace("aio_many");
    let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
    let rt = runtime(1);
    let limits = Limits {
        max_waiters_per_key: n,
        ..Limits::default()
    };
    let locks = rt
        .block_on(Options::new().limits(limits).open_async(&url, &ns))
        .unwrap();
    let holder = rt
        .block_on(locks.try_acquire("job", "holder", 60 * S))
        .unwrap();
    holder.keep_alive();
    let served = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let started = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (locks, served) = (locks.clone(), Arc::clone(&served));
            rt.spawn(async move {
                let owner = format!("w{i:04}");
                let lease = locks.acquire("job", &owner, 60 * S, 600 * S).await.unwrap();
                served.lock().unwrap().push(owner);
                lease.release().await.unwrap();
            })
        })
        .collect();
    // Every task queued (in whatever order the runtime ran them): that order is the queue's.
    let queue = loop {
        let info = rt.block_on(locks.inspect("job")).unwrap().unwrap();
        if info.waiters.len() == n {
            break info
                .waiters
                .into_iter()
                .map(|w| w.owner)
                .collect::<Vec<_>>();
        }
        assert!(
            started.elapsed() < 120 * S,
            "{} of {n} queued",
            info.waiters.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let queued = started.elapsed();
    // One listening connection for all of them.
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let channel = format!("{{el:{ns}}}:handoff");
    let (_, listeners): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(&channel)
        .query::<Vec<(String, i64)>>(&mut redis)
        .unwrap()
        .remove(0);
    assert_eq!(listeners, 1, "listening connections");
    let released = Instant::now();
    rt.block_on(holder.release()).unwrap();
    for task in tasks {
        rt.block_on(task).unwrap();
    }
    eprintln!(
        "{n} tasks on one worker thread: queued in {queued:?}, served in {:?}",
        released.elapsed()
    );
    assert_eq!(*served.lock().unwrap(), queue, "served in queue order");
}
