#!/usr/bin/env bash
# Where a lossy UDP download's link stands idle: each binary in turn downloads 1 GiB over the
# testbed (100 ms, 1 Gbit/s, 1-BDP queue, stock profile, as root, `--transport udp
# --no-path-memory`, into tmpfs) while the receiving namespace's interface counter is read
# every 5 ms; prints per run the whole command, the data phase and the time the link carried
# nothing of it (the share below the line rate, loss included: at 1 % loss 1 % of the phase is
# the loss itself), and the 100 ms windows that lost the most. docs/auto-plan.md has the
# findings it gave.
# Usage (root): bench/udp-idle.sh BINARY... (env LOSS=0.01, ROUNDS=2)
set -euo pipefail
bins=()
for b in "$@"; do bins+=("$(realpath "$b")"); done
cd "$(dirname "$0")/.."
bin=${bins[0]} name=fpidle$$
# shellcheck source=bench/testbed-lib.sh
source bench/testbed-lib.sh
dir=$work
head -c 1G /dev/urandom > "$dir/f1g"
"$bin" testbed up --name "$name" --rtt 100ms --rate 1gbit --loss "${LOSS:-0.01}" --profile stock > /dev/null
# Stops the server of the run (the last process spawned).
cleanup_server() {
    local p=${pids[-1]}
    kill "$p" 2> /dev/null || true
    wait "$p" 2> /dev/null || true
    unset 'pids[-1]'
}
echo "| binary | whole s | data s | idle s | idle % | worst 100 ms windows (s: ms idle) |"
echo "|---|---|---|---|---|---|"
for _ in $(seq "${ROUNDS:-2}"); do
    for b in "${bins[@]}"; do
        spawn b "$b" serve --anonymous-write --root "$dir" --listen 198.18.0.2:2812 > /dev/null 2>&1
        sleep 1
        ip netns exec "$name-a" python3 - "$dir/rx" <<'PY' &
import sys, time
end = time.time() + 30
with open(sys.argv[1], "w", buffering=1) as out:
    while time.time() < end:
        with open("/sys/class/net/fp0/statistics/rx_bytes") as f:
            out.write(f"{time.time():.4f} {f.read().strip()}\n")
        time.sleep(0.005)
PY
        sampler=$!
        ex a "$b" cp -q --json --transport udp --no-path-memory \
            ftp://198.18.0.2:2812/f1g "$dir/copy" > "$dir/cp.json" 2> /dev/null || true
        kill $sampler 2> /dev/null || true
        wait $sampler 2> /dev/null || true
        cmp -s "$dir/f1g" "$dir/copy" || echo "$b: the copy differs from its source" >&2
        rm -f "$dir/copy"
        cleanup_server
        python3 - "$dir/rx" "$dir/cp.json" "$(basename "$b")" <<'PY'
import json, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
rates = [(t0, t1, (b1 - b0) * 8 / (t1 - t0) / 1e6) for (t0, b0), (t1, b1) in zip(rows, rows[1:])]
busy = [i for i, r in enumerate(rates) if r[2] > 300]
d = json.load(open(sys.argv[2]))
if not busy:
    print(f"| {sys.argv[3]} | {d.get('seconds', 0):.2f} | ? | ? | ? | no data seen |")
    sys.exit()
phase = rates[busy[0]:busy[-1] + 1]
start = phase[0][0]
windows = {}
for t0, t1, r in phase:
    k = int((t0 - start) * 10)
    windows[k] = windows.get(k, 0.0) + max(0.0, 1 - r / 1000) * (t1 - t0)
dur = phase[-1][1] - start
idle = sum(windows.values())
worst = sorted(windows.items(), key=lambda kv: -kv[1])[:4]
w = ", ".join(f"{k / 10:.1f}: {v * 1000:.0f}" for k, v in sorted(worst))
print(f"| {sys.argv[3]} | {d['seconds']:.2f} | {dur:.2f} | {idle:.2f} | {100 * idle / dur:.1f} | {w} |")
PY
    done
done
