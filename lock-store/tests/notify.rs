//! Waiters woken by the store: Redis pub/sub and PostgreSQL `LISTEN/NOTIFY` carry "key handed to
//! owner" notices; the waiting calls of one `Locks` listen on one connection between them. A notice that is lost
//! (its connection killed) only means the waiter looks by itself: it is still served. Stores
//! that cannot notify (MariaDB, SQLite, memory) have no watcher: their waiters look by
//! themselves. (Liveness checks with generous bounds, not timings.)
mod common;

use std::time::{Duration, Instant};

use lock_store::{store, Locks};

/// Longer than any wait here may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(15);

fn notifying_stores() -> Vec<(&'static str, String)> {
    let mut urls = Vec::new();
    if cfg!(feature = "redis") {
        urls.push(("redis", common::redis_url()));
    }
    if cfg!(feature = "postgres") {
        urls.push(("postgres", common::postgres_url()));
    }
    urls
}

fn with_namespace(label: &str, url: &str, check: impl FnOnce(&str)) {
    let ns = common::unique_namespace("notify");
    let _cleanup = common::Cleanup(|| common::uninstall(url, &ns));
    println!("{label}");
    check(&ns);
}

/// Polls until `owner` waits for `key`.
fn queued(locks: &Locks, key: &str, owner: &str) {
    let start = Instant::now();
    while !locks
        .inspect(key)
        .unwrap()
        .is_some_and(|i| i.waiters.iter().any(|w| w.owner == owner))
    {
        assert!(start.elapsed() < HANG, "{owner} never queued");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_watcher_hears_the_hand_off_to_its_owner_only() {
    for (label, url) in notifying_stores() {
        with_namespace(label, &url, |ns| {
            let a = Locks::open(&url, ns).unwrap();
            let b = Locks::open(&url, ns).unwrap();
            let open = (store::open(&url, ns, store::DEFAULT_BOUND)
                .unwrap()
                .watcher())
            .expect("this store notifies");
            let mut watcher = open().unwrap();
            let c = Locks::open(&url, ns).unwrap();
            let lease = a.try_acquire("job", "a", Duration::from_secs(30)).unwrap();
            let waiter = |locks: Locks, owner: &'static str| {
                std::thread::spawn(move || {
                    let lease = locks.acquire("job", owner, Duration::from_secs(5), HANG)?;
                    // Held until the test has heard the notice for the next waiter.
                    std::thread::sleep(Duration::from_millis(300));
                    lease.release()?;
                    Ok::<_, lock_store::Error>(lease.fence())
                })
            };
            let b_waits = waiter(b, "b");
            queued(&a, "job", "b");
            let c_waits = waiter(c, "c");
            queued(&a, "job", "c");
            // Nothing yet.
            assert!(!watcher.wait("job", "b", Duration::ZERO).unwrap());
            lease.release().unwrap();
            // b's notice comes first: waiting for c's skips it; then c's comes when b releases.
            let start = Instant::now();
            assert!(
                watcher.wait("job", "c", HANG).unwrap(),
                "{label}: no notice"
            );
            assert!(start.elapsed() < HANG);
            let (fb, fc) = (
                b_waits.join().unwrap().unwrap(),
                c_waits.join().unwrap().unwrap(),
            );
            assert!(lease.fence() < fb && fb < fc);
            // Both notices were consumed: nothing is left for b.
            assert!(!watcher
                .wait("job", "b", Duration::from_millis(100))
                .unwrap());
        });
    }
}

#[test]
fn stores_that_cannot_notify_have_no_watcher() {
    let mut urls = vec![
        ("memory", "memory:".to_owned()),
        ("noop", "noop:".to_owned()),
    ];
    if cfg!(feature = "mysql") {
        urls.push(("mysql", common::mysql_url()));
    }
    for (label, url) in urls {
        with_namespace(label, &url, |ns| {
            assert!(store::open(&url, ns, store::DEFAULT_BOUND)
                .unwrap()
                .watcher()
                .is_none());
        });
    }
}

/// The waiter's notice connection is killed while it waits: it is still served (by looking
/// by itself), well before its wait is over.
#[test]
fn a_lost_notice_connection_does_not_lose_the_wake_up() {
    for (label, url) in notifying_stores() {
        with_namespace(label, &url, |ns| {
            let a = Locks::open(&url, ns).unwrap();
            let b = Locks::open(&url, ns).unwrap();
            let lease = a.try_acquire("job", "a", Duration::from_secs(30)).unwrap();
            let waiting = std::thread::spawn(move || {
                let start = Instant::now();
                let got = b.acquire("job", "b", Duration::from_secs(5), Duration::from_secs(60));
                (got, start.elapsed())
            });
            queued(&a, "job", "b");
            let start = Instant::now();
            while kill_listeners(label, &url, ns) == 0 {
                assert!(start.elapsed() < HANG, "{label}: the waiter never listened");
                std::thread::sleep(Duration::from_millis(10));
            }
            lease.release().unwrap();
            let (got, waited) = waiting.join().unwrap();
            let granted = got.unwrap();
            assert!(granted.fence() > lease.fence());
            assert!(waited < HANG, "{label}: waited {waited:?}");
            granted.release().unwrap();
        });
    }
}

/// Sixteen threads of one `Locks` (clones) wait for sixteen keys at once: they listen on one
/// connection between them (one per waiting call before), and each is served when its key is
/// released. The connection closes once nobody waits.
#[test]
fn waiters_of_one_locks_share_one_listening_connection() {
    const WAITERS: usize = 16;
    for (label, url) in notifying_stores() {
        with_namespace(label, &url, |ns| {
            let holder = Locks::open(&url, ns).unwrap();
            let waiters = Locks::open(&url, ns).unwrap();
            let leases: Vec<_> = (0..WAITERS)
                .map(|i| {
                    holder
                        .try_acquire(&format!("job{i}"), "holder", Duration::from_secs(30))
                        .unwrap()
                })
                .collect();
            let threads: Vec<_> = (0..WAITERS)
                .map(|i| {
                    let locks = waiters.clone();
                    std::thread::spawn(move || {
                        let owner = format!("w{i}");
                        let lease = locks.acquire(
                            &format!("job{i}"),
                            &owner,
                            Duration::from_secs(5),
                            HANG,
                        )?;
                        lease.release()?;
                        Ok::<_, lock_store::Error>(lease.fence())
                    })
                })
                .collect();
            for i in 0..WAITERS {
                queued(&holder, &format!("job{i}"), &format!("w{i}"));
            }
            // Every waiter has queued; each subscribes right after: wait until one listens.
            let start = Instant::now();
            while listeners(label, &url, ns) == 0 {
                assert!(start.elapsed() < HANG, "{label}: nobody listens");
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(listeners(label, &url, ns), 1, "{label}");
            for (lease, thread) in leases.iter().zip(threads) {
                lease.release().unwrap();
                let fence = thread.join().unwrap().unwrap();
                assert!(fence > lease.fence(), "{label}");
            }
        });
    }
}

/// While a waiting call opens its listening connection (here: until the test lets it go), the
/// other calls of the same `Locks` go on: the store is not held during the connect (it was,
/// so a slow server could hold up a lease's keep-alive for the whole connect timeout).
#[test]
fn a_slow_listening_connect_holds_up_no_other_call() {
    let (opening, opened) = std::sync::mpsc::channel();
    let (let_go, gate) = std::sync::mpsc::channel();
    // A memory store whose listening connection takes as long as the test wants to open (then
    // fails, so its waiters look by themselves).
    let gate = std::sync::Arc::new(std::sync::Mutex::new(gate));
    let slow_to_listen = move || -> lock_store::store::OpenWatcher {
        let (opening, gate) = (opening.clone(), std::sync::Arc::clone(&gate));
        Box::new(move || {
            let _ = opening.send(());
            let _ = gate.lock().unwrap().recv_timeout(HANG);
            Err(lock_store::StoreError::Connect {
                store: "slow".into(),
                reason: "the test let it fail".into(),
            })
        })
    };
    let locks = Locks::new(common::Wrapped {
        watcher: Some(Box::new(slow_to_listen)),
        ..common::Wrapped::around(Box::new(
            lock_store::store::MemoryStore::new("slow").unwrap(),
        ))
    });
    let lease = locks
        .try_acquire("job", "a", Duration::from_secs(30))
        .unwrap();
    let waiter = {
        let locks = locks.clone();
        std::thread::spawn(move || locks.acquire("job", "b", Duration::from_secs(5), HANG))
    };
    opened
        .recv_timeout(HANG)
        .expect("the waiter starts listening");
    // The connect is under way: another call of this `Locks` is answered meanwhile.
    let (done, answer) = std::sync::mpsc::channel();
    let other = {
        let locks = locks.clone();
        std::thread::spawn(move || {
            let got = locks.try_acquire("other", "c", Duration::from_secs(30));
            let _ = done.send(got.is_ok());
        })
    };
    let answered = answer.recv_timeout(Duration::from_secs(3));
    let_go.send(()).unwrap();
    assert_eq!(answered, Ok(true), "the other call waited for the connect");
    other.join().unwrap();
    // The waiter, whose listening failed, looks by itself and is served.
    lease.release().unwrap();
    let granted = waiter.join().unwrap().unwrap();
    assert!(granted.fence() > lease.fence());
}

/// How many connections listen for the namespace's notices.
fn listeners(label: &str, url: &str, ns: &str) -> usize {
    let name = format!("lock-store:{ns}");
    match label {
        #[cfg(feature = "redis")]
        "redis" => {
            let mut admin = redis::Client::open(url).unwrap().get_connection().unwrap();
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
            list.lines()
                .filter(|l| l.contains(&format!(" name={name} ")) && l.contains("cmd=subscribe"))
                .count()
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
            let row = admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE application_name = $1 AND query LIKE 'LISTEN%'",
                    &[&name],
                )
                .unwrap();
            usize::try_from(row.get::<_, i64>(0)).unwrap()
        }
        // Only the notifying stores (none without their features).
        _ => unreachable!("{label} {url} {name}"),
    }
}

/// Kills the connections listening for the namespace's notices; how many.
fn kill_listeners(label: &str, url: &str, ns: &str) -> usize {
    match label {
        #[cfg(feature = "redis")]
        "redis" => {
            let name = format!("lock-store:{ns}");
            let mut admin = redis::Client::open(url).unwrap().get_connection().unwrap();
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
            let mut killed = 0;
            for line in list
                .lines()
                .filter(|l| l.contains(&format!(" name={name} ")) && l.contains("cmd=subscribe"))
            {
                if let Some(id) = line.split(' ').find_map(|f| f.strip_prefix("id=")) {
                    let n: i64 = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("ID")
                        .arg(id)
                        .query(&mut admin)
                        .unwrap_or(0);
                    killed += n as usize;
                }
            }
            killed
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            let name = format!("lock-store:{ns}");
            let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
            admin
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = $1 AND query LIKE 'LISTEN%'",
                    &[&name],
                )
                .map_or(0, |rows| {
                    rows.iter().filter(|r| r.get::<_, bool>(0)).count()
                })
        }
        _ => unreachable!("{label} {url} {ns}"),
    }
}
