//! Bursts at the documented limits, on every store: 32 connections at once on distinct keys and
//! on one hot key (no store error, no fence twice); a queue filled to `max_waiters_per_key`
//! (the next waiter is refused `queue-full`); waiters served in the order they queued, across
//! connections; replicas installing a namespace at once (a new SQLite file too).
mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use lock_core::{Limits, LockError};
use lock_store::{Error, Locks};

const CONNECTIONS: usize = 32;

fn each_store(check: impl Fn(&str, &str, &str)) {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("burst");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        check(label, &url, &ns);
    }
}

#[test]
fn many_connections_at_once() {
    each_store(|label, url, ns| {
        drop(Locks::open(url, ns).unwrap());
        let barrier = Arc::new(Barrier::new(CONNECTIONS));
        let threads: Vec<_> = (0..CONNECTIONS)
            .map(|i| {
                let (url, ns, barrier) = (url.to_owned(), ns.to_owned(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let locks = Locks::open(&url, &ns).unwrap();
                    let owner = format!("c{i}");
                    let mut fences = Vec::new();
                    barrier.wait();
                    for round in 0..20 {
                        // Half the time its own key, half the time the hot one.
                        let key = if round % 2 == 0 {
                            format!("k{i}")
                        } else {
                            "hot".into()
                        };
                        match locks.try_acquire(&key, &owner, Duration::from_secs(30)) {
                            Ok(lease) => {
                                fences.push((key, lease.fence().0));
                                lease.release().unwrap();
                            }
                            Err(Error::Lock(LockError::Held { .. })) => {}
                            Err(e) => panic!("{owner}: {e}"),
                        }
                    }
                    fences
                })
            })
            .collect();
        let mut all: Vec<(String, u64)> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let mut fences: Vec<u64> = all.iter().map(|(_, f)| *f).collect();
        fences.sort_unstable();
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "{label}: a fence twice"
        );
        all.retain(|(k, _)| k != "hot");
        assert_eq!(
            all.len(),
            CONNECTIONS * 10,
            "{label}: an uncontended key was refused"
        );
        println!(
            "{label}: {CONNECTIONS} connections, {} grants, no error",
            fences.len()
        );
    });
}

#[test]
fn a_full_queue_refuses_and_waiters_are_served_in_order() {
    each_store(|label, url, ns| {
        let limits = Limits {
            max_waiters_per_key: 6,
            ..Limits::default()
        };
        let open = || {
            lock_store::Options::new()
                .limits(limits.clone())
                .open(url, ns)
                .unwrap()
        };
        let holder = open();
        let lease = holder
            .try_acquire("job", "holder", Duration::from_secs(30))
            .unwrap();
        // Six waiters queue one after the other, each on its own connection.
        let mut waiters = Vec::new();
        for i in 0..6 {
            let locks = open();
            let owner = format!("w{i}");
            waiters.push(std::thread::spawn(move || {
                let lease = locks
                    .acquire(
                        "job",
                        &owner,
                        Duration::from_secs(30),
                        Duration::from_secs(20),
                    )
                    .unwrap();
                let fence = lease.fence().0;
                lease.release().unwrap();
                fence
            }));
            let queued = loop {
                let info = holder.inspect("job").unwrap().unwrap();
                if info.waiters.len() == i + 1 {
                    break info;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            assert_eq!(queued.waiters[i].owner, format!("w{i}"));
        }
        // The seventh is refused with the limit, and nothing changes.
        assert_eq!(
            open()
                .acquire(
                    "job",
                    "late",
                    Duration::from_secs(1),
                    Duration::from_secs(5)
                )
                .err(),
            Some(Error::Lock(LockError::QueueFull {
                max_waiters_per_key: 6
            }))
        );
        lease.release().unwrap();
        let fences: Vec<u64> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "{label}: served out of order: {fences:?}"
        );
        assert!(fences[0] > lease.fence().0);
        println!("{label}: six waiters served in queue order, the seventh refused");
    });
}

/// Replicas started together on a namespace nobody installed yet (for SQLite, a new file): every
/// one opens it, and they still share one lock.
#[test]
fn replicas_installing_at_once() {
    let dir = std::env::temp_dir().join(format!("burst-install-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fresh_file = format!("sqlite://{}", dir.join("new.db").display());
    let mut cases = common::store_urls();
    cases.retain(|(label, _)| *label != "sqlite");
    cases.push(("sqlite (a new file)", fresh_file));
    for (label, url) in cases {
        let ns = common::unique_namespace("install");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let barrier = Arc::new(Barrier::new(16));
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let (barrier, url, ns) = (Arc::clone(&barrier), url.clone(), ns.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Locks::open(&url, &ns).and_then(|locks| {
                        locks
                            .try_acquire("job", &format!("r{i}"), Duration::from_secs(30))
                            .map(std::mem::forget)
                    })
                })
            })
            .collect();
        let mut granted = 0;
        for t in threads {
            match t.join().unwrap() {
                Ok(()) => granted += 1,
                Err(Error::Lock(LockError::Held { .. })) => {}
                other => panic!("{label}: {other:?}"),
            }
        }
        assert_eq!(granted, 1, "{label}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
