#!/usr/bin/env bash
# Issue 39's targets for the plan with no options, on the emulated path (100 ms, 1 Gbit/s,
# 1-BDP drop-tail queue, stock sysctls), whole command, 1 GiB:
#   lossy: random loss each way (1, 5, 10 %), fatpipe cold (fresh path memory) and warm (a copy
#          before it on the same path), as root and unprivileged (--no-force-buffers), against
#          iperf3 -C bbr with buffers far above the BDP (tuned profile);
#   clean: fatpipe -p auto and --tuning drs -p 1 as root against the kernel's autotuning
#          (peak socket memory: client rb + server tb, `ss -tm` every 0.1 s).
# Results: results/auto-plan/{lossy,clean}.md.
# Usage: [RUNS=n] [LOSSES="0.01 0.05"] [WHO="root user"] bench/auto-plan.sh [lossy|clean ...]
#        (root; default: both cases)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
out=results/auto-plan
mkdir -p "$out"
runs=${RUNS:-2}
scratch=$(mktemp -d -p /dev/shm fatpipe-auto.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# The rows of one lab result, with the path's goodput ceiling for `loss`.
rows() {
    python3 bench/lab-rows.py "$1/results.json" "$2" "${3:-}" ||
        echo "| $2 | $3 | no result (see the lab's output) | | | | |"
}
lab() { "$bin" lab --rtt 100ms --rate 1gbit --timeout 90s "$@" >/dev/null 2>&1 || true; }
header() {
    echo "| loss | case | Mbit/s (whole command) | of ceiling | retrans | peak MiB (rb + tb) | x BDP |"
    echo "|---|---|---|---|---|---|---|"
}

lossy() {
    [ -e "$out/lossy.md" ] || header > "$out/lossy.md"
    for loss in ${LOSSES:-0.01 0.05 0.1}; do
        for round in $(seq "$runs"); do
            for who in ${WHO:-root user}; do
                for when in cold warm; do
                    flags=(); [ $who = root ] && flags+=(--as-root)
                    [ $when = warm ] && flags+=(--warm)
                    d=$scratch/$loss-$who-$when-$round
                    lab --loss "$loss" --size 1G --profile stock --runs 1 --tool fatpipe "${flags[@]}" --out "$d"
                    rows "$d" "$loss" "fatpipe ($who, $when)" | tee -a "$out/lossy.md"
                done
            done
        done
        d=$scratch/$loss-bbr
        lab --loss "$loss" --size 1G --runs 1 --profile tuned --server "exec iperf3 -s -1" --port 5201 \
            --client "exec iperf3 -c 198.18.0.2 -R -C bbr -n {bytes} >/dev/null" \
            --label "iperf3 -C bbr" --out "$d"
        rows "$d" "$loss" "iperf3 -C bbr (tuned: 256 MiB buffers)" | tee -a "$out/lossy.md"
    done
}

clean() {
    header > "$out/clean.md"
    d=$scratch/clean
    lab --loss 0 --size 512M --profile stock --runs "$runs" --as-root --tool fatpipe --tool fatpipe:drs/p1 \
        --tool fatpipe:kernel/p1 --out "$d"
    rows "$d" 0 "" | tee -a "$out/clean.md"
    cat "$d/results.md" >> "$out/clean.md"
}

for case in "${@:-lossy clean}"; do
    for c in $case; do "$c"; done
done
