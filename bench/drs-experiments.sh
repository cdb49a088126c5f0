#!/usr/bin/env bash
# The dynamic right-sizing experiments (issue 4), each with `fatpipe lab` on fresh emulated paths.
# Results (results.json, results.md, stats and figures) go to results/drs-*.
# Usage: bench/drs-experiments.sh [1|2|3|4|5 ...]   (default: all five; about 35 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p fatpipe
bin=$PWD/target/release/fatpipe
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

exp3() {  # a changing path: rate 50 <-> 500 Mbit/s, RTT 40 <-> 200 ms, a step every 10 s
    out=results/drs-exp3
    rm -rf "$out" && mkdir -p "$out"
    printf "%s\n" "0s rate=500mbit rtt=40ms" "10s rate=50mbit" "20s rtt=200ms" \
        "30s rate=500mbit" "repeat 40s" > "$out/schedule"
    for mode in drs kernel; do
        "$bin" lab --rtt 40ms --rate 500mbit --profile tuned --runs 1 --size 1536M \
            --schedule "$out/schedule" --tool "fatpipe:$mode" \
            --fatpipe-args "--stats $PWD/$out/$mode.jsonl" --out "$out/$mode"
        # True BDP per phase: 500 Mbit/s x 40 ms, 50 x 40, 50 x 200, 500 x 200, repeating.
        "$bin" plot "$out/$mode.jsonl" -o "$out/$mode.svg" \
            --true-bdp 0:2500000,10:250000,20:1250000,30:12500000,40:2500000,50:250000,60:1250000,70:12500000
        # The receiver's advertised window and buffer against the true BDP over the last 4 s of
        # each phase (settled; the schedule starts about a second before the transfer).
        python3 - "$out/$mode.jsonl" <<'PY' | tee "$out/$mode-follow.md"
import json, statistics, sys
phases = [2.5e6, 0.25e6, 1.25e6, 12.5e6]
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("event") == "sample" and r["role"] == "receiver" and r["tcp"]]
t0 = rows[0]["unix_s"] - 1.0
print("| phase | true BDP MB | advertised window MB (median) | window / BDP | rb MB (median) | rb / BDP |")
print("|---|---|---|---|---|---|")
for k in range(int((rows[-1]["unix_s"] - t0) // 10)):
    sel = [r for r in rows if 10 * k + 6 <= r["unix_s"] - t0 < 10 * k + 10]
    if sel:
        bdp = phases[k % 4]
        w = statistics.median(r["tcp"]["rcv_wnd"] for r in sel)
        rb = statistics.median(r["rcvbuf"] for r in sel)
        print(f"| {10*k}-{10*k+10} s | {bdp/1e6:.2f} | {w/1e6:.2f} | {w/bdp:.2f} | {rb/1e6:.2f} | {rb/bdp:.2f} |")
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
