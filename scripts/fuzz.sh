#!/usr/bin/env bash
# Fuzzes lock-core for a bounded time: arbitrary operation sequences (ops) and arbitrary snapshot
# bytes (restore), arbitrary batch bytes (batch). Installs what it needs if it is missing (the
# nightly toolchain, cargo-fuzz). `scripts/test.sh` runs it for 20 s per target; a crash fails it.
# The restore and batch targets are seeded with the vectors (lock-conformance/examples/fuzz_seeds.rs).
#   scripts/fuzz.sh [seconds per target, default 120]
set -euo pipefail
cd "$(dirname "$0")/.."
# The restore and batch targets start from the vectors (their tables and snapshots, their operations).
cargo run -q -p lock-conformance --example fuzz_seeds -- tests/vectors lock-core/fuzz/corpus
cd lock-core/fuzz
seconds="${1:-120}"
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install -q cargo-fuzz
for target in ops restore batch; do
  echo "== fuzzing $target for ${seconds}s"
  cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -max_len=4096
done
echo "no crash found; any crash would be in lock-core/fuzz/artifacts/ (add it as a vector)"
