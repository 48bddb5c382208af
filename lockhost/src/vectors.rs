//! The shared vectors against the component: a [`BackendDriver`] that starts every scenario on a
//! fresh instance of the component.

use host_wasmtime::{ComponentTable, LockComponent, SandboxLimits};
use lock_conformance::BackendDriver;

/// A vector driver over `component`: one fresh instance (default sandbox) per scenario.
pub fn component_driver(component: LockComponent) -> BackendDriver<ComponentTable> {
    BackendDriver::new(move |limits| {
        component
            .instantiate(limits, 0, SandboxLimits::default())
            .map_err(|e| e.to_string())
    })
}
