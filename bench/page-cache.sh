#!/usr/bin/env bash
# Benchmark: what a large verified copy leaves of the page cache. A file of KEEP_GIB (default 4)
# is read into the cache, then each BINARY downloads a file of SIZE_GIB (default 10) over
# loopback into a file on the same disk (no options, fresh path memory); prints the whole
# command's time, how much of the first file is still cached, how much of the copy's source
# and destination stay cached (`fincore`), and whether the copy equals its source. Needs root
# (it drops the caches before each run) and SIZE + SIZE + KEEP GiB free under DIR.
# Usage (root): bench/page-cache.sh BINARY... (env SIZE_GIB=10, KEEP_GIB=4, DIR=/var/tmp,
#   ARGS: cp options, e.g. --no-verify)
set -euo pipefail
size=${SIZE_GIB:-10} keep=${KEEP_GIB:-4}
work=$(mktemp -d -p "${DIR:-/var/tmp}")
srv=""
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/root"
head -c "${size}G" /dev/zero > "$work/root/src"
head -c "${keep}G" /dev/urandom > "$work/kept"
sync
res() { echo $(($(fincore --bytes --noheadings --output RES "$1") >> 20)); }
echo "| binary | GiB | s | kept file cached, MiB (of $((keep << 10))) | source cached, MiB | copy cached, MiB | same |"
echo "|---|---|---|---|---|---|---|"
for bin in "$@"; do
    bin=$(realpath "$bin")
    echo 3 > /proc/sys/vm/drop_caches
    cat "$work/kept" > /dev/null
    port=$((20000 + RANDOM % 10000))
    "$bin" serve --anonymous --root "$work/root" --listen "127.0.0.1:$port" > /dev/null 2>&1 &
    srv=$!
    sleep 0.5
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # ARGS is a list of options
    XDG_CACHE_HOME="$work/cache" "$bin" cp --quiet ${ARGS:-} "ftp://127.0.0.1:$port/src" "$work/copy"
    t1=$(date +%s.%N)
    kept=$(res "$work/kept") src=$(res "$work/root/src") copy=$(res "$work/copy")
    kill "$srv"; wait "$srv" 2> /dev/null || true; srv=""
    same=no; cmp -s "$work/root/src" "$work/copy" && same=yes
    printf '| %s | %s | %.2f | %s | %s | %s | %s |\n' "$(basename "$bin")" "$size" \
        "$(python3 -c "print($t1 - $t0)")" "$kept" "$src" "$copy" "$same"
    rm -f "$work/copy"
done
