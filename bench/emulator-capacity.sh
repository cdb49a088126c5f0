#!/usr/bin/env bash
# Benchmark: how fast the WAN emulator forwards with release lateness in check, with the
# endpoints (iperf3 -P 4, tuned profile) on the same cores. For each rate: goodput against the
# link's goodput ceiling (rate × 1448/1500) and the a->b release lateness (mean, max, share > 1 ms).
# Usage: bench/emulator-capacity.sh [--smoke] [RTT=100ms] [SECONDS=10] [RATES="250mbit 500mbit 1gbit 1500mbit"]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--smoke" ]; then
    set -- 20ms 2 "200mbit"
fi
rtt=${1:-100ms}
secs=${2:-10}
rates=${3:-"250mbit 500mbit 1gbit 1500mbit"}
bin=$(bench/fatpipe-bin.sh)
name=fpcap$$
work=$(mktemp -d)
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    "$bin" testbed down --name "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "| rate | RTT | goodput Mbit/s | of ceiling | late mean us | late max us | > 1 ms late | queue drops |"
echo "|---|---|---|---|---|---|---|---|"
for rate in $rates; do
    "$bin" testbed up --name "$name" --rtt "$rtt" --rate "$rate" --profile tuned >/dev/null
    "$bin" testbed exec b --name "$name" -- iperf3 -s -1 >/dev/null 2>&1 &
    server=$!
    sleep 0.5
    "$bin" testbed exec a --name "$name" -- iperf3 -c 198.18.0.2 -t "$secs" -P 4 -J > "$work/iperf.json"
    wait "$server" 2>/dev/null || true
    server=""
    sleep 0.3 # one stats period
    "$bin" testbed stats --name "$name" --json > "$work/stats.json"
    "$bin" testbed down --name "$name" >/dev/null
    python3 - "$work/iperf.json" "$work/stats.json" "$rate" "$rtt" <<'PY'
import json, re, sys
iperf = json.load(open(sys.argv[1]))
ab = json.load(open(sys.argv[2]))[0]
rate, rtt = sys.argv[3], sys.argv[4]
m = re.match(r"([\d.]+)([kmg]?)bit", rate)
bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
good = iperf["end"]["sum_received"]["bits_per_second"]
ceiling = bps * 1448 / 1500
out = max(ab["packets_out"], 1)
print(f"| {rate} | {rtt} | {good/1e6:.0f} | {good/ceiling:.1%} | {ab['late_sum_us']/out:.0f} | {ab['late_max_us']} | {ab['late_over_1ms']/out:.2%} | {ab['drops_queue']} |")
PY
done
