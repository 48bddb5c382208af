//! Differential property test: random operation sequences (time sometimes going backwards) run
//! on an in-process `LockTable` and on every store seen as a table (`StoreTable`, test-mode
//! time) give identical answers and identical events, fresh and from outdated records.
mod common;

use lock_core::{Call, Duration, Event, Fence, Instant, Limits, LockBackend, LockTable, Request};
use lock_store::{store::Store, store::StoreTable};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const OWNERS: [&str; 3] = ["o0", "o1", "o2"];

/// Limits without the table-wide bounds a store does not have.
fn limits() -> Limits {
    Limits {
        max_waiters_per_key: 2,
        expired_retention: Duration(300),
        ..Limits::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Try(usize, usize, u64),
    Acquire(usize, usize, u64, u64),
    Release(usize, usize, u64),
    Extend(usize, usize, u64, u64),
    Cancel(usize, usize),
    Timeout,
    Inspect(usize),
    Wakeup,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    let o = 0..OWNERS.len();
    prop_oneof![
        3 => (k.clone(), o.clone(), 1..200u64).prop_map(|(k, o, t)| Op::Try(k, o, t)),
        3 => (k.clone(), o.clone(), 1..200u64, 0..400u64).prop_map(|(k, o, t, w)| Op::Acquire(k, o, t, w)),
        3 => (k.clone(), o.clone(), 0..3u64).prop_map(|(k, o, b)| Op::Release(k, o, b)),
        2 => (k.clone(), o.clone(), 0..3u64, 1..200u64).prop_map(|(k, o, b, t)| Op::Extend(k, o, b, t)),
        1 => (k.clone(), o).prop_map(|(k, o)| Op::Cancel(k, o)),
        2 => Just(Op::Timeout),
        1 => k.prop_map(Op::Inspect),
        1 => Just(Op::Wakeup),
    ]
}

fn steps(max: usize) -> impl Strategy<Value = Vec<(i64, Op)>> {
    prop::collection::vec(
        (
            prop_oneof![6 => 0..120i64, 2 => Just(0i64), 1 => -80..0i64],
            op(),
        ),
        1..max,
    )
}

/// Runs `steps` on a table and on `store` (cleared first); the first difference fails.
fn same_answers<S: Store>(store: S, stale: bool, steps: &[(i64, Op)]) -> Result<(), TestCaseError> {
    let mut table = LockTable::new(limits()).unwrap();
    let mut store = store;
    store.clear().unwrap();
    let mut shared = StoreTable::new(store, limits()).unwrap();
    shared.engine_mut().set_stale(stale);
    let mut now: i64 = 0;
    for (i, (dt, op)) in steps.iter().enumerate() {
        now = (now + dt).max(0);
        let t = Instant(now as u64);
        let last = table.stats(Instant::ZERO).last_fence.0;
        let fence = |back: u64| Fence(last.saturating_sub(back));
        let call = match *op {
            Op::Try(k, o, ttl) => Call::Request(Request::TryAcquire {
                key: KEYS[k],
                owner: OWNERS[o],
                ttl: Duration(ttl),
                now: t,
            }),
            Op::Acquire(k, o, ttl, wait) => Call::Request(Request::Acquire {
                key: KEYS[k],
                owner: OWNERS[o],
                ttl: Duration(ttl),
                wait_deadline: Instant(now as u64 + wait),
                now: t,
            }),
            Op::Release(k, o, b) => Call::Request(Request::Release {
                key: KEYS[k],
                owner: OWNERS[o],
                fence: fence(b),
                now: t,
            }),
            Op::Extend(k, o, b, ttl) => Call::Request(Request::Extend {
                key: KEYS[k],
                owner: OWNERS[o],
                fence: fence(b),
                ttl: Duration(ttl),
                now: t,
            }),
            Op::Cancel(k, o) => Call::Request(Request::CancelWait {
                key: KEYS[k],
                owner: OWNERS[o],
                now: t,
            }),
            Op::Timeout => Call::Request(Request::HandleTimeout { now: t }),
            Op::Inspect(k) => Call::Inspect {
                key: KEYS[k],
                now: t,
            },
            Op::Wakeup => Call::NextWakeup,
        };
        let expected = LockBackend::call(&mut table, call).unwrap();
        let got = shared
            .call(call)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, expected, "step {}: {:?}", i, call);
        let expected: Vec<Event> = table.drain_events().collect();
        let got = shared.drain_events().unwrap();
        prop_assert_eq!(got, expected, "events after step {}", i);
    }
    Ok(())
}

/// Runs the property on `open()` with `cases` cases of up to `max_steps` steps.
fn check<S: Store>(label: &str, open: impl Fn() -> S, cases: u32, max_steps: usize) {
    for stale in [false, true] {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let open = &open;
        let result = runner.run(&steps(max_steps), |steps| {
            same_answers(open(), stale, &steps)
        });
        if let Err(e) = result {
            panic!("{label} (stale: {stale}): {e}");
        }
    }
}

#[test]
fn memory_answers_as_the_table() {
    let store = lock_store::store::MemoryStore::new("diff").unwrap();
    check("memory", || store.clone(), 256, 60);
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_answers_as_the_table() {
    let dir = std::env::temp_dir().join(common::unique_namespace("diff"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("diff.db");
    check(
        "sqlite",
        || common::installed(lock_store::store::SqliteStore::open(&path, "diff")),
        48,
        40,
    );
}

#[cfg(feature = "redis")]
#[test]
fn redis_answers_as_the_table() {
    let ns = common::unique_namespace("diff");
    let open = || {
        let mut s = common::installed(lock_store::store::RedisStore::open(
            &common::redis_url(),
            &ns,
            std::time::Duration::from_secs(5),
        ));
        s.set_seed_from_time(false);
        s
    };
    let _cleanup = common::Cleanup(|| open().uninstall().unwrap());
    check("redis", open, 48, 40);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_answers_as_the_table() {
    let ns = common::unique_namespace("diff");
    let open = || {
        let mut s = common::installed(lock_store::store::PostgresStore::open(
            &common::postgres_url(),
            &ns,
            std::time::Duration::from_secs(5),
        ));
        s.set_seed_from_time(false);
        s
    };
    let _cleanup = common::Cleanup(|| open().uninstall().unwrap());
    check("postgres", open, 32, 40);
}

#[cfg(feature = "mysql")]
#[test]
fn mariadb_answers_as_the_table() {
    let ns = common::unique_namespace("diff");
    let open = || {
        let mut s = common::installed(lock_store::store::MysqlStore::open(
            &common::mysql_url(),
            &ns,
            std::time::Duration::from_secs(5),
        ));
        s.set_seed_from_time(false);
        s
    };
    let _cleanup = common::Cleanup(|| open().uninstall().unwrap());
    check("mariadb", open, 32, 40);
}
