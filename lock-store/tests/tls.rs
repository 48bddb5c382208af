//! TLS on every server store, against throwaway Redis, PostgreSQL and MariaDB servers that speak
//! it, with a CA made at test time: a good certificate connects (and locks); a certificate from
//! a CA the client does not trust, an expired one and one for another host each fail with a
//! connection error that says which; PostgreSQL's `verify-ca` and MariaDB's `VERIFY_CA` accept a
//! certificate for another host (chain only); a server asking for a client certificate (Redis
//! `tls-auth-clients`, PostgreSQL `clientcert=verify-ca`, MariaDB `REQUIRE X509`) refuses a
//! client without one and accepts one with it; listing (what `lockstore list` does) answers alike. The npm
//! package's Node client (`LOCKSTORE_NODE_WORKERS`) takes them too and answers each alike.
mod common;
#[path = "common/node.rs"]
mod node;
#[path = "common/tls_servers.rs"]
mod tls_servers;

use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use lock_store::{Error, Locks, StoreError};
use tls_servers::{Pki, Server};

/// The URL of `server` for `label` at `host`, with the TLS parameters of that store's
/// ecosystem: `ca` the CA file (none: the system's roots), `chain_only` to skip the host name.
fn url(label: &str, server: &Server, host: &str, ca: Option<&Path>, chain_only: bool) -> String {
    let port = server.tls_port;
    let ca = ca.map(|p| p.display().to_string());
    match label {
        "redis" => match ca {
            Some(ca) => format!("rediss://{host}:{port}/0?cacert={ca}"),
            None => format!("rediss://{host}:{port}/0"),
        },
        "postgres" => {
            let mode = if chain_only {
                "verify-ca"
            } else {
                "verify-full"
            };
            match ca {
                Some(ca) => {
                    format!("postgres://postgres@{host}:{port}/postgres?sslmode={mode}&sslrootcert={ca}")
                }
                None => format!("postgres://postgres@{host}:{port}/postgres?sslmode=require"),
            }
        }
        "mysql" => {
            let mode = if chain_only {
                "VERIFY_CA"
            } else {
                "VERIFY_IDENTITY"
            };
            match ca {
                Some(ca) => format!("mysql://root@{host}:{port}/test?ssl-mode={mode}&ssl-ca={ca}"),
                None => format!("mysql://root@{host}:{port}/test?ssl-mode=REQUIRED"),
            }
        }
        other => panic!("{other}"),
    }
}

/// The test's Node client, if it has one.
fn node_client() -> &'static Mutex<Option<node::NodeClient>> {
    static NODE: OnceLock<Mutex<Option<node::NodeClient>>> = OnceLock::new();
    NODE.get_or_init(|| Mutex::new(node::NodeClient::start("tls")))
}

/// What the Node client answers to opening `url` for `ns` and taking and releasing a lock there
/// (`None` without a Node client).
fn node_lock(url: &str, ns: &str) -> Option<Result<String, node::NodeError>> {
    let mut node = node_client().lock().unwrap();
    Some(node.as_mut()?.call(&["lock-once", url, ns]))
}

/// What an answer is, to compare clients: locked, a failed TLS check and which (the words after
/// `TLS: `, which every client says alike), or another failure to connect.
fn outcome(result: Result<(), (&str, &str)>) -> String {
    match result {
        Ok(()) => "locks".into(),
        Err(("connect" | "lost", reason)) => match reason.split_once("TLS: ") {
            Some((_, why)) => format!("TLS: {}", why.split(": ").next().unwrap_or(why)),
            None => "a connect failure".into(),
        },
        Err((code, reason)) => format!("{code}: {reason}"),
    }
}

/// [`outcome`] of a Rust client's answer.
fn rust_outcome(result: &Result<(), Error>) -> String {
    outcome(match result {
        Ok(()) => Ok(()),
        Err(Error::Store(StoreError::Connect { reason, .. })) => Err(("connect", reason)),
        Err(Error::Store(StoreError::Lost { reason, .. })) => Err(("lost", reason)),
        Err(_) => Err(("other", "")),
    })
}

