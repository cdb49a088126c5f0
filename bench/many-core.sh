#!/usr/bin/env bash
# Loopback figures for a many-core host (the device machine), where the CPU, not a path,
# limits a copy: CPU per GiB and rate by case (bench/cpu-cost.py), and `-p auto`'s story.
# Runs prebuilt binaries (the host has no toolchain): carry them.
# Usage: FATPIPE_BIN=path [OLD_BIN=path] [SIZE_MIB=4096] [RUNS=3] [QUICK=1] bench/many-core.sh
set -uo pipefail
cd "$(dirname "$0")/.."
new=${FATPIPE_BIN:?set FATPIPE_BIN} old=${OLD_BIN:-}
size=${SIZE_MIB:-4096} runs=${RUNS:-3}
echo "host: $(nproc) cores, kernel $(uname -r), $(python3 --version 2>&1)"
story() { # BINARY DEST ARGS...: one verbose default copy's plan (DEST: null or file)
    local bin=$1 dest=/dev/null; shift
    [ "$1" = file ] && dest=/dev/shm/fatpipe-story.$$
    shift
    local dir; dir=$(mktemp -d -p /dev/shm)
    python3 -c "import random,sys; b=random.Random(1).randbytes(64<<20); f=open(sys.argv[1],'wb'); [f.write(b) for _ in range($size//64)]" "$dir/f"
    local port=$((20000 + RANDOM % 20000))
    "$bin" serve --root "$dir" --listen 127.0.0.1:$port --anonymous > "$dir/srv.log" 2>&1 &
    local srv=$!
    sleep 0.5
    "$bin" cp -v --no-path-memory "$@" "ftp://127.0.0.1:$port/f" "$dest" 2>&1 |
        grep -E "copied|-p auto: [0-9]|streams:" | cut -c1-400
    kill $srv; wait $srv 2> /dev/null
    rm -rf "$dir" /dev/shm/fatpipe-story.$$
}
echo "## new: $new"
story "$new" null; story "$new" file; story "$new" null; story "$new" file
cases=("fatpipe:-p 1" "fatpipe:-p 4" "fatpipe:-p 16" "fatpipe:" "fatpipe:--transport udp"
       "fatpipe:file" "fatpipe:file --no-verify" iperf3 curl)
# QUICK=1: the default to /dev/null and into a file, the UDP channel, and -p 16.
[ -n "${QUICK:-}" ] && cases=("fatpipe:-p 16" "fatpipe:" "fatpipe:--transport udp" "fatpipe:file")
python3 bench/cpu-cost.py "$new" "$size" "$runs" "${cases[@]}"
if [ -n "$old" ]; then
    echo "## old: $old"
    story "$old" null; story "$old" file
    python3 bench/cpu-cost.py "$old" "$size" "$runs" "fatpipe:" "fatpipe:file"
fi
