//! A throwaway redis-server of a test's own (its port and directory), for the tests that restart
//! or kill their store server.

use std::time::Duration;

/// A Redis that keeps nothing on disk (its restart loses every record).
pub const NO_PERSISTENCE: &[&str] = &["--save", "", "--appendonly", "no"];
/// A Redis with an append-only file synced at every write (a kill loses nothing written).
pub const AOF_ALWAYS: &[&str] = &[
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
];

/// A throwaway redis-server of this test's own (its port and directory), stopped at the end.
pub struct Throwaway {
    pub(crate) port: u16,
    dir: std::path::PathBuf,
    persistence: &'static [&'static str],
    /// More arguments (`--replicaof`...).
    extra: Vec<String>,
}

impl Throwaway {
    pub fn new(offset: u16, persistence: &'static [&'static str]) -> Self {
        Self::with_args(offset, persistence, Vec::new())
    }

    /// A replica of `primary` (it starts syncing at once: no diskless-sync delay); answers once
    /// its link to the primary is up.
    pub fn replica_of(offset: u16, primary: &Throwaway) -> Self {
        let port = 16390 + offset + (std::process::id() % 50) as u16 * 4;
        Self::replica_at(port, primary)
    }

    /// [`replica_of`](Self::replica_of) on `port`.
    pub fn replica_at(port: u16, primary: &Throwaway) -> Self {
        let follow = ["--replicaof", "127.0.0.1", &primary.port.to_string()];
        let mut extra: Vec<String> = follow.iter().map(|a| a.to_string()).collect();
        extra.extend(["--repl-diskless-sync-delay".into(), "0".into()]);
        let replica = Self::at(port, NO_PERSISTENCE, extra);
        for _ in 0..200 {
            if replica
                .info("replication")
                .contains("master_link_status:up")
            {
                return replica;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the replica on {} never linked to its primary",
            replica.port
        );
    }

    fn with_args(offset: u16, persistence: &'static [&'static str], extra: Vec<String>) -> Self {
        let port = 16390 + offset + (std::process::id() % 50) as u16 * 4;
        Self::at(port, persistence, extra)
    }

    /// A server on `port` with `extra` arguments (a test that picks its own ports).
    pub fn at(port: u16, persistence: &'static [&'static str], extra: Vec<String>) -> Self {
        let dir = std::env::temp_dir().join(super::unique_namespace("redis_restart"));
        std::fs::create_dir_all(&dir).unwrap();
        let server = Throwaway {
            port,
            dir,
            persistence,
            extra,
        };
        server.start();
        server
    }

    /// A command's answer on a connection of its own.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> T {
        let mut c = redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap();
        cmd.query(&mut c).unwrap()
    }

    /// `INFO section`.
    pub fn info(&self, section: &str) -> String {
        self.query(redis::cmd("INFO").arg(section))
    }

    /// Its process.
    pub fn pid(&self) -> rustix::process::Pid {
        let pid: i32 = (self.info("server").lines())
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok())
            .expect("INFO server has process_id");
        rustix::process::Pid::from_raw(pid).unwrap()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn start(&self) {
        let ok = std::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(self.persistence)
            .args(&self.extra)
            .args(["--daemonize", "yes", "--dir"])
            .arg(&self.dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "redis-server did not start");
        for _ in 0..100 {
            if let Ok(mut c) = redis::Client::open(self.url()).unwrap().get_connection() {
                // Answering, and done loading its file.
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis on {} does not answer", self.port);
    }

    /// Stops it without saving.
    pub fn shutdown(&self) {
        if let Ok(mut c) = redis::Client::open(self.url()).unwrap().get_connection() {
            let _: Result<(), _> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    /// Kills it with SIGKILL (no shutdown, no save).
    pub fn kill(&self) {
        rustix::process::kill_process(self.pid(), rustix::process::Signal::KILL).unwrap();
        while redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .is_ok()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        self.shutdown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A throwaway Redis Sentinel (redis-server in Sentinel mode) watching `primary` under the name
/// `name` (quorum 2; a primary that does not answer for 400 ms is down), stopped at the end.
pub struct Sentinel {
    port: u16,
    dir: std::path::PathBuf,
}

impl Sentinel {
    pub fn watching(index: u16, name: &str, primary: &Throwaway) -> Self {
        let port = 26390 + index + (std::process::id() % 50) as u16 * 4;
        Self::at(port, name, primary)
    }

    /// [`watching`](Self::watching) on `port`.
    pub fn at(port: u16, name: &str, primary: &Throwaway) -> Self {
        let dir = std::env::temp_dir().join(super::unique_namespace("sentinel"));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndaemonize yes\ndir {}\n\
                 sentinel monitor {name} 127.0.0.1 {} 2\n\
                 sentinel down-after-milliseconds {name} 400\n\
                 sentinel failover-timeout {name} 3000\n",
                dir.display(),
                primary.port
            ),
        )
        .unwrap();
        let ok = std::process::Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .status()
            .unwrap()
            .success();
        assert!(ok, "redis-server --sentinel did not start");
        let sentinel = Sentinel { port, dir };
        super::eventually("the sentinel answers", || {
            let mut c = redis::Client::open(sentinel.address_url())
                .ok()?
                .get_connection()
                .ok()?;
            redis::cmd("PING").query::<String>(&mut c).ok()
        });
        sentinel
    }

    fn address_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `host:port`, for a `redis+sentinel://` URL.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A command's answer.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> T {
        let mut c = redis::Client::open(self.address_url())
            .unwrap()
            .get_connection()
            .unwrap();
        cmd.query(&mut c).unwrap()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Ok(mut c) = redis::Client::open(self.address_url())
            .unwrap()
            .get_connection()
        {
            let _: Result<(), _> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Sentinel {
    /// Kills it with SIGKILL and starts it again from its configuration file (which it keeps
    /// up to date: what it learned survives, as for an operator's restart).
    pub fn kill_and_restart(&self) {
        rustix::process::kill_process(self.pid(), rustix::process::Signal::KILL).unwrap();
        while redis::Client::open(self.address_url())
            .unwrap()
            .get_connection()
            .is_ok()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let ok = std::process::Command::new("redis-server")
            .arg(self.dir.join("sentinel.conf"))
            .arg("--sentinel")
            .status()
            .unwrap()
            .success();
        assert!(ok, "redis-server --sentinel did not start again");
        super::eventually("the sentinel answers again", || {
            let mut c = redis::Client::open(self.address_url())
                .ok()?
                .get_connection()
                .ok()?;
            redis::cmd("PING").query::<String>(&mut c).ok()
        });
    }

    /// Its process.
    pub fn pid(&self) -> rustix::process::Pid {
        let info: String = self.query(redis::cmd("INFO").arg("server"));
        let pid: i32 = (info.lines())
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok())
            .expect("INFO server has process_id");
        rustix::process::Pid::from_raw(pid).unwrap()
    }

    /// The port of the primary it names now, if it answers within 300 ms.
    pub fn primary_port(&self, name: &str) -> Option<u16> {
        let client = redis::Client::open(self.address_url()).ok()?;
        let mut c = client
            .get_connection_with_timeout(Duration::from_millis(300))
            .ok()?;
        c.set_read_timeout(Some(Duration::from_millis(300))).ok()?;
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(name)
            .query(&mut c)
            .ok()?;
        addr?.1.parse().ok()
    }
}

/// `INFO replication` of the server on `port`, if it answers within 300 ms (a paused or
/// killed server does not).
pub fn replication_info(port: u16) -> Option<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_millis(300))
        .ok()?;
    c.set_read_timeout(Some(Duration::from_millis(300))).ok()?;
    redis::cmd("INFO").arg("replication").query(&mut c).ok()
}
