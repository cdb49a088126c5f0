#!/usr/bin/env bash
# Pacing and congestion control (docs/pacing.md), each with `fatpipe lab` on fresh emulated paths.
# Results go to results/pacing/.
# Usage: bench/pacing-experiments.sh [lossy|adaptive ...]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p fatpipe
bin=$PWD/target/release/fatpipe
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

for e in "${@:-lossy adaptive}"; do
    for n in $e; do "$n"; done
done
