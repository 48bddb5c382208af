//! Replicated stores as users deploy them (throwaway servers of this test's own), each failed
//! over under the blocking, the async (tokio) and the Node client (with
//! `LOCKSTORE_NODE_WORKERS`):
//!
//! - the clients follow the new primary: Redis through a `redis+sentinel://` URL (three
//!   Sentinels promote the replica of a killed primary), PostgreSQL and MariaDB through a
//!   multi-host URL with `target_session_attrs=read-write` (the replica, listed first, is passed
//!   over; after the failover the next calls connect to it), each with fences above every one
//!   before;
//! - what survives: with a synchronous PostgreSQL standby or a semi-synchronous MariaDB replica
//!   paused and cut off, the grants made meanwhile are never answered and every answered one is
//!   on the promoted server; with asynchronous replication (the controls, Redis's included),
//!   those grants were answered and their leases are gone, and the promoted server grants none
//!   of their keys while those leases may live (its recovery).
#![cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
mod common;
#[path = "common/failover.rs"]
mod failover;
#[cfg(feature = "mysql")]
#[path = "common/mariadb_server.rs"]
mod mariadb_server;
#[path = "common/node.rs"]
mod node;

use lock_core::Fence;
use lock_store::Locks;

use failover::TTL;
use node::NodeClient;

/// The TTL of the three clients' leases: after a failover the promoted server recovers for as
/// long (docs/stores.md, "Recovery after a change of authority"), which the clients wait out.
const CLIENT_TTL: std::time::Duration = std::time::Duration::from_secs(3);

/// The three clients of one namespace, each granted its own key: "job" (blocking), "async"
/// (tokio) and "node".
struct Clients {
    locks: Locks,
    #[cfg(feature = "tokio")]
    runtime: tokio::runtime::Runtime,
    #[cfg(feature = "tokio")]
    aio: lock_store::aio::Locks,
    node: Option<NodeClient>,
}

impl Clients {
    fn open(url: &str, ns: &str, test: &str) -> Clients {
        let mut node = NodeClient::start(test);
        if let Some(node) = node.as_mut() {
            node.call(&["open", url, ns]).unwrap();
        }
        #[cfg(feature = "tokio")]
        let runtime = common::runtime(1);
        Clients {
            locks: Locks::open(url, ns).unwrap(),
            #[cfg(feature = "tokio")]
            aio: runtime
                .block_on(lock_store::aio::Locks::open(url, ns))
                .unwrap(),
            #[cfg(feature = "tokio")]
            runtime,
            node,
        }
    }

    /// Each client's grant of its key, released (`None` while the store does not answer):
    /// the fences.
    fn try_grant_each(&mut self) -> Option<Vec<Fence>> {
        let mut fences = Vec::new();
        let lease = self.locks.try_acquire("job", "holder", CLIENT_TTL).ok()?;
        fences.push(lease.fence());
        lease.release().ok()?;
        #[cfg(feature = "tokio")]
        fences.push(self.runtime.block_on(async {
            let lease = self
                .aio
                .try_acquire("async", "holder", CLIENT_TTL)
                .await
                .ok()?;
            let fence = lease.fence();
            lease.release().await.ok()?;
            Some(fence)
        })?);
        if let Some(node) = self.node.as_mut() {
            let fence = node.call(&["acquire", "node", "n", "3000"]).ok()?;
            node.call(&["release", "node"]).ok()?;
            fences.push(Fence(fence.parse().ok()?));
        }
        Some(fences)
    }

    /// Each client's grant, the store answering: the highest fence.
    fn grant_each(&mut self) -> Fence {
        let fences = self
            .try_grant_each()
            .expect("each client is granted its key");
        fences.into_iter().max().unwrap()
    }

    /// After a failover: each client's grant once the store answers again (the first calls
    /// find their connection broken and fail typed) and has recovered (for [`CLIENT_TTL`]),
    /// every fence above `above`.
    fn grant_each_once_up(&mut self, above: Fence) {
        let fences =
            common::eventually_within("a grant from each client after the failover", 30, || {
                self.try_grant_each()
            });
        assert!(
            fences.iter().all(|f| *f > above),
            "fences {fences:?} after {above:?}"
        );
    }
}

#[cfg(feature = "postgres")]
mod postgres_multi_host {
    use super::*;
    use common::postgres_server::Cluster;

