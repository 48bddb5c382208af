//! Recovery after a change of authority, on the tests' servers (Redis, PostgreSQL, MariaDB):
//! a namespace whose last authority is another server (what a promoted replica's or a restored
//! copy looks like; `tests/fence_failover.rs` runs the real failovers), with one holder whose
//! record survived and one whose record was lost. The new authority's first grant starts the
//! recovery: for the longest a written lease held its place, it grants nothing (a typed
//! `recovering`, the same instants on both faces); the surviving holder extends and releases;
//! the holder whose record vanished learns its loss at its next extension; an acquire that may
//! wait is granted when the recovery ends, not before (the grant instant, in the store's time).

mod common;

use std::time::Duration;

use lock_core::Instant;
use lock_store::{Error, Locks, StoreError};

/// Every lease's TTL: the recovery lasts as long.
const TTL: Duration = Duration::from_millis(2_500);

/// What an administrator (or a failover) does to the namespace behind the clients' backs.
fn admin(label: &str, ns: &str, what: &str) {
    match label {
        #[cfg(feature = "redis")]
        "redis" => {
            let client = redis::Client::open(common::redis_url()).unwrap();
            let mut conn = client.get_connection().unwrap();
            let prefix = format!("{{el:{ns}}}");
            match what {
                "take over" => redis::cmd("HSET")
                    .arg(format!("{prefix}:authority"))
                    .arg("id")
                    .arg("another server")
                    .query::<()>(&mut conn)
                    .unwrap(),
                lost => redis::cmd("DEL")
                    .arg(format!("{prefix}:k:{lost}"))
                    .query::<()>(&mut conn)
                    .unwrap(),
            }
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            let mut client =
                postgres::Client::connect(&common::postgres_url(), postgres::NoTls).unwrap();
            let sql = match what {
                "take over" => {
                    format!(
                        "UPDATE {ns}.meta SET value = 'another server' \
                         WHERE name IN ('authority', 'timeline')"
                    )
                }
                lost => format!("DELETE FROM {ns}.records WHERE key = '{lost}'"),
            };
            client.batch_execute(&sql).unwrap();
        }
        #[cfg(feature = "mysql")]
        "mysql" => {
            use mysql::prelude::Queryable;
            let opts = mysql::Opts::from_url(&common::mysql_url()).unwrap();
            let mut conn = mysql::Conn::new(opts).unwrap();
            let sql = match what {
                "take over" => {
                    format!("UPDATE `{ns}_meta` SET value = '99' WHERE name = 'authority'")
                }
                lost => format!("DELETE FROM `{ns}_records` WHERE k = '{lost}'"),
            };
            conn.query_drop(sql).unwrap();
        }
        other => panic!("no admin for {other} ({ns}, {what})"),
    }
}

/// The span of a `recovering` refusal, and its end.
fn recovering(label: &str, e: Error) -> (Duration, Instant) {
    match e {
        Error::Store(StoreError::Recovering { until, at, .. }) => {
            (Duration::from_millis(until.0.saturating_sub(at.0)), until)
        }
        other => panic!("{label}: not a recovery: {other}"),
    }
}

