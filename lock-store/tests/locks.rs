//! The service API over every store, with real time: grants, refusals, FIFO hand-off across
//! clients, wait time-outs, keep-alive, the lost-lock callback (exactly once) and release.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_core::LockError;
use lock_store::{Error, Locks};

const MS: Duration = Duration::from_millis(1);

/// Runs `check` with two clients (own connections) on a fresh namespace of each store.
fn on_every_store(check: impl Fn(&Locks, &Locks)) {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("locks");
        let a = Locks::open(&url, &ns).unwrap_or_else(|e| panic!("{label}: {e}"));
        let b = Locks::open(&url, &ns).unwrap_or_else(|e| panic!("{label}: {e}"));
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        println!("{label}");
        check(&a, &b);
    }
}

#[test]
fn one_holder_and_refusals_name_the_deadline() {
    on_every_store(|a, b| {
        let lease = a.try_acquire("job", "a", 5000 * MS).unwrap();
        assert!(lease.fence().0 > 0);
        match b.try_acquire("job", "b", 5000 * MS) {
            Err(Error::Lock(LockError::Held { deadline })) => {
                assert_eq!(deadline, lease.deadline())
            }
            other => panic!("{other:?}"),
        }
        let info = b.inspect("job").unwrap().unwrap();
        assert_eq!(
            (
                info.holder().unwrap().owner.as_str(),
                info.holder().unwrap().fence
            ),
            ("a", lease.fence())
        );
        lease.release().unwrap();
        lease.release().unwrap(); // idempotent
        let next = b.try_acquire("job", "b", 5000 * MS).unwrap();
        assert!(next.fence() > lease.fence());
        assert!(matches!(
            b.try_acquire("", "b", MS),
            Err(Error::Lock(LockError::KeyEmpty))
        ));
    });
}

#[test]
fn a_release_hands_the_key_to_the_first_waiter_in_another_client() {
    on_every_store(|a, b| {
        let lease = a.try_acquire("job", "a", 10_000 * MS).unwrap();
        let fence = lease.fence();
        let waiter = {
            let b = b.clone();
            std::thread::spawn(move || {
                b.acquire("job", "b", 10_000 * MS, 5_000 * MS)
                    .map(|l| l.fence())
            })
        };
        // Wait until b is queued, then release.
        while a.inspect("job").unwrap().unwrap().waiters.is_empty() {
            std::thread::sleep(5 * MS);
        }
        lease.release().unwrap();
        let got = waiter.join().unwrap().unwrap();
        assert!(got > fence);
    });
}

#[test]
fn a_wait_times_out_and_leaves_the_queue() {
    on_every_store(|a, b| {
        let _lease = a.try_acquire("job", "a", 10_000 * MS).unwrap();
        assert_eq!(
            b.acquire("job", "b", 1000 * MS, 150 * MS).err(),
            Some(Error::WaitTimedOut)
        );
        assert!(a.inspect("job").unwrap().unwrap().waiters.is_empty());
    });
}

#[test]
fn an_unreleased_lease_frees_itself_and_its_holder_is_told_once() {
    on_every_store(|a, b| {
        let lease = a.try_acquire("job", "a", 200 * MS).unwrap();
        let lost = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&lost);
        lease.on_lost(move |l| {
            assert_eq!(l.owner, "a");
            seen.fetch_add(1, Ordering::SeqCst);
        });
        // b waits and is handed the key at the deadline, not before.
        let next = b.acquire("job", "b", 1000 * MS, 3000 * MS).unwrap();
        assert!(next.fence() > lease.fence());
        assert!(lease.is_lost());
        std::thread::sleep(50 * MS);
        assert_eq!(lost.load(Ordering::SeqCst), 1);
        assert!(matches!(
            lease.extend(MS * 100),
            Err(Error::Lock(LockError::Expired { .. }))
        ));
        assert!(matches!(
            lease.release(),
            Err(Error::Lock(LockError::Expired { .. })) | Ok(())
        ));
        assert_eq!(lost.load(Ordering::SeqCst), 1, "on_lost ran twice");
    });
}

