//! Fences across a failover that lost the tail of the writes (throwaway servers of this test's
//! own). Redis: a replica that stopped following is promoted after its primary granted more
//! leases, then died; every token the promoted replica issues is above every token the primary
//! issued (each token is at least the server's time in microseconds). PostgreSQL: a standby
//! stopped, the primary grants more and crashes, the standby is started and promoted; its first
//! write that takes tokens moves the sequence up to the server's time (a new authority), so
//! again every token is above the primary's. With the counter alone (the tests' mode that
//! expects tokens 1, 2, 3...), each hands out tokens already issued: the failure these rules
//! are for. MariaDB: a replica stops following, the primary grants more and is killed, the
//! replica is promoted; its procedure sees another server id as the namespace's authority and
//! moves the sequence up to the server's time first. And the end of the tokens, 2^53 - 1.
#![cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
mod common;
#[cfg(feature = "mysql")]
#[path = "common/mariadb_server.rs"]
mod mariadb_server;

#[path = "common/failover.rs"]
mod failover;

use std::time::Duration;

use failover::grants;
use lock_core::Fence;
use lock_store::Locks;

#[cfg(feature = "redis")]
mod redis_replica {
    use super::*;
    use common::redis_server::{Throwaway, NO_PERSISTENCE};
    use lock_store::store::RedisStore;
    use rustix::process::{kill_process, Signal};

    fn open(url: &str, ns: &str, time_floor: bool) -> Locks {
        let mut store = common::installed(RedisStore::open(url, ns, Duration::from_secs(5)));
        store.set_seed_from_time(time_floor);
        Locks::new(store)
    }

    /// Grants on a primary (its port and its replica's: `ports` and the next), some of them reaching its replica; the replica stops following, the
    /// primary grants `missed` more and dies; the replica is promoted. Answers the fences the
    /// primary issued, what the promoted replica's counter says, and its next fences (on the key
    /// and on another key).
    fn promote_a_lagging_replica(
        ports: u16,
        time_floor: bool,
        missed: usize,
    ) -> (Vec<Fence>, Fence, Vec<Fence>) {
        let primary = Throwaway::new(ports, NO_PERSISTENCE);
        let replica = Throwaway::replica_of(ports + 1, &primary);
        let ns = common::unique_namespace("failover");
        let locks = open(&primary.url(), &ns, time_floor);
        let mut issued = grants(&locks, "job", 3);
        let reached: i64 = primary.query(redis::cmd("WAIT").arg(1).arg(5_000));
        assert_eq!(reached, 1, "the replica has the first grants");
        // The replica stops following: its process is paused, and the primary drops its link (as
        // when a replica that stopped reading overflows its output buffer), so that what follows
        // never reaches it, not even through the socket's buffers.
        let replica_pid = replica.pid();
        kill_process(replica_pid, Signal::STOP).unwrap();
        let dropped: i64 =
            primary.query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"));
        assert_eq!(dropped, 1);
        issued.extend(grants(&locks, "job", missed));
        drop(locks);
        primary.kill();
        kill_process(replica_pid, Signal::CONT).unwrap();
        let _: String = replica.query(redis::cmd("REPLICAOF").arg("NO").arg("ONE"));
        let promoted = open(&replica.url(), &ns, time_floor);
        let counter = promoted.last_fence().unwrap();
        // It grants nothing for the longest lease written (tests/recovery.rs has the rest),
        // until an operator who knows better ends it.
        failover::recovers_for_the_ttl(&promoted);
        let _: i64 = replica.query(
            redis::cmd("HDEL")
                .arg(format!("{{el:{ns}}}:authority"))
                .arg("until"),
        );
        let mut after = grants(&promoted, "job", 2);
        after.extend(grants(&promoted, "other", 1));
        (issued, counter, after)
    }

