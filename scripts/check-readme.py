#!/usr/bin/env python3
"""Checks what the README quotes that a script can check, against this checkout's build:
the sizes in its figures table (the component, the npm engine, the playground's module, each
with `gzip -9`, as the build scripts print them), the count of conformance vectors wherever the
README or the docs quote it, and that every relative link of the README and of docs/*.md names a
file that exists. Run after the release artifacts are built (scripts/test.sh does)."""
import glob
import json
import os
import re
import subprocess
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
failures = []

# The artifact each size row names, by the file name quoted in its first cell.
ARTIFACTS = {
    "lock.component.wasm": "host-wasmtime/component/lock.component.wasm",
    "lock_wasm_bg.wasm": "lock-wasm/js/engine/lock_wasm_bg.wasm",
    "web_demo_bg.wasm": "web-demo/dist/pkg/web_demo_bg.wasm",
}


def number(text):
    return int(text.replace(" ", "").replace(",", ""))


def gzipped(path):
    out = subprocess.run(["gzip", "-9c", path], check=True, capture_output=True).stdout
    return len(out)


readme = open("README.md", encoding="utf-8").read()
sized = 0
for line in readme.splitlines():
    m = re.match(r"\|\s*[^|]*`([\w.]+\.wasm)`[^|]*\|\s*([\d ]+) bytes \(([\d ]+) gzipped\)", line)
    if not m:
        continue
    name, quoted, quoted_gz = m.group(1), number(m.group(2)), number(m.group(3))
    path = ARTIFACTS.get(name)
    if path is None:
        failures.append(f"README quotes the size of {name}, which this script does not know")
        continue
    if not os.path.exists(path):
        failures.append(f"{path} is not built (run scripts/release.sh first)")
        continue
    actual, actual_gz = os.path.getsize(path), gzipped(path)
    sized += 1
    if (actual, actual_gz) != (quoted, quoted_gz):
        failures.append(
            f"README: {name} is {quoted} bytes ({quoted_gz} gzipped); the build made "
            f"{actual} ({actual_gz})"
        )
if sized != len(ARTIFACTS):
    failures.append(f"README's figures table has {sized} of the {len(ARTIFACTS)} sizes it should quote")

DOCS = ["README.md"] + sorted(glob.glob("docs/*.md"))


def count_vectors(pattern):
    """(scenarios, files) of the vector files matching `pattern`."""
    files = sorted(glob.glob(pattern))
    return sum(len(json.load(open(p, encoding="utf-8"))["scenarios"]) for p in files), len(files)


def check_counts(checks, what):
    """Every quote of a count in README.md and docs/ must match; at least one must exist.
    `checks`: (regex, the numbers its groups must be, what holds them)."""
    quoted = 0
    for path in DOCS:
        text = open(path, encoding="utf-8").read()
        for regex, want, holder in checks:
            for m in re.finditer(regex, text):
                quoted += 1
                if tuple(int(g) for g in m.groups()) != want:
                    failures.append(f"{path}: \"{m.group(0)}\"; {holder} holds {' in '.join(map(str, want))}")
    if quoted == 0:
        failures.append(f"no count of {what} found in README.md or docs/ (the pattern moved?)")
    return quoted


scenarios, groups = count_vectors("tests/vectors/*.json")
quoted_counts = check_counts([
    (r"(\d+) (?:vector )?scenarios in (\d+) behaviour groups", (scenarios, groups), "tests/vectors"),
    (r"the (\d+) vector scenarios", (scenarios,), "tests/vectors"),
], "vector scenarios")
quoted_counts += check_counts([
    (r"(\d+) scenarios of the lock kinds in (\d+) files", count_vectors("tests/vectors/kinds/*.json"), "tests/vectors/kinds"),
], "the lock kinds' scenarios")

for path in ["README.md"] + sorted(glob.glob("docs/*.md")):
    base = os.path.dirname(path)
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code is not links
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1).split("#", 1)[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        if not os.path.exists(os.path.normpath(os.path.join(base, target))):
            failures.append(f"{path}: the link {m.group(1)} names no file")

if failures:
    print("check-readme: the README does not match this checkout:", file=sys.stderr)
    for f in failures:
        print("  " + f, file=sys.stderr)
    sys.exit(1)
print(f"check-readme: {sized} sizes, {quoted_counts} vector counts and every link match")
