//! Every vector scenario through PostgreSQL (`LOCK_STORE_POSTGRES_URL`), fresh and with outdated
//! records.
#![cfg(feature = "postgres")]
mod common;

use std::time::Duration;

use lock_store::{PostgresStore, Store};

fn open(namespace: &str) -> PostgresStore {
    PostgresStore::open(&common::postgres_url(), namespace, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn check(stale: bool) {
    let ns = common::unique_namespace(if stale { "vec_stale" } else { "vec" });
    let _cleanup = common::Cleanup({
        let ns = ns.clone();
        move || open(&ns).uninstall().unwrap()
    });
    let label = if stale { "postgres, stale" } else { "postgres" };
    let mut store = Some(open(&ns));
    common::check_vectors(
        label,
        move || store.take().unwrap_or_else(|| open(&ns)),
        stale,
    );
}

#[test]
fn vectors_through_postgres() {
    check(false);
}

#[test]
fn vectors_through_postgres_from_outdated_records() {
    check(true);
}
