#!/usr/bin/env bash
# Many files across an emulated WAN (issue 15): `fatpipe cp -r` of 256 files x 4 MiB down and up
# at RTT 100 ms, 1 Gbit/s, 1-BDP queue, stock profile, --no-force-buffers (an unprivileged
# user's limits), default options otherwise; trees checked with diff. With BASE=/path/to/fatpipe
# an older build runs as the client in alternation, for a before/after in one script. With
# PEERS="globus lftp" each run also times globus-url-copy -r -cd -fast -p 4 -cc 4 -pp against
# globus-gridftp-server and lftp mirror --parallel=8 against fatpipe's server, on the same path
# (name one of them for that one only). Each run of a fatpipe client starts with fresh path memory.
# FILES and SIZE (bytes) change the tree (default 256 x 4 MiB).
# Usage: [BASE=bin] [RUNS=2] [PEERS="globus lftp"] [FILES=n SIZE=b] bench/many-files-wan.sh
# (root).
# Prints a table of wall clocks.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
name=fpmany
runs=${RUNS:-2}
. bench/testbed-lib.sh
mkdir -p "$work/root" "$work/src/tree"
head -c $((${FILES:-256} * ${SIZE:-4194304})) /dev/urandom > "$work/all"
(cd "$work/src/tree" && split -a 5 -d -b "${SIZE:-4194304}" "$work/all" f && rm "$work/all")
cp -r "$work/src/tree" "$work/root/"
# globus-gridftp-server serves the tree as user nobody: it must read it and write uploads.
chmod o+rx "$work" "$work/root" "$work/root/tree"
mkdir -m 777 "$work/gup"
"$bin" testbed up --name "$name" --rtt 100ms --rate 1gbit >/dev/null
spawn a "$bin" serve --root "$work/root" --anonymous-write --listen 198.18.0.1:2121 \
    > "$work/serve.out" 2>/dev/null
for _ in $(seq 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
peer() { [[ " ${PEERS:-} " == *" $1 "* ]]; }
if peer globus; then
    spawn a globus-gridftp-server -aa -anonymous-user nobody -p 2811 \
        -control-interface 198.18.0.1 -data-interface 198.18.0.1 -d error
    sleep 1
fi
clients=("current:$bin")
[ -n "${BASE:-}" ] && clients=("base:$BASE" "${clients[@]}")
secs() { local t0=$EPOCHREALTIME; "$@"; python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f}')"; }
echo "| client | run | download s | upload s |"
echo "|---|---|---|---|"
for r in $(seq "$runs"); do
    for c in "${clients[@]}"; do
        label=${c%%:*} client=${c#*:}
        rm -rf "$work/out"; mkdir "$work/out"
        # Each run starts with fresh path memory (as the lab's runs do): runs are independent.
        cache=(env XDG_CACHE_HOME="$work/cache-$label-$r")
        down=$(secs ex b "${cache[@]}" "$client" cp -q -r --no-force-buffers ftp://198.18.0.1:2121/tree "$work/out/")
        diff -rq "$work/src/tree" "$work/out/tree" >/dev/null
        up=$(secs ex b "${cache[@]}" "$client" cp -q -r --no-force-buffers "$work/src/tree" "ftp://198.18.0.1:2121/up-$label-$r/")
        diff -rq "$work/src/tree" "$work/root/up-$label-$r/tree" >/dev/null
        echo "| $label | $r | $down | $up |"
    done
    if peer globus; then
        rm -rf "$work/out"; mkdir "$work/out"
        down=$(secs ex b globus-url-copy -q -r -cd -fast -p 4 -cc 4 -pp \
            "ftp://198.18.0.1:2811$work/root/tree/" "file://$work/out/tree/")
        diff -rq "$work/src/tree" "$work/out/tree" >/dev/null
        rm -rf "$work/gup/tree"
        up=$(secs ex b globus-url-copy -q -r -cd -fast -p 4 -cc 4 -pp \
            "file://$work/src/tree/" "ftp://198.18.0.1:2811$work/gup/tree/")
        diff -rq "$work/src/tree" "$work/gup/tree" >/dev/null
        echo "| globus-url-copy -cc 4 -pp | $r | $down | $up |"
    fi
    peer lftp || continue
    rm -rf "$work/out"; mkdir "$work/out"
    down=$(secs ex b lftp -e "set net:max-retries 1; mirror --parallel=8 tree $work/out/tree; quit" \
        ftp://198.18.0.1:2121)
    diff -rq "$work/src/tree" "$work/out/tree" >/dev/null
    up=$(secs ex b lftp -e "set net:max-retries 1; mirror -R --parallel=8 $work/src/tree up-lftp-$r; quit" \
        ftp://198.18.0.1:2121)
    diff -rq "$work/src/tree" "$work/root/up-lftp-$r" >/dev/null
    echo "| lftp mirror --parallel=8 | $r | $down | $up |"
done
