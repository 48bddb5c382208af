//! Format versions of key records and snapshots, for rolling upgrades: what uses nothing of the
//! lock kinds is written in version 1 (so a build that only reads version 1 keeps working on it),
//! what does is written in version 2, both are read, and a newer version is refused by name
//! without being taken for a fresh key.

use lock_core::{
    AcquireOptions, Duration, Fence, Instant, KeyRecord, Limits, LockError, LockTable, Mode,
    Request,
};

fn version(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[8], bytes[9]])
}

fn record_after(requests: &[Request<'_>]) -> (Vec<u8>, Vec<Fence>) {
    let limits = Limits::default();
    let mut record = KeyRecord::new();
    let mut fresh = Vec::new();
    for request in requests {
        let mut step = record.handle(*request, &limits);
        let mine: Vec<Fence> = (0..step.fresh_fences)
            .map(|i| Fence(fresh.len() as u64 + i as u64 + 1))
            .collect();
        step.settle(&mine);
        record.settle(&mine);
        fresh = mine;
    }
    (record.encode(), fresh)
}

fn shared(now: u64) -> Request<'static> {
    Request::AcquireWith {
        key: "k",
        owner: "a",
        ttl: Duration(100),
        wait_deadline: Instant::ZERO,
        options: AcquireOptions {
            mode: Mode::Shared,
            ..AcquireOptions::default()
        },
        now: Instant(now),
    }
}

#[test]
fn plain_records_stay_in_version_1_and_the_kinds_use_version_2() {
    let plain = Request::TryAcquire {
        key: "k",
        owner: "a",
        ttl: Duration(100),
        now: Instant(0),
    };
    let (bytes, _) = record_after(&[plain]);
    assert_eq!(version(&bytes), 1);
    // A plain acquire with options that are all defaults is still a plain record.
    let defaults = Request::AcquireWith {
        key: "k",
        owner: "a",
        ttl: Duration(100),
        wait_deadline: Instant::ZERO,
        options: AcquireOptions::default(),
        now: Instant(0),
    };
    assert_eq!(version(&record_after(&[defaults]).0), 1);
    let (bytes, fresh) = record_after(&[shared(0)]);
    assert_eq!(version(&bytes), 2);
    let read = KeyRecord::decode(&bytes, &fresh, &Limits::default()).unwrap();
    assert_eq!(read.state().lease().unwrap().mode(), Mode::Shared);
    // A stolen lease remembered by the record needs version 2 (its memory says "stolen").
    let steal = Request::Steal {
        key: "k",
        owner: "b",
        ttl: Duration(100),
        options: AcquireOptions::default(),
        now: Instant(5),
    };
    assert_eq!(version(&record_after(&[plain, steal]).0), 2);
}

#[test]
fn a_newer_record_is_refused_by_name_and_never_taken_for_a_fresh_key() {
    let (mut bytes, fresh) = record_after(&[shared(0)]);
    bytes[8..10].copy_from_slice(&3u16.to_le_bytes());
    let crc_at = bytes.len() - 4;
    let crc = lock_core::crc32(&bytes[..crc_at]);
    bytes[crc_at..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        KeyRecord::decode(&bytes, &fresh, &Limits::default()),
        Err(LockError::SnapshotVersion {
            found: 3,
            supported: 2
        })
    );
}

#[test]
fn a_plain_table_snapshots_in_version_1_and_a_table_with_kinds_in_version_2() {
    let mut table = LockTable::default();
    let _ = table
        .try_acquire("k", "a", Duration(100), Instant(0))
        .unwrap();
    let bytes = table.snapshot(Instant(0));
    assert_eq!(version(&bytes), 1);
    let options = AcquireOptions {
        metadata: "who",
        ..AcquireOptions::default()
    };
    let _ = table
        .acquire_with("m", "a", Duration(100), Instant::ZERO, &options, Instant(0))
        .unwrap();
    let bytes = table.snapshot(Instant(0));
    assert_eq!(version(&bytes), 2);
    let restored = LockTable::from_snapshot(Limits::default(), 0, &bytes).unwrap();
    let mut again = restored.clone();
    assert_eq!(again.snapshot(Instant(0)), bytes);
    // A steal counted in the stats needs version 2 too, even once nothing else does.
    let mut table = LockTable::default();
    let _ = table
        .steal(
            "k",
            "a",
            Duration(10),
            &AcquireOptions::default(),
            Instant(0),
        )
        .unwrap();
    let _ = table
        .steal(
            "k",
            "b",
            Duration(10),
            &AcquireOptions::default(),
            Instant(1),
        )
        .unwrap();
    table.handle_timeout(Instant(100));
    let _ = table.drain_events().count();
    let bytes = table.snapshot(Instant(2_000_000));
    assert_eq!(version(&bytes), 2);
    let mut restored = LockTable::from_snapshot(Limits::default(), 0, &bytes).unwrap();
    assert_eq!(restored.stats(Instant(2_000_000)).stolen, 1);
}
