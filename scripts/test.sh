#!/usr/bin/env bash
# Runs every test: unit and doc tests; the shared conformance vectors against the native core,
# through the WebAssembly component in wasmtime, through the npm package and the jco-transpiled
# component in Node, and inside the playground in headless Chromium; the property tests against
# the reference model; the host library's tests (blocking acquire, keep-alive, lost-lock, traps,
# persistence, plugins); the adversarial suites (a SIGKILL crash loop, a real-clock stress test
# with a checker, a corruption sweep of the persisted files, a million leases in release, a
# short fuzzing run); the npm package's API, type and install tests; the playground end to end;
# the examples; the shared stores (lock-store) against real Redis, PostgreSQL and MariaDB servers
# (the local ones if they answer, else throwaway instances: scripts/services.sh); and the build of
# lock-core without std.
# Longer runs: LOCK_CRASH_ROUNDS=200 LOCK_STRESS_SECS=600 FUZZ_SECONDS=600 LOCK_CONTENTION_MS=60000 LOCK_JEPSEN_LONG=1 scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Each section prints its name, and its duration when the next one starts (CI's time budget).
section_name=""
section_start=$SECONDS
section() {
  if [ -n "$section_name" ]; then echo "   ($section_name: $((SECONDS - section_start)) s)"; fi
  section_name="$1"
  section_start=$SECONDS
  [ -z "$1" ] || echo "== $1"
}
scripts/setup.sh --js --browser
export PROPTEST_CASES="${PROPTEST_CASES:-1024}"
section "cargo test (vectors, model-based proptest with $PROPTEST_CASES cases, loader, doctests)"
# lock-store's and lockstore's tests and doctests run in the next section, with every store and
# the component: a superset of their default features (built once, not twice).
cargo test --workspace --exclude lock-store --exclude lockstore
section "shared stores (lock-store): every vector (native core and component deciding), the service API and its async face (tokio), faults, bursts and contention, against Redis, PostgreSQL and MariaDB"
# shellcheck source=scripts/services.sh
source scripts/services.sh
ensure_services
trap stop_services EXIT
# The npm engine first: a Node process contends beside the Rust ones (processes.rs, every store).
scripts/build-npm.sh >/dev/null
LOCKSTORE_NODE_WORKERS=1 cargo test -p lock-store --features all-stores,component,tokio -- --skip jepsen::
section "the fault suite (lock-store/tests/jepsen.rs, docs/testing.md): seeded clients on single servers with cut paths, Redis with replicas and Sentinels, PostgreSQL with an asynchronous and a synchronous standby, failing over; checkers and the replay of the core (LOCK_JEPSEN_LONG=1: ten times the faults)"
cargo test -p lock-store --features all-stores,component,tokio --test jepsen -- --nocapture
section "the lockstore CLI and real processes (lockstore): run, elect, signals, pauses, process trees, contention and gray failures across processes, on every store"
LOCKSTORE_NODE_WORKERS=1 cargo test -p lockstore --features all-stores,tokio
section "lock-store builds with each store's feature alone, its tests too (nobody compiles clients they do not use)"
for store in sqlite redis postgres mysql; do
  cargo check -q -p lock-store --no-default-features --features "$store" --tests
done
cargo check -q -p lock-store --no-default-features --lib
cargo check -q -p lock-store --no-default-features --features tokio --tests
section "the shared-store benchmarks, smoke runs (figures: cargo run --release -p lock-store --features all-stores,tokio --example bench / bench_async)"
# The tests' feature set: the smoke runs reuse their build instead of compiling the clients again.
store_features=all-stores,component,tokio
cargo run -q -p lock-store --features $store_features --example bench -- 0.05 >/dev/null
# The aims mode the README judges the aims with (only its cells, turn-by-turn ratios), and a
# misspelt argument refused rather than ignored.
aims=$(cargo run -q -p lock-store --features $store_features --example bench -- 0.05 aims turns=2)
grep -q "turn by turn (2 turns)" <<<"$aims"
# (Rows are "| store | workload | conns | ...": a cell other than distinct keys at 1 or 16
# connections; matching "| 64 |" anywhere also hit a latency of 64 us.)
others=$(awk -F' [|] ' '/^[|] [a-z]+ [|] / && $1 != "| store" && $1 != "| ---" && ($2 != "distinct keys" || ($3 != "1" && $3 != "16"))' <<<"$aims")
[ "$(grep -c '| distinct keys |' <<<"$aims")" -eq 6 ] || { echo "bench's aims mode: $aims"; exit 1; }
if [ -n "$others" ]; then echo "bench's aims mode measured a cell the aims do not name: $others"; exit 1; fi
if cargo run -q -p lock-store --features $store_features --example bench -- 0.05 posgres 2>/dev/null; then
  echo "bench accepted a misspelt store"; exit 1
