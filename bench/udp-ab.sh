#!/usr/bin/env bash
# Two fatpipe binaries' UDP channel on one lossy path, alternating: a 1 GiB copy over the
# testbed (RTT, 100 ms unless set, 1 Gbit/s, 1-BDP queue, stock profile, as root), server and client of the same
# binary, `--no-path-memory` and ARGS (default `--transport udp`). DEST=null (default): a
# download to /dev/null with `--no-verify`; DEST=file: into a file on tmpfs, verified as users
# copy, either way (DIR=down or up), the bytes compared. Prints a markdown row per run: whole
# command and data-phase Mbit/s, the share of packets resent (R), the path's own loss the sender
# read (what it lost with no queue standing: the verdict path memory keeps) and the packets the client's
# UDP sockets dropped (its namespace's `RcvbufErrors`). BUSY=N: N shell busy loops run beside
# (nice 0) and the client at nice 10, a receiver that falls behind on a busy host. ARGS="":
# a cold copy with no options (a new long path starts on the UDP channel); SIZE sets the
# file (1G); BLOCK=1 makes the receiving namespace drop every UDP packet (a firewall).
# Usage (root): bench/udp-ab.sh OLD_BINARY NEW_BINARY
#   (env LOSSES="0.01 0.05", ROUNDS=3, RTT=100ms, DEST=null|file, DIR=down|up, BUSY=0,
#   ARGS="--transport udp", SIZE=1G, BLOCK=0)
set -euo pipefail
old=$1 new=$2
tb=fpab$$ dir=$(mktemp -d -p /dev/shm)
dest=${DEST:-null} way=${DIR:-down} args=${ARGS---transport udp}
head -c "${SIZE:-1G}" /dev/zero > "$dir/f1g"
srv="" busy=() nice=0
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2> /dev/null || true
    for p in "${busy[@]}"; do kill "$p" 2> /dev/null || true; done
    "$new" testbed down --name $tb > /dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq "${BUSY:-0}"); do
    bash -c 'while :; do :; done' &
    busy+=($!) nice=10
done
echo "| loss | binary | s | whole Mbit/s | data Mbit/s | R % | path loss % | socket drops |"
echo "|---|---|---|---|---|---|---|---|"
for loss in ${LOSSES:-0.01 0.05}; do
    "$new" testbed up --name $tb --rtt "${RTT:-100ms}" --rate 1gbit --loss "$loss" --profile stock > /dev/null
    if [ "${BLOCK:-0}" = 1 ]; then
        ns=$tb-a; [ "$way" = up ] && ns=$tb-b
        ip -n $ns rule add pref 1 lookup local
        ip -n $ns rule del pref 0
        ip -n $ns rule add pref 0 iif fp0 ipproto udp blackhole
    fi
    for _ in $(seq "${ROUNDS:-3}"); do
        for v in old new; do
            bin=$old; [ $v = new ] && bin=$new
            "$bin" testbed exec b --name $tb -- "$bin" serve --anonymous-write --root "$dir" \
                --listen 198.18.0.2:2812 > /dev/null 2>&1 &
            srv=$!
            sleep 1
            case $dest/$way in
                null/*) ends=(--no-verify ftp://198.18.0.2:2812/f1g /dev/null) ;;
                file/down) ends=(ftp://198.18.0.2:2812/f1g "$dir/copy") ;;
                *) ends=("$dir/f1g" ftp://198.18.0.2:2812/copy) ;;
            esac
            # shellcheck disable=SC2086 # ARGS is a list of options
            drops() {
                "$new" testbed exec a --name $tb -- cat /proc/net/snmp |
                    awk '/^Udp:/ { n++ } /^Udp:/ && n == 2 { print $6 }'
            }
            before=$(drops)
            "$bin" testbed exec a --name $tb -- nice -n $nice "$bin" cp --json $args \
                --no-path-memory "${ends[@]}" > "$dir/cp.json" 2> /dev/null || true
            dropped=$(($(drops) - before))
            if [ "$dest" = file ] && ! cmp -s "$dir/f1g" "$dir/copy"; then
                echo "$v: the copy differs from its source" >&2
            fi
            rm -f "$dir/copy"
            kill "$srv"; wait "$srv" 2> /dev/null || true; srv=""
            python3 - "$dir/cp.json" "$loss" "$v" "$dropped" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
f = d["files"][0]
m = re.search(r"R = ([0-9.]+) %", f.get("udp") or "")
p = re.search(r"path loss ([0-9.]+) %", f.get("udp") or "")
data = f["bytes"] * 8 / f["data_seconds"] / 1e6 if f.get("data_seconds") else 0
print(f"| {sys.argv[2]} | {sys.argv[3]} | {d['seconds']:.2f} | {d['rate_mbit_s']:.0f} | {data:.0f} "
      f"| {m.group(1) if m else '?'} | {p.group(1) if p else '?'} | {sys.argv[4]} |")
PY
        done
    done
    "$new" testbed down --name $tb > /dev/null
done