#[test]
fn keep_alive_holds_past_the_ttl() {
    on_every_store(|a, b| {
        // A TTL long enough that a busy test machine does not stall the keep-alive past it.
        let lease = a.try_acquire("job", "a", 1000 * MS).unwrap();
        lease.keep_alive();
        std::thread::sleep(2500 * MS);
        assert!(!lease.is_lost(), "{}", a.describe());
        assert!(matches!(
            b.try_acquire("job", "b", MS * 100),
            Err(Error::Lock(LockError::Held { .. }))
        ));
        lease.release().unwrap();
    });
}

/// Replicas need not decide alike: one decided by the native core and one by the lock
/// component share a store, hand the key to each other and see the same records.
#[cfg(feature = "component")]
#[test]
fn native_and_component_replicas_share_a_store() {
    use lock_store::{store::Component, Locks};
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("mixed");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let native = Locks::open(&url, &ns).unwrap();
        let wasm = lock_store::Options::new()
            .component(Component::embedded().unwrap())
            .open(&url, &ns)
            .unwrap();
        let a = native.try_acquire("job", "native", 5000 * MS).unwrap();
        let waiter = {
            let wasm = wasm.clone();
            std::thread::spawn(move || wasm.acquire("job", "wasm", 5000 * MS, 5000 * MS))
        };
        while native.inspect("job").unwrap().unwrap().waiters.is_empty() {
            std::thread::sleep(5 * MS);
        }
        a.release().unwrap();
        let lease = waiter.join().unwrap().unwrap();
        let b = lease.fence();
        assert!(b > a.fence(), "{label}");
        let seen = native.inspect("job").unwrap().unwrap();
        assert_eq!(
            (
                seen.holder().unwrap().owner.as_str(),
                seen.holder().unwrap().fence
            ),
            ("wasm", b),
            "{label}"
        );
        lease.release().unwrap();
        assert_eq!(native.inspect("job").unwrap(), None, "{label}");
        assert!(matches!(
            wasm.try_acquire("", "x", MS),
            Err(Error::Lock(LockError::KeyEmpty))
        ));
        println!("{label}: native and component replicas handed the key over");
    }
}

/// A waiter that waits longer than `WAIT_ALIVE` keeps its place by renewing it: the holder
/// outlives several renewal periods, and the first waiter is still first (before one that
/// queued after it), then served in order.
#[test]
fn a_long_wait_keeps_its_place() {
    on_every_store(|a, b| {
        let lease = a.try_acquire("job", "a", 30_000 * MS).unwrap();
        let waiter = |locks: &Locks, owner: &'static str| {
            let locks = locks.clone();
            std::thread::spawn(move || {
                let lease = locks.acquire("job", owner, 5000 * MS, 20_000 * MS)?;
                let fence = lease.fence();
                lease.release()?;
                Ok::<_, Error>(fence)
            })
        };
        let first = waiter(b, "b");
        let queued = |n: usize| {
            let start = std::time::Instant::now();
            while a.inspect("job").unwrap().map_or(0, |i| i.waiters.len()) < n {
                assert!(start.elapsed() < 10_000 * MS, "not queued");
                std::thread::sleep(10 * MS);
            }
        };
        queued(1);
        let second = waiter(a, "c");
        queued(2);
        // Watched throughout: never out of line, not even for a moment.
        let start = std::time::Instant::now();
        while start.elapsed() < lock_store::WAIT_ALIVE + lock_store::WAIT_ALIVE / 2 {
            let info = a.inspect("job").unwrap().unwrap();
            let order: Vec<_> = info.waiters.iter().map(|w| w.owner.as_str()).collect();
            assert_eq!(order, ["b", "c"], "after {:?}", start.elapsed());
            std::thread::sleep(10 * MS);
        }
        lease.release().unwrap();
        let (fb, fc) = (
            first.join().unwrap().unwrap(),
            second.join().unwrap().unwrap(),
        );
        assert!(lease.fence() < fb && fb < fc, "{fb:?} {fc:?}");
    });
}