    #[test]
    fn a_replica_promoted_after_missing_grants_never_issues_their_fences_again() {
        let (issued, counter, after) = promote_a_lagging_replica(0, true, 5);
        let last = *issued.iter().max().unwrap();
        assert!(
            counter < last,
            "the replica missed the last grants (its counter {counter:?}, the primary's {last:?})"
        );
        assert!(issued.windows(2).all(|w| w[0] < w[1]), "{issued:?}");
        assert!(
            after.iter().all(|f| *f > last),
            "the promoted replica issued {after:?}, the primary up to {last:?}: {issued:?}"
        );
    }

    #[test]
    fn with_the_counter_alone_the_promoted_replica_issues_fences_again() {
        // The control: what the time floor prevents (and what every build before it did).
        let (issued, counter, after) = promote_a_lagging_replica(2, false, 5);
        assert_eq!(counter, Fence(3), "{issued:?}");
        assert_eq!(after, [Fence(4), Fence(5), Fence(6)], "{issued:?}");
        assert!(after.iter().all(|f| issued.contains(f)), "issued twice");
    }

    #[test]
    fn the_last_token_below_2_53_is_issued_and_the_next_grant_refused_without_a_write() {
        // The counter a step before the end (JavaScript's exact integers): one more token, then
        // `FencesExhausted`, and the counter, the record and the holder stay as they were.
        let server = Throwaway::new(4, NO_PERSISTENCE);
        let ns = common::unique_namespace("exhausted");
        let locks = open(&server.url(), &ns, true);
        drop(grants(&locks, "job", 1));
        let end: u64 = (1 << 53) - 1;
        let counter = format!("{{el:{ns}}}:fence");
        let _: String = server.query(redis::cmd("SET").arg(&counter).arg(end - 1));
        let last = locks.try_acquire("job", "a", failover::TTL).unwrap();
        assert_eq!(last.fence(), Fence(end));
        let refused = locks.try_acquire("other", "b", failover::TTL);
        assert!(
            matches!(
                refused,
                Err(lock_store::Error::Store(
                    lock_store::StoreError::FencesExhausted { .. }
                ))
            ),
            "{refused:?}"
        );
        let kept: u64 = server.query(redis::cmd("GET").arg(&counter));
        assert_eq!(kept, end);
        assert_eq!(locks.inspect("other").unwrap(), None);
        assert_eq!(
            locks.inspect("job").unwrap().unwrap().holders[0].fence,
            Fence(end)
        );
    }
}

#[cfg(feature = "postgres")]
mod postgres_standby {
    use super::*;
    use common::postgres_server::Cluster;
    use lock_store::store::PostgresStore;

    fn open(url: &str, ns: &str, from_time: bool) -> Locks {
        let mut store = common::installed(PostgresStore::open(url, ns, Duration::from_secs(5)));
        store.set_seed_from_time(from_time);
        Locks::new(store)
    }

    /// Grants on a primary that reach its standby; the standby stops (as one that fell
    /// behind), the primary grants `missed` more and crashes; the standby is started and
    /// promoted. Answers the fences the primary issued and the promoted standby's next fences
    /// (on the key and on another key).
    fn promote_a_lagging_standby(
        offset: u16,
        from_time: bool,
        missed: usize,
    ) -> (Vec<Fence>, Vec<Fence>) {
        let port = 15100 + (std::process::id() % 100) as u16 * 4 + offset;
        let primary = Cluster::init("pg_primary", port);
        let standby = Cluster::standby_of(&primary, "pg_standby", port + 1);
        let ns = common::unique_namespace("failover");
        let locks = open(&primary.url(), &ns, from_time);
        let mut issued = grants(&locks, "job", 5);
        primary.caught_up(&standby);
        standby.stop("fast");
        issued.extend(grants(&locks, "job", missed));
        drop(locks);
        primary.stop("immediate");
        standby.start();
        standby.promote();
        let promoted = open(&standby.url(), &ns, from_time);
        failover::recovers_for_the_ttl(&promoted);
        standby.query(&format!(
            "DELETE FROM {ns}.meta WHERE name = 'recovering_until'"
        ));
        let mut after = grants(&promoted, "job", 2);
        after.extend(grants(&promoted, "other", 1));
        (issued, after)
    }

