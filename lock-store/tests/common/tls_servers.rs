//! Throwaway TLS servers for the TLS tests: a CA and certificates made at test time (rcgen), and
//! a Redis, a PostgreSQL and a MariaDB server of their own, each on free ports of 127.0.0.1 with
//! its data in a temporary directory, presenting a certificate the test chooses (swapped while
//! the server runs) and stopped when dropped. Each also answers on a plain port, for the test's
//! own administration.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// A certificate and its key, as PEM files.
#[derive(Clone, Debug)]
pub struct Pem {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The test's certificate authorities and the server and client certificates they signed.
pub struct Pki {
    /// The CA that signed every certificate below.
    pub ca: PathBuf,
    /// Another CA, which signed none of them.
    pub other_ca: PathBuf,
    /// For 127.0.0.1 and localhost, valid now.
    pub good: Pem,
    /// For 127.0.0.1 and localhost, expired in 2001.
    pub expired: Pem,
    /// Valid now, for another host (`db.example.org`) only.
    pub other_host: Pem,
    /// A client certificate signed by the CA.
    pub client: Pem,
}

impl Pki {
    /// Makes them in `dir`.
    pub fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let ca = authority("lock-store test CA");
        let other = authority("someone else's CA");
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
        let leaf = |name: &str, names: &[&str], expired: bool| {
            let mut params =
                CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                    .unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            if expired {
                params.not_before = rcgen::date_time_ymd(2000, 1, 1);
                params.not_after = rcgen::date_time_ymd(2001, 1, 1);
            }
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &ca).unwrap();
            let pem = Pem {
                cert: dir.join(format!("{name}.pem")),
                key: dir.join(format!("{name}.key")),
            };
            std::fs::write(&pem.cert, cert.pem()).unwrap();
            std::fs::write(&pem.key, key.serialize_pem()).unwrap();
            pem
        };
        Pki {
            ca: dir.join("ca.pem"),
            other_ca: dir.join("other-ca.pem"),
            good: leaf("good", &["127.0.0.1", "localhost"], false),
            expired: leaf("expired", &["127.0.0.1", "localhost"], true),
            other_host: leaf("other-host", &["db.example.org"], false),
            client: leaf("client", &["lock-store-client"], false),
        }
    }
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A port of 127.0.0.1 nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether this process runs as root (PostgreSQL then runs as the `postgres` user).
fn root() -> bool {
    crate::common::postgres_server::running_as_root()
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run(command: &mut Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Copies `pem` to the server's own files (the ones its configuration names), readable by
/// `owner` only if given.
fn install_pem(pem: &Pem, dir: &Path, owner: Option<&str>) -> Pem {
    let to = Pem {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    };
    std::fs::copy(&pem.cert, &to.cert).unwrap();
    std::fs::copy(&pem.key, &to.key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&to.key, std::fs::Permissions::from_mode(0o600)).unwrap();
    if let Some(owner) = owner {
        run(
            Command::new("chown").args([
                owner,
                to.cert.to_str().unwrap(),
                to.key.to_str().unwrap(),
            ]),
            "chown",
        );
    }
    to
}

/// A running server process, stopped (and its directory removed) when dropped.
pub struct Server {
    child: Child,
    dir: PathBuf,
    /// The port it speaks TLS on (Redis), or both TLS and plain text on (PostgreSQL, MariaDB).
    pub tls_port: u16,
    /// A port for the test's own plain connections.
    pub plain_port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Redis with TLS on `tls_port` (and plain text on `plain_port`), presenting `pem`.
pub fn redis(dir: &Path, pki: &Pki, pem: &Pem) -> Server {
    let dir = dir.join("redis");
    std::fs::create_dir_all(&dir).unwrap();
    let served = install_pem(pem, &dir, None);
    let (tls_port, plain_port) = (free_port(), free_port());
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args([
            "--port",
            &plain_port.to_string(),
            "--tls-port",
            &tls_port.to_string(),
        ])
        .arg("--tls-cert-file")
        .arg(&served.cert)
        .arg("--tls-key-file")
        .arg(&served.key)
        .arg("--tls-ca-cert-file")
        .arg(&pki.ca)
        .args(["--tls-auth-clients", "no", "--dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (Debian: redis-server)");
    let server = Server {
        child,
        dir,
        tls_port,
        plain_port,
    };
    wait_until("redis-server", || server.redis_admin().is_ok());
    server
}

/// PostgreSQL with TLS (`ssl = on`) on `tls_port`, presenting `pem`; plain connections too.
/// Role `certuser` (see [`CERT_USER`]) may connect only over TLS with a client certificate
/// signed by the CA (`clientcert=verify-ca` in `pg_hba.conf`).
pub fn postgres(dir: &Path, pki: &Pki, pem: &Pem) -> Server {
    let bin = crate::common::postgres_server::bin_dir();
    let dir = dir.join("postgres");
    std::fs::create_dir_all(&dir).unwrap();
    let owner = root().then_some("postgres");
    let as_owner = |program: PathBuf| {
        let mut c = crate::common::postgres_server::as_owner(&program);
        c.stdout(Stdio::null());
        c
    };
    if let Some(owner) = owner {
        run(
            Command::new("chown").args([owner, dir.to_str().unwrap()]),
            "chown",
        );
    }
    let data = dir.join("data");
    run(
        as_owner(bin.join("initdb")).arg("-D").arg(&data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ]),
        "initdb",
    );
    let hba = data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(
        &hba,
        format!(
            "hostssl all {CERT_USER} 127.0.0.1/32 trust clientcert=verify-ca\n\
             host all {CERT_USER} 127.0.0.1/32 reject\n{rules}"
        ),
    )
    .unwrap();
    let served = install_pem(pem, &dir, owner);
    let port = free_port();
    let child = as_owner(bin.join("postgres"))
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(&dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "ssl=on",
            "-c",
            "fsync=off",
        ])
        .arg("-c")
        .arg(format!("ssl_cert_file={}", served.cert.display()))
        .arg("-c")
        .arg(format!("ssl_key_file={}", served.key.display()))
        .arg("-c")
        .arg(format!("ssl_ca_file={}", pki.ca.display()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        dir,
        tls_port: port,
        plain_port: port,
    };
    wait_until("postgres", || server.postgres_admin().is_ok());
    server
        .postgres_admin()
        .unwrap()
        .batch_execute(&format!(
            "CREATE ROLE {CERT_USER} LOGIN; GRANT CREATE ON DATABASE postgres TO {CERT_USER}"
        ))
        .unwrap();
    server
}

/// The user that PostgreSQL and MariaDB admit only with a client certificate signed by the CA.
pub const CERT_USER: &str = "certuser";

/// MariaDB with TLS on `tls_port`, presenting `pem`; plain connections too. User `certuser`
/// ([`CERT_USER`]) must present a client certificate signed by the CA (`REQUIRE X509`).
pub fn mariadb(dir: &Path, pki: &Pki, pem: &Pem) -> Server {
    let dir = dir.join("mariadb");
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let user = if root() {
        "root".to_owned()
    } else {
        std::env::var("USER").unwrap_or_default()
    };
    run(
        Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--user={user}"))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"]),
        "mariadb-install-db (Debian: mariadb-server)",
    );
    let served = install_pem(pem, &dir, None);
    let port = free_port();
    let child = Command::new("/usr/sbin/mariadbd")
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--socket={}", dir.join("mariadb.sock").display()))
        .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
        .arg(format!("--user={user}"))
        .arg(format!("--ssl-cert={}", served.cert.display()))
        .arg(format!("--ssl-key={}", served.key.display()))
        .arg(format!("--ssl-ca={}", pki.ca.display()))
        .args(["--skip-log-bin", "--innodb-flush-log-at-trx-commit=0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        dir,
        tls_port: port,
        plain_port: port,
    };
    wait_until("mariadbd", || server.mariadb_admin().is_ok());
    use mysql::prelude::Queryable;
    server
        .mariadb_admin()
        .unwrap()
        .query_drop("CREATE DATABASE IF NOT EXISTS test")
        .unwrap();
    let mut admin = server.mariadb_admin().unwrap();
    admin
        .query_drop(format!("CREATE USER '{CERT_USER}'@'%' REQUIRE X509"))
        .unwrap();
    admin
        .query_drop(format!("GRANT ALL ON test.* TO '{CERT_USER}'@'%'"))
        .unwrap();
    server
}

impl Server {
    fn redis_admin(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.plain_port))?.get_connection()
    }

    fn postgres_admin(&self) -> Result<postgres::Client, postgres::Error> {
        postgres::Client::connect(
            &format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres",
                self.plain_port
            ),
            postgres::NoTls,
        )
    }

    fn mariadb_admin(&self) -> mysql::Result<mysql::Conn> {
        mysql::Conn::new(mysql::Opts::from_url(&format!(
            "mysql://root@127.0.0.1:{}/mysql",
            self.plain_port
        ))?)
    }

    /// Presents `pem` from now on (Redis: `CONFIG SET`; PostgreSQL: reload, which takes effect
    /// for the connections that follow it shortly; MariaDB: `FLUSH SSL`).
    pub fn present(&self, label: &str, pem: &Pem) {
        match label {
            "redis" => {
                let served = install_pem(pem, &self.dir, None);
                let _: () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("tls-cert-file")
                    .arg(served.cert.to_str().unwrap())
                    .arg("tls-key-file")
                    .arg(served.key.to_str().unwrap())
                    .query(&mut self.redis_admin().unwrap())
                    .unwrap();
            }
            "postgres" => {
                install_pem(pem, &self.dir, root().then_some("postgres"));
                self.postgres_admin()
                    .unwrap()
                    .batch_execute("SELECT pg_reload_conf()")
                    .unwrap();
            }
            "mysql" => {
                use mysql::prelude::Queryable;
                install_pem(pem, &self.dir, None);
                self.mariadb_admin()
                    .unwrap()
                    .query_drop("FLUSH SSL")
                    .unwrap();
            }
            other => panic!("no server {other}"),
        }
    }

    /// Requires a client certificate signed by the CA (Redis `tls-auth-clients yes`).
    pub fn require_client_certificates(&self) {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("tls-auth-clients")
            .arg("yes")
            .query(&mut self.redis_admin().unwrap())
            .unwrap();
    }
}
