#!/usr/bin/env bash
# The parallel-streams experiments (issue 5), each with `fatpipe lab` on fresh emulated paths.
# Results (results.json, results.md, stats and figures) go to results/parallel-*.
# Usage: bench/parallel-experiments.sh [1|2|3 ...]   (default: 1 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
runs=${RUNS:-2}

exp1() {  # 1 Gbit/s, 1-BDP queue, stock profile, 2 GiB: -p auto against the ceiling and Globus
    out=results/parallel-exp1
    rm -rf "$out" && mkdir -p "$out"
    # iperf3@tuned: the same path with autotuning allowed 256 MiB, far above any BDP here.
    "$bin" lab --rtt 25ms --rtt 50ms --rtt 100ms --rtt 200ms --rate 1gbit --profile stock \
        --runs "$runs" --size 2G --tool iperf3@tuned --tool fatpipe:drs/pauto \
        --tool globus-p4 --tool globus-p8 \
        --fatpipe-args "--stats $PWD/$out/stats.jsonl" --out "$out"
    "$bin" plot-lab "$out/results.json" -o "$out/throughput.svg"
    # One more -p auto run at 200 ms on its own, for a figure of its decisions over time.
    rm -f "$out/auto-200ms.jsonl"
    "$bin" lab --rtt 200ms --rate 1gbit --profile stock --runs 1 --size 2G \
        --tool fatpipe:drs/pauto --fatpipe-args "--stats $PWD/$out/auto-200ms.jsonl" \
        --out "$out/auto-200ms"
    "$bin" plot "$out/auto-200ms.jsonl" -o "$out/auto-200ms.svg"
}

exp2() {  # tcp-autotuning-comparison.txt's matrix: RTT x streams x tuning, 1 Gbit/s, 128 MiB
    out=results/parallel-exp2
    mkdir -p "$out"
    # The seed's "kernel-only tuning": buffer maxima raised (our tuned profile), 128 MB.
    # One lab per mode (MODES="drs" bench/parallel-experiments.sh 2 redoes one of them).
    for mode in ${MODES:-stock kernel drs}; do
        tools=""
        for p in 1 2 4 8; do tools="$tools --tool fatpipe:$mode/p$p"; done
        "$bin" lab --rtt 0.5ms --rtt 25ms --rtt 50ms --rtt 100ms --rate 1gbit --profile tuned \
            --runs 1 --size 128M $tools --out "$out/$mode"
    done
    "$bin" plot-lab "$out"/{stock,kernel,drs}/results.json -o "$out/matrix.svg"
}

exp3() {  # one copy of four files: later files start where the previous one ended
    out=results/parallel-exp3
    rm -rf "$out" && mkdir -p "$out"
    common=(--rtt 100ms --rtt 200ms --rate 1gbit --profile stock --runs "$runs" --size 2G)
    # As the presets on the stock profile: an unprivileged user's buffer caps at both ends.
    serve="exec $bin serve --anonymous --no-force-buffers --listen 198.18.0.2:2812 --root \$(dirname {file})"
    # The same 2 GiB as four 512 MiB files (split before the server starts).
    split="mkdir -p \$(dirname {file})/set && split -n 4 {file} \$(dirname {file})/set/part."
    into='d=$(mktemp -d) && trap "rm -rf $d" EXIT &&'
    "$bin" lab "${common[@]}" --tool fatpipe:drs/pauto --out "$out/one-file"
    "$bin" lab "${common[@]}" --server "$split && $serve" --port 2812 \
        --client "$into $bin cp --quiet --no-force-buffers -r -p auto ftp://198.18.0.2:2812/set \$d/set" \
        --label "fatpipe cp -r -p auto, 4 files in one copy" --out "$out/one-copy"
    # Four invocations: later ones start where the previous ended (path memory), or not.
    for memory in "" --no-path-memory; do
        "$bin" lab "${common[@]}" --server "$split && $serve" --port 2812 \
            --client "$into for f in aa ab ac ad; do $bin cp --quiet --no-force-buffers -p auto $memory ftp://198.18.0.2:2812/set/part.\$f \$d/ || exit 1; done" \
            --label "fatpipe cp -p auto${memory:+ $memory}, 4 copies of one file each" \
            --out "$out/four-copies$memory"
    done
    cat "$out"/one-file/results.md > "$out/results.md"
    for d in one-copy four-copies four-copies--no-path-memory; do
        tail -n +3 "$out/$d/results.md" >> "$out/results.md"
    done
}

for e in "${@:-1 2}"; do
    for n in $e; do "exp$n"; done
done
