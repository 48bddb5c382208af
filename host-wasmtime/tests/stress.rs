//! The stress test: threads race each other and the timer thread on the real clock, on one hot
//! key and a few others, with blocking and non-blocking acquires, extends, keep-alives,
//! releases and drops, and TTLs short enough that leases expire mid-work. A checker then
//! asserts, from what every thread saw:
//!
//! - per key, fences strictly increase in grant order and no two leases overlap in time;
//! - a fence-checking resource never refuses the token of a lease that is still live;
//! - `on_lost` fired exactly once for every lease that was lost, never for a released one;
//! - no call blocked past its wait bound (a watchdog, with generous slack for slow machines).
//!
//! `LOCK_STRESS_SECS` sets how long it runs (default 4 s).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use host_wasmtime::{Error, LockHost};
use lock_core::LockError;

mod common;
use common::{env_number, Rng};

const KEYS: [&str; 5] = ["hot", "a", "b", "c", "d"];
const THREADS: usize = 8;

/// What one lease looked like, seen by its holder.
#[derive(Debug)]
struct Seen {
    key: &'static str,
    fence: u64,
    /// When the table granted it (its first deadline minus its TTL).
    start: u64,
    /// When it ended: the host clock read before its release, or its deadline if lost.
    end: u64,
    lost: bool,
    on_lost_calls: Arc<AtomicUsize>,
}

#[test]
fn threads_racing_the_timer_never_break_the_lock() {
    let secs = env_number("LOCK_STRESS_SECS", 4);
    let host = LockHost::new().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // The resource: per key, the highest token written.
    let resource: Arc<HashMap<&str, Mutex<u64>>> =
        Arc::new(KEYS.iter().map(|k| (*k, Mutex::new(0))).collect());
    let refused_live = Arc::new(AtomicUsize::new(0));
    // The watchdog: per thread, when its current call must have returned by (0 = idle).
    let due: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (host, stop, resource, refused_live, due) = (
                host.clone(),
                Arc::clone(&stop),
                Arc::clone(&resource),
                Arc::clone(&refused_live),
                Arc::clone(&due),
            );
            std::thread::spawn(move || {
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ ((t as u64 + 1) * 0x9E37_79B9));
                let mut seen = Vec::new();
                let owner = format!("t{t}");
                while !stop.load(Ordering::SeqCst) {
                    let key = KEYS[if rng.below(2) == 0 {
                        0
                    } else {
                        rng.below(5) as usize
                    }];
                    let ttl = Duration::from_millis(5 + rng.below(40));
                    let wait = Duration::from_millis(rng.below(60));
                    let watch = started.elapsed() + wait + Duration::from_secs(10);
                    due[t].store(u64::try_from(watch.as_millis()).unwrap(), Ordering::SeqCst);
                    let got = if rng.below(3) == 0 {
                        host.try_acquire(key, &owner, ttl)
                    } else {
                        host.acquire(key, &owner, ttl, wait)
                    };
                    due[t].store(0, Ordering::SeqCst);
                    let lease = match got {
                        Ok(lease) => lease,
                        Err(Error::Lock(LockError::Held { .. }) | Error::WaitTimedOut) => continue,
                        Err(e) => panic!("thread {t}: {e}"),
                    };
                    let start = lease.deadline().0 - u64::try_from(ttl.as_millis()).unwrap();
                    let calls = Arc::new(AtomicUsize::new(0));
                    let c = Arc::clone(&calls);
                    lease.on_lost(move |_| {
                        c.fetch_add(1, Ordering::SeqCst);
                    });
                    if rng.below(4) == 0 {
                        lease.keep_alive();
                    }
                    for _ in 0..rng.below(4) {
                        // Write to the resource with the token, while the lease is live.
                        {
                            let mut highest = resource[key].lock().unwrap();
                            let live = !lease.is_lost() && host.now().0 < lease.deadline().0;
                            if lease.fence().0 >= *highest {
                                *highest = lease.fence().0;
                            } else if live {
                                refused_live.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        std::thread::sleep(Duration::from_millis(rng.below(15)));
                        if rng.below(3) == 0 {
                            let _ = lease.extend(ttl);
                        }
                    }
                    let before = host.now().0;
                    if rng.below(5) == 0 {
                        // A drop releases too; its answer is not seen, so it is not checked.
                        drop(lease);
                        continue;
                    }
                    let r = lease.release();
                    assert!(
                        matches!(
                            r,
                            Ok(())
                                | Err(Error::Lock(LockError::Expired { .. } | LockError::NotHeld))
                        ),
                        "thread {t}: {r:?}"
                    );
                    seen.push(Seen {
                        key,
                        fence: lease.fence().0,
                        start,
                        end: if r.is_ok() {
                            before
                        } else {
                            lease.deadline().0
                        },
                        lost: r.is_err(),
                        on_lost_calls: Arc::clone(&calls),
                    });
                }
                seen
            })
        })
        .collect();
    let watchdog = {
        let (stop, due) = (Arc::clone(&stop), Arc::clone(&due));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let now = u64::try_from(started.elapsed().as_millis()).unwrap();
                for (t, d) in due.iter().enumerate() {
                    let d = d.load(Ordering::SeqCst);
                    assert!(d == 0 || now <= d, "thread {t} blocked past its wait bound");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::SeqCst);
    let mut seen: Vec<Seen> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    watchdog.join().unwrap();
    // Let the timer thread deliver any last callbacks.
    host.tick();

    assert_eq!(
        refused_live.load(Ordering::SeqCst),
        0,
        "a live token was refused"
    );
    seen.sort_by_key(|s| (s.key, s.fence));
    let mut lost = 0;
    for pair in seen.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.key != b.key {
            continue;
        }
        assert!(a.fence < b.fence, "fence reused on {}: {a:?} {b:?}", a.key);
        assert!(
            a.start <= b.start,
            "fences out of grant order on {}: {a:?} {b:?}",
            a.key
        );
        assert!(a.end <= b.start, "overlap on {}: {a:?} then {b:?}", a.key);
    }
    for s in &seen {
        let calls = s.on_lost_calls.load(Ordering::SeqCst);
        if s.lost {
            lost += 1;
            assert_eq!(calls, 1, "on_lost of a lost lease: {s:?}");
        } else {
            assert_eq!(calls, 0, "on_lost of a released lease: {s:?}");
        }
    }
    eprintln!("{} leases checked, {lost} lost, over {secs} s", seen.len());
    assert!(seen.len() > 50, "the threads did work");
}
