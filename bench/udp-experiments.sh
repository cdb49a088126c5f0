#!/usr/bin/env bash
# The UDP data channel (docs/udp.md), each case with `fatpipe lab` on fresh emulated paths.
# Results go to results/udp/.
# Usage: bench/udp-experiments.sh [lossy|seed|contention|fairness|changing|cpu ...]   (default: lossy)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
out=results/udp
mkdir -p "$out"

# UDT4's baseline: Debian ships libudt but not its example programs; bench/udt/udt-pipe.cpp is
# the smallest sender/receiver on its API (memory to memory).
udt=$(dirname "$bin")/udt-pipe
udt_pipe() {
    dpkg -s libudt-dev > /dev/null 2>&1 || apt-get install -y -q libudt-dev > /dev/null
    g++ -O2 -Wall -o "$udt" bench/udt/udt-pipe.cpp -ludt -lpthread
}

lossy() {  # 100 ms, 1 Gbit/s, 1-BDP queue, random loss each way, 1 GiB: UDP vs TCP (default, bbr)
    udt_pipe
    for loss in 0.001 0.01 0.05; do
        path=(--rtt 100ms --rate 1gbit --loss "$loss" --timeout 4m)
        common=("${path[@]}" --size 1G)
        "$bin" lab "${common[@]}" --profile stock --runs 3 --tool fatpipe-udp --out "/tmp/udp-lossy-$loss"
        "$bin" lab "${common[@]}" --profile stock --runs 2 --tool fatpipe:drs/pauto --out "/tmp/udp-lossy-$loss-tcp" || true
        "$bin" lab "${common[@]}" --runs 1 --profile tuned --server "exec iperf3 -s -1" --port 5201 \
            --client "exec iperf3 -c 198.18.0.2 -R -C bbr -n {bytes} >/dev/null" \
            --label "iperf3 -C bbr (tuned: 256 MiB buffers)" --out "/tmp/udp-lossy-$loss-bbr" || true
        # The slow baselines on 64 MiB (tens of Mbit/s here: 1 GiB would take many minutes each).
        "$bin" lab "${path[@]}" --size 64M --runs 1 --profile stock --server "exec $udt send 9000 {bytes}" \
            --port 9000 --client "exec $udt recv 198.18.0.2 9000 {bytes}" \
            --label "UDT4 (libudt 4.11, memory to memory)" --out "/tmp/udp-lossy-$loss-udt" || true
        "$bin" lab "${path[@]}" --size 64M --runs 1 --profile stock --tool globus-p8 \
            --out "/tmp/udp-lossy-$loss-globus" || true
        cat "/tmp/udp-lossy-$loss"{,-tcp,-bbr,-udt,-globus}/results.md > "$out/lossy-$loss.md"
    done
}

seed() {  # the seed's controllers on its short- and long-haul paths (8 and 64 ms)
    # 0.1 % random loss: below the seed's 0.5 % threshold, as its paths mostly were.
    "$bin" lab --rtt 8ms --rtt 64ms --rate 1gbit --loss 0.001 --size 1G --timeout 4m --profile stock \
        --runs 1 --tool fatpipe-udp:history --tool fatpipe-udp:state --tool fatpipe-udp \
        --tool fatpipe:drs/pauto --out /tmp/udp-seed
    # TCP as the seed's host had it: 64 KiB buffers, one stream (64 MiB: it moves ~8 Mbit/s at 64 ms)
    "$bin" lab --rtt 8ms --rtt 64ms --rate 1gbit --loss 0.001 --size 64M --timeout 4m --profile stock \
        --runs 1 --tool fatpipe:stock/p1 --out /tmp/udp-seed-stock
    # 1 % random loss, above the threshold: the seed's controllers read it as congestion.
    "$bin" lab --rtt 64ms --rate 1gbit --loss 0.01 --size 256M --timeout 2m --profile stock \
        --runs 1 --tool fatpipe-udp:history --tool fatpipe-udp:state --tool fatpipe-udp \
        --out /tmp/udp-seed-lossy || true
    cat /tmp/udp-seed/results.md /tmp/udp-seed-stock/results.md /tmp/udp-seed-lossy/results.md \
        > "$out/seed-controllers.md"
}