    #[test]
    fn a_multi_host_url_follows_the_primary_across_a_failover() {
        let port = 15100 + (std::process::id() % 100) as u16 * 4 + 40;
        let primary = Cluster::init("pg_mh_primary", port);
        let standby = Cluster::standby_of(&primary, "pg_mh_standby", port + 1);
        let url = format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{port}/postgres?target_session_attrs=read-write",
            port + 1
        );
        let ns = common::unique_namespace("multi_host");
        let mut clients = Clients::open(&url, &ns, "postgres multi-host");
        let before = clients.grant_each();
        primary.caught_up(&standby);
        primary.stop("immediate");
        standby.promote();
        clients.grant_each_once_up(before);
    }
}

#[cfg(feature = "redis")]
mod redis_sentinel {
    use super::*;
    use common::redis_server::{Sentinel, Throwaway, NO_PERSISTENCE};

    #[test]
    fn a_sentinel_url_follows_the_primary_across_a_failover() {
        let primary = Throwaway::new(5, NO_PERSISTENCE);
        let replica = Throwaway::replica_of(6, &primary);
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|i| Sentinel::watching(i, "locks", &primary))
            .collect();
        // Each Sentinel knows the replica (from the primary's INFO, every 10 s at first) and the
        // other Sentinels before a failover can promote it.
        for sentinel in &sentinels {
            common::eventually_within("the sentinels know the replica and each other", 30, || {
                let replicas: Vec<redis::Value> =
                    sentinel.query(redis::cmd("SENTINEL").arg("REPLICAS").arg("locks"));
                let others: Vec<redis::Value> =
                    sentinel.query(redis::cmd("SENTINEL").arg("SENTINELS").arg("locks"));
                (!replicas.is_empty() && others.len() == 2).then_some(())
            });
        }
        let addresses: Vec<String> = sentinels.iter().map(Sentinel::address).collect();
        let url = format!("redis+sentinel://{}/locks", addresses.join(","));
        let ns = common::unique_namespace("sentinel");
        let mut clients = Clients::open(&url, &ns, "redis sentinel");
        let before = clients.grant_each();
        let _: i64 = primary.query(redis::cmd("WAIT").arg(1).arg(5_000));
        primary.kill();
        clients.grant_each_once_up(before);
        let role: Vec<redis::Value> = replica.query(&mut redis::cmd("ROLE"));
        assert_eq!(
            role.first(),
            Some(&redis::Value::BulkString(b"master".to_vec()))
        );
    }
}

#[cfg(feature = "redis")]
mod redis_replication {
    use super::*;
    use common::redis_server::{Throwaway, NO_PERSISTENCE};
    use failover::{kept_on, lost_keys_wait_out_their_leases};
    use lock_store::{Error, StoreError};
    use rustix::process::{kill_process, Pid, Signal};

