#!/usr/bin/env bash
# Checks the README's main command end to end: starts `scripts/run.sh` (builds, demos, then the
# playground server) on a spare port, waits until the playground page and its wasm are served
# from 127.0.0.1 and the demos printed their timelines, then stops it. Used by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
port="${PORT:-18080}"
log="$(mktemp)"
# Its own process group, so that stopping it also stops whatever it runs at the time.
PORT="$port" setsid scripts/run.sh >"$log" 2>&1 &
pid=$!
stop() { kill -- "-$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap stop EXIT
# Prints the Content-Type of a URL, then (with "body") the start of its text.
fetch() {
  python3 - "$@" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    print(r.headers.get("Content-Type", ""))
    if sys.argv[2:] == ["body"]:
        sys.stdout.write(r.read().decode("utf-8", "replace")[:4000])
PY
}
for _ in $(seq 1 900); do
  if page="$(fetch "http://127.0.0.1:$port/" body 2>/dev/null)"; then
    break
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    cat "$log"
    echo "scripts/run.sh stopped before serving the playground" >&2
    exit 1
  fi
  sleep 1
done
fail() { cat "$log"; echo "scripts/run.sh: $1" >&2; exit 1; }
[[ "${page:-}" == *"<title>Expiring locks playground</title>"* ]] || fail "the playground page was not served"
wasm_type="$(fetch "http://127.0.0.1:$port/pkg/web_demo_bg.wasm")"
[[ "$wasm_type" == "application/wasm" ]] || fail "the playground's wasm was served as '$wasm_type'"
grep -q "handed off" "$log" || fail "the host demo's timeline is missing"
grep -q "plugin-b leads at once" "$log" || fail "the host demo's election did not hand over"
grep -q "replica-2 works with fence" "$log" || fail "the shared-store demo did not hand the key over"
grep -q "The playground is at http://127.0.0.1:$port/" "$log" || fail "no playground address printed"
echo "scripts/run.sh: demos ran, playground served on 127.0.0.1:$port"
