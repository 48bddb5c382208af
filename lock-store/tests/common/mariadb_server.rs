//! Throwaway MariaDB servers of a test's own (Debian's `mariadbd`, its own port and directory,
//! a binary log and a server id): a primary, and replicas following it by GTID, for the tests
//! that fail over their store server.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use mysql::prelude::Queryable;

/// One server: its process, directory and port; killed and removed on drop.
pub struct Mariadb {
    child: Child,
    dir: PathBuf,
    port: u16,
}

fn user() -> String {
    if rustix::process::geteuid().is_root() {
        "root".to_owned()
    } else {
        std::env::var("USER").unwrap_or_default()
    }
}

impl Mariadb {
    /// A new server on `port` with `server_id`, writing a binary log, started, with the
    /// database `test`.
    pub fn start(name: &str, port: u16, server_id: u32) -> Self {
        let dir = std::env::temp_dir().join(crate::common::unique_namespace(name));
        let data = dir.join("data");
        std::fs::create_dir_all(&dir).unwrap();
        // A temporary directory of its own: two bootstraps at once in one clash on their
        // temporary tables' names.
        let out = Command::new("mariadb-install-db")
            .env("TMPDIR", &dir)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--user={}", user()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .output()
            .expect("mariadb-install-db (Debian: mariadb-server)");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let child = Command::new("/usr/sbin/mariadbd")
            .env("TMPDIR", &dir)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", dir.join("mariadb.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
            .arg(format!("--user={}", user()))
            .arg(format!("--server-id={server_id}"))
            .arg(format!("--log-bin={}", dir.join("binlog").display()))
            .args(["--binlog-format=ROW", "--innodb-flush-log-at-trx-commit=0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Mariadb { child, dir, port };
        crate::common::eventually("mariadbd answers", || server.admin().ok());
        server
    }

    /// A replica of `primary` on `port` with `server_id`, following it from the start of its
    /// binary log (so it gets the database `test` and everything after), read-only.
    pub fn replica_of(primary: &Mariadb, name: &str, port: u16, server_id: u32) -> Self {
        let replica = Self::start(name, port, server_id);
        replica.run(&format!(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}, MASTER_USER = 'root', \
             MASTER_USE_GTID = slave_pos",
            primary.port
        ));
        replica.run("START SLAVE");
        replica.run("SET GLOBAL read_only = 1");
        replica
    }

    /// Creates the database `test` (on a primary: its replicas get it too).
    pub fn create_test_database(&self) {
        self.run("CREATE DATABASE IF NOT EXISTS test");
    }

    fn admin(&self) -> mysql::Result<mysql::Conn> {
        let url = format!("mysql://root@127.0.0.1:{}/mysql", self.port);
        mysql::Conn::new(mysql::Opts::from_url(&url)?)
    }

    /// Runs `sql`.
    pub fn run(&self, sql: &str) {
        self.admin().unwrap().query_drop(sql).unwrap();
    }

    /// One value of `sql`, as text.
    pub fn value(&self, sql: &str) -> String {
        let v: Option<String> = self.admin().unwrap().query_first(sql).unwrap();
        v.unwrap_or_default()
    }

    /// Waits until `replica` applied everything this primary wrote so far.
    pub fn caught_up(&self, replica: &Mariadb) {
        let position = self.value("SELECT @@gtid_binlog_pos");
        let waited = replica.value(&format!(
            "SELECT CAST(MASTER_GTID_WAIT('{position}', 30) AS CHAR)"
        ));
        assert_eq!(waited, "0", "the replica applies {position}");
    }

    /// Makes a replica a primary, as failover tools do: it stops receiving, applies what it
    /// received (its relay log), stops following, forgets its primary and accepts writes.
    pub fn promote(&self) {
        self.run("STOP SLAVE IO_THREAD");
        crate::common::eventually("the replica applies what it received", || {
            let mut admin = self.admin().ok()?;
            let row: mysql::Row = admin.query_first("SHOW SLAVE STATUS").ok()??;
            let read: Option<u64> = row.get("Read_Master_Log_Pos");
            let done: Option<u64> = row.get("Exec_Master_Log_Pos");
            let file: Option<String> = row.get("Master_Log_File");
            let exec_file: Option<String> = row.get("Relay_Master_Log_File");
            (read.is_some() && read == done && file == exec_file).then_some(())
        });
        self.run("STOP SLAVE");
        self.run("RESET SLAVE ALL");
        self.run("SET GLOBAL read_only = 0");
    }

    /// Its `host:port`, for a multi-host URL.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its process.
    pub fn pid(&self) -> rustix::process::Pid {
        rustix::process::Pid::from_child(&self.child)
    }

    /// Drops its replicas' links (as a replica that stopped reading is cut off): what it
    /// writes from now on reaches no replica, not even through the sockets' buffers.
    pub fn cut_replicas(&self) {
        let mut admin = self.admin().unwrap();
        let ids: Vec<u64> = admin
            .query(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'",
            )
            .unwrap();
        assert!(!ids.is_empty(), "no replica to cut off");
        for id in ids {
            admin.query_drop(format!("KILL {id}")).unwrap();
        }
    }

    /// Kills it (`SIGKILL`: no shutdown).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its URL (database `test`).
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
