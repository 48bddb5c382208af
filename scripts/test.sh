#!/usr/bin/env bash
# Runs every test: unit and doc tests; the shared conformance vectors against the native core and
# through the WebAssembly component in wasmtime; the property tests against the reference model;
# the vector-file loader tests; the host library's tests (blocking acquire, keep-alive, lost-lock,
# traps, persistence, plugins); the examples; and the build of lock-core without std.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PROPTEST_CASES="${PROPTEST_CASES:-1024}"
echo "== cargo test (vectors, model-based proptest with $PROPTEST_CASES cases, loader, doctests)"
cargo test --workspace
echo "== conformance vectors through the CLIs: native, then the wasm component"
cargo run -q -p lock-conformance --bin lock-vectors -- tests/vectors
cargo run -q -p host-wasmtime --bin lockhost -- vectors tests/vectors
echo "== lock-core builds without std (wasm32v1-none)"
cargo build -p lock-core --target wasm32v1-none --release
echo "== examples and smoke runs of the host demo (real clock) and the bench path"
cargo run -q -p lock-core --example timeline >/dev/null
cargo run -q -p host-wasmtime --example job_plugins
cargo run -q -p host-wasmtime --bin lockhost -- demo >/dev/null
cargo run -q -p host-wasmtime --bin lockhost -- bench 2000 >/dev/null
echo "all tests passed"
