#!/usr/bin/env bash
# Builds every release artifact into one folder, target/release-artifacts/ (under
# CARGO_TARGET_DIR if set):
#   lock.component.wasm         the lock component (imports nothing), as host-wasmtime ships it
#   wit/                        the WIT package `expiring:lock` the component implements
#   expiring-lock-<v>.tgz       the npm package (npm pack)
#   playground/                 the browser playground as a static site (serve the folder)
#   lock-core-<v>.crate, lock-election-<v>.crate, host-wasmtime-<v>.crate   the Rust crates
#                                                 (cargo package, verified)
#   SHA256SUMS                  a checksum of every file above (sha256sum -c SHA256SUMS)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Cargo's target directory: CARGO_TARGET_DIR if set (a shared cache, a CI runner), else ./target.
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
out="$(cd "$target" && pwd)/release-artifacts"
rm -rf "$out"
mkdir -p "$out"

echo "== component (fresh build, checked against the copy host-wasmtime ships)"
cargo build -q -p host-wasmtime
if ! cmp -s "$target/lock.component.wasm" host-wasmtime/component/lock.component.wasm; then
  echo "host-wasmtime/component/lock.component.wasm is stale: run scripts/ship-component.sh" >&2
  exit 1
fi
cp host-wasmtime/component/lock.component.wasm "$out/"
cp -r wit "$out/wit"

echo "== crates"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
# Packaging several crates verifies each against the others' packages through a local registry
# overlay, extracted under CARGO_HOME/registry/src/-<hash>/NAME-VERSION; an extraction left by
# an earlier run of the same version is reused as it is (its code that run's: lock-election then
# fails against an older lock-core). Ours are removed first; nothing else there is touched.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for crate in lock-core lock-election host-wasmtime; do
  rm -rf "$cargo_home"/registry/src/-*/"$crate-$version"
done
cargo package -q -p lock-core -p lock-election -p host-wasmtime --allow-dirty
cp "$target/package/lock-core-$version.crate" "$target/package/lock-election-$version.crate" "$target/package/host-wasmtime-$version.crate" "$out/"

echo "== npm package"
./scripts/build-npm.sh >/dev/null
(cd lock-wasm/js && npm pack --silent --pack-destination "$out" >/dev/null)

echo "== playground"
./scripts/build-web.sh >/dev/null
cp -r web-demo/dist "$out/playground"

(cd "$out" && find . -type f ! -name SHA256SUMS | sed 's#^\./##' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
echo "release artifacts in $out:"
(cd "$out" && ls -1 && sha256sum --quiet -c SHA256SUMS && echo "checksums verified ($(wc -l <SHA256SUMS) files)")
