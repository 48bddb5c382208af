//! The compare-and-set's clock test, called directly on every store: a write whose decision
//! assumed a later time than the store's clock (`not_before` ahead of it) changes nothing and
//! takes no token, however far ahead (up to `u64::MAX` milliseconds, past every store's own
//! time type); a write whose instant the clock has reached is done. The store's clock is the
//! server's: these run in real time, with margins of an hour.
mod common;

use lock_core::{Fence, Instant};
use lock_store::{store, store::Read, store::Store, store::Write, store::Written};

/// An hour, in milliseconds: far more than any clock step between two calls of a test.
const HOUR: u64 = 3_600_000;

/// `bytes` written over the record of version `expected` (0: none) as version `version`; the
/// record replaced holds what this test wrote at version `expected`.
fn write(
    version: u64,
    expected: u64,
    bytes: Option<&[u8]>,
    fresh_fences: usize,
    not_before: Instant,
) -> Write<'_> {
    Write {
        expected,
        replaces: match expected {
            1 => b"first",
            2 => b"second",
            _ => b"",
        },
        version,
        bytes,
        fresh_fences,
        not_before: Some(not_before),
        forget_at: None,
        holds_for: lock_core::Duration(0),
    }
}

/// The record `read` holds: its version and bytes (`None`: no record).
fn record(read: Read) -> Option<(u64, Vec<u8>)> {
    read.record.map(|r| (r.version, r.bytes))
}

/// The record `key` holds now.
fn stored(store: &mut dyn Store, key: &str) -> Option<(u64, Vec<u8>)> {
    record(store.read(key).unwrap())
}

/// Every `not_before` the store's clock has not reached, from `now`.
fn ahead(now: Instant) -> [Instant; 3] {
    [
        Instant(now.0 + HOUR),
        // Past the year 9999 (PostgreSQL's `not_before` is a `timestamptz`).
        Instant(253_402_300_800_000),
        Instant(u64::MAX),
    ]
}

/// Asserts that `w` on `key` is refused as a conflict and changes nothing: the record, the
/// namespace's last token.
fn refused(store: &mut dyn Store, label: &str, key: &str, w: &Write<'_>) {
    let before = stored(store, key);
    let last = store.last_fence().unwrap();
    match store.write(key, w).unwrap() {
        Written::Conflict(read) => assert_eq!(
            record(read),
            before,
            "{label}: the conflict answers the record as it is"
        ),
        other => panic!("{label}: {w:?} was {other:?}"),
    }
    assert_eq!(
        stored(store, key),
        before,
        "{label}: {w:?} changed the record"
    );
    assert_eq!(
        store.last_fence().unwrap(),
        last,
        "{label}: {w:?} took a token"
    );
}

#[test]
fn a_write_ahead_of_the_stores_clock_changes_nothing() {
    common::each_store("casclock", |label, open| {
        ahead_changes_nothing(label, open().as_mut())
    });
    let mut memory = store::open("memory:", "casclock", store::DEFAULT_BOUND).unwrap();
    ahead_changes_nothing("memory", memory.as_mut());
}

/// The test on one store, in a namespace of its own.
fn ahead_changes_nothing(label: &str, store: &mut dyn Store) {
    let key = "nightly-report";
    let now = store.read(key).unwrap().now;

    // Inserting: refused while ahead, done once reached.
    for at in ahead(now) {
        refused(store, label, key, &write(1, 0, Some(b"first"), 1, at));
    }
    let first = match store
        .write(key, &write(1, 0, Some(b"first"), 1, now))
        .unwrap()
    {
        Written::Done { fences } => fences,
        other => panic!("{label}: {other:?}"),
    };
    assert_eq!(first.len(), 1, "{label}");

    // Replacing.
    let now = store.read(key).unwrap().now;
    for at in ahead(now) {
        refused(store, label, key, &write(2, 1, Some(b"second"), 2, at));
    }
    match store
        .write(key, &write(2, 1, Some(b"second"), 2, now))
        .unwrap()
    {
        Written::Done { fences } => {
            assert_eq!(fences.len(), 2, "{label}");
            assert!(
                fences[0] > first[0] && fences[1] > fences[0],
                "{label}: {fences:?}"
            );
        }
        other => panic!("{label}: {other:?}"),
    }
    assert_eq!(stored(store, key), Some((2, b"second".to_vec())), "{label}");

    // Deleting.
    let now = store.read(key).unwrap().now;
    for at in ahead(now) {
        refused(store, label, key, &write(3, 2, None, 0, at));
    }
    assert_eq!(
        store.write(key, &write(3, 2, None, 0, now)).unwrap(),
        Written::Done { fences: Vec::new() },
        "{label}"
    );
    assert_eq!(stored(store, key), None, "{label}");
    assert!(store.last_fence().unwrap() >= Fence(3), "{label}");
}

#[test]
fn a_write_over_other_bytes_at_the_same_version_changes_nothing() {
    common::each_store("casbytes", |label, open| {
        other_bytes_change_nothing(label, open().as_mut())
    });
    let mut memory = store::open("memory:", "casbytes", store::DEFAULT_BOUND).unwrap();
    other_bytes_change_nothing("memory", memory.as_mut());
}

/// A record damaged in place keeps its version: a writer that remembers the record as it was
/// must be refused (a conflict that answers the damaged record), take no token, and change
/// nothing, whether it replaces the record (with no token, one, several) or deletes it.
fn other_bytes_change_nothing(label: &str, store: &mut dyn Store) {
    let key = "nightly-report";
    let now = store.read(key).unwrap().now;
    assert!(matches!(
        store
            .write(key, &write(1, 0, Some(b"first"), 1, now))
            .unwrap(),
        Written::Done { .. }
    ));
    for fresh in [0, 1, 3] {
        let other = Write {
            replaces: b"firsT",
            ..write(5, 1, Some(b"fifth"), fresh, now)
        };
        refused(store, label, key, &other);
        let shorter = Write {
            replaces: b"firs",
            ..other
        };
        refused(store, label, key, &shorter);
    }
    let delete = Write {
        replaces: b"",
        ..write(5, 1, None, 0, now)
    };
    refused(store, label, key, &delete);
    // The bytes as they are: done.
    assert!(matches!(
        store
            .write(key, &write(2, 1, Some(b"second"), 1, now))
            .unwrap(),
        Written::Done { .. }
    ));
    assert_eq!(stored(store, key), Some((2, b"second".to_vec())), "{label}");
}
