//! Every vector scenario through MariaDB (`LOCK_STORE_MYSQL_URL`), fresh and with outdated
//! records.
#![cfg(feature = "mysql")]
mod common;

use std::time::Duration;

use lock_store::{MysqlStore, Store};

fn open(namespace: &str) -> MysqlStore {
    MysqlStore::open(&common::mysql_url(), namespace, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn check(stale: bool) {
    let ns = common::unique_namespace(if stale { "vec_stale" } else { "vec" });
    let _cleanup = common::Cleanup({
        let ns = ns.clone();
        move || open(&ns).uninstall().unwrap()
    });
    let label = if stale { "mysql, stale" } else { "mysql" };
    let mut store = Some(open(&ns));
    common::check_vectors(
        label,
        move || store.take().unwrap_or_else(|| open(&ns)),
        stale,
    );
}

#[test]
fn vectors_through_mysql() {
    check(false);
}

#[test]
fn vectors_through_mysql_from_outdated_records() {
    check(true);
}
