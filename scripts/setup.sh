#!/usr/bin/env bash
# Installs what the build and the tests need, only if it is missing. Safe to run repeatedly.
set -euo pipefail

need_target() {
  if ! rustup target list --installed | grep -qx "$1"; then
    echo "setup: adding Rust target $1"
    rustup target add "$1"
  fi
}

command -v cargo >/dev/null || { echo "setup: cargo is required (https://rustup.rs)" >&2; exit 1; }
# lock-core must build for a target that has no std at all.
need_target wasm32v1-none
# The lock component (lock-wasm) is built for wasm32-unknown-unknown by host-wasmtime/build.rs.
need_target wasm32-unknown-unknown
