#!/usr/bin/env bash
# Runs every test: unit and doc tests, the shared conformance vectors against the native core,
# the property tests against the reference model, the vector-file loader tests, the example, and
# the build of lock-core for a target without std.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PROPTEST_CASES="${PROPTEST_CASES:-1024}"
echo "== cargo test (vectors, model-based proptest with $PROPTEST_CASES cases, loader, doctests)"
cargo test --workspace
echo "== conformance vectors through the lock-vectors CLI"
cargo run -q -p lock-conformance --bin lock-vectors -- tests/vectors
echo "== lock-core builds without std (wasm32v1-none)"
cargo build -p lock-core --target wasm32v1-none --release
echo "== timeline example"
cargo run -q -p lock-core --example timeline >/dev/null
echo "all tests passed"
