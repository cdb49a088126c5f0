#!/usr/bin/env bash
# Adaptive pacing with BIC (issue 14; the seed's figures 8-10 scaled from 10 to 1 Gbit/s), on
# emulated 1 Gbit/s paths with a 1-BDP queue, tuned hosts, downloads of a sparse file to
# /dev/null (memory to memory, as the seed measured). Per run: throughput, loss events (entries
# into recovery and timeouts in the sending namespace) and retransmitted segments.
#   one   50 ms, one flow beside constant UDP background at 64 % of the link (the same
#         direction): BIC unpaced (fatpipe_bicx), BIC with adaptive pacing in the kernel
#         (fatpipe_bic, the seed's BICIPG), cubic unpaced, cubic with user-space adaptive pacing;
#         $PAIRS ("bic cubic") chooses the pairs, $ROUNDS (1) how often each runs
#   four  50 ms, four flows: four adaptive (-p 4) against two adaptive + two unpaced (two copies
#         of -p 2 at once)
#   long  200 ms, four flows for about ten minutes: BIC against BIC with adaptive pacing
#   held  issue 39's case: 50 ms, a 500 Mbit/s link, one flow beside 320 Mbit/s of the
#         emulator's cross traffic for about a minute (1.3 GiB), BIC unpaced and paced, with
#         fatpipe's default buffers (drs, whose window holds the flow) and the kernel's
#         (--tuning kernel, where BIC's own window law rules); $ROUNDS (1) rounds (~10 min each)
#   eab   `one`'s path, one flow of 3 GiB, BIC unpaced and with adaptive pacing in the kernel
#         ($CONTROL=cubic: cubic unpaced and with user-space adaptive pacing), $RUNS (3) runs each, with
#         the sender's telemetry: retransmissions in the first slow start and after
#         ($CONTROL-split.md); results/pacing/$CONTROL-eab.svg draws the pacing rate and eab beside
#         cwnd/RTT (for bic, the program's ceiling: the records' kernel_pace); $KEEP, a directory
#         that keeps each run's telemetry
# The background ($BG): `emulator` (default), the emulator's own cross traffic (`testbed up
# --cross 640mbit`: packets enter the queue at exact times, whatever the two cores are doing), or
# `iperf3` (`iperf3 -u -b 640M`, whose sender catches up in bursts after it was descheduled).
# Usage: bench/bic-experiments.sh [one|four|long|held|eab ...]   (default: one four long; root; builds
# fatpipe with --features bpf). Tables go to results/pacing/bic-*.md; `one` takes ~25 min a round, `four`
# ~8, `long` ~22, `eab` ~11.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh --features bpf)
name=fpbicx
out=results/pacing
mkdir -p "$out"

. bench/testbed-lib.sh

# A fresh path with RTT $1 (and cross traffic a -> b at $3, if given; a link of $4, 1gbit if
# not), a server on side a serving sparse files of $2 (GiB unless a unit is given), iperf3 on
# side b.
path() {
    cleanup
    "$bin" testbed up --name "$name" --rtt "$1" --rate "${4:-1gbit}" --profile tuned \
        --cross "${3:-0}" >/dev/null
    rm -rf "$work/root"; mkdir -p "$work/root"
    local size=$2; [[ $size == *[A-Z] ]] || size=${size}G
    truncate -s "$size" "$work/root/zero.bin" # sparse: read at memory speed
    spawn a "$bin" serve --root "$work/root" --anonymous --listen 198.18.0.1:2121 \
        ${STATS:+--stats "$STATS"} >"$work/serve.out" 2>&1
    spawn b iperf3 -s -p 5301 >/dev/null 2>&1
    sleep 1
}

# The sending namespace's loss events and retransmitted segments so far.
counters() {
    ex a nstat -az TcpExtTCPSackRecovery TcpExtTCPRenoRecovery TcpExtTCPTimeouts TcpRetransSegs |
        awk '/^Tcp/ {if ($1 == "TcpRetransSegs") r = $2; else l += $2} END {print l + 0, r + 0}'
}

# `fatpipe cp` of zero.bin to /dev/null on side b with options "$@" (`--tuning kernel` unless
# $TUNING says otherwise); prints its data-phase Mbit/s.
copy() {
    ex b "$bin" cp --quiet --json --no-verify --tuning "${TUNING:-kernel}" "$@" ftp://198.18.0.1:2121/zero.bin /dev/null |
        python3 -c 'import json,sys; f = json.load(sys.stdin)["files"][0]; print(round(f["bytes"] * 8e-6 / f["data_seconds"]))'
}

# The background at 64 % of the link: with the path (`path ... "$(cross)"`), or iperf3 started
# by `background_on` and stopped by `background_off`.
background=${BG:-emulator}
bg_rate=640mbit
cross() { if [[ $background == emulator ]]; then echo "$bg_rate"; else echo 0; fi; }
background_on() {
    bg=
    [[ $background == iperf3 ]] || return 0
    spawn a iperf3 -c 198.18.0.2 -p 5301 -u -b 640M -l 1400 -t 3600 >/dev/null 2>&1
    bg=${pids[-1]}
    sleep 3
}
background_off() {
    [[ -n $bg ]] || return 0
    kill "$bg" 2>/dev/null || true; wait "$bg" 2>/dev/null || true
}

