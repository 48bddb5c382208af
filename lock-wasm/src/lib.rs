//! `lock-core` for WebAssembly, in two faces built from this one crate:
//!
//! - feature `component` (default): the WebAssembly component of the WIT contract in `wit/`
//!   (wit-bindgen), built for `wasm32-unknown-unknown` and turned into a component that imports
//!   nothing by `host-wasmtime/build.rs`;
//! - feature `js`: the wasm-bindgen engine of the npm package in `lock-wasm/js/`
//!   (`scripts/build-npm.sh` builds it).
//!
//! Both only translate types: every outcome is decided by `lock-core`.

#![warn(missing_docs)]

#[cfg(feature = "component")]
mod component;
#[cfg(feature = "js")]
pub mod js;
