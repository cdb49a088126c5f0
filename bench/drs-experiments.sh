#!/usr/bin/env bash
# The dynamic right-sizing experiments (issue 4), each with `fatpipe lab` on fresh emulated paths.
# Results (results.json, results.md, stats and figures) go to results/drs-*.
# Usage: bench/drs-experiments.sh [1|2|3|4|5 ...]   (default: all five; about 35 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
modes_but_stock="--tool fatpipe:static:32M --tool fatpipe:probe --tool fatpipe:kernel --tool fatpipe:drs-classic --tool fatpipe:drs-grid --tool fatpipe:drs"
small="--size 8K --size 512K --size 8M --size 64M"

exp1() {  # drsftp.txt's experiment: 100 ms, file sizes 8 KiB to 512 MiB, every mode
    for cfg in "200mbit stock" "1gbit tuned"; do
        set -- $cfg
        out=results/drs-exp1-$1-$2
        "$bin" lab --rtt 100ms --rate "$1" --profile "$2" --runs 1 $small \
            --tool fatpipe:stock $modes_but_stock --out "$out"
        # Stock buffers (64 KiB per 100 ms, 5 Mbit/s) would need 14 minutes for 512 MiB, and
        # drs-grid, which hardly grows when the reader keeps up, about 7.
        "$bin" lab --rtt 100ms --rate "$1" --profile "$2" --runs 3 --size 512M \
            ${modes_but_stock/--tool fatpipe:drs-grid /} --out "$out-512m"
    done
}

exp2() {  # tuned 1 Gbit/s, 512 MiB: drs against kernel and static:32M, with telemetry
    rm -f results/drs-exp2/stats.jsonl
    mkdir -p results/drs-exp2
    "$bin" lab --rtt 100ms --rate 1gbit --profile tuned --runs 3 --size 512M \
        --tool fatpipe:kernel --tool fatpipe:static:32M --tool fatpipe:drs \
        --fatpipe-args "--stats $PWD/results/drs-exp2/stats.jsonl" --out results/drs-exp2
    "$bin" plot results/drs-exp2/stats.jsonl --tuning drs -o results/drs-exp2/drs.svg
}

exp3() {  # a changing path: rate 500 -> 50 -> 500 Mbit/s, RTT 40 -> 200 -> 40 ms
    out=results/drs-exp3
    rm -rf "$out" && mkdir -p "$out"
    # The long 500 Mbit/s x 200 ms phase gives cubic, back in congestion avoidance after the
    # step down overflowed the queue, the 30 s it needs to fill a 12.5 MB BDP again; the last
    # phase takes the BDP down by five at once.
    printf "%s\n" "0s rate=500mbit rtt=40ms" "10s rate=50mbit" "20s rtt=200ms" \
        "30s rate=500mbit" "70s rtt=40ms" > "$out/schedule"
    phases="0:10:2500000 10:20:250000 20:30:1250000 30:70:12500000 70:100:2500000"
    for mode in drs kernel; do
        "$bin" lab --rtt 40ms --rate 500mbit --profile tuned --runs 1 --size 3584M \
            --schedule "$out/schedule" --tool "fatpipe:$mode" \
            --fatpipe-args "--stats $PWD/$out/$mode.jsonl" --out "$out/$mode"
        true_bdp=$(for p in $phases; do IFS=: read -r from _ bdp <<<"$p"; printf "%s:%s," "$from" "$bdp"; done)
        "$bin" plot "$out/$mode.jsonl" -o "$out/$mode.svg" --true-bdp "${true_bdp%,}"
        # The receiver's advertised window and buffer against the true BDP over the last 4 s of
        # each phase (settled; the schedule starts about a second before the transfer).
        python3 - "$out/$mode.jsonl" $phases <<'PY' | tee "$out/$mode-follow.md"
import json, statistics, sys
phases = [tuple(float(x) for x in p.split(":")) for p in sys.argv[2:]]
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("event") == "sample" and r["role"] == "receiver" and r["tcp"]]
t0 = rows[0]["unix_s"] - 1.0
end = rows[-1]["unix_s"] - t0
print("| phase | true BDP MB | advertised window MB (median) | window / BDP | rb MB (median) | rb / BDP |")
print("|---|---|---|---|---|---|")
for start, stop, bdp in phases:
    stop = min(stop, end)
    sel = [r for r in rows if max(start, stop - 4) <= r["unix_s"] - t0 < stop]
    if stop - start >= 6 and sel:
        w = statistics.median(r["tcp"]["rcv_wnd"] for r in sel)
        rb = statistics.median(r["rcvbuf"] for r in sel)
        print(f"| {start:.0f}-{stop:.0f} s | {bdp/1e6:.2f} | {w/1e6:.2f} | {w/bdp:.2f} | {rb/1e6:.2f} | {rb/bdp:.2f} |")
PY
    done
}

exp4() {  # stock profile (unprivileged limits), 1 Gbit/s, 100 ms: one stream, what caps it
    out=results/drs-exp4
    rm -rf "$out" && mkdir -p "$out"
    "$bin" lab --rtt 100ms --rate 1gbit --profile stock --runs 1 --size 256M $modes_but_stock \
        --fatpipe-args "--stats $PWD/$out/stats.jsonl" --out "$out"
    "$bin" lab --rtt 100ms --rate 1gbit --profile stock --runs 1 --size 32M --tool fatpipe:stock \
        --fatpipe-args "--stats $PWD/$out/stats.jsonl" --out "$out/stock"
    # What held each mode back: the sender's TCP_INFO time shares (limited by the receive window
    # or by its send buffer) at its last sample, and every system cap either end met.
    python3 - "$out/stats.jsonl" <<'PY' | tee "$out/limits.md"
import json, sys
last, caps = {}, {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["role"] == "sender" and r["tcp"]:
        last[r["tuning"]] = r["tcp"]
    for c in r["capped"]:
        caps.setdefault(r["tuning"], set()).add(f'{r["end"]}: {c.split(" (asked")[0]}')
print("| mode | busy s | receive-window-limited | send-buffer-limited | caps met |")
print("|---|---|---|---|---|")
for mode in sorted(set(last) | set(caps)):
    t = last.get(mode, {})
    busy = max(t.get("busy_us", 0), 1)
    share = lambda k: f'{100 * t.get(k, 0) / busy:.0f} %'
    print(f'| {mode} | {busy / 1e6:.1f} | {share("rwnd_limited_us")} | {share("sndbuf_limited_us")} | '
          f'{"; ".join(sorted(caps.get(mode, []))) or "-"} |')
PY
}

exp5() {  # issue 20: memory within 3 x BDP at the kernel's rate, one stream and -p auto
    out=results/drs-exp5
    rm -rf "$out" && mkdir -p "$out"
    # static:16M is a fixed buffer sized for the peak (16 MiB set: a 1.3-BDP window here).
    "$bin" lab --rtt 100ms --rate 1gbit --profile tuned --runs 3 --size 512M \
        --tool fatpipe:drs/p1 --tool fatpipe:kernel/p1 --tool fatpipe:static:32M/p1 \
        --tool fatpipe:static:16M/p1 --tool fatpipe:drs/pauto --tool fatpipe:kernel/pauto \
        --fatpipe-args "--stats $PWD/$out/stats.jsonl" --out "$out"
    "$bin" plot "$out/stats.jsonl" --tuning drs -o "$out/drs.svg"
}

for e in "${@:-1 2 3 4 5}"; do
    for n in $e; do "exp$n"; done
done
