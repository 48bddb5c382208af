//! Every vector scenario through every store with the lock component deciding (the same
//! WebAssembly bytes as in the browser, Node and plugin hosts), fresh and from outdated records.
#![cfg(feature = "component")]
mod common;

use std::rc::Rc;
use std::time::Duration;

use host_wasmtime::LockComponent;
use lock_store::{store::Component, store::Store};

/// Runs the vectors on `open()` with a fresh component instance per scenario.
fn check<S: Store + 'static>(label: &str, open: impl Fn() -> S + Clone + 'static) {
    let component = Rc::new(LockComponent::embedded().unwrap());
    for stale in [false, true] {
        let c = Rc::clone(&component);
        let label = format!("{label}, component{}", if stale { ", stale" } else { "" });
        common::check_vectors_with(
            &label,
            open.clone(),
            move || Component::new(&c).unwrap(),
            stale,
        );
    }
}

#[test]
fn memory() {
    let store = lock_store::store::MemoryStore::new("vectors").unwrap();
    check("memory", move || store.clone());
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite() {
    let dir = std::env::temp_dir().join(common::unique_namespace("component"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vectors.db");
    check("sqlite", move || {
        common::installed(lock_store::store::SqliteStore::open(&path, "vectors"))
    });
}

#[cfg(feature = "redis")]
#[test]
fn redis() {
    let ns = common::unique_namespace("vec_component");
    let open = move || {
        let mut s = common::installed(lock_store::store::RedisStore::open(
            &common::redis_url(),
            &ns,
            Duration::from_secs(5),
        ));
        s.set_seed_from_time(false);
        s
    };
    let _cleanup = common::Cleanup({
        let open = open.clone();
        move || open().uninstall().unwrap()
    });
    check("redis", open);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres() {
    let ns = common::unique_namespace("vec_component");
    let open = move || {
        let mut s = common::installed(lock_store::store::PostgresStore::open(
            &common::postgres_url(),
            &ns,
            Duration::from_secs(5),
        ));
        s.set_seed_from_time(false);
        s
    };
    let _cleanup = common::Cleanup({
        let open = open.clone();
        move || open().uninstall().unwrap()
    });
    check("postgres", open);
}

#[cfg(feature = "mysql")]
#[test]
fn mariadb() {
    let ns = common::unique_namespace("vec_component");
    let open = move || {
        let mut s = common::installed(lock_store::store::MysqlStore::open(
            &common::mysql_url(),
            &ns,
            Duration::from_secs(5),
        ));
        s.set_seed_from_time(false);
        s
    };
    let _cleanup = common::Cleanup({
        let open = open.clone();
        move || open().uninstall().unwrap()
    });
    check("mariadb", open);
}
