//! Format versions of key records and snapshots: every key and table is written in version 3,
//! which keeps each lease's grant instant; versions 1 and 2 (written before grant instants were
//! kept) are still read, their leases with no grant instant, and keep working; a newer version is
//! refused by name without being taken for a fresh key.

use lock_core::record::RECORD_VERSION;
use lock_core::snapshot::VERSION as SNAPSHOT_VERSION;
use lock_core::{
    crc32, AcquireOptions, Corruption, Duration, Fence, Instant, KeyRecord, Limits, LockError,
    LockTable, Mode, ReleaseOutcome, Request, Response,
};

fn version(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[8], bytes[9]])
}

/// A record after `requests`, each write allocating the next fences from 1.
fn record_after(requests: &[Request<'_>]) -> (KeyRecord, Vec<Fence>) {
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
    (record, fresh)
}

/// The grant instant of each lease of the record's key, in grant order.
fn grants(record: &KeyRecord) -> Vec<(String, Option<Instant>)> {
    (record.state().leases())
        .map(|l| (l.owner().to_owned(), l.granted_at()))
        .collect()
}

/// a's extension (fence 1, TTL 100) at `now`.
fn extend_a(now: u64) -> Request<'static> {
    Request::Extend {
        key: "k",
        owner: "a",
        fence: Fence(1),
        ttl: Duration(100),
        now: Instant(now),
    }
}

/// a's release (fence 1) at `now`.
fn release_a(now: u64) -> Request<'static> {
    Request::Release {
        key: "k",
        owner: "a",
        fence: Fence(1),
        now: Instant(now),
    }
}

fn try_acquire(owner: &str, now: u64) -> Request<'_> {
    Request::TryAcquire {
        key: "k",
        owner,
        ttl: Duration(100),
        now: Instant(now),
    }
}

/// Bytes in the documented layout, framed: magic, version, body length, body, CRC-32.
struct Frame(Vec<u8>);

