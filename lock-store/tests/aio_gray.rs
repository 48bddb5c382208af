//! Gray failures under the async face, on every server store, through the tests' proxy
//! (`common::proxy`): the same promises the blocking face keeps in `gray.rs` and `faults.rs`.
//!
//! - A holder whose path goes silent (nothing forwarded, nothing closed) loses its lease at its
//!   own deadline: `Lease::lost()` completes before another client is handed the key; once the
//!   path is back, the same `Locks` works again (a silent connection is dropped, not waited on).
//! - A release whose write reached the store but whose answer was killed (replies stalled,
//!   then the connection reset) while another client took the key answers `Ok`.
//! - A waiter whose connections are reset again and again while it waits keeps its place and
//!   is handed the key once, in order.
//!
//! Checks are of order and of liveness with wide margins, never of speed.
mod common;

use std::time::Duration;

use common::proxy::{Fault, Proxy};
use lock_store::{aio, store, Options, StoreError};

const S: Duration = Duration::from_secs(1);

/// Runs `check` on each server store with a fresh namespace (installed directly, uninstalled
/// afterwards), an async `Locks` through a new proxy (calls bounded at `bound`) and one on a
/// healthy path.
fn each_server<F: std::future::Future<Output = ()>>(
    purpose: &str,
    bound: Duration,
    check: impl Fn(&'static str, aio::Locks, Proxy, aio::Locks) -> F,
) {
    for (label, real) in common::server_urls() {
        let ns = common::unique_namespace(purpose);
        let _cleanup = common::Cleanup(|| common::uninstall(&real, &ns));
        drop(store::open(&real, &ns, store::DEFAULT_BOUND).and_then(|mut s| s.install()));
        let proxy = Proxy::for_url(&real);
        common::runtime(2).block_on(async {
            let through = Options::new()
                .bound(bound)
                .open_async(&proxy.url(&real), &ns)
                .await
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            let healthy = aio::Locks::open(&real, &ns).await.unwrap();
            check(label, through, proxy, healthy).await;
        });
    }
}

/// Waits (at most 20 s) until `f` answers `Some`.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    f: impl FnMut() -> F,
) -> T {
    common::eventually_async(what, 20 * S, f).await
}

#[test]
fn a_silent_path_ends_an_async_lease_before_the_next_holder_and_the_client_recovers() {
    each_server("aio_silent", 2 * S, |label, a, proxy, b| async move {
        let lease = a
            .try_acquire("job", "a", Duration::from_millis(1500))
            .await
            .unwrap();
        lease.keep_alive();
        proxy.set(Fault::Blackhole);
        let taken = b.acquire("job", "b", 10 * S, 20 * S).await.unwrap();
        // On the holder's clock alone: its lease is over once another holds the key.
        assert!(
            lease.is_lost(),
            "{label}: b was handed the key while a still held it"
        );
        let lost = tokio::time::timeout(10 * S, lease.lost()).await;
        let lost = lost.unwrap_or_else(|_| panic!("{label}: lost() never completed"));
        assert_eq!(lost.refusal, None, "{label}: lost on its own clock");
        assert!(taken.fence() > lease.fence(), "{label}");
        // Meanwhile a call on the silent path fails, at its bound, with a typed error (no
        // answer on its connection, or no answer to a new connection's setup).
        let silent = tokio::time::timeout(20 * S, a.inspect("job")).await;
        let silent = silent.unwrap_or_else(|_| panic!("{label}: a call outlived its bound"));
        assert!(
            matches!(
                silent,
                Err(lock_store::Error::Store(
                    StoreError::Lost { .. } | StoreError::Connect { .. }
                ))
            ),
            "{label}: {silent:?}"
        );
        // The path comes back: the same client answers again, on a new connection (its silent
        // ones were dropped when their calls ran out of time, not kept to be waited on).
        let connections = proxy.accepted();
        proxy.set(Fault::None);
        let info = eventually(&format!("{label}: a's client answers again"), || async {
            a.inspect("job").await.ok()
        })
        .await;
        assert_eq!(info.unwrap().holder().unwrap().owner, "b", "{label}");
        assert!(
            proxy.accepted() > connections,
            "{label}: still on the connection that went silent"
        );
        taken.release().await.unwrap();
        let again = a.try_acquire("job", "a", 10 * S).await.unwrap();
        assert!(again.fence() > taken.fence(), "{label}");
        again.release().await.unwrap();
    });
}

#[test]
fn an_async_release_killed_between_its_write_and_its_answer_is_known_done() {
    each_server("aio_killed", 30 * S, |label, a, proxy, other| async move {
        // Once before, so that every statement is prepared before the replies are held back.
        let warm = a.try_acquire("warm", "a", 60 * S).await.unwrap();
        warm.release().await.unwrap();
        let lease = a.try_acquire("job", "a", 60 * S).await.unwrap();
        proxy.set(Fault::StallReplies);
        let releasing = tokio::spawn(async move {
            let answer = lease.release().await;
            (answer, lease)
        });
        let c = eventually(&format!("{label}: the key free for c"), || async {
            other.try_acquire("job", "c", 60 * S).await.ok()
        })
        .await;
        proxy.reset();
        proxy.set(Fault::None);
        let (answer, lease) = releasing.await.unwrap();
        assert_eq!(answer, Ok(()), "{label}");
        assert!(lease.released_at().is_some(), "{label}");
        assert!(
            !lease.is_lost(),
            "{label}: a released lease counted as lost"
        );
        let info = eventually(&format!("{label}: a answers again"), || async {
            a.inspect("job").await.ok()
        })
        .await;
        assert_eq!(info.unwrap().holder().unwrap().owner, "c", "{label}");
        c.release().await.unwrap();
    });
}

#[test]
fn an_async_waiter_whose_connections_are_reset_keeps_its_place_and_is_served_once() {
    each_server("aio_reset", 5 * S, |label, b, proxy, a| async move {
        let held = a.try_acquire("job", "a", 30 * S).await.unwrap();
        let waiting = {
            let b = b.clone();
            tokio::spawn(async move { b.acquire("job", "b", 30 * S, 30 * S).await })
        };
        eventually(&format!("{label}: b queued"), || async {
            let info = a.inspect("job").await.ok()??;
            (info.waiters.len() == 1).then_some(())
        })
        .await;
        // Its connections are cut again and again for three of its renewal periods.
        for _ in 0..15 {
            proxy.reset();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let info = a.inspect("job").await.unwrap().unwrap();
        assert_eq!(
            info.waiters
                .iter()
                .map(|w| w.owner.as_str())
                .collect::<Vec<_>>(),
            ["b"],
            "{label}: b lost its place"
        );
        held.release().await.unwrap();
        let granted = tokio::time::timeout(20 * S, waiting)
            .await
            .unwrap_or_else(|_| panic!("{label}: b never took the key"))
            .unwrap()
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(granted.fence() > held.fence(), "{label}");
        let info = a.inspect("job").await.unwrap().unwrap();
        assert_eq!(info.holder().unwrap().owner, "b", "{label}");
        assert!(info.waiters.is_empty(), "{label}: {info:?}");
        granted.release().await.unwrap();
    });
}
