#!/usr/bin/env bash
# When a cold download's sender tells random loss: one `fatpipe cp -v` of SIZE_MIB with no
# options and a fresh path memory across an emulated 100 ms, 1 Gbit/s path (stock profile, as
# root) with LOSS random loss, the server logging at info. Prints the time from the command's
# start to the server's congestion-control switch (or "no switch"), the whole command's time,
# the switch's reason and the client's summary.
# Usage (root): bench/loss-verdict.sh BINARY [LOSS=0.01] [SIZE_MIB=1024]
set -euo pipefail
bin=$(realpath "$1") loss=${2:-0.01} size=${3:-1024} name=verdict
cd "$(dirname "$0")"
. ./testbed-lib.sh
mkdir -p "$work/root" "$work/cache"
head -c $((size << 20)) /dev/urandom > "$work/root/f.bin"
"$bin" testbed up --name $name --rtt 100ms --rate 1gbit --loss "$loss" --profile stock > /dev/null
spawn a env FATPIPE_LOG=info "$bin" serve --anonymous --root "$work/root" \
    --listen 198.18.0.1:2121 > /dev/null 2> "$work/serve.log"
sleep 1
t0=$(date +%s.%N)
ex b env XDG_CACHE_HOME="$work/cache" "$bin" cp -v ftp://198.18.0.1:2121/f.bin /dev/null \
    > "$work/cp.log" 2>&1 || echo "the copy failed"
t1=$(date +%s.%N)
switch=$(grep -m1 "random loss, not congestion" "$work/serve.log" || true)
[ -n "${KEEP_LOG:-}" ] && cp "$work/serve.log" "$KEEP_LOG"
at=""
[ -n "$switch" ] && at=$(date -d "${switch%% *}" +%s.%N)
python3 - "$t0" "$t1" "$at" <<'PY'
import sys
t0, t1, at = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
said = f"switch at {float(at) - t0:.2f} s" if at else "no switch"
print(f"{said}, whole command {t1 - t0:.2f} s")
PY
[ -n "$switch" ] && echo "${switch#* }" | cut -c1-300
grep -E "copied|transport" "$work/cp.log" | cut -c1-300