fi
# The async face against the blocking one: every store, both faces, each cell measured.
async_rows=$(cargo run -q -p lock-store --features $store_features --example bench_async -- 0.1 turns=1)
[ "$(grep -c '| async |' <<<"$async_rows")" -eq 6 ] || { echo "bench_async: $async_rows"; exit 1; }
if cargo run -q -p lock-store --features $store_features --example bench_async -- 0.05 posgres 2>/dev/null; then
  echo "bench_async accepted a misspelt store"; exit 1
fi
# The replicated modes against a single server and the alternatives on the same throwaway servers
# (figures: cargo run --release -p lock-store --features all-stores --example bench_replicated).
cargo run -q -p lock-store --features $store_features --example bench_replicated -- 0.05 turns=1 >/dev/null
# Leader election's failover per store (figures: cargo run --release -p lock-store --features
# all-stores --example failover -- 20 1000), one short round here.
failover=$(cargo run -q -p lock-store --features $store_features --example failover -- 1 300)
[ "$(grep -c '^| \(sqlite\|redis\|postgres\|mariadb\) | [0-9]' <<<"$failover")" -eq 4 ] || { echo "failover: $failover"; exit 1; }
section "scale at the documented limits (release build): a million leases expiring at once, saved and restored, within the default call bound"
cargo test --release -p host-wasmtime --test scale -- --ignored
section "fuzzing lock-core (${FUZZ_SECONDS:-20} s per target; scripts/fuzz.sh 600 for longer)"
scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
section "conformance vectors through the CLIs: native, then the wasm component"
cargo run -q -p lock-conformance --bin lock-vectors -- tests/vectors tests/vectors/kinds web-demo/guides
cargo run -q -p lock-conformance --bin lock-vectors -- --campaign tests/vectors/election/
cargo run -q -p lockhost -- vectors tests/vectors tests/vectors/kinds web-demo/guides
section "lock-core builds without std (wasm32v1-none)"
cargo build -p lock-core --target wasm32v1-none --release
section "examples and smoke runs of the host demo (real clock) and the bench path"
cargo run -q -p lock-core --example timeline >/dev/null
cargo run -q -p host-wasmtime --example job_plugins
cargo run -q -p lockhost -- demo >/dev/null
cargo run -q -p lockhost -- bench 2000 >/dev/null
section "the build scripts write under CARGO_TARGET_DIR, never a hard-coded target/"
if grep -nE '(^|[ "'"'"'(=])target/' scripts/{build-npm,build-web,release,ship-component}.sh | grep -vE ':[0-9]+:\s*#'; then
  echo "a script above names target/ instead of \$target (\${CARGO_TARGET_DIR:-target})"; exit 1
fi
section "release artifacts (component checked against the shipped copy, crates packaged and verified from their packages, npm tarball, playground, checksums)"
scripts/release.sh
section "the README's sizes, vector counts and links against this build (scripts/check-readme.py)"
python3 scripts/check-readme.py
section "Node: vectors (npm package, jco component, every store), Locks API, store faults, package install + types; Chromium: playground, npm browser entry"
npm test
section "JS benchmark smoke runs (figures: node scripts/bench-js.mjs; node scripts/bench-store-js.mjs)"
node scripts/bench-js.mjs 20000 >/dev/null
# Node over Redis against node-redlock and a hand-written pair: every row measured, and a
# misspelt argument refused rather than ignored.
store_rows=$(node scripts/bench-store-js.mjs 0.2 turns=1)
[ "$(grep -c '^| [a-z].* | [0-9]* | ' <<<"$store_rows")" -eq 7 ] || { echo "bench-store-js: $store_rows"; exit 1; }
if node scripts/bench-store-js.mjs 0.2 turn=1 2>/dev/null; then echo "bench-store-js accepted a misspelt argument"; exit 1; fi
section "the main job (scripts/run.sh): demos, then the playground served on 127.0.0.1"
scripts/check-run.sh
section ""
echo "all tests passed in $SECONDS s"
