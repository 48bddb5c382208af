//! Throwaway PostgreSQL clusters of a test's own (Debian's server binaries, its own port and
//! directory): a primary, and standbys streaming from it, for the tests that restart, crash or
//! fail over their store server. Run as the `postgres` user when the tests run as root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The newest server binaries under /usr/lib/postgresql (Debian's `postgresql` package).
pub fn bin_dir() -> PathBuf {
    std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server binaries in /usr/lib/postgresql (Debian: postgresql)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").exists())
        .max()
        .expect("initdb")
}

/// Whether the tests run as root (then the server runs as `postgres`, which initdb needs).
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `program` run as the cluster's owner.
pub fn as_owner(program: &Path) -> Command {
    if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One cluster: its data directory, port and log; stopped (immediately) and removed on drop.
pub struct Cluster {
    dir: PathBuf,
    port: u16,
    /// Its clock's offset from this machine's, as Debian's libfaketime takes it (`-5s`);
    /// `None`: the machine's clock.
    clock: Option<String>,
    /// The server's process when this test started it itself (under faketime), reaped once it
    /// stopped.
    server: std::sync::Mutex<Option<std::process::Child>>,
}

impl Cluster {
    /// A new cluster on `port` (`initdb`, trust authentication, replication allowed from
    /// 127.0.0.1), started.
    pub fn init(name: &str, port: u16) -> Self {
        let cluster = Self::at(name, port);
        let mut initdb = as_owner(&bin_dir().join("initdb"));
        initdb.arg("-D").arg(cluster.data());
        run(
            initdb.args(["-A", "trust", "-U", "postgres", "--no-sync"]),
            "initdb",
        );
        // Streaming replication to the tests' standbys; no fsync (throwaway data).
        let conf = cluster.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap();
        text.push_str("\nwal_level = replica\nmax_wal_senders = 4\nfsync = off\n");
        std::fs::write(&conf, text).unwrap();
        cluster.start();
        cluster
    }

    /// A standby of `primary` on `port` (`pg_basebackup -R`), started and streaming.
    pub fn standby_of(primary: &Cluster, name: &str, port: u16) -> Self {
        Self::standby_with_clock(primary, name, port, None)
    }

    /// [`standby_of`](Self::standby_of), its clock `clock` off this machine's (the server run
    /// under Debian's `faketime`).
    pub fn standby_with_clock(
        primary: &Cluster,
        name: &str,
        port: u16,
        clock: Option<&str>,
    ) -> Self {
        let mut cluster = Self::at(name, port);
        cluster.clock = clock.map(str::to_owned);
        let mut backup = as_owner(&bin_dir().join("pg_basebackup"));
        backup.args(["-h", "127.0.0.1", "-p", &primary.port.to_string()]);
        backup.args(["-U", "postgres", "-R", "--no-sync", "-D"]);
        run(backup.arg(cluster.data()), "pg_basebackup");
        cluster.start();
        super::eventually("the standby streams", || {
            let state = primary.query("SELECT state FROM pg_stat_replication");
            (state == "streaming").then_some(())
        });
        cluster
    }

    fn at(name: &str, port: u16) -> Self {
        let dir = std::env::temp_dir().join(super::unique_namespace(name));
        std::fs::create_dir_all(&dir).unwrap();
        if running_as_root() {
            let mut chown = Command::new("chown");
            run(chown.args(["-R", "postgres"]).arg(&dir), "chown");
        }
        Cluster {
            dir,
            port,
            clock: None,
            server: std::sync::Mutex::default(),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// `pg_ctl -D <data> args...`, waiting for it (`-w`).
    pub fn pg_ctl(&self, args: &[&str]) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("postgres.log");
        let mut cmd = as_owner(&bin_dir().join("pg_ctl"));
        cmd.arg("-D").arg(self.data()).arg("-w").args(args);
        if args.contains(&"start") || args.contains(&"restart") {
            cmd.arg("-o").arg(&options).arg("-l").arg(log);
        }
        run(&mut cmd, &format!("pg_ctl {args:?}"));
    }

    /// Starts it.
    pub fn start(&self) {
        let Some(offset) = &self.clock else {
            self.pg_ctl(&["start"]);
            return;
        };
        // The server itself under faketime (`pg_ctl -w` waits on a clock faketime moves).
        let log = std::fs::File::create(self.dir.join("postgres.log")).unwrap();
        let mut server = as_owner(Path::new("faketime"));
        server.args(["-f", offset]).arg(bin_dir().join("postgres"));
        server
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"]);
        server
            .arg(&self.dir)
            .args(["-c", "listen_addresses=127.0.0.1"]);
        let child = server
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("Debian's faketime installed (scripts/services.sh installs it)");
        *self.server.lock().unwrap() = Some(child);
        super::eventually_within("the server under faketime answers", 30, || {
            let ready = Command::new(bin_dir().join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .ok()?;
            ready.success().then_some(())
        });
    }

    /// Stops it: `fast` (clean) or `immediate` (as a crash: no checkpoint).
    pub fn stop(&self, mode: &str) {
        self.pg_ctl(&["-m", mode, "stop"]);
        if let Some(mut server) = self.server.lock().unwrap().take() {
            let _ = server.wait();
        }
    }

    /// Restarts it (`fast` or `immediate`).
    pub fn restart(&self, mode: &str) {
        self.pg_ctl(&["-m", mode, "restart"]);
    }

    /// Promotes a standby to a primary (a new timeline), once it accepts writes.
    pub fn promote(&self) {
        self.pg_ctl(&["promote"]);
        super::eventually("the promoted standby accepts writes", || {
            (self.query("SELECT pg_is_in_recovery()") == "f").then_some(())
        });
    }

    /// Its URL (database `postgres`).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// One value of `sql` as `psql` prints it unaligned (`""` for none).
    pub fn query(&self, sql: &str) -> String {
        let out = Command::new(bin_dir().join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-Atc", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Sends `signal` to every process of the cluster (its postmaster and the postmaster's
    /// children: a standby's WAL receiver among them).
    pub fn signal_all(&self, signal: rustix::process::Signal) {
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid")).unwrap();
        let postmaster: i32 = pid_file.lines().next().unwrap().trim().parse().unwrap();
        let children = Command::new("pgrep")
            .args(["-P", &postmaster.to_string()])
            .output()
            .unwrap();
        let pids = String::from_utf8_lossy(&children.stdout)
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .chain([postmaster])
            .collect::<Vec<_>>();
        for pid in pids {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }

    /// Makes its standby synchronous (`synchronous_standby_names = '*'`: a commit waits until
    /// the standby has it), once the standby says so.
    pub fn make_synchronous(&self) {
        self.query("ALTER SYSTEM SET synchronous_standby_names = '*'");
        self.query("SELECT pg_reload_conf()");
        super::eventually("the standby is synchronous", || {
            (self.query("SELECT sync_state FROM pg_stat_replication") == "sync").then_some(())
        });
    }

    /// Cuts its standbys off (ends their WAL senders): what it writes from now on reaches
    /// none of them until they connect again.
    pub fn cut_standbys(&self) {
        self.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication");
    }

    /// Waits until `standby` replayed everything this primary wrote so far.
    pub fn caught_up(&self, standby: &Cluster) {
        let written = self.query("SELECT pg_current_wal_lsn()");
        super::eventually("the standby replays the primary's writes", || {
            let behind = standby.query(&format!(
                "SELECT pg_wal_lsn_diff('{written}', pg_last_wal_replay_lsn()) > 0"
            ));
            (behind == "f").then_some(())
        });
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut cmd = as_owner(&bin_dir().join("pg_ctl"));
        let _ = (cmd.arg("-D").arg(self.data()))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        if let Some(mut server) = self.server.lock().unwrap().take() {
            let _ = server.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
