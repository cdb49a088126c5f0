#!/usr/bin/env bash
# Builds the release fatpipe binary (with the features given, e.g. `--features bpf`) and prints
# its path as cargo reports it: wherever CARGO_TARGET_DIR or a config puts the build.
# Usage: bin=$(bench/fatpipe-bin.sh [cargo build options])
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p fatpipe --message-format json-render-diagnostics "$@" |
    python3 -c '
import json, sys
exe = [m["executable"] for m in map(json.loads, sys.stdin)
       if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "fatpipe"
       and m.get("executable")]
if not exe:
    sys.exit("cargo built no fatpipe binary")
print(exe[-1])'
