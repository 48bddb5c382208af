//! Every lease that ends other than by its holder's release fires `on_lost` exactly once, on
//! every path; no call returns a lease that is already over; blocked callers never outlive a
//! broken table; expiry bursts stay in bounded slices.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

mod common;

use host_wasmtime::{Clock, Error, HostError, LockHost, ManualClock, SandboxLimits};
use lock_core::Instant;
use lock_core::LockError;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// An `on_lost` callback that counts into `count`.
fn counting(count: &Arc<AtomicUsize>) -> impl FnOnce(&host_wasmtime::LostLease) + Send + 'static {
    let count = Arc::clone(count);
    move |_| {
        count.fetch_add(1, Ordering::SeqCst);
    }
}

/// Issue 9, defect 4a: a release after the deadline, before the timer handled the expiry,
/// answered `expired` while `on_lost` never fired.
#[test]
fn a_release_that_finds_the_lease_expired_fires_on_lost_once() {
    let clock = ManualClock::at(0);
    let host = LockHost::builder().clock(clock.clone()).build().unwrap();
    for round in 0..50 {
        let lease = host.try_acquire("job", "a", MS(100)).unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        lease.on_lost(counting(&fired));
        clock.advance(100 + round % 3);
        let err = lease.release().unwrap_err();
        assert!(
            matches!(err, Error::Lock(LockError::Expired { .. })),
            "{err}"
        );
        assert!(lease.is_lost(), "round {round}");
        host.tick();
        drop(lease);
        assert_eq!(fired.load(Ordering::SeqCst), 1, "round {round}");
    }
}

#[test]
fn an_extend_that_finds_the_lease_expired_fires_on_lost_once() {
    let clock = ManualClock::at(0);
    let host = LockHost::builder().clock(clock.clone()).build().unwrap();
    let lease = host.try_acquire("job", "a", MS(100)).unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    lease.on_lost(counting(&fired));
    clock.advance(150);
    assert!(matches!(
        lease.extend(MS(100)),
        Err(Error::Lock(LockError::Expired {
            deadline: Instant(100)
        }))
    ));
    assert!(lease.is_lost());
    assert!(lease.release().is_err());
    host.tick();
    assert_eq!(fired.load(Ordering::SeqCst), 1);
}

#[test]
fn a_released_lease_never_fires_on_lost() {
    let clock = ManualClock::at(0);
    let host = LockHost::builder().clock(clock.clone()).build().unwrap();
    let lease = host.try_acquire("job", "a", MS(100)).unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    lease.on_lost(counting(&fired));
    clock.advance(99);
    lease.release().unwrap();
    clock.advance(1_000);
    host.tick();
    assert!(!lease.is_lost());
    assert_eq!(fired.load(Ordering::SeqCst), 0);
}

/// A clock that the test's waiter thread sees a second later at every reading: whatever the
/// waiter is handed, it wakes up after that lease's deadline.
struct WaiterJumps {
    base: ManualClock,
    waiter: Mutex<Option<ThreadId>>,
    reads: AtomicU64,
}

#[derive(Clone)]
struct Shared(Arc<WaiterJumps>);

impl std::ops::Deref for Shared {
    type Target = WaiterJumps;
    fn deref(&self) -> &WaiterJumps {
        &self.0
    }
}

impl Clock for Shared {
    fn now_ms(&self) -> u64 {
        let base = self.base.now_ms();
        if *self.waiter.lock().unwrap() == Some(thread::current().id()) {
            base + 1_000 * (self.reads.fetch_add(1, Ordering::SeqCst) + 1)
        } else {
            base
        }
    }
}

/// Issue 9, defect 4b: a blocking acquire whose handed-off lease expired before its thread woke
/// returned that lease, over already.
#[test]
fn a_blocking_acquire_never_returns_a_lease_that_is_over() {
    let clock = Shared(Arc::new(WaiterJumps {
        base: ManualClock::at(0),
        waiter: Mutex::new(None),
        reads: AtomicU64::new(0),
    }));
    let host = LockHost::builder().clock(clock.clone()).build().unwrap();
    let holder = host.try_acquire("job", "holder", MS(60_000)).unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = {
        let host = host.clone();
        let clock = clock.clone();
        thread::spawn(move || {
            let lease = host.acquire("job", "waiter", MS(10), MS(3_600_000));
            let now = clock.base.now_ms() + 1_000 * clock.reads.load(Ordering::SeqCst);
            tx.send(()).unwrap();
            (lease, now)
        })
    };
    while host.inspect("job").unwrap().unwrap().waiters.is_empty() {
        thread::sleep(MS(2));
    }
    *clock.waiter.lock().unwrap() = Some(waiter.thread().id());
    let handed_off = holder.fence().0 + 1;
    holder.release().unwrap();
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the waiter returns");
    let (lease, now) = waiter.join().unwrap();
    let lease = lease.unwrap();
    assert!(
        lease.fence().0 > handed_off,
        "the over lease {handed_off} was returned"
    );
    assert!(
        lease.deadline().0 > now - 1_000,
        "returned over: {} <= {now}",
        lease.deadline().0
    );
    let info = host.inspect("job").unwrap().unwrap();
    assert_eq!(
        (
            info.holder().unwrap().owner.as_str(),
            info.holder().unwrap().fence.0
        ),
        ("waiter", lease.fence().0)
    );
}

/// Issue 9, defect 10: acquirers blocked on a host whose table traps slept until their wait
/// deadline (here: forever, as the manual clock never moves).
#[test]
fn blocked_acquirers_are_woken_with_the_error_when_the_table_traps() {
    let clock = ManualClock::at(0);
    let host = LockHost::builder()
        .clock(clock)
        .sandbox(SandboxLimits {
            memory_bytes: 2 << 20,
            ..SandboxLimits::default()
        })
        .build()
        .unwrap();
    let _held = host.try_acquire("job", "holder", MS(60_000)).unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = {
        let host = host.clone();
        thread::spawn(move || tx.send(host.acquire("job", "waiter", MS(10), MS(3_600_000))))
    };
    while host.inspect("job").unwrap().unwrap().waiters.is_empty() {
        thread::sleep(MS(2));
    }
    let (trap, held) = common::fill_until_trap(&host);
    assert!(matches!(trap, Error::Host(HostError::Trap(_))), "{trap}");
    let woken = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the blocked acquirer is woken");
    assert!(matches!(woken, Err(Error::Host(_))), "{woken:?}");
    waiter.join().unwrap().ok();
    std::mem::forget(held);
}

/// Issue 9, defect 3 (in small): far more leases expire at one instant than the table keeps
/// undrained events; the host applies them in slices and every holder hears of its loss.
#[test]
fn an_expiry_burst_larger_than_the_event_queue_loses_no_on_lost() {
    let clock = ManualClock::at(0);
    let limits = lock_core::Limits {
        max_pending_events: 50,
        max_waiters_per_key: 2,
        ..lock_core::Limits::default()
    };
    let host = LockHost::builder()
        .clock(clock.clone())
        .limits(limits)
        .build()
        .unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    let leases: Vec<_> = (0..3_000)
        .map(|i| {
            let lease = host.try_acquire(&format!("k{i}"), "a", MS(100)).unwrap();
            lease.on_lost(counting(&fired));
            lease
        })
        .collect();
    clock.advance(100);
    host.tick();
    assert_eq!(fired.load(Ordering::SeqCst), 3_000);
    assert!(leases.iter().all(host_wasmtime::Lease::is_lost));
    let stats = host.stats().unwrap();
    assert_eq!((stats.events_dropped, stats.live_leases), (0, 0));
}
