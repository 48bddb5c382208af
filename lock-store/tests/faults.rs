//! Faults, per store: connections dropped by the server while a client works (Redis
//! `CLIENT KILL`, PostgreSQL `pg_terminate_backend`, MariaDB `KILL`), corrupt records, servers
//! restarted. Each attack checks what the docs promise: no duplicate grant, a typed error or a
//! correct answer, clients that recover, corruption reported and never reset.
mod common;
#[cfg(feature = "postgres")]
#[path = "common/node.rs"]
mod node;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lock_core::{
    AcquireOutcome, Duration as Ms, Fence, Instant, Limits, LockError, Request, Response,
};
use lock_store::{store::Engine, store::Store, store::TimeSource, StoreError};

#[allow(dead_code)] // used by the server stores' tests
/// Acquires and releases one key `pairs` times while `kill` drops the client's connection from
/// the server side every few milliseconds. Every call answers correctly or fails with a typed
/// connection error (then the caller retries); fences strictly increase; the key ends free.
fn survives_dropped_connections<S: Store>(
    label: &str,
    store: S,
    mut kill: impl FnMut() -> usize + Send + 'static,
) {
    let mut engine = Engine::new(store, Limits::default(), TimeSource::Store).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (stop, killed) = (Arc::clone(&stop), Arc::clone(&killed));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(
                    1 + lock_store::store::new_version() % 12,
                ));
                killed.fetch_add(kill(), Ordering::SeqCst);
            }
        })
    };
    let ttl = Ms(60_000);
    let mut fences: Vec<Fence> = Vec::new();
    let mut dropped = 0;
    let mut pairs = 0;
    let started = std::time::Instant::now();
    while pairs < 60
        || (killed.load(Ordering::SeqCst) < 20 && started.elapsed() < Duration::from_secs(30))
    {
        pairs += 1;
        let mut retried = false;
        let fence = loop {
            let answer = engine.request("k", Instant::ZERO, |now| Request::TryAcquire {
                key: "k",
                owner: "a",
                ttl,
                now,
            });
            match answer {
                Ok(d) => match d.reply {
                    Response::Acquire(Ok(AcquireOutcome::Acquired(g))) => break g.fence,
                    // A retried acquire whose first attempt went through.
                    Response::Acquire(Ok(AcquireOutcome::AlreadyHeld(g))) if retried => {
                        break g.fence
                    }
                    other => panic!("{label}: acquire answered {other:?}"),
                },
                Err(StoreError::Lost { .. } | StoreError::Connect { .. }) => {
                    dropped += 1;
                    retried = true;
                }
                Err(e) => panic!("{label}: {e}"),
            }
        };
        assert!(
            fences.last().is_none_or(|&last| fence > last),
            "{label}: fence {fence:?} after {fences:?}"
        );
        fences.push(fence);
        let mut retried = false;
        loop {
            let answer = engine.request("k", Instant::ZERO, |now| Request::Release {
                key: "k",
                owner: "a",
                fence,
                now,
            });
            match answer {
                Ok(d) => match d.reply {
                    Response::Release(Ok(_)) => break,
                    // A retried release whose first attempt went through.
                    Response::Release(Err(LockError::NotHeld)) if retried => break,
                    other => panic!("{label}: release answered {other:?}"),
                },
                Err(StoreError::Lost { .. } | StoreError::Connect { .. }) => {
                    dropped += 1;
                    retried = true;
                }
                Err(e) => panic!("{label}: {e}"),
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    killer.join().unwrap();
    let killed = killed.load(Ordering::SeqCst);
    assert!(
        killed >= 20,
        "{label}: only {killed} connections killed in {pairs} pairs"
    );
    let end = loop {
        match engine.inspect("k", Instant::ZERO) {
            Ok(d) => break d.reply.unwrap(),
            Err(StoreError::Lost { .. } | StoreError::Connect { .. }) => {}
            Err(e) => panic!("{label}: {e}"),
        }
    };
    assert_eq!(end, None, "{label}: the key is still held");
    println!(
        "{label}: {pairs} pairs, {killed} connections killed, {dropped} calls answered with a \
         connection error (the rest resolved by re-reading), all correct"
    );
}

/// A waiter's connections dropped (five times) while it waits: its `acquire` rides the drops
/// out (it reconnects and keeps its place) and is handed the key at the holder's release; then
/// a newcomer gets it: nobody is stuck. (Before, the waiter answered a typed error.)
#[allow(dead_code)] // used by the server stores' tests
fn survives_a_drop_while_waiting(
    label: &str,
    url: &str,
    ns: &str,
    mut kill: impl FnMut() -> usize,
) {
    use lock_store::{Error, Locks};
    let holder = Locks::open(url, ns).unwrap();
    let waiter = Locks::open(url, ns).unwrap();
    let retry = |f: &dyn Fn() -> Result<(), Error>| loop {
        match f() {
            Ok(()) => return,
            Err(Error::Store(StoreError::Lost { .. } | StoreError::Connect { .. })) => {}
            Err(e) => panic!("{label}: {e}"),
        }
    };
    let lease = holder
        .try_acquire("job", "holder", Duration::from_secs(30))
        .unwrap();
    let lease_fence = lease.fence();
    let waiting = std::thread::spawn(move || {
        waiter
            .acquire("job", "w", Duration::from_secs(30), Duration::from_secs(10))
            .map(|l| (l.fence(), l))
    });
    loop {
        let info = holder.inspect("job");
        if matches!(&info, Ok(Some(i)) if i.waiters.iter().any(|w| w.owner == "w")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut killed = 0;
    for _ in 0..5 {
        killed += kill();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(killed > 0, "{label}: no connection was killed");
    retry(&|| lease.release());
    match waiting.join().unwrap() {
        Ok((fence, lease)) => {
            assert!(fence > lease_fence, "{label}");
            retry(&|| lease.release());
            println!("{label}: the waiter rode out {killed} killed connections and got the key");
        }
        Err(e) => panic!("{label}: the waiter answered {e} after {killed} killed connections"),
    }
    // Nobody is stuck: the key is free (or freed) and a newcomer gets it.
    let next = loop {
        match holder.acquire(
            "job",
            "next",
            Duration::from_secs(5),
            Duration::from_secs(35),
        ) {
            Ok(l) => break l,
            Err(Error::Store(StoreError::Lost { .. } | StoreError::Connect { .. })) => {}
            Err(e) => panic!("{label}: {e}"),
        }
    };
    retry(&|| next.release());
}

/// Writes garbage as the record of a key held before the call (its version left as it was),
/// then checks that every call on it is [`StoreError::Corrupt`], the holder's own too (it
/// remembers the record as it was, and would write over it if the store compared versions
/// only), and that the bytes are left as they were.
#[cfg(any(
    feature = "sqlite",
    feature = "redis",
    feature = "postgres",
    feature = "mysql"
))]
fn corrupt_record_is_reported<S: Store, H: Store>(
    label: &str,
    (mut holder, fence): (Engine<H>, Fence),
    store: S,
    overwrite: impl Fn(&[u8]),
    read_raw: impl Fn() -> Vec<u8>,
) {
    let garbage = b"LOCKKREC\x01\x00garbage that is not a record".to_vec();
    overwrite(&garbage);
    let extend = holder.request("job", Instant::ZERO, |now| Request::Extend {
        key: "job",
        owner: "a",
        fence,
        ttl: Ms(60_000),
        now,
    });
    assert!(
        matches!(extend, Err(StoreError::Corrupt { ref key, .. }) if key == "job"),
        "{label}: the holder's extend answered {extend:?}"
    );
    let release = holder.request("job", Instant::ZERO, |now| Request::Release {
        key: "job",
        owner: "a",
        fence,
        now,
    });
    assert!(
        matches!(release, Err(StoreError::Corrupt { .. })),
        "{label}: the holder's release answered {release:?}"
    );
    assert_eq!(read_raw(), garbage, "{label}: the holder wrote over it");
    let mut engine = Engine::new(store, Limits::default(), TimeSource::Store).unwrap();
    for _ in 0..2 {
        let answer = engine.request("job", Instant::ZERO, |now| Request::TryAcquire {
            key: "job",
            owner: "b",
            ttl: Ms(1000),
            now,
        });
        assert!(
            matches!(answer, Err(StoreError::Corrupt { ref key, .. }) if key == "job"),
            "{label}: {answer:?}"
        );
        let inspect = engine.inspect("job", Instant::ZERO);
        assert!(
            matches!(inspect, Err(StoreError::Corrupt { .. })),
            "{label}: {inspect:?}"
        );
    }
    assert_eq!(
        read_raw(),
        garbage,
        "{label}: the corrupt record was changed"
    );
}

/// Takes "job" for "a" through `store`: the holder's engine (which remembers the record) and
/// its fence.
#[cfg(any(
    feature = "sqlite",
    feature = "redis",
    feature = "postgres",
    feature = "mysql"
))]
fn hold_job<S: Store>(store: S) -> (Engine<S>, Fence) {
    let mut engine = Engine::new(store, Limits::default(), TimeSource::Store).unwrap();
    let d = engine
        .request("job", Instant::ZERO, |now| Request::TryAcquire {
            key: "job",
            owner: "a",
            ttl: Ms(60_000),
            now,
        })
        .unwrap();
    match d.reply {
        Response::Acquire(Ok(AcquireOutcome::Acquired(g))) => (engine, g.fence),
        other => panic!("{other:?}"),
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_corrupt_record() {
    use lock_store::store::SqliteStore;
    let dir = std::env::temp_dir().join(common::unique_namespace("faults"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("locks.db");
    let holder = hold_job(common::installed(SqliteStore::open(&path, "faults")));
    let (p1, p2) = (path.clone(), path.clone());
    corrupt_record_is_reported(
        "sqlite",
        holder,
        common::installed(SqliteStore::open(&path, "faults")),
        move |bytes| {
            rusqlite::Connection::open(&p1)
                .unwrap()
                .execute(
                    "UPDATE expiring_lock_records SET record = ?1 WHERE key = 'job'",
                    [bytes],
                )
                .unwrap();
        },
        move || {
            rusqlite::Connection::open(&p2)
                .unwrap()
                .query_row(
                    "SELECT record FROM expiring_lock_records WHERE key = 'job'",
                    [],
                    |r| r.get(0),
                )
                .unwrap()
        },
    );
}

#[cfg(feature = "redis")]
mod redis_faults {
    use super::*;
    use common::redis_server::{Throwaway, AOF_ALWAYS, NO_PERSISTENCE};
    use lock_store::store::RedisStore;

    fn open(ns: &str) -> RedisStore {
        common::installed(RedisStore::open(
            &common::redis_url(),
            ns,
            Duration::from_secs(5),
        ))
    }

    fn admin() -> redis::Connection {
        redis::Client::open(common::redis_url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    #[test]
    fn redis_client_kill() {
        let ns = common::unique_namespace("faults");
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || open(&ns).uninstall().unwrap()
        });
        survives_dropped_connections("redis", open(&ns), killer(&ns));
    }

    #[test]
    fn redis_client_kill_while_waiting() {
        let ns = common::unique_namespace("faults");
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || open(&ns).uninstall().unwrap()
        });
        survives_a_drop_while_waiting("redis", &common::redis_url(), &ns, killer(&ns));
    }

    /// Kills every connection of namespace `ns` (they are named after it).
    fn killer(ns: &str) -> impl FnMut() -> usize + Send + 'static {
        let name = format!("lock-store:{ns}");
        let mut admin = admin();
        move || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
            let mut killed = 0;
            for line in list
                .lines()
                .filter(|l| l.contains(&format!(" name={name} ")))
            {
                if let Some(id) = line.split(' ').find_map(|f| f.strip_prefix("id=")) {
                    let n: Result<i64, _> = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("ID")
                        .arg(id)
                        .query(&mut admin);
                    killed += n.unwrap_or(0) as usize;
                }
            }
            killed
        }
    }

    #[test]
    fn redis_corrupt_record() {
        let ns = common::unique_namespace("faults");
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || open(&ns).uninstall().unwrap()
        });
        let holder = hold_job(open(&ns));
        let key = format!("{{el:{ns}}}:k:job");
        let k2 = key.clone();
        corrupt_record_is_reported(
            "redis",
            holder,
            open(&ns),
            move |bytes| {
                let _: () = redis::cmd("HSET")
                    .arg(&key)
                    .arg("r")
                    .arg(bytes)
                    .query(&mut admin())
                    .unwrap();
            },
            move || {
                redis::cmd("HGET")
                    .arg(&k2)
                    .arg("r")
                    .query(&mut admin())
                    .unwrap()
            },
        );
    }

    /// Takes `k0`..`k4` for "a" (leases forgotten, not released); their fences.
    fn hold_five(locks: &lock_store::Locks) -> Vec<Fence> {
        (0..5)
            .map(|i| {
                let lease = locks
                    .try_acquire(&format!("k{i}"), "a", Duration::from_secs(60))
                    .unwrap();
                let fence = lease.fence();
                std::mem::forget(lease);
                fence
            })
            .collect()
    }

    /// The first call that is not a lost connection (the client reconnects).
    fn after_restart<T>(
        mut call: impl FnMut() -> Result<T, lock_store::Error>,
    ) -> Result<T, lock_store::Error> {
        loop {
            match call() {
                Err(lock_store::Error::Store(
                    StoreError::Lost { .. } | StoreError::Connect { .. },
                )) => std::thread::sleep(Duration::from_millis(20)),
                other => return other,
            }
        }
    }

    /// A throwaway Redis of this test's own, restarted without persistence: leases are gone
    /// after the restart (as docs/stores.md says), and fences after it exceed every fence before.
    #[test]
    fn redis_restart_keeps_fences_increasing() {
        let server = Throwaway::new(0, NO_PERSISTENCE);
        let locks = lock_store::Locks::open(&server.url(), "restart").unwrap();
        let before = hold_five(&locks);
        server.shutdown();
        server.start();
        // The same client: its connection is gone; the first call fails typed or reconnects.
        let after =
            after_restart(|| locks.try_acquire("k0", "b", Duration::from_secs(60))).unwrap();
        // "k0" was held by "a" for a minute; the restart lost that lease (no persistence).
        assert!(
            before.iter().all(|&f| after.fence() > f),
            "{:?} then {:?}",
            before,
            after.fence()
        );
    }

    /// A server that lost its scripts (`SCRIPT FLUSH`, as after a restart or a failover to a
    /// replica that never ran them) while the client stays connected: the next write loads the
    /// script again and succeeds, once (the refused `EVALSHA` ran nothing).
    #[test]
    fn redis_without_the_script_loads_it_again() {
        let server = Throwaway::new(2, NO_PERSISTENCE);
        // Tokens counted from 1 (no time floor), so that a token burnt by the refused call
        // would show.
        let mut store = common::installed(lock_store::store::RedisStore::open(
            &server.url(),
            "noscript",
            Duration::from_secs(5),
        ));
        store.set_seed_from_time(false);
        let locks = lock_store::Locks::new(store);
        let first = locks
            .try_acquire("k", "a", Duration::from_secs(60))
            .unwrap();
        let fence = first.fence();
        let mut admin = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query::<()>(&mut admin)
            .unwrap();
        first.release().unwrap();
        let second = locks
            .try_acquire("k", "b", Duration::from_secs(60))
            .unwrap();
        assert_eq!(second.fence(), Fence(fence.0 + 1));
    }

    /// Redis with an append-only file synced at every write (`appendfsync always`), killed with
    /// SIGKILL while leases are held: as the docs say, the leases come back from the file and
    /// fences continue above every one issued before.
    #[test]
    fn redis_with_aof_keeps_leases_across_a_kill() {
        let server = Throwaway::new(1, AOF_ALWAYS);
        let locks = lock_store::Locks::open(&server.url(), "aof").unwrap();
        let before = hold_five(&locks);
        server.kill();
        server.start();
        let held = after_restart(|| locks.try_acquire("k0", "b", Duration::from_secs(60)));
        assert!(
            matches!(held, Err(lock_store::Error::Lock(LockError::Held { .. }))),
            "the lease did not survive: {held:?}"
        );
        // A restarted Redis is a new authority (its run_id): it grants nothing for the longest
        // lease written (an append-only file synced every second loses the last writes), until
        // an operator who knows better ends the recovery.
        match locks.try_acquire("new", "b", Duration::from_secs(60)) {
            Err(lock_store::Error::Store(StoreError::Recovering { until, at, .. })) => {
                let span = until.0 - at.0;
                assert!(span <= 60_000 && span > 59_000, "recovers for {span} ms");
            }
            other => panic!("not recovering after a restart: {other:?}"),
        }
        server.query::<i64>(redis::cmd("HDEL").arg("{el:aof}:authority").arg("until"));
        let info = locks.inspect("k4").unwrap().expect("k4 is still held");
        assert_eq!(
            (
                info.holder().unwrap().owner.as_str(),
                info.holder().unwrap().fence
            ),
            ("a", before[4])
        );
        let next = locks
            .try_acquire("new", "b", Duration::from_secs(60))
            .unwrap();
        assert!(
            before.iter().all(|&f| next.fence() > f),
            "{:?} then {:?}",
            before,
            next.fence()
        );
    }
}

