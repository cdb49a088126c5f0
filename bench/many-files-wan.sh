#!/usr/bin/env bash
# Many files across an emulated WAN (issue 15): `fatpipe cp -r` of 256 files x 4 MiB down and up
# at RTT 100 ms, 1 Gbit/s, 1-BDP queue, stock profile, --no-force-buffers (an unprivileged
# user's limits), default options otherwise; trees checked with diff. With BASE=/path/to/fatpipe
# an older build runs as the client in alternation, for a before/after in one script.
# Usage: [BASE=bin] [RUNS=2] bench/many-files-wan.sh   (root). Prints a table of wall clocks.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p fatpipe
bin=$PWD/target/release/fatpipe
name=fpmany
runs=${RUNS:-2}
. bench/testbed-lib.sh
mkdir -p "$work/root" "$work/src/tree"
for i in $(seq 256); do head -c 4194304 /dev/urandom > "$work/src/tree/f$i"; done
cp -r "$work/src/tree" "$work/root/"
"$bin" testbed up --name "$name" --rtt 100ms --rate 1gbit >/dev/null
spawn a "$bin" serve --root "$work/root" --anonymous-write --listen 198.18.0.1:2121 \
    > "$work/serve.out" 2>/dev/null
for _ in $(seq 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
clients=("current:$bin")
[ -n "${BASE:-}" ] && clients=("base:$BASE" "${clients[@]}")
secs() { local t0=$EPOCHREALTIME; "$@"; python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f}')"; }
echo "| client | run | download s | upload s |"
echo "|---|---|---|---|"
for r in $(seq "$runs"); do
    for c in "${clients[@]}"; do
        label=${c%%:*} client=${c#*:}
        rm -rf "$work/out"; mkdir "$work/out"
        down=$(secs ex b "$client" cp -q -r --no-force-buffers ftp://198.18.0.1:2121/tree "$work/out/")
        diff -rq "$work/src/tree" "$work/out/tree" >/dev/null
        up=$(secs ex b "$client" cp -q -r --no-force-buffers "$work/src/tree" "ftp://198.18.0.1:2121/up-$label-$r/")
        diff -rq "$work/src/tree" "$work/root/up-$label-$r/tree" >/dev/null
        echo "| $label | $r | $down | $up |"
    done
done
