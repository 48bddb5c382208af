#!/usr/bin/env bash
# Refreshes the lock component that host-wasmtime ships in its package
# (host-wasmtime/component/lock.component.wasm): a fresh build of lock-wasm. A test of the host
# (tests/shipped.rs) fails while the shipped copy differs from the fresh build.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Cargo's target directory: CARGO_TARGET_DIR if set (a shared cache, a CI runner), else ./target.
target="${CARGO_TARGET_DIR:-target}"
cargo build -q -p host-wasmtime
cp "$target/lock.component.wasm" host-wasmtime/component/lock.component.wasm
echo "shipped: host-wasmtime/component/lock.component.wasm ($(wc -c <host-wasmtime/component/lock.component.wasm) bytes)"
