//! The few tests that prove the real-clock host works: the timer thread alone (nobody calls
//! `tick`) reports expiries and hands the lock over. Generous timeouts; nothing asserts on speed.

use std::sync::mpsc;
use std::time::Duration;

use host_wasmtime::LockHost;
use lock_core::Fence;

#[test]
fn the_timer_thread_reports_a_lost_lock_and_hands_the_key_over() {
    let host = LockHost::new().unwrap();
    let lease = host
        .try_acquire("job", "a", Duration::from_millis(50))
        .unwrap();
    let (lost_tx, lost_rx) = mpsc::channel();
    lease.on_lost(move |lost| {
        let _ = lost_tx.send(lost.fence.0);
    });
    // A waiter blocks until the timer thread expires a's lease and hands the key over.
    let waiter = host
        .acquire(
            "job",
            "b",
            Duration::from_millis(50),
            Duration::from_secs(30),
        )
        .unwrap();
    assert_eq!(waiter.fence(), Fence(2));
    assert_eq!(lost_rx.recv_timeout(Duration::from_secs(30)).unwrap(), 1);
    assert!(lease.is_lost());
    drop(waiter);
}

#[test]
fn the_timer_thread_keeps_a_handed_off_lease_alive() {
    let host = LockHost::new().unwrap();
    let a = host
        .try_acquire("job", "a", Duration::from_millis(100))
        .unwrap();
    let b = host
        .acquire(
            "job",
            "b",
            Duration::from_millis(600),
            Duration::from_secs(30),
        )
        .unwrap();
    assert!(a.is_lost());
    let first_deadline = b.deadline().0;
    b.keep_alive();
    // Renewed every ~400 ms by the timer thread alone (200 ms of slack per renewal).
    while host.now().0 < first_deadline + 900 {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!b.is_lost(), "the keep-alive did not renew the lease");
    assert!(b.deadline().0 > host.now().0);
    assert!(host.stats().unwrap().extended >= 2);
    b.release().unwrap();
}
