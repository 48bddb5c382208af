#!/usr/bin/env bash
# The main job: builds everything (the core, the WebAssembly component, the wasmtime host, the npm
# package, the playground), prints the core's timeline demo (fake clock), runs the host demo (the
# component in wasmtime on the real clock: blocking acquires, hand-off, lost-lock callbacks,
# keep-alive), then serves the playground on http://127.0.0.1:${PORT:-8080}/ until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --workspace --all-targets
cargo run -q -p lock-core --example timeline
echo
cargo run -q -p lockhost -- demo
echo
scripts/build-npm.sh
scripts/build-web.sh
port="${PORT:-8080}"
echo
echo "The playground is at http://127.0.0.1:$port/ (Ctrl-C stops it)."
exec python3 -m http.server "$port" --bind 127.0.0.1 --directory web-demo/dist
