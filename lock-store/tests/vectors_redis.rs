//! Every vector scenario through Redis (`LOCK_STORE_REDIS_URL`), fresh and with outdated records.
#![cfg(feature = "redis")]
mod common;

use std::time::Duration;

use lock_store::{RedisStore, Store};

fn open(namespace: &str) -> RedisStore {
    let mut store = RedisStore::open(&common::redis_url(), namespace, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"));
    store.set_seed_from_time(false);
    store
}

fn check(stale: bool) {
    let ns = common::unique_namespace(if stale { "vec_stale" } else { "vec" });
    let _cleanup = common::Cleanup({
        let ns = ns.clone();
        move || open(&ns).uninstall().unwrap()
    });
    let label = if stale { "redis, stale" } else { "redis" };
    common::check_vectors(label, move || open(&ns), stale);
}

#[test]
fn vectors_through_redis() {
    check(false);
}

#[test]
fn vectors_through_redis_from_outdated_records() {
    check(true);
}
