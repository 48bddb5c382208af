//! The documented limits, in a release build, within the default call bound (1 s): a million
//! leases expiring at one instant, and a million-lease table saved and restored. Before the
//! expiry slices and the scaled snapshot bound, 600 000 simultaneous expiries or an 800 000-lease
//! snapshot trapped and poisoned the host.
//!
//! Release only (a debug component is about 40 times slower): `scripts/test.sh` runs
//! `cargo test --release -p host-wasmtime --test scale -- --ignored`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use host_wasmtime::{LockHost, ManualClock};

const MS: fn(u64) -> Duration = Duration::from_millis;
const LEASES: usize = 1_000_000;

#[test]
#[ignore = "release only; scripts/test.sh runs it with --release --ignored"]
fn a_million_leases_expire_at_once_and_survive_a_save_and_restore() {
    let dir = std::env::temp_dir().join(format!("lockhost-scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("table.lock");
    let clock = ManualClock::at(1_000);
    let host = LockHost::builder()
        .clock(clock.clone())
        .persist_to(&path, Duration::from_secs(24 * 3600))
        .build()
        .unwrap();
    let lost = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let leases: Vec<_> = (0..LEASES)
        .map(|i| {
            let lease = host
                .try_acquire(&format!("job-{i:07}"), "worker", MS(60_000))
                .unwrap();
            if i % 1_000 == 0 {
                let lost = Arc::clone(&lost);
                lease.on_lost(move |_| {
                    lost.fetch_add(1, Ordering::SeqCst);
                });
            }
            lease
        })
        .collect();
    eprintln!("{LEASES} grants in {:?}", started.elapsed());

    let started = Instant::now();
    host.save().unwrap();
    eprintln!(
        "snapshot + save of {LEASES} leases in {:?}",
        started.elapsed()
    );
    let bytes = std::fs::metadata(&path).unwrap().len();

    // The restart: every lease comes back.
    let started = Instant::now();
    let restored = LockHost::builder()
        .clock(clock.clone())
        .persist_to(dir.join("copy.lock"), Duration::from_secs(24 * 3600))
        .build()
        .unwrap();
    drop(restored);
    std::fs::copy(&path, dir.join("copy.lock")).unwrap();
    std::fs::copy(
        dir.join("table.lock.reserve"),
        dir.join("copy.lock.reserve"),
    )
    .unwrap();
    let restored = LockHost::builder()
        .clock(clock.clone())
        .persist_to(dir.join("copy.lock"), Duration::from_secs(24 * 3600))
        .build()
        .unwrap();
    eprintln!("restore of {bytes} bytes in {:?}", started.elapsed());
    assert_eq!(restored.recovery().unwrap().leases, LEASES);

    // Every lease expires at the same instant, in both hosts.
    clock.advance(60_000);
    for host in [&host, &restored] {
        let started = Instant::now();
        let stats = host.stats().unwrap();
        eprintln!("{LEASES} expiries in {:?}", started.elapsed());
        assert_eq!((stats.live_leases, stats.expired), (0, LEASES as u64));
        assert_eq!(stats.events_dropped, 0);
        // The host is not poisoned: it goes on granting.
        assert!(host.try_acquire("after", "w", MS(10)).is_ok());
    }
    assert_eq!(lost.load(Ordering::SeqCst), LEASES / 1_000);
    assert!(leases.iter().all(host_wasmtime::Lease::is_lost));
    std::mem::forget(leases);
    let _ = std::fs::remove_dir_all(&dir);
}
