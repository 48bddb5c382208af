//! Every script and statement a store client sends is a step of `lock-store/steps/`, the files
//! the Rust and the Node clients share: a client that built SQL or a script of its own would
//! decide with a store side nobody else runs. Each server store is driven through every call
//! (a read of a namespace not installed yet, the install, grants, a wait and its hand-off,
//! extensions, releases, inspection, listing, the collection walk, clear, uninstall) over the
//! tests' proxy, which keeps what the client sent; the test reads it as the server would
//! (PostgreSQL's and MariaDB's protocol messages, Redis' RESP) and names every text that is
//! not a step. The async face's native client (Redis) is driven the same way. SQLite, which has no wire, is checked the same way in its unit tests (SQLite's
//! statement trace).
mod common;

#[allow(dead_code)]
#[path = "../src/steps.rs"]
mod steps;

use std::time::Duration;

use common::proxy::Proxy;
use lock_store::store::{self, Store};
use lock_store::Locks;

const MS: Duration = Duration::from_millis(1);

/// Drives every call of the store API on namespace `ns` of the server behind `url` (a
/// proxy's URL).
fn every_call(url: &str, ns: &str) {
    let mut raw = store::open(url, ns, store::DEFAULT_BOUND).unwrap();
    // Reads of a namespace that is not there yet (its presence checks).
    assert!(matches!(
        raw.read("job"),
        Err(lock_store::StoreError::NoNamespace { .. })
    ));
    let a = Locks::open(url, ns).unwrap();
    let b = Locks::open(url, ns).unwrap();
    assert!(matches!(
        a.keys(),
        Err(lock_store::Error::Store(
            lock_store::StoreError::NoNamespace { .. }
        ))
    ));
    let lease = a.try_acquire("job", "a", 5000 * MS).unwrap();
    lease.extend(5000 * MS).unwrap();
    assert!(a.inspect("job").unwrap().is_some());
    std::thread::scope(|s| {
        let waiter = s.spawn(|| b.acquire("job", "b", 5000 * MS, 10_000 * MS));
        common::eventually("b waits", || {
            (a.inspect("job").unwrap()?.waiters.len() == 1).then_some(())
        });
        lease.release().unwrap();
        waiter.join().unwrap().unwrap().release().unwrap();
    });
    // Enough writes on many keys for the collection walk to take steps (the leases of 1 ms
    // end by themselves).
    for i in 0..140 {
        let lease = a.try_acquire(&format!("k{i}"), "a", MS).unwrap();
        let _ = lease.release();
    }
    a.keys().unwrap();
    assert!(a.last_fence().unwrap().0 >= 142);
    raw.clear().unwrap();
    raw.install().unwrap();
    raw.uninstall().unwrap();
}

/// Drives the async face's calls (`lock_store::aio`) on namespace `ns` behind `url`: the
/// clients it runs natively (Redis) send their own commands.
#[cfg(feature = "tokio")]
fn every_async_call(url: &str, ns: &str) {
    let runtime = common::runtime(2);
    runtime.block_on(async {
        let a = lock_store::aio::Locks::open(url, ns).await.unwrap();
        let b = lock_store::aio::Locks::open(url, ns).await.unwrap();
        let lease = a.try_acquire("job", "a", 5000 * MS).await.unwrap();
        lease.extend(5000 * MS).await.unwrap();
        let waiter =
            tokio::spawn(async move { b.acquire("job", "b", 5000 * MS, 10_000 * MS).await });
        while a.inspect("job").await.unwrap().unwrap().waiters.is_empty() {
            tokio::time::sleep(10 * MS).await;
        }
        lease.release().await.unwrap();
        waiter.await.unwrap().unwrap().release().await.unwrap();
        a.keys().await.unwrap();
        assert!(a.last_fence().await.unwrap().0 >= 2);
    });
}

/// The texts PostgreSQL was sent: each simple query (`Q`) and each statement parsed (`P`),
/// after each connection's startup packet.
fn postgres_texts(stream: &[u8]) -> Vec<String> {
    let mut texts = Vec::new();
    let len = |at: usize| u32::from_be_bytes(stream[at..at + 4].try_into().unwrap()) as usize;
    // The startup packet (or an SSL request): a length, no type byte.
    let mut at = len(0);
    while at + 5 <= stream.len() {
        let (kind, body) = (stream[at], &stream[at + 5..at + 1 + len(at + 1)]);
        let cstr = |b: &[u8]| {
            let end = b.iter().position(|&c| c == 0).unwrap();
            (String::from_utf8(b[..end].to_vec()).unwrap(), end + 1)
        };
        match kind {
            b'Q' => texts.push(cstr(body).0),
            b'P' => {
                let (_, name_len) = cstr(body);
                texts.push(cstr(&body[name_len..]).0);
            }
            _ => {}
        }
        at += 1 + len(at + 1);
    }
    texts
}

