#!/usr/bin/env bash
# The main job: builds everything (the core, the WebAssembly component, the wasmtime host), prints
# the core's timeline demo (fake clock), then runs the host demo: the component in wasmtime on
# the real clock, with blocking acquires, hand-off, lost-lock callbacks and keep-alive.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --workspace --all-targets
cargo run -q -p lock-core --example timeline
echo
cargo run -q -p host-wasmtime --bin lockhost -- demo
