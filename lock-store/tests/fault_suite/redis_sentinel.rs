//! Redis as users run it replicated: a primary, two replicas and three Sentinels (quorum 2, a
//! primary silent for 400 ms is down), throwaway servers on this run's own ports; the clients
//! follow it through a `redis+sentinel://` URL. The nemesis pauses and kills primaries,
//! replicas and Sentinels (a killed one restarted from its file), and fails over to a replica it cut off first (a lagging one).

use std::time::Duration;

use rustix::process::{kill_process, Signal};

use super::history::Rng;
use super::run::Nemesis;
use crate::common;
use crate::common::redis_server::{replication_info, Sentinel, Throwaway, NO_PERSISTENCE};

/// The name the Sentinels know the primary by.
const NAME: &str = "locks";

/// The servers and Sentinels of one run.
pub struct Topology {
    servers: Vec<Throwaway>,
    sentinels: Vec<Sentinel>,
}

impl Topology {
    /// Starts them on ports `base..base + 3` (servers) and `base + 10..base + 13` (Sentinels),
    /// and waits until every Sentinel knows both replicas and the other Sentinels.
    pub fn start(base: u16) -> Self {
        let no_delay = vec!["--repl-diskless-sync-delay".to_owned(), "0".to_owned()];
        let primary = Throwaway::at(base, NO_PERSISTENCE, no_delay);
        let replicas = [
            Throwaway::replica_at(base + 1, &primary),
            Throwaway::replica_at(base + 2, &primary),
        ];
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|i| Sentinel::at(base + 10 + i, NAME, &primary))
            .collect();
        for sentinel in &sentinels {
            common::eventually_within("the sentinels know the replicas and each other", 40, || {
                let replicas: Vec<redis::Value> =
                    sentinel.query(redis::cmd("SENTINEL").arg("REPLICAS").arg(NAME));
                let others: Vec<redis::Value> =
                    sentinel.query(redis::cmd("SENTINEL").arg("SENTINELS").arg(NAME));
                (replicas.len() == 2 && others.len() == 2).then_some(())
            });
        }
        let [a, b] = replicas;
        Topology {
            servers: vec![primary, a, b],
            sentinels,
        }
    }

    /// The clients' URL.
    pub fn url(&self) -> String {
        let addresses: Vec<String> = self.sentinels.iter().map(Sentinel::address).collect();
        format!("redis+sentinel://{}/{NAME}", addresses.join(","))
    }

    /// The index of the server the Sentinels name primary.
    fn primary(&self) -> usize {
        let port = common::eventually_within("a sentinel names the primary", 30, || {
            self.sentinels.iter().find_map(|s| s.primary_port(NAME))
        });
        self.servers
            .iter()
            .position(|s| s.port == port)
            .expect("one of ours")
    }

    /// Waits until the Sentinels agree on a primary that answers as one and both other servers
    /// replicate from it, their link up.
    fn healed(&self) {
        let started = std::time::Instant::now();
        common::eventually_within("the replicated Redis is whole again", 60, || {
            let ports: Vec<Option<u16>> = self
                .sentinels
                .iter()
                .map(|s| s.primary_port(NAME))
                .collect();
            let port = ports[0]?;
            if ports.iter().any(|p| *p != Some(port)) {
                return None;
            }
            let mut whole = true;
            for s in &self.servers {
                let info = replication_info(s.port)?;
                if s.port == port {
                    whole &= info.contains("role:master");
                    continue;
                }
                let follows = info.contains(&format!("master_port:{port}"));
                whole &= follows && info.contains("master_link_status:up");
                // A paused primary that came back, or a restarted server, left a second
                // primary or a replica of a replica, which the Sentinels fix within their
                // 10 s round of INFO; after a second, as they would, so that a run stays
                // short (the run has seen that second already).
                if !follows && started.elapsed() > Duration::from_secs(1) {
                    let _: Result<redis::Value, _> = redis::Client::open(s.url())
                        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
                        .and_then(|mut c| {
                            redis::cmd("REPLICAOF")
                                .arg("127.0.0.1")
                                .arg(port)
                                .query(&mut c)
                        });
                }
            }
            whole.then_some(())
        });
    }

    /// Kills server `i` and starts it again after the Sentinels chose another primary (if it
    /// was the primary); they make it a replica of the new one.
    fn kill_and_restart(&self, i: usize, was_primary: bool, rng: &mut Rng) {
        self.servers[i].kill();
        if was_primary {
            common::eventually_within("the sentinels promote a replica", 30, || {
                (self.primary() != i).then_some(())
            });
        }
        std::thread::sleep(Duration::from_millis(rng.between(100, 800)));
        self.restart_as_replica(i);
    }

    /// Starts server `i` again and makes it a replica of the Sentinels' primary at once (as
    /// they would, a few seconds later).
    fn restart_as_replica(&self, i: usize) {
        self.servers[i].start();
        let primary = self.servers[self.primary()].port;
        let _: redis::Value =
            self.servers[i].query(redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary));
    }
}

