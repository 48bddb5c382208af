//! Every vector scenario through MariaDB (`LOCK_STORE_MYSQL_URL`), fresh and with outdated
//! records.
#![cfg(feature = "mysql")]
mod common;

use std::time::Duration;

use lock_store::store::MysqlStore;

fn open(namespace: &str) -> MysqlStore {
    let mut store = common::installed(MysqlStore::open(
        &common::mysql_url(),
        namespace,
        Duration::from_secs(5),
    ));
    store.set_seed_from_time(false); // tokens 1, 2, 3... as the vectors expect
    store
}

#[test]
fn vectors_through_mysql() {
    common::check_vectors_on_server("mysql", open, false);
}

#[test]
fn vectors_through_mysql_from_outdated_records() {
    common::check_vectors_on_server("mysql", open, true);
}
