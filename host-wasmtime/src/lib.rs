//! Embeds the lock component (`lock-wasm`, WIT world `expiring:lock/lock`) with wasmtime.

pub mod component;
pub mod conformance;

pub use component::{
    types, ComponentTable, HostError, LockComponent, SandboxLimits, LOCK_COMPONENT,
};