    /// Waits until `replica` has applied every write `primary` made (their replication
    /// offsets).
    fn caught_up(primary: &Throwaway, replica: &Throwaway) {
        let offset = |server: &Throwaway, field: &str| -> Option<u64> {
            (server.info("replication").lines())
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().parse().ok())
        };
        common::eventually("the replica caught up", || {
            let applied = offset(replica, "slave_repl_offset:")?;
            (Some(applied) == offset(primary, "master_repl_offset:")).then_some(())
        });
    }

    /// A paused server, sent `SIGCONT` when dropped (also when a test fails: a paused server
    /// answers nothing, not even the shutdown of its `Throwaway`).
    struct Paused(Pid);

    impl Drop for Paused {
        fn drop(&mut self) {
            let _ = kill_process(self.0, Signal::CONT);
        }
    }

    /// Pauses `replica` (`SIGSTOP`) and cuts it off: the primary drops its link (what it had
    /// sent into the link before would still reach the replica when it runs again).
    fn pause_and_cut_off(primary: &Throwaway, replica: &Throwaway) -> Paused {
        let paused = Paused(replica.pid());
        kill_process(paused.0, Signal::STOP).unwrap();
        let _: i64 = primary.query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"));
        paused
    }

    /// Whether `e` is a write the replicas did not acknowledge.
    fn unreplicated(e: &Error) -> bool {
        matches!(e, Error::Store(StoreError::Unreplicated { reason, .. }) if reason.contains("0 of the 1 replicas"))
    }

    /// A Redis primary and its replica (asynchronous, as Redis replicates), a client whose URL
    /// ends with `params` (and a 1 s bound): three grants, the replica paused and cut off, three
    /// more tried (a refused one must have left its key free on the primary), then the primary
    /// killed and the replica promoted (`REPLICAOF NO ONE`), where no key of a lease it lost is
    /// granted while that lease may live (its recovery). Answers, for each lease granted,
    /// whether the promoted replica has it, and the refusals.
    fn fail_over_with_a_cut_off_replica(
        offset: u16,
        params: &str,
    ) -> (Vec<(String, bool)>, Vec<Error>) {
        let primary = Throwaway::new(offset, NO_PERSISTENCE);
        let replica = Throwaway::replica_of(offset + 1, &primary);
        let ns = common::unique_namespace("redis_replication");
        let locks = lock_store::Options::new()
            .bound(std::time::Duration::from_secs(1))
            .open(&format!("{}/{params}", primary.url()), &ns)
            .unwrap();
        let grant = |i: usize| locks.try_acquire(&format!("job{i}"), "holder", TTL);
        let mut held: Vec<_> = (0..3).map(|i| grant(i).unwrap()).collect();
        caught_up(&primary, &replica);
        let paused = pause_and_cut_off(&primary, &replica);
        let mut refused = Vec::new();
        for i in 3..6 {
            match grant(i) {
                Ok(lease) => held.push(lease),
                Err(e) => {
                    let plain = Locks::open(&primary.url(), &ns).unwrap();
                    let info = plain.inspect(&format!("job{i}")).unwrap();
                    assert!(
                        info.as_ref().and_then(|i| i.holder()).is_none(),
                        "job{i}: refused ({e}) but held on the primary: {info:?}"
                    );
                    refused.push(e);
                }
            }
        }
        primary.kill();
        drop(paused);
        let _: () = replica.query(redis::cmd("REPLICAOF").arg("NO").arg("ONE"));
        let promoted = Locks::open(&replica.url(), &ns).unwrap();
        let kept = kept_on(&promoted, &held);
        lost_keys_wait_out_their_leases(&promoted, &held);
        (kept, refused)
    }

    /// The control: the three leases granted while the replica was cut off are gone from it.
    #[test]
    fn with_asynchronous_replication_the_promoted_redis_replica_lost_granted_leases() {
        let (kept, refused) = fail_over_with_a_cut_off_replica(7, "");
        check_kept(&kept, 3);
        assert!(refused.is_empty(), "{refused:?}");
    }

    /// `wait_replicas=1`: the grants tried while no replica acknowledged were answered
    /// `unreplicated` and given back; every grant answered is on the promoted replica.
    #[test]
    fn with_wait_replicas_the_promoted_redis_replica_has_every_granted_lease() {
        let (kept, refused) =
            fail_over_with_a_cut_off_replica(9, "?wait_replicas=1&wait_timeout_ms=200");
        check_kept(&kept, 0);
        assert_eq!(refused.len(), 3);
        assert!(refused.iter().all(unreplicated), "{refused:?}");
    }

    /// Every face reads `wait_replicas`: with the replica following, the blocking, the async
    /// and the Node client are granted, each grant acknowledged before it is answered (the
    /// replica has the token counter); with the replica cut off, each one's try is answered
    /// `unreplicated` and its key left free, a lease's extension is answered `unreplicated`
    /// and leaves its deadline, and its release too, which tried again finds done (a read: no
    /// write to wait for); once the replica follows again, each client is granted.
    #[test]
    fn every_client_waits_for_the_replicas() {
        let primary = Throwaway::new(11, NO_PERSISTENCE);
        let replica = Throwaway::replica_of(12, &primary);
        let ns = common::unique_namespace("redis_wait_faces");
        let url = format!("{}/?wait_replicas=1&wait_timeout_ms=300", primary.url());
        let mut clients = Clients::open(&url, &ns, "redis wait_replicas");
        let before = clients.grant_each();
        let counter: u64 = replica.query(redis::cmd("GET").arg(format!("{{el:{ns}}}:fence")));
        assert!(counter >= before.0, "{counter} < {before:?}");
        let held = (clients.locks.try_acquire("held", "holder", TTL)).unwrap();
        let paused = pause_and_cut_off(&primary, &replica);
        // An extension made but not acknowledged leaves the lease's deadline as it was; a
        // release answers the error, and tried again finds it done.
        let deadline = held.deadline();
        let e = held.extend(CLIENT_TTL * 2).unwrap_err();
        assert!(unreplicated(&e), "extend: {e}");
        assert_eq!(held.deadline(), deadline);
        let e = held.release().unwrap_err();
        assert!(unreplicated(&e), "release: {e}");
        held.release().unwrap();
        let e = (clients.locks.try_acquire("job", "holder", CLIENT_TTL)).unwrap_err();
        assert!(unreplicated(&e), "blocking: {e}");
        #[cfg(feature = "tokio")]
        {
            let tried = clients.aio.try_acquire("async", "holder", CLIENT_TTL);
            let e = clients.runtime.block_on(tried).unwrap_err();
            assert!(unreplicated(&e), "tokio: {e}");
        }
        if let Some(node) = clients.node.as_mut() {
            let e = node.call(&["acquire", "node", "n", "3000"]).unwrap_err();
            assert_eq!(e.code, "unreplicated", "node: {}", e.message);
            assert!(e.message.contains("0 of the 1 replicas"), "{}", e.message);
        }
        let plain = Locks::open(&primary.url(), &ns).unwrap();
        for key in ["job", "async", "node"] {
            let info = plain.inspect(key).unwrap();
            assert!(
                info.as_ref().and_then(|i| i.holder()).is_none(),
                "{key}: held on the primary after a refused grant: {info:?}"
            );
        }
        drop(paused);
        let after = common::eventually_within("grants once the replica follows again", 30, || {
            clients.try_grant_each()
        });
        held.release().unwrap();
        assert!(plain
            .inspect("held")
            .unwrap()
            .and_then(|i| i.holder().cloned())
            .is_none());
        assert!(
            after.iter().all(|f| *f > before),
            "{after:?} after {before:?}"
        );
    }
}

