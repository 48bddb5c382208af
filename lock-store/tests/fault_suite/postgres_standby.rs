//! PostgreSQL as users run it replicated: a primary and a streaming standby (asynchronous, or
//! synchronous: `synchronous_standby_names = '*'`), throwaway clusters on this run's own
//! ports; the clients follow the primary through a multi-host URL with
//! `target_session_attrs=read-write`. The nemesis pauses either server, cuts the standby's
//! stream, and once fails over to the standby after cutting it off (a lagging standby under
//! asynchronous replication) as an operator or Patroni would: the primary dies, the standby
//! is promoted.

use std::time::Duration;

use rustix::process::Signal;

use super::history::Rng;
use super::run::Nemesis;
use crate::common;
use crate::common::postgres_server::Cluster;

/// The clusters of one run.
pub struct Topology {
    primary: Cluster,
    standby: Option<Cluster>,
    synchronous: bool,
    ports: (u16, u16),
}

impl Topology {
    /// Starts the primary on `base` and its standby on `base + 1`, the standby's clock
    /// `standby_clock` off this machine's (libfaketime's offset: `-5s`).
    pub fn start(base: u16, synchronous: bool, standby_clock: Option<&str>) -> Self {
        let primary = Cluster::init("jepsen_primary", base);
        let standby =
            Cluster::standby_with_clock(&primary, "jepsen_standby", base + 1, standby_clock);
        if synchronous {
            primary.make_synchronous();
        }
        Topology {
            primary,
            standby: Some(standby),
            synchronous,
            ports: (base, base + 1),
        }
    }

    /// The clients' URL: both servers, the standby first.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.ports.1, self.ports.0
        )
    }

    /// Waits until the standby streams again (and, synchronous, is the synchronous one).
    fn streaming(&self) {
        if self.standby.is_none() {
            return;
        }
        let want = if self.synchronous { "sync" } else { "async" };
        common::eventually_within("the standby streams again", 30, || {
            (self
                .primary
                .query("SELECT sync_state FROM pg_stat_replication")
                == want)
                .then_some(())
        });
    }
}

fn pause(cluster: &Cluster, for_ms: u64) {
    cluster.signal_all(Signal::STOP);
    std::thread::sleep(Duration::from_millis(for_ms));
    cluster.signal_all(Signal::CONT);
}

impl Nemesis for Topology {
    fn must(&self) -> Option<&'static str> {
        Some("failover to a cut-off standby")
    }

    fn faults(&self) -> Vec<&'static str> {
        vec![
            "primary paused",
            "standby paused",
            "standby stream cut",
            "failover to a cut-off standby",
        ]
    }

    fn make(&mut self, fault: &'static str, rng: &mut Rng) {
        let Some(standby) = &self.standby else {
            // Failed over: one server left, which the nemesis pauses.
            pause(&self.primary, rng.between(200, 1500));
            return;
        };
        match fault {
            "primary paused" => pause(&self.primary, rng.between(200, 1500)),
            "standby paused" => pause(standby, rng.between(200, 1500)),
            "standby stream cut" => self.primary.cut_standbys(),
            "failover to a cut-off standby" => {
                standby.signal_all(Signal::STOP);
                self.primary.cut_standbys();
                std::thread::sleep(Duration::from_millis(rng.between(300, 1000)));
                self.primary.stop("immediate");
                standby.signal_all(Signal::CONT);
                standby.promote();
                let promoted = self.standby.take().unwrap();
                self.primary = promoted;
                return;
            }
            other => unreachable!("{other}"),
        }
        self.streaming();
    }
}