/// A record left holding only a remembered expiry is collected by the store once that memory
/// has run out (Redis by its own expiry, the others by their writers, memory too).
#[test]
fn forgotten_records_are_collected() {
    let mut urls = common::store_urls();
    urls.push(("memory", "memory:".to_owned()));
    for (label, url) in urls {
        let ns = common::unique_namespace("forget");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let limits = lock_core::Limits {
            // Long enough for the checks below on a busy machine (Redis drops the record by
            // itself at its time).
            expired_retention: lock_core::Duration(2000),
            ..lock_core::Limits::default()
        };
        let locks = lock_store::Options::new()
            .limits(limits)
            .open(&url, &ns)
            .unwrap();
        let lease = locks.try_acquire("old", "a", 50 * MS).unwrap();
        std::thread::sleep(80 * MS);
        // Its expiry is applied and remembered: the record stays, free, until 2 s later.
        assert_eq!(locks.inspect("old").unwrap(), None);
        assert!(matches!(
            lease.release(),
            Err(Error::Lock(LockError::Expired { .. }))
        ));
        assert!(locks.keys().unwrap().contains(&"old".to_owned()), "{label}");
        std::thread::sleep(2100 * MS);
        let start = std::time::Instant::now();
        let mut i = 0;
        while locks.keys().unwrap().contains(&"old".to_owned()) {
            assert!(start.elapsed() < 10_000 * MS, "{label}: never collected");
            for _ in 0..70 {
                i += 1;
                let other = locks
                    .try_acquire(&format!("k{i}"), "b", 10_000 * MS)
                    .unwrap();
                other.release().unwrap();
            }
        }
    }
}

/// A decision taken on a free key must not be written after the key went through a whole lease
/// meanwhile (taken and released: free again, as far as a version-less absence could tell). The
/// emptied record stays as a tombstone with a new version, so the late write conflicts and is
/// decided again: the two leases never overlap in the store's time.
#[test]
fn a_decision_on_a_free_key_is_not_written_after_a_whole_lease_in_between() {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("aba");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let b = Locks::open(&url, &ns).unwrap();
        let b_lease = std::sync::Arc::new(std::sync::Mutex::new(None));
        let hook = {
            let (b, b_lease) = (b.clone(), std::sync::Arc::clone(&b_lease));
            Box::new(move || {
                std::thread::sleep(30 * MS);
                let lease = b.try_acquire("job", "b", 5000 * MS).unwrap();
                std::thread::sleep(30 * MS);
                lease.release().unwrap();
                *b_lease.lock().unwrap() =
                    Some((lease.fence(), lease.deadline(), lease.released_at()));
            })
        };
        let a = Locks::new(common::Wrapped {
            before_write: Some(hook),
            ..common::Wrapped::around(
                lock_store::store::open(&url, &ns, lock_store::store::DEFAULT_BOUND).unwrap(),
            )
        });
        let lease = a.try_acquire("job", "a", 5000 * MS).unwrap();
        let (b_fence, _, b_released) = b_lease.lock().unwrap().take().expect("b ran");
        let a_start = lease.deadline().0 - 5000;
        assert!(lease.fence() > b_fence, "{label}");
        assert!(
            a_start >= b_released.unwrap().0,
            "{label}: a's lease dated {a_start}, before b released at {:?}",
            b_released
        );
        lease.release().unwrap();
        assert!(
            a.keys().unwrap().is_empty(),
            "{label}: a tombstone listed as a key"
        );
    }
}

/// A client whose calls come faster than one per millisecond still decides at the store's
/// time: its estimate of the store's clock (the last read plus its own clock since) must not
/// stand still. If it did, after a TTL of quick take-and-release pairs its next lease would be
/// written already past its deadline: another client would be handed the key at once while
/// the first still believed it held it.
#[test]
fn quick_calls_do_not_hold_the_store_clock_back() {
    on_every_store(|a, b| {
        let ttl = 300 * MS;
        let start = std::time::Instant::now();
        let mut pairs = 0u32;
        while start.elapsed() < ttl * 2 {
            a.try_acquire("job", "a", ttl).unwrap().release().unwrap();
            pairs += 1;
        }
        let lease = a.try_acquire("job", "a", ttl).unwrap();
        let taken = std::time::Instant::now();
        match b.try_acquire("job", "b", ttl) {
            Err(Error::Lock(LockError::Held { deadline })) => {
                assert_eq!(deadline, lease.deadline())
            }
            Ok(second) if taken.elapsed() < ttl && !lease.is_lost() => panic!(
                "two holders after {pairs} pairs: a's lease (deadline {:?}) is not lost on a's \
                 clock, and b was handed the key with fence {:?}",
                lease.deadline(),
                second.fence()
            ),
            other => println!("inconclusive (the machine stalled past the TTL): {other:?}"),
        }
    });
}