#[cfg(feature = "postgres")]
mod postgres_faults {
    use super::*;
    use lock_store::store::PostgresStore;

    fn open(ns: &str) -> PostgresStore {
        common::installed(PostgresStore::open(
            &common::postgres_url(),
            ns,
            Duration::from_secs(5),
        ))
    }

    fn admin() -> postgres::Client {
        postgres::Client::connect(&common::postgres_url(), postgres::NoTls).unwrap()
    }

    #[test]
    fn postgres_terminate_backend() {
        let ns = common::unique_namespace("faults");
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || open(&ns).uninstall().unwrap()
        });
        survives_dropped_connections("postgres", open(&ns), killer(&ns));
    }

    #[test]
    fn postgres_terminate_backend_while_waiting() {
        let ns = common::unique_namespace("faults");
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || open(&ns).uninstall().unwrap()
        });
        survives_a_drop_while_waiting("postgres", &common::postgres_url(), &ns, killer(&ns));
    }

    /// The connection that installed the schema is the one the calls use: an opened store is
    /// connected, and its first call does not connect (it once did, inside the benchmark's
    /// timed window: the 64-connection tail).
    #[test]
    fn postgres_store_is_connected_when_opened() {
        let ns = common::unique_namespace("faults");
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || open(&ns).uninstall().unwrap()
        });
        let name = format!("lock-store:{ns}");
        let backends = || -> Vec<i32> {
            admin()
                .query(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                    &[&name],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect()
        };
        let mut store = open(&ns);
        let opened = backends();
        assert_eq!(opened.len(), 1, "{opened:?}");
        assert!(store.read("job").unwrap().record.is_none());
        assert_eq!(store.last_fence().unwrap(), Fence(0));
        assert!(store.keys().unwrap().is_empty());
        assert_eq!(backends(), opened, "the calls used the opening connection");
    }

    /// Terminates every backend of namespace `ns` (its application name).
    fn killer(ns: &str) -> impl FnMut() -> usize + Send + 'static {
        let name = format!("lock-store:{ns}");
        let mut admin = admin();
        move || {
            admin
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                    &[&name],
                )
                .map_or(0, |rows| rows.iter().filter(|r| r.get::<_, bool>(0)).count())
        }
    }

    #[test]
    fn postgres_corrupt_record() {
        let ns = common::unique_namespace("faults");
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || open(&ns).uninstall().unwrap()
        });
        let holder = hold_job(open(&ns));
        let (n1, n2) = (ns.clone(), ns.clone());
        corrupt_record_is_reported(
            "postgres",
            holder,
            open(&ns),
            move |bytes| {
                admin()
                    .execute(
                        &format!("UPDATE {n1}.records SET record = $1 WHERE key = 'job'"),
                        &[&bytes],
                    )
                    .unwrap();
            },
            move || {
                admin()
                    .query_one(
                        &format!("SELECT record FROM {n2}.records WHERE key = 'job'"),
                        &[],
                    )
                    .unwrap()
                    .get(0)
            },
        );
    }
}

