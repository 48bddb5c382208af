#!/usr/bin/env bash
# The main job: builds everything and runs the lock-core timeline demo (a table driven through a
# story with a fake clock; prints the timeline).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --workspace --all-targets
cargo run -q -p lock-core --example timeline
