#!/usr/bin/env bash
# The main job: builds everything (the core, the WebAssembly component, the wasmtime host, the npm
# package, the playground), prints the core's timeline demo (fake clock), runs the host demo (the
# component in wasmtime on the real clock: blocking acquires, hand-off, lost-lock callbacks,
# keep-alive, then three plugins electing a leader), two processes sharing one lock through a store (lock-store), then serves the playground on http://127.0.0.1:${PORT:-8080}/ until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --workspace --all-targets
cargo run -q -p lock-core --example timeline
echo
cargo run -q -p lockhost -- demo
echo
# One lock across processes: two `lockstore run` processes contend for one key through a SQLite
# file, and through Redis, PostgreSQL and MariaDB when LOCK_STORE_REDIS_URL,
# LOCK_STORE_POSTGRES_URL and LOCK_STORE_MYSQL_URL are given.
echo "== one lock shared by processes (lock-store): two replicas, one key, the hand-off and the fences"
stores=(--store "sqlite://$PWD/target/lockstore-demo.db")
for url in "${LOCK_STORE_REDIS_URL:-}" "${LOCK_STORE_POSTGRES_URL:-}" "${LOCK_STORE_MYSQL_URL:-}"; do
  if [ -n "$url" ]; then stores+=(--store "$url"); fi
done
cargo run -q -p lockstore --features all-stores -- demo "${stores[@]}"
echo
scripts/build-npm.sh
scripts/build-web.sh
port="${PORT:-8080}"
echo
echo "The playground is at http://127.0.0.1:$port/ (Ctrl-C stops it)."
exec python3 -m http.server "$port" --bind 127.0.0.1 --directory web-demo/dist
