#!/usr/bin/env bash
# Installs what the build and the tests need, only if it is missing. Safe to run repeatedly.
#   scripts/setup.sh            Rust targets and wasm-bindgen-cli (enough to build everything)
#   scripts/setup.sh --js       also the Node test tooling (npm ci: jco, TypeScript, playwright-core)
#   scripts/setup.sh --browser  also Debian's Chromium (for the browser tests; needs apt-get)
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.130 # must equal the `=` version of wasm-bindgen in lock-wasm and web-demo

need_target() {
  if ! rustup target list --installed | grep -qx "$1"; then
    echo "setup: adding Rust target $1"
    rustup target add "$1"
  fi
}

command -v cargo >/dev/null || { echo "setup: cargo is required (https://rustup.rs)" >&2; exit 1; }
# lock-core must build for a target that has no std at all.
need_target wasm32v1-none
# The component, the npm engine and the playground are built for wasm32-unknown-unknown.
need_target wasm32-unknown-unknown

if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  echo "setup: installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (a few minutes, once)"
  # Not --locked: its lock file pins a yanked crate.
  cargo install -q wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

for arg in "$@"; do
  case "$arg" in
    --js)
      command -v npm >/dev/null || { echo "setup: Node.js >= 20 and npm are required for the JS tests" >&2; exit 1; }
      # node_modules/.setup-stamp is the package-lock.json it was installed from.
      if ! cmp -s package-lock.json node_modules/.setup-stamp 2>/dev/null; then
        echo "setup: npm ci (from package-lock.json; better-sqlite3 compiles its addon, about a minute)"
        # node-gyp builds better-sqlite3 against this Node's own headers when the system has
        # them, rather than downloading them.
        if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node.h ]; then
          export npm_config_nodedir=/usr
        fi
        npm ci --no-audit --no-fund --loglevel=error
        cp package-lock.json node_modules/.setup-stamp
      fi
      ;;
    --browser)
      if [ ! -x /usr/bin/chromium ]; then
        echo "setup: installing Debian's chromium (about a minute)"
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
      fi
      ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done
