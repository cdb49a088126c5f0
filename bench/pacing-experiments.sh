#!/usr/bin/env bash
# Pacing and congestion control (docs/pacing.md), each with `fatpipe lab` on fresh emulated paths.
# Results go to results/pacing/.
# Usage: bench/pacing-experiments.sh [lossy|adaptive|losses|pacing ...]   (default: all four)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
out=results/pacing
mkdir -p "$out"

lossy() {  # 100 ms, 1 Gbit/s, 1-BDP queue, 1 % random loss each way, 1 GiB
    common=(--rtt 100ms --rate 1gbit --loss 0.01 --size 1G --timeout 4m)
    "$bin" lab "${common[@]}" --runs 2 --profile stock --tool fatpipe:drs/pauto --out /tmp/lossy-default
    cp /tmp/lossy-default/results.md "$out/lossy-default.md"
    "$bin" lab "${common[@]}" --runs 1 --profile stock --tool fatpipe:drs/pauto \
        --fatpipe-args "--cc bbr" --out /tmp/lossy-bbr
    cp /tmp/lossy-bbr/results.md "$out/lossy-cc-bbr.md"
    "$bin" lab "${common[@]}" --runs 1 --profile tuned --server "exec iperf3 -s -1" --port 5201 \
        --client "exec iperf3 -c 198.18.0.2 -R -C bbr -n {bytes} >/dev/null" \
        --label "iperf3 -C bbr (tuned: 256 MiB buffers)" --out /tmp/lossy-iperf3
    cp /tmp/lossy-iperf3/results.md "$out/lossy-iperf3-bbr.md"
}

adaptive() {  # -p auto with adaptive pacing on experiment 1's clean path, and a figure at 200 ms
    "$bin" lab --rtt 100ms --rtt 200ms --rate 1gbit --profile stock --runs 1 --size 2G \
        --tool fatpipe:drs/pauto --fatpipe-args "--pacing adaptive" --out /tmp/adaptive
    cp /tmp/adaptive/results.md "$out/adaptive-results.md"
    rm -f /tmp/adaptive-200.jsonl
    "$bin" lab --rtt 200ms --rate 1gbit --profile stock --runs 1 --size 2G --tool fatpipe:drs/pauto \
        --fatpipe-args "--pacing adaptive --stats /tmp/adaptive-200.jsonl" --out /tmp/adaptive-fig
    "$bin" plot /tmp/adaptive-200.jsonl -o "$out/adaptive-200ms.svg"
}

# One table row per run (or failure) of a lab result: case, Mbit/s, retransmissions, memory.
rows() {
    python3 - "$1/results.json" "$2" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1])):
    size = c["bytes"] * 8 / 1e6
    for r in c["runs"]:
        mem = (r["peak_rb_receiver"] + r["peak_tb_sender"]) / 2**20
        print(f"| {sys.argv[2]} | {c['label']} | {r['mbit_s']:.0f} | {size / r['wall_seconds']:.0f} | {r['retrans']} | {mem:.0f} |")
    for f in c["failures"]:
        print(f"| {sys.argv[2]} | {c['label']} | {f.replace(c['label'] + ' ', '')[:60]} | | | |")
PY
}

losses() {  # experiment 5: 100 ms, 1 Gbit/s, 1-BDP queue, 0.1, 1 and 5 % random loss each way
    table="$out/losses.md"
    echo "| loss | tool | data Mbit/s | whole command Mbit/s | retrans | peak MiB |" > "$table"
    echo "|---|---|---|---|---|---|" >> "$table"
    for loss in 0.001 0.01 0.05; do
        # At 5 % a loss-based control moves well under a megabit per stream: a smaller file, and
        # two minutes for any tool to finish it.
        size=1G; [ "$loss" = 0.05 ] && size=256M
        common=(--rtt 100ms --rate 1gbit --loss "$loss" --size "$size" --timeout 2m --runs 1)
        for cc in "" cubic reno bbr; do
            "$bin" lab "${common[@]}" --profile stock --tool fatpipe:drs/pauto \
                ${cc:+--fatpipe-args "--cc $cc"} --out /tmp/losses-run >/dev/null 2>&1 || true
            rows /tmp/losses-run "$loss" | sed "s/| fatpipe cp /| fatpipe cp ${cc:+--cc $cc }/" | tee -a "$table"
        done
        "$bin" lab "${common[@]}" --profile tuned --server "exec iperf3 -s -1" --port 5201 \
            --client "exec iperf3 -c 198.18.0.2 -R -C bbr -n {bytes} >/dev/null" \
            --label "iperf3 -C bbr (tuned)" --out /tmp/losses-run >/dev/null 2>&1 || true
        rows /tmp/losses-run "$loss" | tee -a "$table"
    done
}

pacing() {  # experiment 4: -p auto with adaptive pacing against TCP's pacing, cold 2 GiB, 25-200 ms
    table="$out/pacing-pauto.md"
    echo "| RTT | tool | data Mbit/s | whole command Mbit/s | retrans | peak MiB |" > "$table"
    echo "|---|---|---|---|---|---|" >> "$table"
    for rtt in 25ms 50ms 100ms 200ms; do
        for pacing in tcp adaptive; do
            "$bin" lab --rtt "$rtt" --rate 1gbit --profile stock --runs "${RUNS:-2}" --size 2G \
                --tool fatpipe:drs/pauto --fatpipe-args "--pacing $pacing" --out /tmp/pacing-run \
                >/dev/null 2>&1 || true
            rows /tmp/pacing-run "$rtt" | sed "s/| fatpipe cp /| fatpipe cp --pacing $pacing /" | tee -a "$table"
        done
    done
}

for e in "${@:-lossy adaptive losses pacing}"; do
    for n in $e; do "$n"; done
done
