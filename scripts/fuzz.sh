#!/usr/bin/env bash
# Fuzzes lock-core for a bounded time: arbitrary operation sequences (ops) and arbitrary snapshot
# bytes (restore), arbitrary batch bytes (batch). Needs the nightly toolchain; installs cargo-fuzz if it is missing.
#   scripts/fuzz.sh [seconds per target, default 120]
set -euo pipefail
cd "$(dirname "$0")/../lock-core/fuzz"
seconds="${1:-120}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
for target in ops restore batch; do
  echo "== fuzzing $target for ${seconds}s"
  cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -max_len=4096
done
echo "no crash found; any crash would be in lock-core/fuzz/artifacts/ (add it as a vector)"
