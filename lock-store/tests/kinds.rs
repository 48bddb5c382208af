//! The lock kinds in the records of every store: what one client writes (shared leases, permits,
//! metadata, a minimum hold kept after an early release, a lock-delay kept after an expiry, a
//! steal) is what another client (another connection) reads and obeys; and a record of a newer
//! format than this client reads is refused by name and never written over (a rolling upgrade).
mod common;

use lock_core::{
    AcquireOptions, AcquireOutcome, Call, Duration, Fence, HolderInfo, Instant, KeyInfo, LeaseEnd,
    Limits, LockBackend, LockError, Mode, ReleaseOutcome, Reply, Request, Response,
};
use lock_store::store::{Store, StoreError, StoreTable, TableFault, Write, Written};

type Table = StoreTable<Box<dyn Store>>;

fn table(store: Box<dyn Store>) -> Table {
    StoreTable::new(store, Limits::default()).unwrap()
}

fn respond(t: &mut Table, request: Request<'_>) -> Response {
    match t.call(Call::Request(request)).unwrap() {
        Reply::Response(r) => r,
        other => panic!("{other:?}"),
    }
}

fn take(t: &mut Table, key: &str, owner: &str, options: AcquireOptions<'_>, now: u64) -> Response {
    respond(
        t,
        Request::AcquireWith {
            key,
            owner,
            ttl: Duration(100),
            wait_deadline: Instant(now),
            options,
            now: Instant(now),
        },
    )
}

fn fence_of(r: &Response) -> Fence {
    match r {
        Response::Acquire(Ok(AcquireOutcome::Acquired(g))) => g.fence,
        other => panic!("not a grant: {other:?}"),
    }
}

fn release(t: &mut Table, key: &str, owner: &str, fence: Fence, now: u64) -> Response {
    respond(
        t,
        Request::Release {
            key,
            owner,
            fence,
            now: Instant(now),
        },
    )
}

fn inspect(t: &mut Table, key: &str, now: u64) -> Option<KeyInfo> {
    match t.call(Call::Inspect {
        key,
        now: Instant(now),
    }) {
        Ok(Reply::Inspect(Ok(info))) => info,
        other => panic!("{other:?}"),
    }
}

/// A holder as inspection reports it, granted at `granted` and live until `deadline`.
fn holder(
    owner: &str,
    fence: Fence,
    granted: u64,
    deadline: u64,
    mode: Mode,
    metadata: &str,
) -> HolderInfo {
    HolderInfo {
        owner: owner.into(),
        fence,
        deadline: Instant(deadline),
        mode,
        metadata: metadata.into(),
        min_until: None,
        ended: None,
        granted_at: Some(Instant(granted)),
    }
}

/// Replaces the kinds' snapshot scenarios (a store has no whole-table snapshot): every kind is
/// in the key's record, so a second client sees it exactly and obeys it.
#[test]
fn kinds_survive_in_the_record() {
    common::each_store("kinds", |label, open| {
        let mut first = table(open());
        let reader = AcquireOptions {
            mode: Mode::Shared,
            permits: 2,
            metadata: "reader on host-1",
            ..AcquireOptions::default()
        };
        let a = fence_of(&take(&mut first, "pool", "a", reader, 0));
        let held = AcquireOptions {
            min_hold: Duration(60),
            ..reader
        };
        let b = fence_of(&take(&mut first, "pool", "b", held, 1));
        assert_eq!(
            release(&mut first, "pool", "b", b, 10),
            Response::Release(Ok(ReleaseOutcome::HeldUntil { until: Instant(61) })),
            "{label}"
        );
        let delayed = AcquireOptions {
            lock_delay: Duration(50),
            metadata: "nightly",
            ..AcquireOptions::default()
        };
        let j = fence_of(&take(&mut first, "job", "c", delayed, 10));
        drop(first);

        let mut second = table(open());
        let pool = inspect(&mut second, "pool", 20).unwrap();
        let mut kept = holder("b", b, 1, 61, Mode::Shared, "reader on host-1");
        kept.min_until = Some(Instant(61));
        kept.ended = Some(LeaseEnd::Released);
        let expected = KeyInfo {
            holders: vec![
                holder("a", a, 0, 100, Mode::Shared, "reader on host-1"),
                kept,
            ],
            waiters: Vec::new(),
            permits: 2,
        };
        assert_eq!(pool, expected, "{label}");
        // The kept place still counts: both permits are taken until 61.
        assert!(
            matches!(
                take(&mut second, "pool", "d", reader, 30),
                Response::Acquire(Err(LockError::Held { .. }))
            ),
            "{label}"
        );
        assert_eq!(
            take(
                &mut second,
                "pool",
                "d",
                AcquireOptions {
                    permits: 3,
                    ..reader
                },
                30
            ),
            Response::Acquire(Err(LockError::PermitsMismatch { permits: 2 })),
            "{label}"
        );
        fence_of(&take(&mut second, "pool", "d", reader, 61));

        // The lock-delay keeps the expired lease's place until 110 + 50.
        let job = inspect(&mut second, "job", 120).unwrap();
        let mut expired = holder("c", j, 10, 160, Mode::Exclusive, "nightly");
        expired.ended = Some(LeaseEnd::Expired);
        assert_eq!(job.holders, vec![expired], "{label}");
        assert_eq!(
            take(&mut second, "job", "e", AcquireOptions::default(), 159),
            Response::Acquire(Err(LockError::Held {
                deadline: Instant(160)
            })),
            "{label}"
        );
        fence_of(&take(
            &mut second,
            "job",
            "e",
            AcquireOptions::default(),
            160,
        ));
    });
}

