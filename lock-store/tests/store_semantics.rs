//! The nearest store meaning of each table-only vector scenario (the list is in
//! `tests/common/mod.rs`), on every store, with test-mode time.
mod common;

use lock_core::{
    AcquireOutcome, Call, Duration, Fence, Instant, Limits, LockBackend, LockError, Reply, Request,
    Response,
};
use lock_store::{url, Store, StoreTable};

/// Runs `check` on a fresh namespace of each store, opened by `open(url, ns)`.
fn each_store(check: impl Fn(&str, &dyn Fn() -> Box<dyn Store>)) {
    for (label, url) in common::store_urls() {
        let ns = common::unique_namespace("semantics");
        let open = || url::open(&url, &ns).unwrap();
        let _cleanup = common::Cleanup(|| {
            let _ = url::open(&url, &ns).and_then(|mut s| s.uninstall());
        });
        check(label, &open);
    }
}

fn table(store: Box<dyn Store>, limits: Limits) -> StoreTable<Box<dyn Store>> {
    StoreTable::new(store, limits).unwrap()
}

fn acquire(
    t: &mut impl LockBackend<Fault = lock_store::TableFault>,
    key: &str,
    owner: &str,
    ttl: u64,
    wait: u64,
    now: u64,
) -> Response {
    let request = Request::Acquire {
        key,
        owner,
        ttl: Duration(ttl),
        wait_deadline: Instant(now + wait),
        now: Instant(now),
    };
    match t.call(Call::Request(request)).unwrap() {
        Reply::Response(r) => r,
        other => panic!("{other:?}"),
    }
}

fn release(
    t: &mut impl LockBackend<Fault = lock_store::TableFault>,
    key: &str,
    owner: &str,
    fence: u64,
    now: u64,
) -> Response {
    let request = Request::Release {
        key,
        owner,
        fence: Fence(fence),
        now: Instant(now),
    };
    match t.call(Call::Request(request)).unwrap() {
        Reply::Response(r) => r,
        other => panic!("{other:?}"),
    }
}

fn fence_of(r: &Response) -> u64 {
    match r {
        Response::Acquire(Ok(AcquireOutcome::Acquired(g))) => g.fence.0,
        other => panic!("not a grant: {other:?}"),
    }
}

/// Replaces the whole-table snapshot scenarios: a store needs no snapshot, since every record
/// is in it. A new client (another connection, another process) sees the same leases and the
/// fences continue above every fence issued before.
#[test]
fn a_new_client_sees_the_leases_and_continues_the_fences() {
    each_store(|label, open| {
        let mut first = table(open(), Limits::default());
        let a = fence_of(&acquire(&mut first, "a", "o1", 1000, 0, 0));
        let b = fence_of(&acquire(&mut first, "b", "o2", 1000, 0, 0));
        drop(first);
        let mut second = table(open(), Limits::default());
        let info = match second
            .call(Call::Inspect {
                key: "a",
                now: Instant(10),
            })
            .unwrap()
        {
            Reply::Inspect(Ok(Some(info))) => info,
            other => panic!("{label}: {other:?}"),
        };
        assert_eq!(
            (info.holder.owner.as_str(), info.holder.fence.0),
            ("o1", a),
            "{label}"
        );
        assert_eq!(
            acquire(&mut second, "b", "o3", 1000, 0, 10),
            Response::Acquire(Err(LockError::Held {
                deadline: Instant(1000)
            })),
            "{label}"
        );
        let c = fence_of(&acquire(&mut second, "c", "o3", 1000, 0, 10));
        assert!(c > a && c > b, "{label}: fence {c} after {a}, {b}");
    });
}

/// Replaces the `max_keys` scenarios: a namespace has no key count, and a key that holds
/// nothing leaves no record, so a store's size is the keys in use.
#[test]
fn free_keys_leave_no_record() {
    each_store(|label, open| {
        let limits = Limits {
            expired_retention: Duration(100),
            ..Limits::default()
        };
        let mut t = table(open(), limits);
        for i in 0..5 {
            let key = format!("k{i}");
            let f = fence_of(&acquire(&mut t, &key, "o", 1000, 0, 0));
            assert_eq!(release(&mut t, &key, "o", f, 1), Response::Done(Ok(())));
        }
        // One lease runs out: its record stays while its expiry is remembered.
        let f = fence_of(&acquire(&mut t, "gone", "o", 10, 0, 1));
        let mut store = open();
        assert_eq!(store.keys().unwrap(), vec!["gone".to_owned()], "{label}");
        assert_eq!(
            release(&mut t, "gone", "o", f, 50),
            Response::Done(Err(LockError::Expired {
                deadline: Instant(11)
            })),
            "{label}"
        );
    });
}

/// Replaces the table-wide `max_expired_records` scenario: in a store the bound is per key.
#[test]
fn expired_memory_is_bounded_per_key() {
    each_store(|label, open| {
        let limits = Limits {
            max_expired_records: 2,
            ..Limits::default()
        };
        let mut t = table(open(), limits);
        let mut fences = Vec::new();
        for i in 0..3u64 {
            fences.push(fence_of(&acquire(
                &mut t,
                "k",
                &format!("o{i}"),
                10,
                0,
                i * 100,
            )));
        }
        // Another key's expiries do not count against "k".
        let other = fence_of(&acquire(&mut t, "other", "x", 10, 0, 300));
        let now = 400;
        assert_eq!(
            release(&mut t, "k", "o0", fences[0], now),
            Response::Done(Err(LockError::NotHeld)),
            "{label}"
        );
        for (i, f) in fences.iter().enumerate().skip(1) {
            let deadline = Instant(i as u64 * 100 + 10);
            assert_eq!(
                release(&mut t, "k", &format!("o{i}"), *f, now),
                Response::Done(Err(LockError::Expired { deadline })),
                "{label}"
            );
        }
        assert_eq!(
            release(&mut t, "other", "x", other, now),
            Response::Done(Err(LockError::Expired {
                deadline: Instant(310)
            })),
            "{label}"
        );
    });
}

/// Replaces the table-wide `max_waiters` scenario: in a store it bounds each key's queue (with
/// `max_waiters_per_key`, whichever is smaller), and other keys' queues do not count.
#[test]
fn max_waiters_bounds_each_queue() {
    each_store(|label, open| {
        let limits = Limits {
            max_waiters: 2,
            ..Limits::default()
        };
        let mut t = table(open(), limits);
        for key in ["a", "b"] {
            fence_of(&acquire(&mut t, key, "holder", 1000, 0, 0));
            for w in ["w1", "w2"] {
                assert!(
                    matches!(
                        acquire(&mut t, key, w, 10, 500, 1),
                        Response::Acquire(Ok(AcquireOutcome::Queued { .. }))
                    ),
                    "{label}"
                );
            }
            assert_eq!(
                acquire(&mut t, key, "w3", 10, 500, 1),
                Response::Acquire(Err(LockError::TooManyWaiters { max_waiters: 2 })),
                "{label}"
            );
        }
    });
}
