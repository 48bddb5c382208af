//! Limits outside their ranges are refused by name, and every error message names its limit.

use lock_core::{Duration, LimitName, Limits, LockError, LockTable};

/// A limit's name and a way to put it out of range.
type Breakage = (&'static str, fn(&mut Limits));

#[test]
fn each_limit_out_of_range_is_refused_by_name() {
    let cases: [Breakage; 9] = [
        ("max_key_bytes", |l| l.max_key_bytes = 0),
        ("max_key_bytes", |l| {
            l.max_key_bytes = lock_core::MAX_NAME_BYTES + 1
        }),
        ("max_owner_bytes", |l| l.max_owner_bytes = 0),
        ("max_ttl", |l| l.max_ttl = Duration(0)),
        ("max_keys", |l| l.max_keys = 0),
        ("max_keys", |l| l.max_keys = usize::MAX),
        ("max_waiters_per_key", |l| l.max_waiters_per_key = 0),
        ("max_waiters", |l| l.max_waiters = 0),
        ("max_pending_events", |l| l.max_pending_events = 0),
    ];
    for (name, break_it) in cases {
        let mut limits = Limits::default();
        break_it(&mut limits);
        let err = LockTable::new(limits.clone()).unwrap_err();
        assert_eq!(
            err,
            LockError::InvalidLimits {
                limit: LimitName::from_name(name).unwrap()
            }
        );
        assert!(err.to_string().contains(name), "{err}");
        assert_eq!(LockTable::from_snapshot(limits, 0, &[]).unwrap_err(), err);
    }
}

#[test]
fn zero_expiry_memory_is_allowed() {
    let limits = Limits {
        expired_retention: Duration(0),
        max_expired_records: 0,
        ..Limits::default()
    };
    assert!(LockTable::new(limits).is_ok());
}

#[test]
fn messages_name_the_limit_they_enforce() {
    let cases = [
        (
            LockError::KeyTooLong { len: 300, max: 256 },
            "max_key_bytes",
        ),
        (
            LockError::OwnerTooLong { len: 300, max: 256 },
            "max_owner_bytes",
        ),
        (
            LockError::TtlTooLong {
                ttl: Duration(5),
                max: Duration(4),
            },
            "max_ttl",
        ),
        (LockError::TableFull { max_keys: 3 }, "max_keys"),
        (
            LockError::QueueFull {
                max_waiters_per_key: 3,
            },
            "max_waiters_per_key",
        ),
        (LockError::TooManyWaiters { max_waiters: 3 }, "max_waiters"),
        (
            LockError::SnapshotExceedsLimits {
                limit: LimitName::MaxKeys,
            },
            "max_keys",
        ),
    ];
    for (err, limit) in cases {
        assert!(err.to_string().contains(limit), "{err}");
    }
}
