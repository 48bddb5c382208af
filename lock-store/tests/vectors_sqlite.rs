//! Every vector scenario through a SQLite file, fresh and with outdated records.
#![cfg(feature = "sqlite")]

mod common;

use lock_store::store::SqliteStore;

fn file(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(common::unique_namespace("lockstore"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn vectors_through_sqlite() {
    let path = file("vectors.db");
    common::check_vectors(
        "sqlite",
        move || common::installed(SqliteStore::open(&path, "vectors")),
        false,
    );
}

#[test]
fn vectors_through_sqlite_from_outdated_records() {
    let path = file("stale.db");
    common::check_vectors(
        "sqlite, stale",
        move || common::installed(SqliteStore::open(&path, "vectors")),
        true,
    );
}
