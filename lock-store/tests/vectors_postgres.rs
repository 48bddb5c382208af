//! Every vector scenario through PostgreSQL (`LOCK_STORE_POSTGRES_URL`), fresh and with outdated
//! records.
#![cfg(feature = "postgres")]
mod common;

use std::time::Duration;

use lock_store::store::PostgresStore;

fn open(namespace: &str) -> PostgresStore {
    let mut store = common::installed(PostgresStore::open(
        &common::postgres_url(),
        namespace,
        Duration::from_secs(5),
    ));
    store.set_seed_from_time(false); // tokens 1, 2, 3... as the vectors expect
    store
}

#[test]
fn vectors_through_postgres() {
    common::check_vectors_on_server("postgres", open, false);
}

#[test]
fn vectors_through_postgres_from_outdated_records() {
    common::check_vectors_on_server("postgres", open, true);
}