table() { # file, header
    echo "$2" >"$out/$1"
    echo "$2" | sed 's/[^|]*|/---|/g; s/^---//' >>"$out/$1"
}

one() {
    path 50ms 14 "$(cross)"
    table bic-one.md "| control | pacing | background | round | Mbit/s | loss events | retransmitted segments |"
    for round in $(seq "${ROUNDS:-1}"); do
    for cc in ${PAIRS:-bic cubic}; do
    for pacing in off adaptive; do
        background_on
        read -r l0 r0 < <(counters)
        mbit=$(copy -p 1 --cc "$cc" --pacing "$pacing")
        read -r l1 r1 < <(counters)
        background_off
        echo "| $cc | $pacing | $background | $round | $mbit | $((l1 - l0)) | $((r1 - r0)) |" | tee -a "$out/bic-one.md"
        sleep 5
    done
    done
    done
}

four() {
    path 50ms 20
    table bic-four.md "| flows | Mbit/s (all) | loss events | retransmitted segments |"
    read -r l0 r0 < <(counters)
    mbit=$(copy -p 4 --cc bic)
    read -r l1 r1 < <(counters)
    echo "| 4 BIC + adaptive (-p 4) | $mbit | $((l1 - l0)) | $((r1 - r0)) |" | tee -a "$out/bic-four.md"
    truncate -s 10G "$work/root/zero.bin"
    read -r l0 r0 < <(counters)
    s=$(date +%s.%N)
    copy -p 2 --cc bic >"$work/paced" & a=$!
    copy -p 2 --cc bic --pacing off >"$work/plain" & b=$!
    wait "$a" "$b"
    e=$(date +%s.%N)
    read -r l1 r1 < <(counters)
    all=$(echo "20 * 8 * 1.073741824 * 1000 / ($e - $s)" | bc)
    echo "| 2 BIC + adaptive ($(cat "$work/paced")) + 2 BIC ($(cat "$work/plain")) | $all | $((l1 - l0)) | $((r1 - r0)) |" |
        tee -a "$out/bic-four.md"
}

long() {
    path 200ms 70
    table bic-long.md "| flows | Mbit/s | loss events | retransmitted segments |"
    for pacing in off adaptive; do
        read -r l0 r0 < <(counters)
        mbit=$(copy -p 4 --cc bic --pacing "$pacing")
        read -r l1 r1 < <(counters)
        echo "| 4 BIC, pacing $pacing | $mbit | $((l1 - l0)) | $((r1 - r0)) |" | tee -a "$out/bic-long.md"
    done
}

held() {
    path 50ms 1300M 320mbit 500mbit
    table bic-held.md "| buffers | pacing | round | Mbit/s | loss events | retransmitted segments |"
    for round in $(seq "${ROUNDS:-1}"); do
    for tuning in drs kernel; do
    for pacing in off adaptive; do
        read -r l0 r0 < <(counters)
        mbit=$(TUNING=$tuning copy -p 1 --cc bic --pacing "$pacing")
        read -r l1 r1 < <(counters)
        echo "| $tuning | $pacing | $round | $mbit | $((l1 - l0)) | $((r1 - r0)) |" | tee -a "$out/bic-held.md"
        sleep 3
    done
    done
    done
}

eab() {
    local cc=${CONTROL:-bic}
    table "$cc-split.md" "| control | pacing | run | Mbit/s | retransmitted segments | in the first 4 s | after |"
    for run in $(seq "${RUNS:-3}"); do
    for pacing in off adaptive; do
        rm -f "$work/$pacing.jsonl"
        STATS=$work/$pacing.jsonl path 50ms 3 "$(cross)"
        background_on
        mbit=$(copy -p 1 --cc "$cc" --pacing "$pacing")
        background_off
        [[ -z ${KEEP:-} ]] || cp "$work/$pacing.jsonl" "$KEEP/$cc-$pacing-$run.jsonl"
        # Retransmissions of the first 4 s (the first slow start's overshoot) and after.
        split=$(python3 - "$work/$pacing.jsonl" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
rs = [r for r in rs if r.get("role") == "sender" and r.get("tcp")]
t0 = rs[0]["unix_s"]
total = rs[-1]["tcp"]["total_retrans"]
early = max(r["tcp"]["total_retrans"] for r in rs if r["unix_s"] - t0 <= 4.0)
print(f"{total} | {early} | {total - early}")
PY
)
        echo "| $cc | $pacing | $run | $mbit | $split |" | tee -a "$out/$cc-split.md"
    done
    done
    "$bin" plot "$work/adaptive.jsonl" -o "$out/$cc-eab.svg"
}

for e in "${@:-one four long}"; do
    for x in $e; do "$x"; done
done