/// A steal by one client is what the holder, on another, learns on its next call.
#[test]
fn a_steal_reaches_the_holder_through_the_store() {
    common::each_store("kinds", |label, open| {
        let mut holder_side = table(open());
        let mut thief = table(open());
        let f = fence_of(&take(
            &mut holder_side,
            "job",
            "a",
            AcquireOptions::default(),
            0,
        ));
        let stolen = respond(
            &mut thief,
            Request::Steal {
                key: "job",
                owner: "b",
                ttl: Duration(100),
                options: AcquireOptions::default(),
                now: Instant(10),
            },
        );
        assert!(fence_of(&stolen) > f, "{label}");
        let seen = inspect(&mut holder_side, "job", 20).unwrap();
        assert_eq!(seen.holders[0].granted_at, Some(Instant(10)), "{label}");
        assert_eq!(
            release(&mut holder_side, "job", "a", f, 20),
            Response::Release(Err(LockError::Stolen { at: Instant(10) })),
            "{label}"
        );
    });
}

/// Rolling upgrades: a record written in a format newer than this client reads is refused with
/// both versions named, by every call and by a query, and is never written over.
#[test]
fn a_record_of_a_newer_format_is_refused_by_name_and_kept() {
    use lock_core::record::RECORD_VERSION;
    const NEWER: u16 = RECORD_VERSION + 1;
    common::each_store("kinds", |label, open| {
        let mut newer = table(open());
        let shared = AcquireOptions {
            mode: Mode::Shared,
            ..AcquireOptions::default()
        };
        let f = fence_of(&take(&mut newer, "k", "a", shared, 0));
        // What a later format version would write: the same record, one version newer.
        let mut raw = open();
        let stored = raw.read("k").unwrap().record.unwrap();
        let mut bytes = stored.bytes.clone();
        bytes[8..10].copy_from_slice(&NEWER.to_le_bytes());
        let crc_at = bytes.len() - 4;
        let crc = lock_core::crc32(&bytes[..crc_at]);
        bytes[crc_at..].copy_from_slice(&crc.to_le_bytes());
        let written = raw
            .write(
                "k",
                &Write {
                    expected: stored.version,
                    replaces: &stored.bytes,
                    version: stored.version.wrapping_add(1).max(1),
                    bytes: Some(&bytes),
                    fresh_fences: 0,
                    not_before: None,
                    forget_at: None,
                    holds_for: lock_core::Duration(0),
                },
            )
            .unwrap();
        assert!(matches!(written, Written::Done { .. }), "{label}");

        let mut older = table(open());
        let refused = |answer: Result<Reply, TableFault>| match answer {
            Err(TableFault::Store(StoreError::Corrupt { key, error })) => {
                assert_eq!(key, "k", "{label}");
                assert_eq!(
                    error,
                    LockError::SnapshotVersion {
                        found: NEWER,
                        supported: RECORD_VERSION
                    },
                    "{label}"
                );
            }
            other => panic!("{label}: {other:?}"),
        };
        refused(older.call(Call::Request(Request::TryAcquire {
            key: "k",
            owner: "b",
            ttl: Duration(100),
            now: Instant(200),
        })));
        refused(older.call(Call::Request(Request::Release {
            key: "k",
            owner: "a",
            fence: f,
            now: Instant(10),
        })));
        refused(older.call(Call::Inspect {
            key: "k",
            now: Instant(10),
        }));
        refused(older.call(Call::Query {
            prefix: "",
            after: "",
            limit: 10,
            now: Instant(10),
        }));
        let message = StoreError::Corrupt {
            key: "k".into(),
            error: LockError::SnapshotVersion {
                found: NEWER,
                supported: RECORD_VERSION,
            },
        }
        .to_string();
        assert!(
            message.contains(&format!("version {NEWER}"))
                && message.contains(&format!("up to {RECORD_VERSION}")),
            "{message}"
        );
        let after = raw.read("k").unwrap().record.unwrap();
        assert_eq!(
            after.bytes, bytes,
            "{label}: the older client wrote over it"
        );
    });
}

