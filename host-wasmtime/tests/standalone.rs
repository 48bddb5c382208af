//! The README's "component without this repository" path, run for real: a plugin host that
//! does not use `host-wasmtime` generates bindings from `wit/` and instantiates the shipped
//! component in a default wasmtime engine (no sandbox, no imports to provide).

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

wasmtime::component::bindgen!({ path: "wit", world: "lock" });
use exports::expiring::lock::types::{AcquireOutcome, Grant, Limits, LockError};

#[test]
fn the_shipped_component_runs_in_a_plain_engine_from_the_wit_alone() {
    let shipped = include_bytes!("../component/lock.component.wasm");
    let engine = Engine::default();
    let component = Component::new(&engine, shipped).unwrap();
    let mut store = Store::new(&engine, ());
    let lock = Lock::instantiate(&mut store, &component, &Linker::new(&engine)).unwrap();
    let tables = lock.expiring_lock_table().lock_table();
    let limits = Limits {
        max_key_bytes: 256,
        max_owner_bytes: 256,
        max_ttl: 86_400_000,
        max_keys: 1_000_000,
        max_waiters_per_key: 64,
        max_waiters: 100_000,
        expired_retention: 600_000,
        max_expired_records: 10_000,
        max_pending_events: 100_000,
        max_holders_per_key: 64,
        max_metadata_bytes: 256,
        lock_delay: 0,
    };
    let table = tables
        .call_create(&mut store, limits, 0)
        .unwrap()
        .expect("the README's limits are valid");
    let taken = tables
        .call_try_acquire(&mut store, table, "nightly-report", "worker-a", 30_000, 0)
        .unwrap();
    assert!(matches!(
        taken,
        Ok(AcquireOutcome::Acquired(Grant {
            fence: 1,
            deadline: 30_000
        }))
    ));
    let refused = tables
        .call_try_acquire(&mut store, table, "nightly-report", "worker-b", 30_000, 5)
        .unwrap();
    assert!(matches!(refused, Err(LockError::Held(30_000))));
}
