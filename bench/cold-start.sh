#!/usr/bin/env bash
# A cold 2 GiB download at each RTT (issue 15, target 1): fatpipe with no options (fresh path
# memory: `fatpipe lab` gives every run its own) against globus-url-copy -fast -p 8 -tcp-bs 16M
# and -fast -p 4, stock profile, 1 Gbit/s, 1-BDP queue, one run each per round, in turn. With
# BASE=/path/to/fatpipe an older build runs too (as a --server/--client case). Prints the data
# phase and the whole command (2 GiB over the lab's wall_seconds), retransmissions, memory.
# Usage: [RTTS="25ms 50ms 100ms 200ms"] [ROUNDS=2] [BASE=bin] bench/cold-start.sh   (root)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
out=$(mktemp -d -p /dev/shm fatpipe-cold.XXXXXX)
trap 'rm -rf "$out"' EXIT
row() {
    python3 - "$1/results.json" "$2" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))[0]
for r in d["runs"]:
    mem = (r["peak_rb_receiver"] + r["peak_tb_sender"]) / 2**20
    whole = d["bytes"] * 8 / r["wall_seconds"] / 1e6
    print(f"| {sys.argv[3]} | {sys.argv[2]} | {whole:.0f} | {r['mbit_s']:.0f} | {r['wall_seconds']:.2f} | {r['retrans']} | {mem:.0f} |")
PY
}
lab() { "$bin" lab --rate 1gbit --size 2G --timeout 3m --profile stock --runs 1 "$@" >/dev/null 2>&1; }
echo "| RTT | tool | whole command Mbit/s | data phase Mbit/s | wall s | retrans | peak MiB |"
echo "|---|---|---|---|---|---|---|"
for rtt in ${RTTS:-25ms 50ms 100ms 200ms}; do
    for round in $(seq "${ROUNDS:-2}"); do
        for t in fatpipe globus-p8 globus-p4; do
            [ "$round" -gt 1 ] && [ "$t" != fatpipe ] && continue
            lab --rtt "$rtt" --tool "$t" --out "$out/$rtt-$t-$round"
            row "$out/$rtt-$t-$round" "$t" "$rtt"
        done
        if [ -n "${BASE:-}" ]; then
            lab --rtt "$rtt" --label base --port 2812 \
                --server "exec $BASE serve --anonymous --listen 198.18.0.2:2812 --root \$(dirname {file}) --no-force-buffers" \
                --client "exec $BASE cp -q --no-force-buffers ftp://198.18.0.2:2812/\$(basename {file}) /dev/null" \
                --out "$out/$rtt-base-$round"
            row "$out/$rtt-base-$round" base "$rtt"
        fi
    done
done