    #[test]
    fn a_standby_promoted_after_missing_grants_never_issues_their_fences_again() {
        let (issued, after) = promote_a_lagging_standby(0, true, 40);
        let last = *issued.iter().max().unwrap();
        assert!(issued.windows(2).all(|w| w[0] < w[1]), "{issued:?}");
        assert!(
            after.iter().all(|f| *f > last),
            "the promoted standby issued {after:?}, the primary up to {last:?}: {issued:?}"
        );
        assert!(after.windows(2).all(|w| w[0] < w[1]), "{after:?}");
    }

    #[test]
    fn with_the_sequence_alone_the_promoted_standby_issues_fences_again() {
        // The control: the sequence reached the standby up to its last logged value (32
        // ahead of the grants it saw), short of the primary's 45.
        let (issued, after) = promote_a_lagging_standby(2, false, 40);
        assert_eq!(issued.last(), Some(&Fence(45)), "{issued:?}");
        assert!(
            after.iter().all(|f| issued.contains(f)),
            "not issued twice: {after:?}"
        );
    }
}

/// The same rule without a real failover, on the tests' PostgreSQL server: a namespace whose
/// `meta` names another server as its last authority (as a promoted standby's copy does), its
/// sequence behind the tokens that server issued. The first grant moves the tokens up to this
/// server's time, once, on each face; a namespace of an earlier build (no `take_over()`) is
/// brought up to date by its owner's first write, and a role that may not change it writes on,
/// counting on.
#[cfg(feature = "postgres")]
mod postgres_authority {
    use super::*;

    fn client() -> postgres::Client {
        postgres::Client::connect(&common::postgres_url(), postgres::NoTls).unwrap()
    }

    fn admin(sql: &str) {
        client().batch_execute(sql).unwrap();
    }

    /// What another server's copy of namespace `ns` looks like: its authority, and a sequence
    /// that missed the last grants.
    fn copied_from_another_server(ns: &str, sequence: i64) {
        // No lease held its place there (tests/recovery.rs has the recovery that follows).
        admin(&format!(
            "UPDATE {ns}.meta SET value = 'another server' WHERE name = 'authority'; \
             UPDATE {ns}.meta SET value = '0' WHERE name = 'longest'"
        ));
        admin(&format!("SELECT setval('{ns}.fences', {sequence})"));
    }

    fn server_us() -> u64 {
        let sql = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
        client().query_one(sql, &[]).unwrap().get::<_, i64>(0) as u64
    }

    #[test]
    fn the_first_grant_on_a_new_authority_moves_the_tokens_once() {
        let ns = common::unique_namespace("authority");
        let url = common::postgres_url();
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let locks = Locks::open(&url, &ns).unwrap();
        let before = grants(&locks, "job", 3);
        let now = server_us();
        assert!(
            before[0].0 <= now && before[0].0 > now - 600_000_000,
            "the first token is the server's time in µs when it took over: {before:?}, {now}"
        );
        copied_from_another_server(&ns, 2);
        let after = grants(&locks, "job", 2);
        assert!(after[0] > before[2], "{before:?} then {after:?}");
        assert_eq!(after[1].0, after[0].0 + 1, "moved once");
        // The async face, likewise.
        copied_from_another_server(&ns, 2);
        #[cfg(feature = "tokio")]
        common::runtime(1).block_on(async {
            let locks = lock_store::aio::Locks::open(&url, &ns).await.unwrap();
            let lease = locks
                .try_acquire("job", "holder", failover::TTL)
                .await
                .unwrap();
            assert!(
                lease.fence() > after[1],
                "{after:?} then {:?}",
                lease.fence()
            );
            lease.release().await.unwrap();
        });
    }