/// The service faces carry the kinds on every store, and a blocking and an async client share
/// them on one namespace: shared holders side by side, a query from both, an exclusive waiter
/// handed the key when both shared leases end, a steal whose victim's `on_lost` is told
/// `stolen`, and a minimum hold that keeps the key after its release.
#[cfg(feature = "tokio")]
#[test]
fn blocking_and_async_clients_share_the_kinds() {
    use lock_store::{aio, AcquireOptions, Error, Locks};
    use std::sync::mpsc;
    use std::time::Duration as Std;

    let runtime = common::runtime(2);
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("kinds_faces");
        let _cleanup = common::Cleanup(|| {
            if let Ok(mut s) = lock_store::store::open(&url, &ns, lock_store::store::DEFAULT_BOUND)
            {
                let _ = s.uninstall();
            }
        });
        let blocking = Locks::open(&url, &ns).unwrap();
        let asynch = runtime.block_on(aio::Locks::open(&url, &ns)).unwrap();
        let ttl = Std::from_secs(30);
        let reader = AcquireOptions::shared().metadata("report reader");
        let a = blocking
            .acquire_with("doc", "a", ttl, Std::ZERO, &reader)
            .unwrap();
        let b = runtime
            .block_on(asynch.acquire_with("doc", "b", ttl, Std::ZERO, &reader))
            .unwrap();
        let page = blocking.query("", "", 10).unwrap();
        assert_eq!(
            page,
            runtime.block_on(asynch.query("", "", 10)).unwrap(),
            "{label}"
        );
        let (key, info) = &page.keys[0];
        assert_eq!((key.as_str(), info.holders.len()), ("doc", 2), "{label}");
        assert!(
            (info.holders.iter()).all(|h| h.mode == Mode::Shared && h.metadata == "report reader"),
            "{label}: {info:?}"
        );
        assert!(
            matches!(
                runtime.block_on(asynch.query("", "", 0)),
                Err(Error::Lock(LockError::QueryLimit { max: 1000 }))
            ),
            "{label}"
        );
        // An exclusive writer waits (in another thread) until both shared leases end.
        let writer = {
            let blocking = blocking.clone();
            std::thread::spawn(move || blocking.acquire("doc", "w", Std::from_secs(3), 10 * ttl))
        };
        common::eventually("the writer queued", || {
            let info = blocking.inspect("doc").unwrap()?;
            (info.waiters.len() == 1).then_some(())
        });
        a.release().unwrap();
        runtime.block_on(b.release()).unwrap();
        let w = writer.join().unwrap().unwrap();
        assert!(w.fence() > a.fence() && w.fence() > b.fence(), "{label}");
        // Stolen by the async client: the writer's keep-alive hears it, and `on_lost` says so.
        let (lost_tx, lost) = mpsc::channel();
        w.on_lost(move |l| {
            let _ = lost_tx.send(l.refusal.clone());
        });
        w.keep_alive();
        let thief = runtime
            .block_on(asynch.steal("doc", "operator", ttl, &AcquireOptions::EXCLUSIVE))
            .unwrap();
        assert!(thief.fence() > w.fence(), "{label}");
        let refusal = lost.recv_timeout(Std::from_secs(10)).unwrap();
        assert!(
            matches!(refusal, Some(LockError::Stolen { .. })),
            "{label}: {refusal:?}"
        );
        assert!(matches!(
            w.release(),
            Ok(()) | Err(Error::Lock(LockError::Stolen { .. }))
        ));
        assert!(
            lost.recv_timeout(Std::from_millis(200)).is_err(),
            "{label}: on_lost ran twice"
        );
        runtime.block_on(thief.release()).unwrap();
        // A minimum hold outlives an early release.
        let held = AcquireOptions::default().min_hold(Std::from_secs(20));
        let job = blocking
            .acquire_with("nightly", "a", ttl, Std::ZERO, &held)
            .unwrap();
        job.release().unwrap();
        let until = job.released_at().unwrap();
        // Granted at one instant: the hold ends 20 s after it, the TTL 30 s after it.
        assert_eq!(until.0, job.deadline().0 - 10_000, "{label}");
        assert!(
            matches!(
                runtime.block_on(asynch.try_acquire("nightly", "b", ttl)),
                Err(Error::Lock(LockError::Held { deadline })) if deadline == until
            ),
            "{label}"
        );
    }
}
