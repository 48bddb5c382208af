//! Every vector scenario through Redis (`LOCK_STORE_REDIS_URL`), fresh and with outdated
//! records.
#![cfg(feature = "redis")]
mod common;

use std::time::Duration;

use lock_store::store::RedisStore;

fn open(namespace: &str) -> RedisStore {
    let mut store = common::installed(RedisStore::open(
        &common::redis_url(),
        namespace,
        Duration::from_secs(5),
    ));
    // Tokens 1, 2, 3... as the vectors expect.
    store.set_seed_from_time(false);
    store
}

#[test]
fn vectors_through_redis() {
    common::check_vectors_on_server("redis", open, false);
}

#[test]
fn vectors_through_redis_from_outdated_records() {
    common::check_vectors_on_server("redis", open, true);
}