/// Opens `url` and takes, then releases, a lock there (the namespace installed over TLS too),
/// with the blocking face and (feature `tokio`) the async one, which must answer alike: the
/// same success, or the same connection error; and with the Node client, which must answer as
/// the blocking face does, a failed TLS check in the same words.
fn lock(url: &str) -> Result<(), Error> {
    // The namespace's owner is the URL's user: one namespace per user.
    let ns = if url.contains(tls_servers::CERT_USER) {
        "tls_cert"
    } else {
        "tls"
    };
    let blocking = (|| {
        let locks = Locks::open(url, ns)?;
        locks
            .try_acquire("job", "tls", Duration::from_secs(5))?
            .release()
    })();
    #[cfg(feature = "tokio")]
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let asynchronous = runtime.block_on(async {
            let locks = lock_store::aio::Locks::open(url, ns).await?;
            let lease = locks
                .try_acquire("job", "tls", Duration::from_secs(5))
                .await?;
            lease.release().await
        });
        // Both lock, or both fail to connect, over TLS alike (a TLS failure named as one);
        // the async client's words may differ where its client library does.
        let kind = |r: &Result<(), Error>| match r {
            Ok(()) => Some("locks"),
            Err(Error::Store(StoreError::Connect { reason, .. }))
                if reason.starts_with("TLS: ") =>
            {
                Some("a TLS failure")
            }
            Err(Error::Store(StoreError::Connect { .. })) => Some("a connect failure"),
            Err(_) => None,
        };
        // A server reloading its certificate may answer the two differently: the caller tries
        // again then, as for any answer it did not expect.
        if kind(&blocking).is_some() && kind(&blocking) != kind(&asynchronous) {
            return Err(Error::Store(StoreError::Server {
                store: url.to_owned(),
                reason: format!("blocking {blocking:?}, async {asynchronous:?}"),
            }));
        }
    }
    if let Some(node) = node_lock(url, ns) {
        let theirs = outcome(match &node {
            Ok(_) => Ok(()),
            Err(e) => Err((e.code.as_str(), e.message.as_str())),
        });
        let ours = rust_outcome(&blocking);
        // A Redis that wants a client certificate resets the connection after the handshake:
        // Node sees the reset, not the alert before it, and says what it may mean.
        let reset_for_a_certificate = ours.starts_with("TLS: the server asks for a client")
            && matches!(&node, Err(e) if e.message.contains("asks for a client certificate"));
        if theirs != ours && !reset_for_a_certificate {
            return Err(Error::Store(StoreError::Server {
                store: url.to_owned(),
                reason: format!("blocking {blocking:?}, Node {node:?}"),
            }));
        }
    }
    blocking
}

/// The connection error of `url`, which must say `words`. A server reloading its certificate
/// (PostgreSQL) may present the former one for a moment: tried for up to 10 s.
fn refused(label: &str, url: &str, words: &str) {
    let start = Instant::now();
    loop {
        let got = lock(url);
        match &got {
            Err(Error::Store(StoreError::Connect { reason, .. })) if reason.contains(words) => {
                assert!(reason.starts_with("TLS: "), "{label}: {reason}");
                println!("{label}: {reason}");
                return;
            }
            _ if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!("{label} {url}: expected \"{words}\", got {other:?}"),
        }
    }
}

/// `url` locks (after the server's reload, as in [`refused`]).
fn locks(label: &str, url: &str) {
    let start = Instant::now();
    loop {
        match lock(url) {
            Ok(()) => return,
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{label} {url}: {e}"),
        }
    }
}

/// What `lockstore list` over `url` reads (the `lockstore` crate maps these answers to its exit
/// statuses, `tests/cli.rs` there): the namespace's keys, or why not.
fn list(url: &str) -> Result<Vec<String>, Error> {
    Locks::open(url, "never_used").and_then(|locks| locks.keys())
}