#[cfg(feature = "mysql")]
mod mysql_faults {
    use super::*;
    use lock_store::store::MysqlStore;
    use mysql::prelude::Queryable;

    /// Each test gets its own database, so its connections can be told apart (and killed).
    fn database(ns: &str) -> String {
        let mut admin = admin();
        admin
            .query_drop(format!("CREATE DATABASE IF NOT EXISTS `{ns}`"))
            .unwrap();
        common::mysql_url()
            .rsplit_once('/')
            .map(|(base, _)| format!("{base}/{ns}"))
            .unwrap()
    }

    fn admin() -> mysql::Conn {
        mysql::Conn::new(mysql::Opts::from_url(&common::mysql_url()).unwrap()).unwrap()
    }

    fn drop_database(ns: &str) {
        let _ = admin().query_drop(format!("DROP DATABASE IF EXISTS `{ns}`"));
    }

    #[test]
    fn mariadb_kill() {
        let ns = common::unique_namespace("faults");
        let url = database(&ns);
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || drop_database(&ns)
        });
        let store = common::installed(MysqlStore::open(&url, "faults", Duration::from_secs(5)));
        survives_dropped_connections("mariadb", store, killer(&ns));
    }

    #[test]
    fn mariadb_kill_while_waiting() {
        let ns = common::unique_namespace("faults");
        let url = database(&ns);
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || drop_database(&ns)
        });
        survives_a_drop_while_waiting("mariadb", &url, "faults", killer(&ns));
    }

    /// Kills every connection to database `db` (each test has its own).
    fn killer(db: &str) -> impl FnMut() -> usize + Send + 'static {
        let db = db.to_owned();
        let mut admin = admin();
        move || {
            let ids: Vec<u64> = admin
                .exec(
                    "SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()",
                    (&db,),
                )
                .unwrap_or_default();
            ids.into_iter()
                .filter(|id| admin.query_drop(format!("KILL {id}")).is_ok())
                .count()
        }
    }

    #[test]
    fn mariadb_corrupt_record() {
        let ns = common::unique_namespace("faults");
        let url = database(&ns);
        let _cleanup = common::Cleanup({
            let ns = ns.clone();
            move || drop_database(&ns)
        });
        let holder = hold_job(common::installed(MysqlStore::open(
            &url,
            "faults",
            Duration::from_secs(5),
        )));
        let (n1, n2) = (ns.clone(), ns.clone());
        corrupt_record_is_reported(
            "mariadb",
            holder,
            common::installed(MysqlStore::open(&url, "faults", Duration::from_secs(5))),
            move |bytes| {
                admin()
                    .exec_drop(
                        format!("UPDATE `{n1}`.faults_records SET record = ? WHERE k = 'job'"),
                        (bytes,),
                    )
                    .unwrap();
            },
            move || {
                admin()
                    .query_first(format!(
                        "SELECT record FROM `{n2}`.faults_records WHERE k = 'job'"
                    ))
                    .unwrap()
                    .unwrap()
            },
        );
    }
}