#[cfg(feature = "mysql")]
mod mariadb_multi_host {
    use super::*;
    use crate::mariadb_server::Mariadb;

    #[test]
    fn a_multi_host_url_follows_the_primary_across_a_failover() {
        let port = 16100 + (std::process::id() % 100) as u16 * 4 + 40;
        let mut primary = Mariadb::start("maria_mh_primary", port, 1);
        let replica = Mariadb::replica_of(&primary, "maria_mh_replica", port + 1, 2);
        primary.create_test_database();
        primary.caught_up(&replica);
        let url = format!(
            "mysql://root@{},{}/test?target_session_attrs=read-write",
            replica.address(),
            primary.address()
        );
        let ns = common::unique_namespace("multi_host");
        let mut clients = Clients::open(&url, &ns, "mariadb multi-host");
        let before = clients.grant_each();
        primary.caught_up(&replica);
        primary.kill();
        replica.promote();
        clients.grant_each_once_up(before);
    }
}

/// Three grants to "holder" with a 1 s bound at `url`, then `cut_off` (the replica paused and cut
/// off), then three more that are answered only if the primary does not wait for the replica:
/// the leases granted.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn grant_around_a_cut(url: &str, ns: &str, cut_off: impl FnOnce()) -> Vec<lock_store::Lease> {
    let locks = lock_store::Options::new()
        .bound(std::time::Duration::from_secs(1))
        .open(url, ns)
        .unwrap();
    let grant = |i: usize| locks.try_acquire(&format!("job{i}"), "holder", TTL);
    let mut held: Vec<_> = (0..3).map(|i| grant(i).unwrap()).collect();
    cut_off();
    held.extend((3..6).filter_map(|i| grant(i).ok()));
    held
}

/// The leases a client was granted before and while the replica was cut off, and whether the
/// promoted server has each, checked by the caller against the replication's promise.
#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
fn check_kept(kept: &[(String, bool)], answered_while_cut_off: usize) {
    assert_eq!(kept.len(), 3 + answered_while_cut_off, "{kept:?}");
    let lost = kept.iter().filter(|(_, kept)| !*kept).count();
    assert_eq!(
        lost, answered_while_cut_off,
        "every lease answered before the cut survives; those answered after it are lost: {kept:?}"
    );
}

#[cfg(feature = "postgres")]
mod postgres_synchronous_standby {
    use super::*;
    use common::postgres_server::Cluster;
    use failover::{kept_on, lost_keys_wait_out_their_leases};
    use rustix::process::Signal;

