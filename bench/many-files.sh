#!/usr/bin/env bash
# Benchmark: many small files over loopback: `fatpipe cp -r` down and up (no options) against
# `fatpipe serve`, beside `lftp mirror` (download) against the same server; runs interleaved.
# Prints each run's wall clock and the medians.
# Usage: bench/many-files.sh [FILES=400] [KIB=32] [RUNS=3]    (lftp from scripts/test.sh's packages)
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-400}
kib=${2:-32}
runs=${3:-3}
bin=$(bench/fatpipe-bin.sh)

work=$(mktemp -d -p /dev/shm fatpipe-many.XXXXXX)
pid=""
cleanup() {
    [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir -p "$work/root/t"
for i in $(seq 1 "$files"); do head -c "$((kib << 10))" /dev/urandom > "$work/root/t/f$i"; done
export XDG_CACHE_HOME=$work/cache
"$bin" serve --root "$work/root" --anonymous-write --listen 127.0.0.1:0 > "$work/serve.out" 2>/dev/null & pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
addr=$(sed -n 's/.*listening on \([^,]*\),.*/\1/p' "$work/serve.out")
port=${addr##*:}

secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
down=() up=() lftp_down=()
for r in $(seq 1 "$runs"); do
    rm -rf "$work/down" "$work/root/up" "$work/lftp"
    d=$(secs "$bin" cp -q -r "ftp://$addr/t" "$work/down")
    u=$(secs "$bin" cp -q -r "$work/down" "ftp://$addr/up")
    l=$(secs lftp -c "open -p $port -u anonymous,x 127.0.0.1; mirror t $work/lftp")
    diff -r "$work/root/t" "$work/down" && diff -r "$work/root/t" "$work/root/up" && diff -r "$work/root/t" "$work/lftp"
    echo "run $r: fatpipe cp -r download ${d}s, upload ${u}s; lftp mirror download ${l}s"
    down+=("$d") up+=("$u") lftp_down+=("$l")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "$files files x $kib KiB on loopback, median of $runs: fatpipe cp -r download $(median "${down[@]}") s ($(echo "$files / $(median "${down[@]}")" | bc) files/s), upload $(median "${up[@]}") s; lftp mirror download $(median "${lftp_down[@]}") s"
