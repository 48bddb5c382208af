//! `KeyRecord` against `LockTable`: random operation sequences (time sometimes going backwards)
//! run on one table and on per-key records kept as bytes, the way a shared store keeps them.
//! Every record is decoded from its stored bytes before each step and written back only when the
//! step says it changed; fresh fences come from one namespace counter, allocated at the write,
//! and reach the record only through `decode`'s fresh-fence list. Replies and events must be
//! identical, and a step that says "unchanged" must really leave the record unchanged.
//!
//! The one thing the records cannot do by themselves is the table's single timer: the table
//! applies every key's due changes before any call. The harness plays that timer, as a store's
//! waiters do in production, by sweeping due keys in the table's order (deadline, then fence).

use std::collections::BTreeMap;

use lock_core::{
    AcquireOptions, Call, Duration, Event, Fence, Instant, KeyEvent, KeyRecord, Limits, LockTable,
    Mode, Reply, Request, Response,
};
use proptest::prelude::*;

const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const OWNERS: [&str; 3] = ["o0", "o1", "o2"];

std::thread_local! {
    /// The table's lock-delay for the running case (0 or a few ms: both paths are exercised).
    static TABLE_DELAY: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn limits() -> Limits {
    Limits {
        lock_delay: Duration(TABLE_DELAY.with(std::cell::Cell::get)),
        max_waiters_per_key: 2,
        max_holders_per_key: 3,
        expired_retention: Duration(300),
        ..Limits::default()
    }
}

/// Stored bytes per key, the fences allocated at their last write, and the namespace counter.
#[derive(Default)]
struct Store {
    records: BTreeMap<String, (Vec<u8>, Vec<Fence>)>,
    counter: u64,
    clock: Instant,
    events: Vec<Event>,
}

impl Store {
    fn load(&self, key: &str) -> KeyRecord {
        match self.records.get(key) {
            Some((bytes, fresh)) => KeyRecord::decode(bytes, fresh, &limits()).expect("decodes"),
            None => KeyRecord::new(),
        }
    }

    /// One transition of `key`: read, decide, write back if changed (allocating its fences).
    fn run(&mut self, key: &str, request: Request<'_>) -> Response {
        let mut record = self.load(key);
        let before = record.clone();
        let mut step = record.handle(request, &limits());
        if step.changed {
            self.write(key, &record, step.fresh_fences, |fresh| step.settle(fresh));
        } else {
            assert_eq!(step.fresh_fences, 0, "an unchanged record allocated fences");
            assert!(step.events.is_empty(), "events from an unchanged record");
            assert_eq!(
                record.state(),
                before.state(),
                "unchanged step changed the state"
            );
        }
        self.absorb(key, step.events);
        step.reply
    }

    fn write(&mut self, key: &str, record: &KeyRecord, n: usize, settle: impl FnOnce(&[Fence])) {
        let fresh: Vec<Fence> = (1..=n as u64).map(|i| Fence(self.counter + i)).collect();
        self.counter += n as u64;
        settle(&fresh);
        if record.is_empty() {
            self.records.remove(key);
        } else {
            self.records
                .insert(key.to_owned(), (record.encode(), fresh));
        }
    }

    fn absorb(&mut self, key: &str, events: Vec<KeyEvent>) {
        self.events.extend(events.into_iter().map(|e| Event {
            key: key.to_owned(),
            at: e.at,
            kind: e.kind,
        }));
    }

    /// The table's timer: every due key, in (deadline, lease fence) order, at its own instant.
    fn sweep(&mut self, now: Instant) {
        loop {
            let due = (self.records.keys())
                .filter_map(|k| {
                    let r = self.load(k);
                    let at = r.next_deadline().filter(|&at| at <= now)?;
                    Some((at, r.state().lease().map(|l| l.fence()), k.clone()))
                })
                .min();
            let Some((at, _, key)) = due else { break };
            let _ = self.run(&key, Request::HandleTimeout { now: at });
        }
    }

    fn call(&mut self, request: Request<'_>) -> Response {
        self.clock = self.clock.max(request.now());
        let now = self.clock;
        self.sweep(now);
        match request.key() {
            None => Response::Timeout,
            Some(key) => self.run(key, request.at(now)),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Try(usize, usize, u64),
    Acquire(usize, usize, u64, u64),
    Release(usize, usize, u64),
    Extend(usize, usize, u64, u64),
    Cancel(usize, usize),
    Renew(usize, usize, u64),
    Timeout,
    Inspect(usize),
    /// An acquire with options: key, owner, ttl, wait, shared, permits, min hold (per mille of
    /// the ttl), lock-delay, metadata, wait kept alive for (0: the whole wait).
    With(usize, usize, u64, u64, bool, u32, u64, u64, bool, u64),
    /// A steal: key, owner, ttl, lock-delay.
    Steal(usize, usize, u64, u64),
}

const METADATA: [&str; 2] = ["", "batch 7"];

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    let o = 0..OWNERS.len();
    prop_oneof![
        3 => (k.clone(), o.clone(), 1..200u64).prop_map(|(k, o, t)| Op::Try(k, o, t)),
        3 => (k.clone(), o.clone(), 1..200u64, 0..400u64).prop_map(|(k, o, t, w)| Op::Acquire(k, o, t, w)),
        3 => (k.clone(), o.clone(), 0..3u64).prop_map(|(k, o, b)| Op::Release(k, o, b)),
        2 => (k.clone(), o.clone(), 0..3u64, 1..200u64).prop_map(|(k, o, b, t)| Op::Extend(k, o, b, t)),
        1 => (k.clone(), o.clone()).prop_map(|(k, o)| Op::Cancel(k, o)),
        2 => (k.clone(), o, 0..400u64).prop_map(|(k, o, w)| Op::Renew(k, o, w)),
        2 => Just(Op::Timeout),
        1 => k.clone().prop_map(Op::Inspect),
        4 => (k.clone(), 0..OWNERS.len(), 1..200u64, 0..400u64, any::<bool>(),
              prop_oneof![3 => Just(0u32), 1 => Just(2u32)], 0..1000u64,
              prop_oneof![2 => Just(0u64), 1 => 1..100u64], any::<bool>(), prop_oneof![2 => Just(0u64), 1 => 1..60u64])
            .prop_map(|(k, o, t, w, s, p, m, d, md, a)| Op::With(k, o, t, w, s, p, m, d, md, a)),
        1 => (k, 0..OWNERS.len(), 1..200u64, prop_oneof![Just(0u64), 1..100u64])
            .prop_map(|(k, o, t, d)| Op::Steal(k, o, t, d)),
    ]
}

fn run(steps: Vec<(i64, Op)>) -> Result<(), TestCaseError> {
    let mut table = LockTable::new(limits()).unwrap();
    let mut store = Store::default();
    let mut now: i64 = 0;
    for (i, (dt, op)) in steps.into_iter().enumerate() {
        now = (now + dt).max(0);
        let t = Instant(now as u64);
        let last = Fence(table.stats(Instant::ZERO).last_fence.0);
        let fence = |back: u64| Fence(last.0.saturating_sub(back));
        let request = match op {
            Op::Try(k, o, ttl) => Request::TryAcquire {
                key: KEYS[k],
                owner: OWNERS[o],
                ttl: Duration(ttl),
                now: t,
            },
            Op::Acquire(k, o, ttl, wait) => Request::Acquire {
                key: KEYS[k],
                owner: OWNERS[o],
                ttl: Duration(ttl),
                wait_deadline: Instant(now as u64 + wait),
                now: t,
            },
            Op::Release(k, o, back) => Request::Release {
                key: KEYS[k],
                owner: OWNERS[o],
                fence: fence(back),
                now: t,
            },
            Op::Extend(k, o, back, ttl) => Request::Extend {
                key: KEYS[k],
                owner: OWNERS[o],
                fence: fence(back),
                ttl: Duration(ttl),
                now: t,
            },
            Op::Cancel(k, o) => Request::CancelWait {
                key: KEYS[k],
                owner: OWNERS[o],
                now: t,
            },
            Op::Renew(k, o, wait) => Request::RenewWait {
                key: KEYS[k],
                owner: OWNERS[o],
                wait_deadline: Instant(now as u64 + wait),
                now: t,
            },
            Op::Timeout => Request::HandleTimeout { now: t },
            Op::With(k, o, ttl, wait, shared, permits, min, delay, md, alive) => {
                Request::AcquireWith {
                    key: KEYS[k],
                    owner: OWNERS[o],
                    ttl: Duration(ttl),
                    wait_deadline: Instant(now as u64 + wait),
                    options: AcquireOptions {
                        mode: if shared {
                            Mode::Shared
                        } else {
                            Mode::Exclusive
                        },
                        permits,
                        min_hold: Duration(ttl * min / 1000),
                        lock_delay: Duration(delay),
                        metadata: METADATA[usize::from(md)],
                        wait_alive: Duration(alive),
                    },
                    now: t,
                }
            }
            Op::Steal(k, o, ttl, delay) => Request::Steal {
                key: KEYS[k],
                owner: OWNERS[o],
                ttl: Duration(ttl),
                options: AcquireOptions {
                    lock_delay: Duration(delay),
                    ..AcquireOptions::default()
                },
                now: t,
            },
            Op::Inspect(k) => {
                let expected = table.call(Call::Inspect {
                    key: KEYS[k],
                    now: t,
                });
                store.call(Request::HandleTimeout { now: t });
                let clock = store.clock;
                let mut record = store.load(KEYS[k]);
                let step = record.inspect(KEYS[k], clock, &limits());
                prop_assert!(!step.changed, "step {i}: swept record changed on inspect");
                prop_assert_eq!(Reply::Inspect(step.reply), expected, "step {}", i);
                compare_events(&mut table, &mut store, i)?;
                continue;
            }
        };
        let expected = table.handle(request);
        let got = store.call(request);
        prop_assert_eq!(got, expected, "step {}: {:?}", i, request);
        compare_events(&mut table, &mut store, i)?;
        for key in KEYS {
            holds_until_is_exact(&store.load(key), i)?;
        }
    }
    Ok(())
}

/// `holds_until` is exactly when the last lease the record holds now lets go of its place: at
/// that instant none of them is left (waiters may have been handed the key, with newer fences),
/// one instant before it one still is.
fn holds_until_is_exact(record: &KeyRecord, i: usize) -> Result<(), TestCaseError> {
    let held: Vec<Fence> = record.state().leases().map(|l| l.fence()).collect();
    let Some(until) = record.holds_until() else {
        prop_assert!(held.is_empty(), "step {}: leases but no holds_until", i);
        return Ok(());
    };
    let left_at = |at: Instant| {
        let mut after = record.clone();
        let _ = after.handle(Request::HandleTimeout { now: at }, &limits());
        let remaining: Vec<Fence> = after.state().leases().map(|l| l.fence()).collect();
        held.iter().filter(|f| remaining.contains(f)).count()
    };
    prop_assert_eq!(
        left_at(until),
        0,
        "step {}: a lease outlives holds_until",
        i
    );
    if until.0 > record.clock().0 {
        prop_assert!(
            left_at(Instant(until.0 - 1)) > 0,
            "step {}: holds_until is later than the last lease",
            i
        );
    }
    Ok(())
}

fn compare_events(table: &mut LockTable, store: &mut Store, i: usize) -> Result<(), TestCaseError> {
    let expected: Vec<Event> = table.drain_events().collect();
    let got = std::mem::take(&mut store.events);
    prop_assert_eq!(got, expected, "events after step {}", i);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn records_answer_as_the_table(steps in prop::collection::vec(
        (prop_oneof![6 => 0..120i64, 2 => Just(0i64), 1 => -80..0i64], op()), 1..60),
        delay in prop_oneof![Just(0u64), 1..40u64]) {
        TABLE_DELAY.with(|d| d.set(delay));
        run(steps)?;
    }
}

#[test]
fn provisional_fences_are_settled_by_decode_and_refused_without_them() {
    let limits = Limits::default();
    let mut record = KeyRecord::new();
    let acquire = |owner, now| Request::Acquire {
        key: "job",
        owner,
        ttl: Duration(100),
        wait_deadline: Instant(1_000),
        now: Instant(now),
    };
    let step = record.handle(acquire("a", 0), &limits);
    assert_eq!(step.fresh_fences, 1);
    let bytes = record.encode();
    // Without the store's fence the provisional one cannot be read back.
    assert!(matches!(
        KeyRecord::decode(&bytes, &[], &limits),
        Err(lock_core::LockError::SnapshotCorrupt { .. })
    ));
    let read = KeyRecord::decode(&bytes, &[Fence(41)], &limits).unwrap();
    assert_eq!(read.state().lease().unwrap().fence(), Fence(41));
    // Settling in memory gives the same record as decoding with the fences.
    record.settle(&[Fence(41)]);
    assert_eq!(record, read);
    // Corrupt bytes are an error, never a fresh key.
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x20;
        assert!(
            KeyRecord::decode(&bad, &[Fence(41)], &limits).is_err(),
            "byte {i}"
        );
    }
    assert!(KeyRecord::decode(&bytes[..bytes.len() - 1], &[Fence(41)], &limits).is_err());
}

/// A waiter whose place is kept alive by renewals keeps both its instants through a record and
/// a snapshot (the place's end and the end of the wait it asked for), and a record whose place
/// outlasts its wait is refused as corrupt, never read.
#[test]
fn a_kept_alive_wait_survives_records_and_snapshots_and_a_bad_one_is_refused() {
    let limits = Limits::default();
    let kept = AcquireOptions::default().wait_alive(Duration(2_000));
    let waiter = |info: &lock_core::KeyInfo| {
        let w = &info.waiters[0];
        (w.owner.clone(), w.wait_deadline, w.wait_end)
    };
    let want = ("b".to_owned(), Instant(2_010), Instant(60_000));

    let mut record = KeyRecord::new();
    let take = Request::TryAcquire {
        key: "job",
        owner: "a",
        ttl: Duration(30_000),
        now: Instant(0),
    };
    let mut step = record.handle(take, &limits);
    step.settle(&[Fence(1)]);
    record.settle(&[Fence(1)]);
    let wait = Request::AcquireWith {
        key: "job",
        owner: "b",
        ttl: Duration(500),
        wait_deadline: Instant(60_000),
        options: kept,
        now: Instant(10),
    };
    let step = record.handle(wait, &limits);
    assert!(step.changed);
    let bytes = record.encode();
    assert_eq!(
        &bytes[8..10],
        &lock_core::record::RECORD_VERSION.to_le_bytes(),
        "records are written in the newest version"
    );
    let read = KeyRecord::decode(&bytes, &[], &limits).unwrap();
    assert_eq!(waiter(&read.state().info().unwrap()), want);
    assert_eq!(read, record);

    let mut table = LockTable::new(limits.clone()).unwrap();
    let _ = table
        .try_acquire("job", "a", Duration(30_000), Instant(0))
        .unwrap();
    let queued = table.acquire_with(
        "job",
        "b",
        Duration(500),
        Instant(60_000),
        &kept,
        Instant(10),
    );
    assert!(queued.is_ok());
    let snapshot = table.snapshot(Instant(10));
    let mut restored = LockTable::from_snapshot(limits.clone(), 7, &snapshot).unwrap();
    assert_eq!(
        waiter(&restored.inspect("job", Instant(10)).unwrap().unwrap()),
        want
    );

    // The waiter's wait_end is the last 8 bytes before the expired count (0) and the checksum:
    // put it before the place's end.
    let mut bad = bytes.clone();
    let at = bad.len() - 4 - 4 - 8;
    assert_eq!(bad[at..at + 8], 60_000u64.to_le_bytes());
    bad[at..at + 8].copy_from_slice(&2_000u64.to_le_bytes());
    let body_end = bad.len() - 4;
    let crc = crc32(&bad[..body_end]);
    bad[body_end..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        KeyRecord::decode(&bad, &[], &limits),
        Err(lock_core::LockError::SnapshotCorrupt {
            reason: lock_core::Corruption::WaitKeptPastItsEnd
        })
    );
}

/// CRC-32 (IEEE), as the record's frame uses.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & 0u32.wrapping_sub(crc & 1));
        }
    }
    !crc
}