contention() {  # issue 16's experiment 1: the seed's paths with competing flows
    # Short haul (8 ms) and long haul (64 ms), 1 Gbit/s, 1-BDP queue, stock profile; while each
    # tool runs, a cubic flow (stock buffers) and a constant 100 Mbit/s UDP flow cross the same
    # queue. Memory to memory: a sparse file (read from the page cache) to /dev/null, 10 GB as
    # in the seed unless CONTENTION_SIZE says otherwise (TCP with 64 KiB buffers: 256/64 MiB).
    # CONTENTION_RTTS chooses the paths.
    # Throughput of the data phase and of the whole command; R = (T - N) / N, the share of
    # packets (segments) sent again: UDP from the transfer's summary, TCP from the sender's
    # telemetry (total_retrans of each data connection).
    local rtt tool dir tb=cont
    dir=$(mktemp -d)
    truncate -s "${CONTENTION_SIZE:-10G}" "$dir/f10g"
    truncate -s 256M "$dir/f256m"
    truncate -s 64M "$dir/f64m"
    trap '"$bin" testbed down --name '$tb' > /dev/null 2>&1; rm -rf "$dir"' RETURN
    {
        echo "| path | tool | bytes | Mbit/s (data phase) | Mbit/s (whole command) | R | cubic beside it, Mbit/s |"
        echo "|---|---|---|---|---|---|---|"
    } > "$out/contention.md"
    for rtt in ${CONTENTION_RTTS:-8ms 64ms}; do
        "$bin" testbed up --name $tb --rtt $rtt --rate 1gbit --profile stock > /dev/null
        for tool in "udp history" "udp state" "udp default" "tcp auto" "tcp 64k"; do
            contend $tb "$rtt" "$tool" "$dir" | tee -a "$out/contention.md"
        done
        "$bin" testbed down --name $tb > /dev/null
    done
}

