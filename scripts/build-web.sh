#!/usr/bin/env bash
# Builds the playground into web-demo/dist/: web-demo for wasm32-unknown-unknown, wasm-bindgen
# (`--target web`), the static page, and the shared vector files (served for the in-page run).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Cargo's target directory: CARGO_TARGET_DIR if set (a shared cache, a CI runner), else ./target.
target="${CARGO_TARGET_DIR:-target}"
cargo rustc -q -p web-demo --target wasm32-unknown-unknown --profile wasm-web --crate-type cdylib
rm -rf web-demo/dist
mkdir -p web-demo/dist/vectors/kinds
wasm-bindgen --target web --no-typescript --out-dir web-demo/dist/pkg \
  "$target/wasm32-unknown-unknown/wasm-web/web_demo.wasm"
cp web-demo/static/* web-demo/dist/
cp tests/vectors/*.json web-demo/dist/vectors/
cp tests/vectors/kinds/*.json web-demo/dist/vectors/kinds/
(cd tests/vectors && ls *.json kinds/*.json | python3 -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin]))') \
  > web-demo/dist/vectors/index.json
wasm=web-demo/dist/pkg/web_demo_bg.wasm
echo "playground: web-demo/dist ($(wc -c <"$wasm") bytes of wasm, $(gzip -9c "$wasm" | wc -c) gzipped)"