#[test]
fn every_server_store_speaks_tls_and_says_which_check_failed() {
    let dir = std::env::temp_dir().join(common::unique_namespace("tls"));
    let pki = Pki::new(&dir.join("pki"));
    let servers = [
        ("redis", tls_servers::redis(&dir, &pki, &pki.good)),
        ("postgres", tls_servers::postgres(&dir, &pki, &pki.good)),
        ("mysql", tls_servers::mariadb(&dir, &pki, &pki.good)),
    ];
    for (label, server) in &servers {
        let (label, server) = (*label, server);
        let good = url(label, server, "127.0.0.1", Some(&pki.ca), false);
        locks(label, &good);
        // The URL reaches the store: the namespace listed does not exist, not a TLS failure.
        assert!(
            matches!(
                list(&good),
                Err(Error::Store(StoreError::NoNamespace { .. }))
            ),
            "{label}: {:?}",
            list(&good)
        );
        // The system's roots do not hold the test's CA, nor does another CA file.
        refused(
            label,
            &url(label, server, "127.0.0.1", None, false),
            "not signed by a CA this client trusts",
        );
        refused(
            label,
            &url(label, server, "127.0.0.1", Some(&pki.other_ca), false),
            "not signed by a CA this client trusts",
        );
        // A certificate for another host.
        server.present(label, &pki.other_host);
        refused(label, &good, "for another host name");
        if label != "redis" {
            // The chain alone is checked on request.
            locks(label, &url(label, server, "127.0.0.1", Some(&pki.ca), true));
        }
        server.present(label, &pki.expired);
        refused(label, &good, "has expired");
        assert!(
            matches!(list(&good), Err(Error::Store(StoreError::Connect { .. }))),
            "{label}: a TLS failure is a store error: {:?}",
            list(&good)
        );
        server.present(label, &pki.good);
        locks(label, &good);
    }
    // A Redis server that asks for a client certificate.
    let redis = &servers[0].1;
    redis.require_client_certificates();
    let good = url("redis", redis, "127.0.0.1", Some(&pki.ca), false);
    match lock(&good) {
        Err(Error::Store(StoreError::Connect { .. } | StoreError::Lost { .. })) => {}
        other => panic!("redis without a client certificate: {other:?}"),
    }
    locks(
        "redis",
        &format!(
            "{good}&cert={}&key={}",
            pki.client.cert.display(),
            pki.client.key.display()
        ),
    );
    // PostgreSQL and MariaDB users that must present one.
    let user = tls_servers::CERT_USER;
    let ca = pki.ca.display();
    let (cert, key) = (pki.client.cert.display(), pki.client.key.display());
    for (label, without, with) in [
        (
            "postgres",
            format!(
                "postgres://{user}@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={ca}",
                servers[1].1.tls_port
            ),
            format!("&sslcert={cert}&sslkey={key}"),
        ),
        (
            "mysql",
            format!(
                "mysql://{user}@127.0.0.1:{}/test?ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}",
                servers[2].1.tls_port
            ),
            format!("&ssl-cert={cert}&ssl-key={key}"),
        ),
    ] {
        match lock(&without) {
            Err(Error::Store(StoreError::Connect { reason, .. })) => {
                println!("{label} without a client certificate: {reason}");
                // The error says what is missing, not only "access denied".
                assert!(reason.contains("client certificate"), "{label}: {reason}");
            }
            other => panic!("{label} without a client certificate: {other:?}"),
        }
        if let Some(node) = node_lock(&without, "tls_cert") {
            let e = node.expect_err("Node without a client certificate");
            println!("{label} without a client certificate, Node: {}", e.message);
            assert!(e.message.contains("client certificate"), "{label}: {e:?}");
        }
        locks(label, &format!("{without}{with}"));
    }
    drop(servers);
    let _ = std::fs::remove_dir_all(&dir);
}
