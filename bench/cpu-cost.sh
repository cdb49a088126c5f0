#!/usr/bin/env bash
# Benchmark: CPU seconds per GiB (client + server, user + sys) and rate on loopback, fatpipe
# against curl from vsftpd and iperf3 -Z, runs alternating, medians (bench/cpu-cost.py).
# Usage: bench/cpu-cost.sh [SIZE_MIB=2048] [RUNS=5] [CASE...]
#   a CASE is `curl`, `iperf3`, `fatpipe:OPTIONS` (cp options, `file` = into a tmpfs file
#   instead of /dev/null), e.g. "fatpipe:-p 4" "fatpipe:--transport udp" "fatpipe:file", or
#   `vsftpd:OPTIONS` (fatpipe cp from vsftpd).
#   Env FATPIPE_BIN: a binary to measure instead of building this tree's.
# Needs root for vsftpd (scripts/test.sh installs curl, vsftpd and iperf3).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-2048}
runs=${2:-5}
shift $(($# < 2 ? $# : 2))
cases=("$@")
if ((${#cases[@]} == 0)); then
    cases=(curl iperf3 "fatpipe:" "fatpipe:-p 1" "fatpipe:-p 2" "fatpipe:-p 4"
           "fatpipe:--transport udp" "fatpipe:file --no-verify" "fatpipe:file")
fi
bin=${FATPIPE_BIN:-$(bench/fatpipe-bin.sh)}
exec python3 bench/cpu-cost.py "$bin" "$size" "$runs" "${cases[@]}"
