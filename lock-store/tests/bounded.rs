//! Bounded calls: a server that stops answering never hangs a caller. A silent server at
//! connect time, and a proxy that freezes mid-use (the server stays up, its answers never
//! arrive): every call fails typed within its bound, and the client works again once the path
//! is back, and the failure says "no answer within" the bound on every store. A call is
//! bounded end to end: a store call that timed out is not followed by another one that waits
//! a whole bound again (the re-read of an ambiguous write had doubled it). (Liveness checks
//! with generous margins, not timings: half a bound over it is allowed.)
mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::proxy::{locks_through, Fault};
use lock_store::{store, Error, StoreError};

/// The bound the clients are opened with: short, yet long enough for a busy test machine to
/// install a namespace through the proxy.
const BOUND: Duration = Duration::from_millis(1500);
/// How long a bounded call may take at most before the test calls it a hang.
const HANG: Duration = Duration::from_secs(15);

/// A listener that accepts and never says a word.
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    port
}

fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let value = f();
    assert!(start.elapsed() < HANG, "{what} took {:?}", start.elapsed());
    value
}

/// Runs `f`, which must fail with no answer, within the bound (half a bound over it allowed,
/// so that a busy machine passes and a doubled bound does not).
fn within_the_bound<T: std::fmt::Debug>(what: &str, f: impl FnOnce() -> Result<T, Error>) -> Error {
    let start = Instant::now();
    let value = f();
    let took = start.elapsed();
    assert!(took < BOUND * 3 / 2, "{what} took {took:?}: {value:?}");
    let error = match value {
        Err(e) => e,
        Ok(v) => panic!("{what}: answered {v:?} through a frozen path"),
    };
    assert!(
        error.to_string().contains("no answer within"),
        "{what}: the error says {error}"
    );
    error
}

#[test]
fn a_silent_server_fails_the_connection_within_its_bound() {
    let port = silent_server();
    let mut urls = Vec::new();
    if cfg!(feature = "redis") {
        urls.push(format!("redis://127.0.0.1:{port}"));
    }
    if cfg!(feature = "postgres") {
        urls.push(format!("postgres://postgres@127.0.0.1:{port}/test"));
    }
    if cfg!(feature = "mysql") {
        urls.push(format!("mysql://root@127.0.0.1:{port}/test"));
    }
    // Several hosts, every one silent: they share the one bound (a connect does not cost a
    // bound per host or per Sentinel).
    let other = silent_server();
    if cfg!(feature = "redis") {
        urls.push(format!(
            "redis+sentinel://127.0.0.1:{port},127.0.0.1:{other}/locks"
        ));
    }
    if cfg!(feature = "postgres") {
        urls.push(format!(
            "postgres://postgres@127.0.0.1:{port},127.0.0.1:{other}/test?target_session_attrs=read-write"
        ));
    }
    if cfg!(feature = "mysql") {
        urls.push(format!(
            "mysql://root@127.0.0.1:{port},127.0.0.1:{other}/test?target_session_attrs=read-write"
        ));
    }
    for u in urls {
        let e = within_the_bound(&u, || {
            store::open(&u, "bounded", BOUND)
                .map(|_| ())
                .map_err(Error::Store)
        });
        assert!(
            matches!(
                e,
                Error::Store(StoreError::Connect { .. } | StoreError::Lost { .. })
            ),
            "{u}: {e:?}"
        );
    }
}

/// Redis and MariaDB bound every call with socket timeouts, PostgreSQL with a timer around each
/// call of its async client.
#[test]
fn a_frozen_path_mid_use_fails_calls_typed_and_the_client_recovers() {
    let mut cases = Vec::new();
    if cfg!(feature = "redis") {
        cases.push(("redis", common::redis_url()));
    }
    if cfg!(feature = "postgres") {
        cases.push(("postgres", common::postgres_url()));
    }
    if cfg!(feature = "mysql") {
        cases.push(("mariadb", common::mysql_url()));
    }
    for (label, real) in cases {
        let ns = common::unique_namespace("bounded");
        let _cleanup = common::Cleanup(|| common::uninstall(&real, &ns));
        let (locks, proxy) = locks_through(&real, &ns, BOUND);
        let lease = locks
            .try_acquire("job", "a", Duration::from_secs(30))
            .unwrap();
        proxy.set(Fault::Blackhole);
        // Through the frozen path: an extension (a write whose answer never comes, then the
        // re-read of the ambiguous write) and a look, each within one bound in all.
        let _ = within_the_bound(label, || lease.extend(Duration::from_secs(30)));
        let _ = within_the_bound(label, || locks.inspect("job"));
        let released = bounded(label, || lease.release());
        assert!(
            matches!(
                released,
                Err(Error::Store(
                    StoreError::Lost { .. } | StoreError::Connect { .. }
                ))
            ),
            "{label}: {released:?}"
        );
        let inspected = bounded(label, || locks.inspect("job"));
        assert!(
            matches!(inspected, Err(Error::Store(_))),
            "{label}: {inspected:?}"
        );
        proxy.set(Fault::None);
        // The path is back: the client reconnects; the release is retried and answers.
        let again = bounded(label, || loop {
            match lease.release() {
                Err(Error::Store(StoreError::Lost { .. } | StoreError::Connect { .. })) => {}
                other => break other,
            }
        });
        assert!(
            matches!(again, Ok(()) | Err(Error::Lock(_))),
            "{label}: {again:?}"
        );
        assert_eq!(
            bounded(label, || locks.inspect("job")).unwrap(),
            None,
            "{label}"
        );
    }
}
