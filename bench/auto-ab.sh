#!/usr/bin/env bash
# Two fatpipe binaries' plan with no options on one lossy path, alternating: `fatpipe lab` (100 ms,
# 1 Gbit/s, 1-BDP queue, stock profile, 1 GiB, whole command) with each binary as server and
# client, as root and unprivileged (--no-force-buffers), cold (fresh path memory) and warm (a
# copy before it). Prints one markdown row per run (bench/lab-rows.py): binary and case,
# Mbit/s, share of the goodput ceiling, retransmissions, peak socket memory (client rb + server tb).
# Usage (root): bench/auto-ab.sh OLD_BINARY NEW_BINARY   (env LOSS=0.01, ROUNDS=3, WHO="root user")
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2")
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
loss=${LOSS:-0.01}
echo "| loss | case | Mbit/s (whole command) | of ceiling | retrans | peak MiB (rb + tb) | x BDP |"
echo "|---|---|---|---|---|---|---|"
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
                python3 bench/lab-rows.py "$d/results.json" "$loss" "$v $who $when" ||
                    echo "| $loss | $v $who $when | no result | | | | |"
            done
        done
    done
done