    #[test]
    fn an_earlier_builds_namespace_is_brought_up_to_date_by_its_owners_first_write() {
        let ns = common::unique_namespace("authority_old");
        let url = common::postgres_url();
        let role = format!("{ns}_svc");
        let _cleanup = common::Cleanup(|| {
            common::uninstall(&url, &ns);
            let _ = postgres::Client::connect(&url, postgres::NoTls).map(|mut c| {
                c.batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE IF EXISTS {role}"))
            });
        });
        let before = grants(&Locks::open(&url, &ns).unwrap(), "job", 1);
        admin(&format!(
            "DROP FUNCTION {ns}.take_over(boolean); DROP FUNCTION {ns}.hold_for(bigint)"
        ));
        copied_from_another_server(&ns, 7);
        // A role that may use the namespace but not change it: it writes without take_over(),
        // counting on from the sequence (what every earlier build did).
        admin(&format!(
            "CREATE ROLE {role} LOGIN; \
             GRANT USAGE ON SCHEMA {ns} TO {role}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON {ns}.records TO {role}; \
             GRANT SELECT ON {ns}.meta TO {role}; \
             GRANT USAGE, SELECT ON SEQUENCE {ns}.fences TO {role};"
        ));
        let service = url.replacen("postgres@", &format!("{role}@"), 1);
        assert_eq!(
            grants(&Locks::open(&service, &ns).unwrap(), "job", 2),
            [Fence(8), Fence(9)]
        );
        // The owner's first write installs take_over() again, then takes over.
        let after = grants(&Locks::open(&url, &ns).unwrap(), "job", 1);
        assert!(after[0] > before[0], "{before:?} then {after:?}");
        // And the service role's next connection calls it too (the authority is this server
        // now: it counts on).
        let next = grants(&Locks::open(&service, &ns).unwrap(), "job", 1);
        assert_eq!(next[0].0, after[0].0 + 1);
    }
}

#[cfg(feature = "mysql")]
mod mariadb_replica {
    use super::*;
    use crate::mariadb_server::Mariadb;
    use lock_store::store::MysqlStore;

    fn open(url: &str, ns: &str, from_time: bool) -> Locks {
        let mut store = common::installed(MysqlStore::open(url, ns, Duration::from_secs(5)));
        store.set_seed_from_time(from_time);
        Locks::new(store)
    }

    /// Grants on a primary that reach its replica; the replica stops following (its SQL
    /// thread and link stopped, as one that fell behind), the primary grants `missed` more and
    /// is killed; the replica is promoted. Answers the fences the primary issued and the
    /// promoted replica's next fences (on the key and on another key).
    fn promote_a_lagging_replica(
        offset: u16,
        from_time: bool,
        missed: usize,
    ) -> (Vec<Fence>, Vec<Fence>) {
        let port = 16100 + (std::process::id() % 100) as u16 * 4 + offset;
        let mut primary = Mariadb::start("maria_primary", port, 1);
        let replica = Mariadb::replica_of(&primary, "maria_replica", port + 1, 2);
        primary.create_test_database();
        let ns = common::unique_namespace("failover");
        let locks = open(&primary.url(), &ns, from_time);
        let mut issued = grants(&locks, "job", 5);
        primary.caught_up(&replica);
        replica.run("STOP SLAVE");
        issued.extend(grants(&locks, "job", missed));
        drop(locks);
        primary.kill();
        replica.promote();
        let promoted = open(&replica.url(), &ns, from_time);
        failover::recovers_for_the_ttl(&promoted);
        replica.run(&format!(
            "DELETE FROM test.{ns}_meta WHERE name = 'recovering_until'"
        ));
        let mut after = grants(&promoted, "job", 2);
        after.extend(grants(&promoted, "other", 1));
        (issued, after)
    }