#[test]
fn a_new_authority_grants_nothing_for_the_longest_lease_and_holders_learn_what_was_lost() {
    for (label, url) in common::server_urls() {
        let ns = common::unique_namespace("recovery");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let before = Locks::open(&url, &ns).unwrap();
        let kept = before.try_acquire("kept", "a", TTL).unwrap();
        let gone = before.try_acquire("gone", "b", TTL).unwrap();
        admin(label, &ns, "gone");
        admin(label, &ns, "take over");
        // A client of the new authority (new connections, as after a failover).
        let after = Locks::open(&url, &ns).unwrap();
        let refused = after.try_acquire("free", "c", TTL).unwrap_err();
        let (span, until) = recovering(label, refused);
        assert!(
            span <= TTL && span > TTL - Duration::from_secs(1),
            "{label}: recovers for {span:?}"
        );
        // Still recovering: the same end, whoever asks (a steal is a grant too).
        let again = after
            .steal("kept", "c", TTL, &lock_core::AcquireOptions::EXCLUSIVE)
            .unwrap_err();
        assert_eq!(recovering(label, again).1, until, "{label}");
        // The holder whose record survived extends and releases: nothing is granted by that.
        kept.extend(TTL).unwrap_or_else(|e| panic!("{label}: {e}"));
        kept.release().unwrap_or_else(|e| panic!("{label}: {e}"));
        // The one whose record was lost learns it at its next extension.
        assert!(gone.extend(TTL).is_err(), "{label}: a lost record extended");
        assert!(gone.is_lost(), "{label}");
        // An acquire that may wait is granted when the recovery ends, not before.
        let waited = after
            .acquire("free", "c", TTL, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let info = after.inspect("free").unwrap().unwrap();
        let granted = info.holder().and_then(|h| h.granted_at).unwrap();
        assert!(
            granted >= until,
            "{label}: granted at {granted:?}, recovering until {until:?}"
        );
        waited.release().unwrap();
        // Then grants go on as usual.
        after
            .try_acquire("free", "d", TTL)
            .unwrap()
            .release()
            .unwrap();
    }
}

/// The async face: the same refusal, and an acquire that waits it out.
#[cfg(feature = "tokio")]
#[test]
fn the_async_face_is_refused_alike_and_waits_the_recovery_out() {
    for (label, url) in common::server_urls() {
        let ns = common::unique_namespace("recovery_aio");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let runtime = common::runtime(1);
        runtime.block_on(async {
            let before = lock_store::aio::Locks::open(&url, &ns).await.unwrap();
            before.try_acquire("kept", "a", TTL).await.unwrap();
        });
        admin(label, &ns, "take over");
        runtime.block_on(async {
            let after = lock_store::aio::Locks::open(&url, &ns).await.unwrap();
            let refused = after.try_acquire("free", "c", TTL).await.unwrap_err();
            let (span, until) = recovering(label, refused);
            assert!(
                span <= TTL && span > TTL - Duration::from_secs(1),
                "{label}"
            );
            let lease = after
                .acquire("free", "c", TTL, Duration::from_secs(10))
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            let info = after.inspect("free").await.unwrap().unwrap();
            let granted = info.holder().and_then(|h| h.granted_at).unwrap();
            assert!(
                granted >= until,
                "{label}: granted at {granted:?}, until {until:?}"
            );
            lease.release().await.unwrap();
        });
    }
}

/// A try that cannot wait is answered at once, with nothing written: the key stays free for
/// the first request after the recovery.
#[test]
fn a_refused_grant_writes_nothing() {
    for (label, url) in common::server_urls() {
        let ns = common::unique_namespace("recovery_try");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let before = Locks::open(&url, &ns).unwrap();
        before.try_acquire("kept", "a", TTL).unwrap();
        let last = before.last_fence().unwrap();
        admin(label, &ns, "take over");
        let after = Locks::open(&url, &ns).unwrap();
        for _ in 0..3 {
            recovering(label, after.try_acquire("free", "c", TTL).unwrap_err());
        }
        assert!(after.inspect("free").unwrap().is_none(), "{label}");
        assert!(after.last_fence().unwrap() >= last, "{label}");
    }
}

/// Two writers whose statements began before either took over (both wait for the take-over's
/// lock, held here until both do): the first starts the recovery and is refused; the second
/// finds the take-over done and is refused as well, although its statement's snapshot predates
/// the recovery (found by the fault suite: such a writer was granted inside the recovery).
#[cfg(feature = "postgres")]
#[test]
fn postgres_writers_racing_a_take_over_are_both_refused() {
    let url = common::postgres_url();
    let ns = common::unique_namespace("takeover_race");
    let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
    let before = Locks::open(&url, &ns).unwrap();
    before.try_acquire("held", "a", TTL).unwrap();
    admin("postgres", &ns, "take over");
    let mut blocker = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut watcher = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = blocker.transaction().unwrap();
    let lock = format!("expiring-locks take-over {ns}");
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&lock])
        .unwrap();
    let holder: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let (first, second) = std::thread::scope(|s| {
        let ask = |key: &'static str| {
            let (url, ns) = (&url, &ns);
            s.spawn(move || Locks::open(url, ns).unwrap().try_acquire(key, key, TTL))
        };
        let (a, b) = (ask("k1"), ask("k2"));
        common::eventually("both writers wait for the take-over's lock", || {
            let waiting: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_locks w JOIN pg_locks g ON g.locktype = 'advisory' \
                     AND g.granted AND g.pid = $1 AND w.classid = g.classid AND w.objid = g.objid \
                     AND w.objsubid = g.objsubid WHERE w.locktype = 'advisory' AND NOT w.granted",
                    &[&holder],
                )
                .unwrap()
                .get(0);
            (waiting == 2).then_some(())
        });
        tx.commit().unwrap();
        (a.join().unwrap(), b.join().unwrap())
    });
    for (writer, answer) in [("first", first), ("second", second)] {
        match answer {
            Err(e) => {
                recovering("postgres", e);
            }
            Ok(lease) => panic!(
                "the {writer} writer was granted {} inside the recovery",
                lease.fence().0
            ),
        }
    }
}
