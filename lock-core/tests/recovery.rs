//! The primitives a persisting host needs to recover: bounded expiry slices, a fence floor, and
//! dropping waiters whose process is gone.

use lock_core::{AcquireOutcome, Duration, Event, EventKind, Fence, Instant, LockTable};
use proptest::prelude::*;

/// A table with `leases` keys, some with waiters, deadlines spread over `spread` ms from 1.
fn busy_table(leases: u64, spread: u64) -> LockTable {
    let mut table = LockTable::default();
    for i in 0..leases {
        let key = format!("k{}", i % (leases / 2 + 1));
        let ttl = 1 + (i * 7919) % spread.max(1);
        // Half the calls find the key held and queue behind it with a wait past its deadline.
        let wait_deadline = Instant(1 + spread * 2);
        let _ = table.acquire(
            &key,
            &format!("o{i}"),
            Duration(ttl),
            wait_deadline,
            Instant(0),
        );
    }
    table.drain_events().for_each(drop);
    table
}

fn events(table: &mut LockTable) -> Vec<Event> {
    table.drain_events().collect()
}

proptest! {
    /// Run to completion in slices of any size, the bounded form gives exactly the state and the
    /// events of one `handle_timeout`, and each slice applies at most its budget.
    #[test]
    fn bounded_slices_equal_one_handle_timeout(
        leases in 1u64..300, spread in 1u64..50, budget in 1u32..40, now in (0u64..120).prop_map(Instant),
    ) {
        let mut whole = busy_table(leases, spread);
        let mut sliced = whole.clone();
        whole.handle_timeout(now);
        let expected = events(&mut whole);
        let mut got = Vec::new();
        let mut slices = 0;
        while sliced.handle_timeout_bounded(now, budget) {
            let before = got.len();
            got.extend(events(&mut sliced));
            // Each change of one key yields at most an expiry, a hand-off and its wait timeouts.
            prop_assert!(got.len() - before <= budget as usize * 66);
            slices += 1;
            prop_assert!(slices < 10_000, "slices never end");
        }
        got.extend(events(&mut sliced));
        prop_assert_eq!(got, expected);
        prop_assert_eq!(sliced.snapshot(now), whole.snapshot(now));
    }
}

#[test]
fn a_slice_never_moves_the_clock_past_a_change_it_left() {
    let mut table = LockTable::default();
    for i in 0..10 {
        let _ = table
            .try_acquire(&format!("k{i}"), "a", Duration(100 + i), Instant(0))
            .unwrap();
    }
    assert!(table.handle_timeout_bounded(Instant(1_000), 3));
    // Three expiries applied (at 100, 101, 102); the clock stops at the last one applied.
    assert_eq!(table.clock(), Instant(102));
    assert_eq!(table.stats(Instant(102)).live_leases, 7);
    assert!(table.handle_timeout_bounded(Instant(1_000), 0));
    assert_eq!(table.clock(), Instant(102));
    assert!(!table.handle_timeout_bounded(Instant(1_000), 100));
    assert_eq!(table.clock(), Instant(1_000));
    assert_eq!(table.stats(Instant(1_000)).live_leases, 0);
}

#[test]
fn zero_budget_changes_nothing() {
    let mut table = LockTable::default();
    let _ = table
        .try_acquire("k", "a", Duration(10), Instant(0))
        .unwrap();
    let before = table.snapshot(Instant(0));
    assert!(table.handle_timeout_bounded(Instant(50), 0));
    assert_eq!(table.clock(), Instant(0));
    assert_eq!(table.snapshot(Instant(0)), before);
    assert_eq!(table.pending_events(), 0);
}

#[test]
fn the_fence_floor_only_raises() {
    let mut table = LockTable::default();
    table.raise_fence_floor(Fence(1_000));
    let AcquireOutcome::Acquired(g) = table
        .try_acquire("k", "a", Duration(10), Instant(0))
        .unwrap()
    else {
        panic!("free key")
    };
    assert_eq!(g.fence, Fence(1_001));
    table.raise_fence_floor(Fence(5));
    table.release("k", "a", g.fence, Instant(1)).unwrap();
    let AcquireOutcome::Acquired(g) = table
        .try_acquire("k", "b", Duration(10), Instant(2))
        .unwrap()
    else {
        panic!("free key")
    };
    assert_eq!(
        g.fence,
        Fence(1_002),
        "a lower floor never moves the counter back"
    );
    // Past the counter's maximum it is clamped, never wrapped.
    table.raise_fence_floor(Fence(u64::MAX));
    assert_eq!(table.stats(Instant(2)).last_fence, Fence(1 << 63));
}

#[test]
fn the_fence_floor_survives_a_snapshot() {
    let mut table = LockTable::default();
    table.raise_fence_floor(Fence(41));
    let bytes = table.snapshot(Instant(0));
    let mut restored = LockTable::from_snapshot(lock_core::Limits::default(), 0, &bytes).unwrap();
    let AcquireOutcome::Acquired(g) = restored
        .try_acquire("k", "a", Duration(10), Instant(0))
        .unwrap()
    else {
        panic!("free key")
    };
    assert_eq!(g.fence, Fence(42));
}

#[test]
fn cancelling_every_wait_leaves_the_leases_and_hands_off_to_nobody() {
    let mut table = LockTable::default();
    let _ = table
        .try_acquire("k", "holder", Duration(100), Instant(0))
        .unwrap();
    let _ = table
        .try_acquire("j", "other", Duration(50), Instant(0))
        .unwrap();
    for w in ["w1", "w2"] {
        assert!(matches!(
            table
                .acquire("k", w, Duration(10), Instant(1_000), Instant(1))
                .unwrap(),
            AcquireOutcome::Queued { .. }
        ));
    }
    let _ = table
        .acquire("j", "w3", Duration(10), Instant(30), Instant(1))
        .unwrap();
    assert_eq!(table.cancel_all_waits(Instant(5)), 3);
    let stats = table.stats(Instant(5));
    assert_eq!(
        (stats.live_leases, stats.waiters, stats.cancelled),
        (2, 0, 3)
    );
    // The waiter's wait deadline (30) is no wake-up any more; the lease deadline (50) is.
    assert_eq!(table.next_wakeup(), Some(Instant(50)));
    table.release("k", "holder", Fence(1), Instant(6)).unwrap();
    assert!(
        table
            .drain_events()
            .all(|e| !matches!(e.kind, EventKind::Granted { .. })),
        "nobody was waiting any more"
    );
    assert!(table.inspect("k", Instant(6)).unwrap().is_none());
    assert_eq!(table.cancel_all_waits(Instant(7)), 0);
}

#[test]
fn the_latest_instant_covers_the_clock_deadlines_and_wait_deadlines() {
    let mut table = LockTable::default();
    assert_eq!(table.latest_instant(), Instant(0));
    let _ = table
        .try_acquire("k", "a", Duration(100), Instant(10))
        .unwrap();
    assert_eq!(table.latest_instant(), Instant(110));
    let _ = table
        .acquire("k", "w", Duration(5), Instant(5_000), Instant(20))
        .unwrap();
    assert_eq!(table.latest_instant(), Instant(5_000));
    table.handle_timeout(Instant(7_000));
    assert_eq!(
        table.latest_instant(),
        Instant(7_000),
        "everything ended: the clock"
    );
}
