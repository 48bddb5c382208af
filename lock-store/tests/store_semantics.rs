//! The nearest store meaning of each table-only vector scenario (the list is in
//! `tests/common/mod.rs`), on every store, with test-mode time.
mod common;

use lock_core::{
    AcquireOutcome, Call, Duration, Fence, Instant, Limits, LockBackend, LockError, Reply, Request,
    Response,
};
use lock_store::{store::Store, store::StoreTable};

fn table(store: Box<dyn Store>, limits: Limits) -> StoreTable<Box<dyn Store>> {
    StoreTable::new(store, limits).unwrap()
}

fn acquire(
    t: &mut impl LockBackend<Fault = lock_store::store::TableFault>,
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
    t: &mut impl LockBackend<Fault = lock_store::store::TableFault>,
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
    common::each_store("semantics", |label, open| {
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
            (
                info.holder().unwrap().owner.as_str(),
                info.holder().unwrap().fence.0
            ),
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
    common::each_store("semantics", |label, open| {
        let limits = Limits {
            expired_retention: Duration(100),
            ..Limits::default()
        };
        let mut t = table(open(), limits);
        for i in 0..5 {
            let key = format!("k{i}");
            let f = fence_of(&acquire(&mut t, &key, "o", 1000, 0, 0));
            assert_eq!(
                release(&mut t, &key, "o", f, 1),
                Response::Release(Ok(lock_core::ReleaseOutcome::Released))
            );
        }
        // One lease runs out: its record stays while its expiry is remembered.
        let f = fence_of(&acquire(&mut t, "gone", "o", 10, 0, 1));
        let mut store = open();
        assert_eq!(store.keys().unwrap(), vec!["gone".to_owned()], "{label}");
        assert_eq!(
            release(&mut t, "gone", "o", f, 50),
            Response::Release(Err(LockError::Expired {
                deadline: Instant(11)
            })),
            "{label}"
        );
    });
}

/// Replaces the table-wide `max_expired_records` scenario: in a store the bound is per key.
#[test]
fn expired_memory_is_bounded_per_key() {
    common::each_store("semantics", |label, open| {
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
            Response::Release(Err(LockError::NotHeld)),
            "{label}"
        );
        for (i, f) in fences.iter().enumerate().skip(1) {
            let deadline = Instant(i as u64 * 100 + 10);
            assert_eq!(
                release(&mut t, "k", &format!("o{i}"), *f, now),
                Response::Release(Err(LockError::Expired { deadline })),
                "{label}"
            );
        }
        assert_eq!(
            release(&mut t, "other", "x", other, now),
            Response::Release(Err(LockError::Expired {
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
    common::each_store("semantics", |label, open| {
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

/// A namespace installed by an earlier build has an index on `forget_at` (every write had to
/// update it; PostgreSQL could not update in place): the first write after an upgrade drops
/// the index (a read changes nothing), keeps the records, and the namespace works on.
#[test]
fn an_earlier_namespace_loses_its_forget_at_index() {
    /// For a namespace: the statement that adds the old index, the one that counts it.
    type Statements = fn(&str) -> (String, String);
    let mut servers: Vec<(&str, String, Statements)> = Vec::new();
    if cfg!(feature = "postgres") {
        servers.push(("postgres", common::postgres_url(), |ns| {
            (
                format!("CREATE INDEX records_forget_at ON {ns}.records (forget_at) WHERE forget_at IS NOT NULL"),
                format!("SELECT count(*) FROM pg_indexes WHERE schemaname = '{ns}' AND indexname = 'records_forget_at'"),
            )
        }));
    }
    if cfg!(feature = "mysql") {
        servers.push(("mysql", common::mysql_url(), |ns| {
            (
                format!("ALTER TABLE `{ns}_records` ADD KEY forget_at (forget_at)"),
                format!("SELECT count(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = '{ns}_records' AND index_name = 'forget_at'"),
            )
        }));
    }
    for (label, server_url, statements) in servers {
        let ns = common::unique_namespace("oldindex");
        let _cleanup = common::Cleanup(|| common::uninstall(&server_url, &ns));
        let locks = lock_store::Locks::open(&server_url, &ns).unwrap();
        let lease = locks
            .try_acquire("job", "a", std::time::Duration::from_secs(60))
            .unwrap();
        let (add, count) = statements(&ns);
        let indexes = |sql: &str| -> i64 {
            match label {
                #[cfg(feature = "postgres")]
                "postgres" => {
                    let mut c = postgres::Client::connect(&server_url, postgres::NoTls).unwrap();
                    c.query_one(sql, &[]).map(|r| r.get(0)).unwrap_or(-1)
                }
                #[cfg(feature = "mysql")]
                "mysql" => {
                    use mysql::prelude::Queryable;
                    let mut c =
                        mysql::Conn::new(mysql::Opts::from_url(&server_url).unwrap()).unwrap();
                    c.query_first::<i64, _>(sql).unwrap().unwrap_or(-1)
                }
                // Only the servers listed above (none without their features).
                _ => unreachable!("{sql}"),
            }
        };
        indexes(&add);
        assert_eq!(indexes(&count), 1, "{label}: the old index was not made");
        let reopened = lock_store::Locks::open(&server_url, &ns).unwrap();
        // Reading changes nothing; the first write upgrades.
        assert!(reopened.inspect("job").unwrap().is_some());
        assert_eq!(indexes(&count), 1, "{label}: a read changed the schema");
        reopened
            .try_acquire("other", "b", std::time::Duration::from_secs(60))
            .unwrap()
            .release()
            .unwrap();
        assert_eq!(indexes(&count), 0, "{label}: the old index is still there");
        let info = reopened.inspect("job").unwrap().expect("the lease is kept");
        assert_eq!(info.holder().unwrap().fence, lease.fence(), "{label}");
        lease.release().unwrap();
        assert!(reopened
            .try_acquire("job", "b", std::time::Duration::from_secs(1))
            .is_ok());
    }
}