/// The texts MariaDB was sent: each `COM_QUERY` and `COM_STMT_PREPARE` (commands start a
/// sequence at 0; the handshake's answer does not).
fn mysql_texts(stream: &[u8]) -> Vec<String> {
    let mut texts = Vec::new();
    let mut at = 0;
    while at + 4 <= stream.len() {
        let len = usize::from(stream[at])
            | usize::from(stream[at + 1]) << 8
            | usize::from(stream[at + 2]) << 16;
        let (seq, payload) = (stream[at + 3], &stream[at + 4..at + 4 + len]);
        if seq == 0 && matches!(payload.first(), Some(0x03 | 0x16)) {
            texts.push(String::from_utf8(payload[1..].to_vec()).unwrap());
        }
        at += 4 + len;
    }
    texts
}

/// The scripts Redis was sent (`EVAL`, `SCRIPT LOAD`) and named (`EVALSHA`: `sha:` and the
/// SHA-1), from the RESP arrays of the stream.
fn redis_scripts(stream: &[u8]) -> Vec<String> {
    let mut scripts = Vec::new();
    let mut at = 0;
    let line = |at: &mut usize| {
        let end = *at + stream[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let text = std::str::from_utf8(&stream[*at..end]).unwrap().to_owned();
        *at = end + 2;
        text
    };
    while at < stream.len() {
        let count: usize = line(&mut at).strip_prefix('*').unwrap().parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..count {
            let len: usize = line(&mut at).strip_prefix('$').unwrap().parse().unwrap();
            args.push(String::from_utf8_lossy(&stream[at..at + len]).into_owned());
            at += len + 2;
        }
        let name = args
            .first()
            .map(|a| a.to_ascii_uppercase())
            .unwrap_or_default();
        match name.as_str() {
            "EVAL" | "EVAL_RO" => scripts.push(args[1].clone()),
            "EVALSHA" | "EVALSHA_RO" => scripts.push(format!("sha:{}", args[1])),
            "SCRIPT" if args[1].eq_ignore_ascii_case("load") => scripts.push(args[2].clone()),
            "FCALL" | "FUNCTION" => scripts.push(args.join(" ")),
            _ => {}
        }
    }
    scripts
}

/// Every step of `file` filled for namespace `ns`.
fn filled(file: &str, values: &[(&str, &str)]) -> Vec<String> {
    steps::all(file)
        .into_iter()
        .map(|(_, text)| steps::fill(&text, values))
        .collect()
}

#[test]
fn every_text_a_client_sends_is_a_step_of_the_shared_files() {
    for (label, real) in common::server_urls() {
        let ns = common::unique_namespace("steps");
        let _cleanup = common::Cleanup(|| common::uninstall(&real, &ns));
        let proxy = Proxy::recording(&real);
        every_call(&proxy.url(&real), &ns);
        let mut sent = proxy.sent();
        #[cfg(feature = "tokio")]
        {
            let proxy = Proxy::recording(&real);
            every_async_call(&proxy.url(&real), &ns);
            sent.extend(proxy.sent());
        }
        let (texts, steps): (Vec<String>, Vec<String>) = match label {
            "postgres" => (
                sent.iter().flat_map(|s| postgres_texts(s)).collect(),
                // The writes call take_over(), or num_nulls() in a namespace without it.
                [
                    [format!("{ns}.take_over"), format!("{ns}.hold_for")],
                    [
                        "pg_catalog.num_nulls".to_owned(),
                        "pg_catalog.num_nulls".to_owned(),
                    ],
                ]
                .iter()
                .flat_map(|[take_over, hold_for]| {
                    filled(
                        steps::POSTGRES,
                        &[
                            ("ns", &ns),
                            ("format", "1"),
                            ("channel", &format!("{ns}_handoff")),
                            ("take_over", take_over),
                            ("hold_for", hold_for),
                        ],
                    )
                })
                .collect(),
            ),
            "mysql" => (
                sent.iter().flat_map(|s| mysql_texts(s)).collect(),
                filled(steps::MYSQL, &[("ns", &ns), ("format", "1")]),
            ),
            "redis" => (
                sent.iter().flat_map(|s| redis_scripts(s)).collect(),
                vec![
                    steps::REDIS_CAS.to_owned(),
                    format!("sha:{}", redis::Script::new(steps::REDIS_CAS).get_hash()),
                ],
            ),
            other => panic!("no wire reader for {other}"),
        };
        assert!(texts.len() >= 3, "{label}: the reader found only {texts:?}");
        let strangers: Vec<&String> = texts
            .iter()
            .filter(|t| !steps::is_step(t, &steps))
            .collect();
        assert!(
            strangers.is_empty(),
            "{label}: sent texts that are not steps of lock-store/steps/: {strangers:#?}"
        );
        // And the calls used the shared steps, not a few of them: the hot path's at least.
        let used = |needle: &str| texts.iter().any(|t| t.contains(needle));
        match label {
            "postgres" => assert!(
                used("UPDATE") && used("INSERT") && used("LISTEN"),
                "{label}"
            ),
            "mysql" => assert!(used("CALL") && used("UPDATE"), "{label}"),
            _ => assert!(texts.iter().any(|t| t.starts_with("sha:")), "{label}"),
        }
        println!("{label}: {} texts sent, each a step", texts.len());
    }
}
