#!/usr/bin/env bash
# The UDP data channel (docs/udp.md), each case with `fatpipe lab` on fresh emulated paths.
# Results go to results/udp/.
# Usage: bench/udp-experiments.sh [lossy|fairness|seed ...]   (default: lossy)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p fatpipe
bin=$PWD/target/release/fatpipe
out=results/udp
mkdir -p "$out"

lossy() {  # 100 ms, 1 Gbit/s, 1-BDP queue, random loss each way, 1 GiB: UDP vs TCP (default, bbr)
    for loss in 0.001 0.01 0.05; do
        common=(--rtt 100ms --rate 1gbit --loss "$loss" --size 1G --timeout 4m)
        "$bin" lab "${common[@]}" --profile stock --runs 2 --tool fatpipe-udp --tool fatpipe:drs/pauto \
            --out "/tmp/udp-lossy-$loss"
        "$bin" lab "${common[@]}" --runs 1 --profile tuned --server "exec iperf3 -s -1" --port 5201 \
            --client "exec iperf3 -c 198.18.0.2 -R -C bbr -n {bytes} >/dev/null" \
            --label "iperf3 -C bbr (tuned: 256 MiB buffers)" --out "/tmp/udp-lossy-$loss-bbr"
        cat "/tmp/udp-lossy-$loss/results.md" "/tmp/udp-lossy-$loss-bbr/results.md" > "$out/lossy-$loss.md"
    done
}

seed() {  # the seed's controllers on the seed's long-haul path (64 ms), 1 % loss, 1 GiB
    "$bin" lab --rtt 64ms --rate 1gbit --loss 0.01 --size 1G --timeout 4m --profile stock --runs 1 \
        --tool fatpipe-udp --tool fatpipe-udp:history --tool fatpipe-udp:state --out /tmp/udp-seed
    cp /tmp/udp-seed/results.md "$out/seed-controllers.md"
}

for e in "${@:-lossy}"; do
    for n in $e; do "$n"; done
done
