//! The pieces of the `lockhost` CLI, as a library so its tests drive them too: the benchmark
//! workloads and start-up timings ([`mod@bench`]), the vector driver over the component
//! ([`vectors`]), and the demo's election among plugins ([`election_demo`]). Not a public API of the project: plugin hosts use `host-wasmtime`.

pub mod bench;
pub mod election_demo;
pub mod vectors;
