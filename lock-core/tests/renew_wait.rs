//! `renew_wait`: a waiter keeps its place alive by pushing its wait deadline later; one that
//! stops renewing leaves the queue at its last deadline and is never handed the key.

use lock_core::{AcquireOutcome, Duration, EventKind, Instant, LockError, LockTable};

fn table_with_a_waiter() -> LockTable {
    let mut table = LockTable::default();
    let _ = table
        .try_acquire("job", "a", Duration(100), Instant(0))
        .unwrap();
    assert_eq!(
        table.acquire("job", "b", Duration(50), Instant(10), Instant(1)),
        Ok(AcquireOutcome::Queued { position: 1 })
    );
    table
}

#[test]
fn a_renewed_waiter_keeps_its_place_past_its_first_deadline() {
    let mut table = table_with_a_waiter();
    assert_eq!(
        table.renew_wait("job", "b", Instant(30), Instant(5)),
        Ok(AcquireOutcome::AlreadyWaiting { position: 1 })
    );
    // Never earlier.
    assert_eq!(
        table.renew_wait("job", "b", Instant(20), Instant(6)),
        Ok(AcquireOutcome::AlreadyWaiting { position: 1 })
    );
    assert_eq!(table.next_wakeup(), Some(Instant(30)));
    table.handle_timeout(Instant(29));
    assert_eq!(table.drain_events().count(), 0);
    let info = table.inspect("job", Instant(29)).unwrap().unwrap();
    assert_eq!(info.waiters[0].wait_deadline, Instant(30));
    // It stops renewing (it died): it leaves at 30, and the holder's expiry frees the key.
    table.handle_timeout(Instant(100));
    let kinds: Vec<_> = table.drain_events().map(|e| (e.at, e.kind)).collect();
    assert!(matches!(&kinds[0], (Instant(30), EventKind::WaitTimedOut { owner }) if owner == "b"));
    assert!(matches!(
        &kinds[1],
        (Instant(100), EventKind::Expired { .. })
    ));
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert_eq!(table.inspect("job", Instant(100)), Ok(None));
}

#[test]
fn a_renewal_after_the_hand_off_answers_the_grant() {
    let mut table = table_with_a_waiter();
    let info = table.inspect("job", Instant(2)).unwrap().unwrap();
    let held = info.holder().unwrap().clone();
    table.release("job", "a", held.fence, Instant(3)).unwrap();
    match table.renew_wait("job", "b", Instant(40), Instant(4)) {
        Ok(AcquireOutcome::AlreadyHeld(grant)) => assert_eq!(grant.deadline, Instant(53)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_renewal_by_someone_not_waiting_is_refused_and_changes_nothing() {
    let mut table = table_with_a_waiter();
    let before = table.snapshot(Instant(2));
    assert_eq!(
        table.renew_wait("job", "c", Instant(40), Instant(2)),
        Err(LockError::NotWaiting)
    );
    assert_eq!(
        table.renew_wait("other", "b", Instant(40), Instant(2)),
        Err(LockError::NotWaiting)
    );
    assert_eq!(table.snapshot(Instant(2)), before);
    // Too late: its wait already timed out.
    assert_eq!(
        table.renew_wait("job", "b", Instant(40), Instant(10)),
        Err(LockError::NotWaiting)
    );
    assert!(matches!(
        table.renew_wait("", "b", Instant(40), Instant(10)),
        Err(LockError::KeyEmpty)
    ));
}

/// Over a store, a record is written back only when a call changed it: a renewal that moves the
/// deadline later changes the record; one that would move it earlier (kept as it was), or by an
/// owner not waiting, does not.
#[test]
fn only_a_later_deadline_changes_the_record() {
    use lock_core::{KeyRecord, Limits, Request};
    let limits = Limits::default();
    let mut record = KeyRecord::new();
    let step = record.handle(
        Request::TryAcquire {
            key: "job",
            owner: "a",
            ttl: Duration(100),
            now: Instant(0),
        },
        &limits,
    );
    assert!(step.changed);
    let step = record.handle(
        Request::Acquire {
            key: "job",
            owner: "b",
            ttl: Duration(50),
            wait_deadline: Instant(10),
            now: Instant(1),
        },
        &limits,
    );
    assert!(step.changed);
    let renew = |record: &mut KeyRecord, owner: &str, until: u64, now: u64| {
        record
            .handle(
                Request::RenewWait {
                    key: "job",
                    owner,
                    wait_deadline: Instant(until),
                    now: Instant(now),
                },
                &limits,
            )
            .changed
    };
    assert!(renew(&mut record, "b", 30, 5), "a later deadline");
    assert!(!renew(&mut record, "b", 30, 6), "the same deadline");
    assert!(!renew(&mut record, "b", 20, 7), "an earlier deadline");
    assert!(!renew(&mut record, "c", 90, 8), "not waiting");
    assert!(renew(&mut record, "b", 31, 9), "later again");
}