    /// Answers the leases the client was granted and, for each, whether the promoted standby has
    /// it; the holders of those it has extend and release them through the multi-host URL.
    fn fail_over_with_a_cut_off_standby(offset: u16, synchronous: bool) -> Vec<(String, bool)> {
        let port = 15100 + (std::process::id() % 100) as u16 * 4 + offset;
        let primary = Cluster::init("pg_sync_primary", port);
        let standby = Cluster::standby_of(&primary, "pg_sync_standby", port + 1);
        if synchronous {
            primary.make_synchronous();
        }
        let url = format!(
            "postgres://postgres@127.0.0.1:{port},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            port + 1
        );
        let ns = common::unique_namespace("sync_standby");
        let held = grant_around_a_cut(&url, &ns, || {
            primary.caught_up(&standby);
            standby.signal_all(Signal::STOP);
            primary.cut_standbys();
        });
        primary.stop("immediate");
        standby.signal_all(Signal::CONT);
        standby.promote();
        let promoted = Locks::open(&standby.url(), &ns).unwrap();
        let kept = kept_on(&promoted, &held);
        lost_keys_wait_out_their_leases(&promoted, &held);
        // The holders of the leases that survived carry on through the multi-host URL (after
        // a typed failure or two).
        for (lease, (_, kept)) in held.into_iter().zip(&kept) {
            if *kept {
                common::eventually(
                    "the holder extends its lease on the promoted standby",
                    || lease.extend(TTL).ok(),
                );
                lease.release().unwrap();
            }
        }
        kept
    }

    #[test]
    fn a_synchronous_standby_promoted_after_a_crash_has_every_granted_lease() {
        check_kept(&fail_over_with_a_cut_off_standby(44, true), 0);
    }

    #[test]
    fn with_an_asynchronous_standby_the_promoted_standby_lost_granted_leases() {
        // The control: what a synchronous standby prevents.
        check_kept(&fail_over_with_a_cut_off_standby(46, false), 3);
    }
}

#[cfg(feature = "mysql")]
mod mariadb_semi_synchronous {
    use super::*;
    use crate::mariadb_server::Mariadb;
    use failover::{kept_on, lost_keys_wait_out_their_leases};
    use rustix::process::{kill_process, Signal};

    /// Answers the leases the client was granted and, for each, whether the promoted replica
    /// has it.
    fn fail_over_with_a_cut_off_replica(offset: u16, semi_sync: bool) -> Vec<(String, bool)> {
        let port = 16100 + (std::process::id() % 100) as u16 * 4 + offset;
        let mut primary = Mariadb::start("maria_semi_primary", port, 1);
        let replica = Mariadb::replica_of(&primary, "maria_semi_replica", port + 1, 2);
        if semi_sync {
            primary.run("SET GLOBAL rpl_semi_sync_master_enabled = 1");
            primary.run("SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC");
            primary.run("SET GLOBAL rpl_semi_sync_master_timeout = 60000");
            replica.run("SET GLOBAL rpl_semi_sync_slave_enabled = 1");
            replica.run("STOP SLAVE IO_THREAD");
            replica.run("START SLAVE IO_THREAD");
            common::eventually("the replica acknowledges", || {
                let status = primary.value(
                    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                     WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS'",
                );
                (status == "1").then_some(())
            });
        }
        primary.create_test_database();
        let ns = common::unique_namespace("semi_sync");
        let held = grant_around_a_cut(&primary.url(), &ns, || {
            primary.caught_up(&replica);
            kill_process(replica.pid(), Signal::STOP).unwrap();
            primary.cut_replicas();
        });
        primary.kill();
        kill_process(replica.pid(), Signal::CONT).unwrap();
        replica.promote();
        let promoted = Locks::open(&replica.url(), &ns).unwrap();
        lost_keys_wait_out_their_leases(&promoted, &held);
        kept_on(&promoted, &held)
    }

    #[test]
    fn a_semi_synchronous_replica_promoted_after_a_kill_has_every_granted_lease() {
        check_kept(&fail_over_with_a_cut_off_replica(44, true), 0);
    }

    #[test]
    fn with_asynchronous_replication_the_promoted_replica_lost_granted_leases() {
        // The control: what semi-synchronous replication prevents.
        check_kept(&fail_over_with_a_cut_off_replica(46, false), 3);
    }
}