    #[test]
    fn a_replica_promoted_after_missing_grants_never_issues_their_fences_again() {
        let (issued, after) = promote_a_lagging_replica(0, true, 5);
        let last = *issued.iter().max().unwrap();
        assert!(issued.windows(2).all(|w| w[0] < w[1]), "{issued:?}");
        assert!(
            after.iter().all(|f| *f > last),
            "the promoted replica issued {after:?}, the primary up to {last:?}: {issued:?}"
        );
        assert!(after.windows(2).all(|w| w[0] < w[1]), "{after:?}");
    }

    #[test]
    fn with_the_sequence_alone_the_promoted_replica_issues_fences_again() {
        // The control: a NOCACHE sequence reached the replica up to the grants it applied.
        let (issued, after) = promote_a_lagging_replica(2, false, 5);
        assert_eq!(issued.last(), Some(&Fence(10)), "{issued:?}");
        assert_eq!(after, [Fence(6), Fence(7), Fence(8)], "{issued:?}");
    }
}

/// MariaDB's rule without a real failover, on the tests' server: a namespace whose `meta` names
/// another server id as its last authority, its sequence behind. A new client's write that
/// takes the next token (the single-`UPDATE` path, which holds only once the session saw the
/// authority, handing the write to the procedure) moves the tokens up to this server's time,
/// once; a namespace of an earlier build
/// (no `take-over` mark) is brought up to date by its owner's first write.
#[cfg(feature = "mysql")]
mod mariadb_authority {
    use super::*;
    use mysql::prelude::Queryable;

    fn admin(sql: &str) {
        let mut conn =
            mysql::Conn::new(mysql::Opts::from_url(&common::mysql_url()).unwrap()).unwrap();
        conn.query_drop(sql).unwrap();
    }

    /// Another server's copy of namespace `ns`: its authority, and a sequence that missed the
    /// last grants (`SETVAL` never moves back: a restart of the sequence does).
    fn copied_from_another_server(ns: &str, next: u64) {
        admin(&format!(
            "INSERT INTO `{ns}_meta` VALUES ('authority', '99') ON DUPLICATE KEY UPDATE value = '99'"
        ));
        // No lease held its place there (tests/recovery.rs has the recovery that follows).
        admin(&format!(
            "UPDATE `{ns}_meta` SET value = '0' WHERE name = 'longest'"
        ));
        admin(&format!("ALTER SEQUENCE `{ns}_fences` RESTART WITH {next}"));
    }

    #[test]
    fn the_first_grant_on_a_new_authority_moves_the_tokens_once() {
        let ns = common::unique_namespace("authority");
        let url = common::mysql_url();
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let locks = Locks::open(&url, &ns).unwrap();
        // Grants on a free key (the procedure) and on a released one (the single UPDATE).
        let before = grants(&locks, "job", 3);
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        assert!(
            before[0].0 > now_us - 600_000_000 && before.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "moved to the server's time once: {before:?}, {now_us}"
        );
        copied_from_another_server(&ns, 3);
        // A client of the new server (its connections are new: a session remembers the
        // authority it saw while its server and what that server applied stay the same).
        let after = grants(&Locks::open(&url, &ns).unwrap(), "job", 2);
        assert!(after[0] > before[2], "{before:?} then {after:?}");
        assert_eq!(after[1].0, after[0].0 + 1, "moved once");
    }

    #[test]
    fn an_earlier_builds_namespace_is_brought_up_to_date_by_its_owners_first_write() {
        let ns = common::unique_namespace("authority_old");
        let url = common::mysql_url();
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let before = grants(&Locks::open(&url, &ns).unwrap(), "job", 1);
        // An earlier build's namespace: no mark, a procedure that moves nothing.
        admin(&format!("DELETE FROM `{ns}_meta` WHERE name = 'take-over'"));
        copied_from_another_server(&ns, 3);
        let after = grants(&Locks::open(&url, &ns).unwrap(), "job", 2);
        assert!(after[0] > before[0], "{before:?} then {after:?}");
        assert_eq!(after[1].0, after[0].0 + 1);
    }
}
