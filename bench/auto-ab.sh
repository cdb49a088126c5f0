#!/usr/bin/env bash
# Two fatpipe binaries' plan with no options on one lossy path, alternating: `fatpipe lab` (100 ms,
# 1 Gbit/s, 1-BDP queue, stock profile, 1 GiB, whole command) with each binary as server and
# client, as root and unprivileged (--no-force-buffers), cold (fresh path memory) and warm (a
# copy before it). Prints one line per run: binary, case, Mbit/s, share of the goodput ceiling,
# peak socket memory (client rb + server tb).
# Usage (root): bench/auto-ab.sh OLD_BINARY NEW_BINARY   (env LOSS=0.01, ROUNDS=3, WHO="root user")
set -euo pipefail
old=$1 new=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
loss=${LOSS:-0.01}
for round in $(seq "${ROUNDS:-3}"); do
    for v in old new; do
        bin=$old; [ $v = new ] && bin=$new
        for who in ${WHO:-root user}; do
            for when in cold warm; do
                flags=(); [ "$who" = root ] && flags+=(--as-root)
                [ $when = warm ] && flags+=(--warm)
                d=$out/$v-$who-$when-$round
                "$bin" lab --rtt 100ms --rate 1gbit --timeout 90s --loss "$loss" --size 1G \
                    --profile stock --runs 1 --tool fatpipe "${flags[@]}" --out "$d" > /dev/null 2>&1 || true
                python3 - "$d/results.json" "$v" "$who $when" "$loss" <<'PY' || echo "$v $who $when: no result"
import json, sys
loss = float(sys.argv[4])
ceiling = 1000 * 1448 / 1500 * (1 - loss)
for d in json.load(open(sys.argv[1])):
    for r in d["runs"]:
        w = d["bytes"] * 8 / r["wall_seconds"] / 1e6
        mem = (r["peak_rb_receiver"] + r["peak_tb_sender"]) / 2**20
        print(f"{sys.argv[2]} {sys.argv[3]}: {w:.0f} Mbit/s, {w / ceiling:.3f} of the ceiling, peak {mem:.0f} MiB")
    for f in d.get("failures", []):
        print(f"{sys.argv[2]} {sys.argv[3]}: failed: {f}")
PY
            done
        done
    done
done
