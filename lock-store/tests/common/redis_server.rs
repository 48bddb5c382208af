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
    port: u16,
    dir: std::path::PathBuf,
    persistence: &'static [&'static str],
}

impl Throwaway {
    pub fn new(offset: u16, persistence: &'static [&'static str]) -> Self {
        let port = 16390 + offset + (std::process::id() % 50) as u16 * 4;
        let dir = std::env::temp_dir().join(super::unique_namespace("redis_restart"));
        std::fs::create_dir_all(&dir).unwrap();
        let server = Throwaway {
            port,
            dir,
            persistence,
        };
        server.start();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn start(&self) {
        let ok = std::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(self.persistence)
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
        let mut c = redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
        let pid: i32 = info
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok())
            .expect("INFO server has process_id");
        let pid = rustix::process::Pid::from_raw(pid).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
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