# One tool's run of `contention`: starts the competing flows, moves the file, prints a row.
contend() {
    local tb=$1 rtt=$2 tool=$3 dir=$4 file=f10g opts serve_opts="" srv bg1 bg2 bgs t0 t1
    case $tool in
        "udp "*) opts="--transport udp --udp-rate-control ${tool#udp }" ;;
        "tcp auto") opts="" ;;
        # the seed host's 64 KiB buffers, at both ends
        "tcp 64k") opts="--tuning stock -p 1"; serve_opts="--tuning stock"
                   file=$([[ $rtt == 8ms ]] && echo f256m || echo f64m) ;;
    esac
    rm -f "$dir/stats.jsonl"
    # shellcheck disable=SC2086
    "$bin" testbed exec b --name "$tb" -- "$bin" serve --anonymous --root "$dir" --no-force-buffers \
        --listen 198.18.0.2:2812 --stats "$dir/stats.jsonl" $serve_opts > /dev/null 2>&1 &
    srv=$!
    "$bin" testbed exec b --name "$tb" -- iperf3 -s -p 5301 > /dev/null 2>&1 & bgs=$!
    "$bin" testbed exec b --name "$tb" -- iperf3 -s -p 5302 > /dev/null 2>&1 & bgs="$bgs $!"
    sleep 1
    "$bin" testbed exec a --name "$tb" -- iperf3 -c 198.18.0.2 -p 5301 -R -C cubic -t 900 -i 1 -J \
        > "$dir/cubic.json" 2> /dev/null & bg1=$!
    "$bin" testbed exec a --name "$tb" -- iperf3 -c 198.18.0.2 -p 5302 -R -u -b 100M -t 900 -i 0 \
        > /dev/null 2>&1 & bg2=$!
    sleep 3
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$bin" testbed exec a --name "$tb" -- "$bin" cp -q --json --no-verify --no-force-buffers $opts \
        "ftp://198.18.0.2:2812/$file" /dev/null > "$dir/cp.json" || true
    t1=$(date +%s.%N)
    kill -INT "$bg1" "$bg2" 2> /dev/null || true
    wait "$bg1" "$bg2" 2> /dev/null || true
    # shellcheck disable=SC2086
    kill $srv $bgs 2> /dev/null || true
    wait $srv $bgs 2> /dev/null || true
    local cubic r
    # cubic's mean over the seconds the transfer ran
    cubic=$(jq -r --argjson a "$t0" --argjson b "$t1" '.start.timestamp.timesecs as $s
        | [.intervals[].sum | select($s + .start >= $a and $s + .end <= $b) | .bits_per_second]
        | if length > 0 then add / length / 1e6 | floor else "?" end' "$dir/cubic.json" 2> /dev/null || echo "?")
    if [[ $tool == udp* ]]; then
        r=$(jq -r '.files[0].udp // ""' "$dir/cp.json" | sed -n 's/.*(R = \([0-9.]*\) %.*/\1 %/p')
    else
        r=$(jq -rs --argjson bytes "$(jq '.bytes' "$dir/cp.json")" '
            [.[] | select(.event == "sample" and .role == "sender")]
            | group_by([.port, .peer_port]) | map(last.tcp.total_retrans) | add // 0
            | . * 1448 / $bytes * 100 | . * 100 | round / 100 | "\(.) %"' "$dir/stats.jsonl")
    fi
    jq -r --arg rtt "$rtt" --arg tool "$tool" --arg r "$r" --arg cubic "$cubic" \
        --argjson wall "$(echo "$t1 - $t0" | bc)" '
        "| \($rtt) | \($tool) | \(.bytes) | \(.bytes * 8 / .files[0].data_seconds / 1e6 | floor) | \(.bytes * 8 / $wall / 1e6 | floor) | \($r) | \($cubic) |"' \
        "$dir/cp.json"
}

fairness() {  # issue 16's experiment 3: a long cubic flow, then a UDP transfer beside it
    # 100 ms, 1 Gbit/s, 1-BDP queue, tuned profile (the cubic flow has large buffers); both
    # flows go b -> a. Prints cubic's rate before and while the UDP transfer runs, and the sum.
    local tb=fair dir
    dir=$(mktemp -d)
    "$bin" testbed up --name $tb --rtt 100ms --rate 1gbit --profile tuned
    trap '"$bin" testbed down --name '$tb' >/dev/null 2>&1; rm -rf "$dir"' RETURN
    head -c 2G /dev/urandom > "$dir/f"
    "$bin" testbed exec b --name $tb -- iperf3 -s -1 > /dev/null 2>&1 &
    "$bin" testbed exec b --name $tb -- "$bin" serve --anonymous --root "$dir" \
        --listen 198.18.0.2:2812 --stats "$dir/udp.jsonl" > "$dir/serve.log" 2>&1 &
    local srv=$!
    trap 'kill '$srv' 2>/dev/null; "$bin" testbed down --name '$tb' >/dev/null 2>&1; rm -rf "$dir"' RETURN
    sleep 1
    "$bin" testbed exec a --name $tb -- iperf3 -c 198.18.0.2 -R -C cubic -t 45 -i 1 -J \
        > "$dir/iperf3.json" &
    local cubic=$!
    sleep 12
    local t0 t1
    t0=$(date +%s.%N)
    "$bin" testbed exec a --name $tb -- "$bin" cp -q --json --transport udp --no-verify \
        ftp://198.18.0.2:2812/f /dev/null > "$dir/cp.json"
    t1=$(date +%s.%N)
    wait $cubic
    local start
    start=$(jq '.start.timestamp.timesecs' "$dir/iperf3.json")
    jq -r --argjson s "$start" --argjson a "$t0" --argjson b "$t1" '
        [.intervals[].sum | {t: ($s + .end), m: (.bits_per_second / 1e6)}] as $iv
        | ($iv | map(select(.t > $s + 3 and .t <= $a)) | map(.m) | add / length) as $alone
        | ($iv | map(select(.t > $a + 1 and .t <= $b)) | map(.m) | add / length) as $beside
        | "cubic alone: \($alone | floor) Mbit/s; cubic beside UDP: \($beside | floor) Mbit/s"' \
        "$dir/iperf3.json" | tee "$out/fairness.md"
    local bytes secs
    bytes=$(jq '.bytes' "$dir/cp.json")
    secs=$(echo "$t1 - $t0" | bc)
    echo "UDP transfer beside it: $(echo "$bytes * 8 / $secs / 1000000" | bc) Mbit/s over ${secs} s (whole command)" \
        | tee -a "$out/fairness.md"
    cp "$dir/udp.jsonl" /tmp/fairness-udp.jsonl
    "$bin" plot "$dir/udp.jsonl" -o "$out/fairness.svg"
}

changing() {  # issue 16's experiment 4: rate and delay step every 5 s (1 GiB, 1 % loss)
    local sched
    sched=$(mktemp)
    printf '0s rate=1gbit rtt=100ms\n5s rate=300mbit rtt=40ms\n10s rate=1gbit rtt=150ms\nrepeat 15s\n' > "$sched"
    rm -f /tmp/changing-udp.jsonl
    "$bin" lab --rtt 100ms --rate 1gbit --loss 0.01 --schedule "$sched" --size 1G --timeout 4m \
        --profile stock --runs 1 --tool fatpipe-udp --tool fatpipe:drs/pauto \
        --fatpipe-args "--stats /tmp/changing-udp.jsonl" --out /tmp/udp-changing
    cp /tmp/udp-changing/results.md "$out/changing.md"
    # The stats file holds both tools' runs; the UDP run's rate events are what is drawn.
    "$bin" plot /tmp/changing-udp.jsonl -o "$out/changing.png"   # PNG: the signatures have thousands of dots
    rm -f "$sched"
}

cpu() {  # CPU seconds per GiB at both ends, loopback, 1 GiB download to /dev/null, TCP vs UDP
    dir=$(mktemp -d); trap 'kill "$srv" 2>/dev/null; rm -rf "$dir"' RETURN
    head -c 1G /dev/urandom > "$dir/f"
    "$bin" serve --anonymous --root "$dir" --listen 127.0.0.1:0 > "$dir/log" 2>&1 & srv=$!
    for _ in $(seq 50); do grep -q listening "$dir/log" && break; sleep 0.1; done
    addr=$(sed -n 's/.*listening on \([^,]*\),.*/\1/p' "$dir/log")
    ticks() { awk '{print $14 + $15}' "/proc/$srv/stat"; }
    hz=$(getconf CLK_TCK)
    {
        echo "| transport | client CPU s (user + sys) | server CPU s | wall s |"
        echo "|---|---|---|---|"
        for t in tcp udp tcp udp; do
            before=$(ticks)
            c=$( { /usr/bin/time -f "%U %S %e" "$bin" cp -q --no-verify --transport "$t" \
                "ftp://$addr/f" /dev/null; } 2>&1 | tail -1)
            s=$(( $(ticks) - before ))
            read -r u y e <<< "$c"
            awk -v t="$t" -v c="$u + $y" -v u="$u" -v y="$y" -v s="$s" -v hz="$hz" -v e="$e" \
                'BEGIN { printf "| %s | %.2f | %.2f | %s |\n", t, u + y, s / hz, e }'
        done
    } | tee "$out/cpu-loopback.md"
}

for e in "${@:-lossy}"; do
    for n in $e; do "$n"; done
done