fn pause(pid: rustix::process::Pid, for_ms: u64) {
    kill_process(pid, Signal::STOP).unwrap();
    std::thread::sleep(Duration::from_millis(for_ms));
    kill_process(pid, Signal::CONT).unwrap();
}

impl Nemesis for Topology {
    fn must(&self) -> Option<&'static str> {
        Some("lagging replica promoted")
    }

    fn faults(&self) -> Vec<&'static str> {
        vec![
            "primary paused",
            "primary killed",
            "replica paused",
            "replica killed",
            "sentinel paused",
            "sentinel killed",
            "lagging replica promoted",
        ]
    }

    fn make(&mut self, fault: &'static str, rng: &mut Rng) {
        let primary = self.primary();
        let replica = (primary + 1 + rng.between(0, 2) as usize) % 3;
        match fault {
            "primary paused" => pause(self.servers[primary].pid(), rng.between(200, 2500)),
            "primary killed" => self.kill_and_restart(primary, true, rng),
            "replica paused" => pause(self.servers[replica].pid(), rng.between(200, 2000)),
            "replica killed" => self.kill_and_restart(replica, false, rng),
            "sentinel paused" => {
                let s = &self.sentinels[rng.between(0, 3) as usize];
                pause(s.pid(), rng.between(200, 2000));
            }
            "sentinel killed" => {
                self.sentinels[rng.between(0, 3) as usize].kill_and_restart();
            }
            "lagging replica promoted" => {
                // Both replicas stop receiving (paused, and the primary drops their links: a
                // pause alone would deliver what was in flight), the clients write on, the
                // primary dies, the replicas resume: one of them, behind, is promoted.
                let others: Vec<usize> = (0..3).filter(|i| *i != primary).collect();
                let pids: Vec<_> = others.iter().map(|i| self.servers[*i].pid()).collect();
                for pid in &pids {
                    kill_process(*pid, Signal::STOP).unwrap();
                }
                let _: redis::Value = self.servers[primary]
                    .query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"));
                std::thread::sleep(Duration::from_millis(rng.between(300, 1000)));
                let primary_pid = self.servers[primary].pid();
                kill_process(primary_pid, Signal::KILL).unwrap();
                common::eventually("the killed primary is gone", || {
                    replication_info(self.servers[primary].port)
                        .is_none()
                        .then_some(())
                });
                for pid in &pids {
                    kill_process(*pid, Signal::CONT).unwrap();
                }
                common::eventually_within("the sentinels promote a lagging replica", 30, || {
                    (self.primary() != primary).then_some(())
                });
                std::thread::sleep(Duration::from_millis(rng.between(100, 800)));
                self.restart_as_replica(primary);
            }
            other => unreachable!("{other}"),
        }
        self.healed();
    }
}
