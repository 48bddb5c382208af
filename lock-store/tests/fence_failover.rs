//! Fences across a failover that lost the tail of the writes (throwaway servers of this test's
//! own). Redis: a replica that stopped following is promoted after its primary granted more
//! leases, then died; every token the promoted replica issues is above every token the primary
//! issued (each token is at least the server's time in microseconds). With the counter alone
//! (the tests' mode that expects tokens 1, 2, 3...), it hands out tokens already issued: the
//! failure this rule is for. And the end of the tokens, 2^53 - 1.
#![cfg(feature = "redis")]
mod common;

use std::time::Duration;

use lock_core::Fence;
use lock_store::Locks;

const TTL: Duration = Duration::from_secs(60);

/// `n` grants of `key`, each released: their fences.
fn grants(locks: &Locks, key: &str, n: usize) -> Vec<Fence> {
    (0..n)
        .map(|_| {
            let lease = locks.try_acquire(key, "holder", TTL).unwrap();
            let fence = lease.fence();
            lease.release().unwrap();
            fence
        })
        .collect()
}

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
        let last = locks.try_acquire("job", "a", TTL).unwrap();
        assert_eq!(last.fence(), Fence(end));
        let refused = locks.try_acquire("other", "b", TTL);
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
