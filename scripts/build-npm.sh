#!/usr/bin/env bash
# Builds the npm package's engine: lock-wasm (feature `js`) for wasm32-unknown-unknown, then
# wasm-bindgen (ES module glue, `--target web`) into lock-wasm/js/engine/. The package's own
# JS (lock-wasm/js/src) and types (lock-wasm/js/index.d.ts) are checked in; the engine's own
# declarations (engine/lock_wasm.d.ts) are generated for type-checking the JS, not shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Cargo's target directory: CARGO_TARGET_DIR if set (a shared cache, a CI runner), else ./target.
target="${CARGO_TARGET_DIR:-target}"
cargo rustc -q -p lock-wasm --no-default-features --features js \
  --target wasm32-unknown-unknown --profile wasm-js --crate-type cdylib
rm -rf lock-wasm/js/engine
wasm-bindgen --target web --out-dir lock-wasm/js/engine --out-name lock_wasm \
  "$target/wasm32-unknown-unknown/wasm-js/lock_wasm.wasm"
cp LICENSE-MIT LICENSE-APACHE lock-wasm/js/ # the package ships the licences its `license` field names
# The store clients send the same store-side steps as the Rust clients: the package ships the files.
rm -rf lock-wasm/js/steps && mkdir -p lock-wasm/js/steps
cp lock-store/steps/README.md lock-store/steps/*.lua lock-store/steps/*.sql lock-wasm/js/steps/
wasm=lock-wasm/js/engine/lock_wasm_bg.wasm
echo "npm engine: $wasm $(wc -c <"$wasm") bytes ($(gzip -9c "$wasm" | wc -c) gzipped)"