/// A stored key that names an owner twice (two live holders, a holder in line, a waiter twice)
/// is corrupt, and the first broken rule in order is the one reported, whatever the number of
/// holders and waiters (repeats are found by hash, not by comparing every pair).
#[test]
fn a_key_naming_an_owner_twice_is_corrupt_and_the_first_broken_rule_is_named() {
    use lock_core::{Corruption, KeyState, Lease, Room, Waiter};
    let room = Room::of(&Limits::default(), 0);
    let now = Instant(10);
    let holder = || vec![Lease::new("holder", Fence(1), Instant(1_000))];
    let waiter = |owner: &str, ttl| Waiter::new(owner, Duration(ttl), Instant(5_000));
    let decode =
        |waiters: Vec<Waiter>| KeyState::from_parts(holder(), waiters, 0, now, &room).err();
    // Two thousand distinct owners: whole.
    let many: Vec<Waiter> = (0..2_000).map(|i| waiter(&format!("w{i}"), 100)).collect();
    assert_eq!(decode(many.clone()), None);
    // The last one repeats the first.
    let mut repeated = many;
    repeated.push(waiter("w0", 100));
    assert_eq!(decode(repeated), Some(Corruption::OwnerWaitingTwice));
    // A repeat before a zero TTL is the repeat; a zero TTL before a repeat is the zero TTL.
    let q = |names: &[(&str, u64)]| names.iter().map(|&(o, t)| waiter(o, t)).collect();
    assert_eq!(
        decode(q(&[("b", 1), ("a", 1), ("b", 1), ("c", 0)])),
        Some(Corruption::OwnerWaitingTwice)
    );
    assert_eq!(
        decode(q(&[("b", 1), ("c", 0), ("a", 1), ("b", 1)])),
        Some(Corruption::WaiterZeroTtl)
    );
    // A waiter that also holds the key, wherever it stands in line.
    assert_eq!(
        decode(q(&[("a", 1), ("b", 1), ("holder", 1)])),
        Some(Corruption::HolderAlsoWaiting)
    );
    // Two thousand shared holders, then one of them twice (a later fence).
    let wide = Room {
        max_holders_per_key: 3_000,
        ..room
    };
    let shared = |i: u64, owner: &str| {
        Lease::new(owner, Fence(i + 1), Instant(1_000)).with_terms(
            Mode::Shared,
            "",
            None,
            Duration::ZERO,
        )
    };
    let mut holders: Vec<Lease> = (0..2_000).map(|i| shared(i, &format!("h{i}"))).collect();
    assert_eq!(
        KeyState::from_parts(holders.clone(), vec![], 0, now, &wide).err(),
        None
    );
    holders.push(shared(2_000, "h7"));
    assert_eq!(
        KeyState::from_parts(holders, vec![], 0, now, &wide).err(),
        Some(Corruption::HoldersConflict)
    );
    // Names that share a prefix or differ only in length are not repeats.
    assert_eq!(
        decode(q(&[("ab", 1), ("a", 1), ("abc", 1), ("abd", 1)])),
        None
    );
}