/// A holder stops believing in its lease before any other client can be handed the key, even
/// when answers come back slowly: the store read its clock well before the answer arrived, so
/// a client deciding from a remembered record is that far behind the store's time, and a
/// holder that counted its lease from its own decision would still believe in it after the
/// store let it go. Both ways a lease gets its end: granted, and extended.
#[test]
fn a_holder_with_slow_answers_stops_before_the_key_is_handed_on() {
    common::each_store("slowreply", |label, open| {
        let a = Locks::new(common::Wrapped {
            reply_delay: 80 * MS,
            ..common::Wrapped::around(open())
        });
        let b = Locks::new(open());
        for (key, extend) in [("granted", false), ("extended", true)] {
            // a reads the record once, then decides from memory.
            a.try_acquire(key, "a", 1000 * MS)
                .unwrap()
                .release()
                .unwrap();
            let lease = a.try_acquire(key, "a", 400 * MS).unwrap();
            if extend {
                lease.extend(400 * MS).unwrap();
            }
            let next = loop {
                match b.try_acquire(key, "b", 1000 * MS) {
                    Ok(next) => break next,
                    Err(Error::Lock(LockError::Held { .. })) => std::thread::sleep(MS),
                    Err(e) => panic!("{label}: {e}"),
                }
            };
            assert!(
                lease.is_lost(),
                "{label}, {key}: b was handed the key (fence {:?}) while a, on its own clock, \
                 still held it",
                next.fence()
            );
            assert!(next.fence() > lease.fence());
        }
    });
}

/// A remembered record is decided on from memory (no read) while its read is young, and read
/// again once the read is older than the engine's read life, even if every call in between
/// wrote: only a read bounds the store's clock from above, and a holder's view of its lease
/// rests on that bound.
#[test]
fn a_remembered_record_is_read_again_once_its_read_is_old() {
    use lock_core::{AcquireOutcome, Duration as Ms, Instant, Request, Response};
    use lock_store::{store::Engine, store::TimeSource};
    let reads = Arc::new(AtomicUsize::new(0));
    let store = common::Wrapped {
        reads: Arc::clone(&reads),
        ..common::Wrapped::around(Box::new(
            lock_store::store::MemoryStore::new("readlife").unwrap(),
        ))
    };
    let mut engine = Engine::new(store, lock_core::Limits::default(), TimeSource::Store).unwrap();
    engine.set_read_life(1000 * MS);
    let mut pair = || {
        let acquire = |now| Request::TryAcquire {
            key: "job",
            owner: "a",
            ttl: Ms(10_000),
            now,
        };
        let fence = match engine.request("job", Instant::ZERO, acquire).unwrap().reply {
            Response::Acquire(Ok(AcquireOutcome::Acquired(grant))) => grant.fence,
            other => panic!("{other:?}"),
        };
        let release = |now| Request::Release {
            key: "job",
            owner: "a",
            fence,
            now,
        };
        let released = engine.request("job", Instant::ZERO, release).unwrap().reply;
        assert!(matches!(released, Response::Release(Ok(_))), "{released:?}");
    };
    // Margins of hundreds of milliseconds, so that a busy machine cannot stall a pair past them.
    let first = std::time::Instant::now();
    pair();
    assert_eq!(reads.load(Ordering::SeqCst), 1, "the first call reads");
    let mut pairs = 0;
    while first.elapsed() < 300 * MS {
        pair();
        pairs += 1;
    }
    assert_eq!(
        reads.load(Ordering::SeqCst),
        1,
        "{pairs} pairs within the read's life read"
    );
    std::thread::sleep((1300 * MS).saturating_sub(first.elapsed()));
    pair();
    assert_eq!(
        reads.load(Ordering::SeqCst),
        2,
        "a read older than its life was trusted"
    );
}
