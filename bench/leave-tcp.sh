#!/usr/bin/env bash
# A copy of one file that meets random loss over TCP, kept on TCP (`--transport tcp`) against no
# option (it leaves TCP for the UDP channel at the congestion policy's verdict), alternated,
# ROUNDS rounds: `fatpipe cp -v` of SIZE_MIB across an emulated 100 ms, 1 Gbit/s path (stock
# profile, as root) with LOSS random loss, DIR `down` or `up`, with ARGS more options (`-p 1`),
# a fresh path memory each copy, each capped at 60 s. Prints the whole command's rate, whether
# the bytes arrived identical, and the transport the copy took.
# Usage (root): bench/leave-tcp.sh BINARY [LOSS=0.01] [SIZE_MIB=1024] [DIR=up] [ARGS] [ROUNDS=2]
set -euo pipefail
bin=$(realpath "$1") loss=${2:-0.01} size=${3:-1024} dir=${4:-up} args=${5:-} rounds=${6:-2}
name=leavetcp
cd "$(dirname "$0")"
. ./testbed-lib.sh
mkdir -p "$work/root"
head -c $((size << 20)) /dev/urandom > "$work/f.bin"
cp "$work/f.bin" "$work/root/f.bin"
"$bin" testbed up --name $name --rtt 100ms --rate 1gbit --loss "$loss" --profile stock > /dev/null
spawn a env FATPIPE_LOG=info "$bin" serve --anonymous-write --root "$work/root" \
    --listen 198.18.0.1:2121 > /dev/null 2> "$work/serve.log"
sleep 1
i=0
for _ in $(seq "$rounds"); do
    for transport in tcp auto; do
        i=$((i + 1))
        case $dir in
            up) src=$work/f.bin dst=ftp://198.18.0.1:2121/up$i.bin out=$work/root/up$i.bin ;;
            *) src=ftp://198.18.0.1:2121/f.bin dst=$work/down$i.bin out=$work/down$i.bin ;;
        esac
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086 # ARGS is a list of options
        ex b env XDG_CACHE_HOME="$work/cache$i" timeout 60 "$bin" cp -v --transport $transport \
            $args "$src" "$dst" > "$work/cp$i.log" 2>&1 || true
        t1=$(date +%s.%N)
        same=$(cmp -s "$work/f.bin" "$out" && echo identical || echo "NOT identical")
        took=$(grep -o 'transport [a-z]*' "$work/cp$i.log" | head -1 || true)
        python3 - "$t0" "$t1" "$transport" "$size" "$same" "${took:-no summary}" <<'PY'
import sys
t0, t1, transport, size, same, took = sys.argv[1:]
t = float(t1) - float(t0)
rate = float(size) * 8 * 1.048576 / t
print(f"--transport {transport}: {rate:.0f} Mbit/s whole command ({t:.2f} s), {same}, {took}")
PY
        rm -f "$out"
    done
done