impl Frame {
    fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(self, s: &str) -> Self {
        let mut f = self.u32(s.len() as u32);
        f.0.extend_from_slice(s.as_bytes());
        f
    }
    fn framed(self, magic: &[u8; 8], version: u16) -> Vec<u8> {
        let mut out = magic.to_vec();
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&(self.0.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.0);
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

/// A version-2 lease of "k" (shared, metadata "m", no minimum hold, no lock-delay), as the
/// version-2 layout of `key_codec` puts it.
fn v2_shared_lease(f: Frame, owner: &str, fence: u64, deadline: u64) -> Frame {
    f.str(owner)
        .u64(fence)
        .u64(deadline)
        .u8(1) // shared
        .u8(0) // live
        .str("m")
        .u8(0) // no minimum hold
        .u64(0) // no lock-delay
}

#[test]
fn every_record_is_written_in_version_3_with_each_leases_grant_instant() {
    let limits = Limits::default();
    // A plain acquire: granted at its call.
    let (record, fresh) = record_after(&[try_acquire("a", 5)]);
    let bytes = record.encode();
    assert_eq!(version(&bytes), 3);
    assert_eq!(RECORD_VERSION, 3);
    let read = KeyRecord::decode(&bytes, &fresh, &limits).unwrap();
    assert_eq!(grants(&read), vec![("a".into(), Some(Instant(5)))]);
    assert_eq!(read, record);

    // An extension keeps it; a hand-off grants the waiter at the release's instant.
    let wait = Request::Acquire {
        key: "k",
        owner: "b",
        ttl: Duration(100),
        wait_deadline: Instant(1_000),
        now: Instant(10),
    };
    let extend = extend_a(30);
    let release = release_a(40);
    let (extended, _) = record_after(&[try_acquire("a", 5), wait, extend]);
    assert_eq!(grants(&extended), vec![("a".into(), Some(Instant(5)))]);
    let (handed, fresh) = record_after(&[try_acquire("a", 5), wait, release]);
    let read = KeyRecord::decode(&handed.encode(), &fresh, &limits).unwrap();
    assert_eq!(grants(&read), vec![("b".into(), Some(Instant(40)))]);

    // A steal grants at its call; a shared holder beside another keeps its own.
    let steal = Request::Steal {
        key: "k",
        owner: "c",
        ttl: Duration(100),
        options: AcquireOptions::default(),
        now: Instant(50),
    };
    let (stolen, fresh) = record_after(&[try_acquire("a", 5), steal]);
    let read = KeyRecord::decode(&stolen.encode(), &fresh, &limits).unwrap();
    assert_eq!(grants(&read), vec![("c".into(), Some(Instant(50)))]);
    let shared = |owner, now| Request::AcquireWith {
        key: "k",
        owner,
        ttl: Duration(100),
        wait_deadline: Instant::ZERO,
        options: AcquireOptions {
            mode: Mode::Shared,
            ..AcquireOptions::default()
        },
        now: Instant(now),
    };
    let (readers, _) = record_after(&[shared("a", 1), shared("b", 7)]);
    let bytes = readers.encode();
    let read = KeyRecord::decode(&bytes, &[Fence(1), Fence(2)], &limits);
    assert_eq!(version(&bytes), 3);
    assert!(read.is_ok(), "{read:?}");
    assert_eq!(
        grants(&readers),
        vec![
            ("a".into(), Some(Instant(1))),
            ("b".into(), Some(Instant(7)))
        ]
    );
}

#[test]
fn every_snapshot_is_written_in_version_3_and_restores_each_grant_instant() {
    let mut table = LockTable::default();
    let _ = table
        .try_acquire("k", "a", Duration(100), Instant(3))
        .unwrap();
    let _ = table
        .acquire("k", "b", Duration(100), Instant(1_000), Instant(4))
        .unwrap();
    let _ = table.release("k", "a", Fence(1), Instant(20)).unwrap();
    let bytes = table.snapshot(Instant(25));
    assert_eq!(version(&bytes), 3);
    assert_eq!(SNAPSHOT_VERSION, 3);
    let mut restored = LockTable::from_snapshot(Limits::default(), 0, &bytes).unwrap();
    let info = restored.inspect("k", Instant(25)).unwrap().unwrap();
    assert_eq!(info.holders[0].owner, "b");
    assert_eq!(info.holders[0].granted_at, Some(Instant(20)));
    assert_eq!(restored.snapshot(Instant(25)), bytes);
}

/// Records written before grant instants were kept: version 1 (a plain key) and version 2 (the
/// lock kinds), each laid out by hand from the documented format.
#[test]
fn records_of_versions_1_and_2_are_read_without_a_grant_instant_and_keep_working() {
    let limits = Limits::default();
    let v1 = Frame(Vec::new())
        .u64(10) // clock
        .u8(1)
        .str("a")
        .u64(1)
        .u64(100) // lease a, fence 1, deadline 100
        .u32(1)
        .str("b")
        .u64(50)
        .u64(900) // waiter b, ttl 50, waits until 900
        .u32(0) // no expired lease
        .framed(b"LOCKKREC", 1);
    let mut record = KeyRecord::decode(&v1, &[], &limits).unwrap();
    assert_eq!(grants(&record), vec![("a".into(), None)]);
    let info = record.state().info().unwrap();
    assert_eq!(info.holders[0].granted_at, None);
    // Written back in version 3 with no grant instant, and read again the same.
    let again = KeyRecord::decode(&record.encode(), &[], &limits).unwrap();
    assert_eq!(version(&record.encode()), 3);
    assert_eq!(again, record);
    // The old lease still works: its extension keeps "not known", its release hands the key
    // to b, whose lease has the release's instant.
    let extend = extend_a(20);
    let step = record.handle(extend, &limits);
    assert!(
        matches!(step.reply, Response::Extend(Ok(_))),
        "{:?}",
        step.reply
    );
    assert_eq!(grants(&record), vec![("a".into(), None)]);
    let release = release_a(30);
    let mut step = record.handle(release, &limits);
    step.settle(&[Fence(2)]);
    record.settle(&[Fence(2)]);
    assert_eq!(step.reply, Response::Release(Ok(ReleaseOutcome::Released)));
    assert_eq!(grants(&record), vec![("b".into(), Some(Instant(30)))]);

    let v2 = v2_shared_lease(
        v2_shared_lease(Frame(Vec::new()).u64(10).u32(0).u32(2), "a", 1, 100),
        "b",
        2,
        120,
    )
    .u32(0) // no waiter
    .u32(0) // no expired lease
    .framed(b"LOCKKREC", 2);
    let record = KeyRecord::decode(&v2, &[], &limits).unwrap();
    assert_eq!(
        grants(&record),
        vec![("a".into(), None), ("b".into(), None)]
    );
    let info = record.state().info().unwrap();
    assert_eq!(
        (info.holders[1].mode, info.holders[1].metadata.as_str()),
        (Mode::Shared, "m")
    );
    let again = KeyRecord::decode(&record.encode(), &[], &limits).unwrap();
    assert_eq!(again, record);
}

/// Snapshots written before grant instants were kept, versions 1 and 2, restore with no grant
/// instant and snapshot again in version 3.
#[test]
fn snapshots_of_versions_1_and_2_restore_without_a_grant_instant() {
    let head = |counters: usize| {
        let mut f = Frame(Vec::new()).u64(10).u64(2); // clock, last fence
        for _ in 0..counters {
            f = f.u64(0);
        }
        f
    };
    let v1 = head(10)
        .u32(1)
        .str("k")
        .str("a")
        .u64(1)
        .u64(100)
        .u32(0)
        .u32(0)
        .framed(b"LOCKSNAP", 1);
    let v2 = v2_shared_lease(
        v2_shared_lease(head(11).u32(1).str("k").u32(0).u32(2), "a", 1, 100),
        "b",
        2,
        120,
    )
    .u32(0)
    .u32(0)
    .framed(b"LOCKSNAP", 2);
    for (bytes, holders) in [(v1, 1), (v2, 2)] {
        let mut table = LockTable::from_snapshot(Limits::default(), 0, &bytes).unwrap();
        let info = table.inspect("k", Instant(10)).unwrap().unwrap();
        assert_eq!(info.holders.len(), holders);
        assert!(info.holders.iter().all(|h| h.granted_at.is_none()));
        let again = table.snapshot(Instant(10));
        assert_eq!(version(&again), 3);
        let mut restored = LockTable::from_snapshot(Limits::default(), 0, &again).unwrap();
        assert_eq!(restored.inspect("k", Instant(10)).unwrap(), Some(info));
    }
}

#[test]
fn a_newer_record_is_refused_by_name_and_never_taken_for_a_fresh_key() {
    let (record, fresh) = record_after(&[try_acquire("a", 0)]);
    let mut bytes = record.encode();
    bytes[8..10].copy_from_slice(&4u16.to_le_bytes());
    let crc_at = bytes.len() - 4;
    let crc = crc32(&bytes[..crc_at]);
    bytes[crc_at..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        KeyRecord::decode(&bytes, &fresh, &Limits::default()),
        Err(LockError::SnapshotVersion {
            found: 4,
            supported: 3
        })
    );
}

/// A grant instant after the clock the record was written at is a broken record, not a lease.
#[test]
fn a_lease_granted_after_its_records_clock_is_corrupt() {
    let (record, fresh) = record_after(&[try_acquire("a", 5)]);
    let mut bytes = record.encode();
    // The grant instant is the lease's last 8 bytes: before the waiter count and the expired
    // count (both 0) and the checksum.
    let at = bytes.len() - 4 - 4 - 4 - 8;
    assert_eq!(bytes[at..at + 8], 5u64.to_le_bytes());
    bytes[at..at + 8].copy_from_slice(&6u64.to_le_bytes());
    let crc_at = bytes.len() - 4;
    let crc = crc32(&bytes[..crc_at]);
    bytes[crc_at..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        KeyRecord::decode(&bytes, &fresh, &Limits::default()),
        Err(LockError::SnapshotCorrupt {
            reason: Corruption::GrantedAfterClock
        })
    );
}
