//! The component the crate ships for builds from its package
//! (`component/lock.component.wasm`) is the one this workspace builds from `lock-wasm` now: it
//! never goes stale. (In a build from the package both are the shipped copy.)

#[test]
fn the_shipped_component_is_the_fresh_build() {
    let shipped: &[u8] = include_bytes!("../component/lock.component.wasm");
    assert!(
        shipped == host_wasmtime::LOCK_COMPONENT,
        "host-wasmtime/component/lock.component.wasm ({} bytes) differs from the fresh build \
         ({} bytes): run scripts/ship-component.sh and commit it",
        shipped.len(),
        host_wasmtime::LOCK_COMPONENT.len()
    );
}
