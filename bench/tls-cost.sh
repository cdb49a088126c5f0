#!/usr/bin/env bash
# The cost of FTPS (issue 17): `fatpipe cp` downloads to /dev/null with `--tls off` against
# `--tls require` (AES-GCM in rustls/ring with the CPU's AES instructions), one stream (-p 1)
# and the default (-p auto), runs interleaved in one script:
#   loopback  a random file on tmpfs, both ends on this machine: rate and CPU seconds per GiB
#             of client and server together (the cost where the CPU is the bottleneck)
#   wan       an emulated 1 Gbit/s path with RTT 20 ms and a 1-BDP queue (tuned profile), a
#             sparse file (read at memory speed): rate and the client's CPU seconds per GiB
# Usage: bench/tls-cost.sh [loopback|wan ...]   (default both; root; SIZE_MIB=1024 RUNS=3)
# Tables go to results/tls/cost-*.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bench/fatpipe-bin.sh)
size_mib=${SIZE_MIB:-1024}
runs=${RUNS:-3}
name=fptls
out=results/tls
mkdir -p "$out"

. bench/testbed-lib.sh
mkdir -p "$work/root" "$work/certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=fatpipe-bench -addext "subjectAltName=IP:127.0.0.1,IP:198.18.0.1" \
    -keyout "$work/certs/key.pem" -out "$work/certs/cert.pem" 2>/dev/null

# CPU seconds (user + system) a process has used, from /proc.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }

# Runs the four cases $runs times, interleaved, against server address $1 (prefix $2 runs the
# client somewhere else); server pid $3 (empty: not measured). Rows: case secs client_cpu server_cpu.
measure() {
    local addr=$1 prefix=$2 spid=$3
    : > "$work/rows"
    for i in $(seq "$runs"); do
        for p in 1 auto; do
            for tls in off require; do
                local s0=0 s1=0
                [ -n "$spid" ] && s0=$(cpu_of "$spid")
                local t0=$EPOCHREALTIME
                $prefix /usr/bin/time -f "%U %S" -o "$work/time" "$bin" cp --quiet --tls "$tls" \
                    --ca "$work/certs/cert.pem" -p "$p" "ftp://$addr/file" /dev/null
                local t1=$EPOCHREALTIME
                [ -n "$spid" ] && s1=$(cpu_of "$spid")
                read -r cu cs < "$work/time"
                echo "p$p-$tls $t0 $t1 $cu $cs $s0 $s1" >> "$work/rows"
            done
        done
    done
}

table() {
    python3 - "$work/rows" "$size_mib" "$1" <<'PY'
import statistics, sys
rows, mib, title = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = {}
for l in open(rows):
    c, t0, t1, cu, cs, s0, s1 = l.split()
    secs = float(t1) - float(t0)
    data.setdefault(c, []).append((mib * 8 * 1.048576 / secs, float(cu) + float(cs), float(s1) - float(s0)))
gib = mib / 1024
print(f"{title}: {mib} MiB to /dev/null, {len(next(iter(data.values())))} runs each, interleaved\n")
print("| case | median Mbit/s | min | max | client CPU s/GiB | server CPU s/GiB |")
print("|---|---|---|---|---|---|")
for c in ("p1-off", "p1-require", "pauto-off", "pauto-require"):
    r = data[c]
    rates = sorted(x[0] for x in r)
    cc = statistics.median(x[1] for x in r) / gib
    sc = statistics.median(x[2] for x in r) / gib
    label = {"p1-off": "-p 1, --tls off", "p1-require": "-p 1, TLS",
             "pauto-off": "-p auto, --tls off", "pauto-require": "-p auto, TLS"}[c]
    server = f"{sc:.2f}" if sc > 0 else "-"
    print(f"| {label} | {statistics.median(rates):.0f} | {rates[0]:.0f} | {rates[-1]:.0f} | {cc:.2f} | {server} |")
PY
}

loopback() {
    head -c "$((size_mib << 20))" /dev/urandom > "$work/root/file"
    "$bin" serve --root "$work/root" --listen 127.0.0.1:0 --anonymous \
        --tls-cert "$work/certs/cert.pem" --tls-key "$work/certs/key.pem" \
        > "$work/serve.out" 2>/dev/null & pids+=($!)
    local spid=$!
    for _ in $(seq 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
    local addr
    addr=$(sed -n 's/.*listening on \([^,]*\),.*/\1/p' "$work/serve.out")
    measure "$addr" "" "$spid"
    table "Loopback ($(nproc) cores)" | tee "$out/cost-loopback.md"
    cleanup
}

wan() {
    "$bin" testbed up --name "$name" --rtt 20ms --rate 1gbit --profile tuned >/dev/null
    rm -f "$work/root/file"
    truncate -s "$((size_mib << 20))" "$work/root/file"
    spawn a "$bin" serve --root "$work/root" --anonymous \
        --listen 198.18.0.1:2121 --tls-cert "$work/certs/cert.pem" \
        --tls-key "$work/certs/key.pem" > "$work/serve.out" 2>/dev/null
    for _ in $(seq 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
    measure 198.18.0.1:2121 "$bin testbed exec b --name $name --" ""
    table "Emulated 1 Gbit/s, RTT 20 ms, 1-BDP queue, tuned profile" | tee "$out/cost-wan.md"
    cleanup
}

for what in "${@:-loopback wan}"; do
    for w in $what; do "$w"; done
done