/// A throwaway PostgreSQL cluster of this test's own (initdb, its own port and directory),
/// restarted, then crashed (`-m immediate`) and started again, while a client holds a lease:
/// the lease survives (committed rows), the client's next calls fail typed or reconnect, and
/// fences continue above every one issued before. The blocking, the async and the Node client
/// alike (Node with `LOCKSTORE_NODE_WORKERS`).
#[cfg(feature = "postgres")]
#[test]
fn postgres_restart_keeps_leases_and_fences() {
    let port = 15500 + (std::process::id() % 400) as u16;
    let server = common::postgres_server::Cluster::init("pg_restart", port);
    let url = server.url();
    let locks = lock_store::Locks::open(&url, "restart").unwrap();
    // The async face on the same server: its connections die with the server too.
    #[cfg(feature = "tokio")]
    let runtime = common::runtime(2);
    #[cfg(feature = "tokio")]
    let async_locks = runtime
        .block_on(lock_store::aio::Locks::open(&url, "restart"))
        .unwrap();
    // The npm package's client on the same server.
    let mut node = node::NodeClient::start("postgres_restart");
    if let Some(node) = node.as_mut() {
        node.call(&["open", &url, "restart"]).unwrap();
    }
    let mut highest = Fence(0);
    // A clean restart, then a crash (immediate shutdown: no checkpoint, recovery from the WAL at
    // the next start; the sequence's cached values are skipped, never reissued).
    for (round, mode) in ["fast", "immediate"].into_iter().enumerate() {
        let key = format!("job{round}");
        let lease = locks
            .try_acquire(&key, "a", Duration::from_secs(120))
            .unwrap();
        #[cfg(feature = "tokio")]
        let async_lease = runtime
            .block_on(async_locks.try_acquire(
                &format!("async{round}"),
                "c",
                Duration::from_secs(120),
            ))
            .unwrap();
        let node_fence = node.as_mut().map(|node| {
            let fence: u64 = node
                .call(&["acquire", &format!("node{round}"), "n", "120000"])
                .unwrap()
                .parse()
                .unwrap();
            highest = highest.max(Fence(fence));
            fence
        });
        // A few grants, so that the sequence is in the middle of a block it logged ahead.
        for i in 0..5 {
            let other = locks
                .try_acquire(&format!("burst{round}_{i}"), "b", Duration::from_secs(10))
                .unwrap();
            highest = highest.max(other.fence());
            other.release().unwrap();
        }
        server.restart(mode);
        let info = loop {
            match locks.inspect(&key) {
                Ok(info) => break info,
                Err(lock_store::Error::Store(
                    StoreError::Lost { .. } | StoreError::Connect { .. },
                )) => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("{mode}: {e}"),
            }
        };
        let info = info.unwrap_or_else(|| panic!("{mode}: the lease did not survive"));
        assert_eq!(
            (
                info.holder().unwrap().owner.as_str(),
                info.holder().unwrap().fence
            ),
            ("a", lease.fence()),
            "{mode}"
        );
        let next = locks
            .try_acquire(&format!("after{round}"), "b", Duration::from_secs(10))
            .unwrap();
        assert!(next.fence() > highest, "{mode}: a fence issued again");
        highest = next.fence();
        lease.release().unwrap();
        // The async face reconnects by itself: its lease survived, and its next grant's fence
        // is new.
        #[cfg(feature = "tokio")]
        runtime.block_on(async {
            let info = loop {
                match async_locks.inspect(&format!("async{round}")).await {
                    Ok(info) => break info,
                    Err(lock_store::Error::Store(
                        StoreError::Lost { .. } | StoreError::Connect { .. },
                    )) => tokio::time::sleep(Duration::from_millis(50)).await,
                    Err(e) => panic!("{mode} (async): {e}"),
                }
            };
            let info = info.unwrap_or_else(|| panic!("{mode}: the async lease did not survive"));
            assert_eq!(
                (
                    info.holder().unwrap().owner.as_str(),
                    info.holder().unwrap().fence
                ),
                ("c", async_lease.fence()),
                "{mode} (async)"
            );
            let next = async_locks
                .try_acquire(&format!("async_after{round}"), "d", Duration::from_secs(10))
                .await
                .unwrap();
            assert!(
                next.fence() > highest,
                "{mode} (async): a fence issued again"
            );
            highest = next.fence();
            async_lease.release().await.unwrap();
        });
        // The Node client reconnects by itself too.
        if let (Some(node), Some(fence)) = (node.as_mut(), node_fence) {
            let key = format!("node{round}");
            let info = common::eventually("the Node client back", || {
                match node.call(&["inspect", &key]) {
                    Ok(info) => Some(info),
                    Err(e) if e.code == "lost" || e.code == "connect" => None,
                    Err(e) => panic!("{mode} (Node): {e:?}"),
                }
            });
            assert_eq!(info, format!("n {fence}"), "{mode}: the Node lease");
            let next: u64 = node
                .call(&["acquire", &format!("node_after{round}"), "m", "10000"])
                .unwrap()
                .parse()
                .unwrap();
            assert!(next > highest.0, "{mode} (Node): a fence issued again");
            highest = Fence(next);
            node.call(&["release", &key]).unwrap();
            node.call(&["release", &format!("node_after{round}")])
                .unwrap();
        }
    }
}
