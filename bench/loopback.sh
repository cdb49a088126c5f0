#!/usr/bin/env bash
# Benchmark: `fatpipe cp` from `fatpipe serve` vs curl from vsftpd, one file on tmpfs over
# loopback to /dev/null, runs interleaved in one script. Prints medians, spread and the ratio.
# Usage: bench/loopback.sh [SIZE_MIB=1024] [RUNS=5]     (needs root for vsftpd; run scripts/test.sh once for the packages)
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
runs=${2:-5}
bin=$(bench/fatpipe-bin.sh)

work=$(mktemp -d -p /dev/shm fatpipe-bench.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir -p "$work/root" && chmod 755 "$work" "$work/root"
head -c "$((size_mib << 20))" /dev/urandom > "$work/root/file"
chmod 644 "$work/root/file"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
vport=$(port)
cat > "$work/vsftpd.conf" <<CONF
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$vport
background=NO
anonymous_enable=YES
local_enable=NO
anon_root=$work/root
no_anon_password=YES
seccomp_sandbox=NO
secure_chroot_dir=/var/run/vsftpd/empty
xferlog_enable=NO
CONF
mkdir -p /var/run/vsftpd/empty
vsftpd "$work/vsftpd.conf" & pids+=($!)
"$bin" serve --root "$work/root" --listen 127.0.0.1:0 --anonymous > "$work/fatpipe.out" 2>/dev/null & pids+=($!)
for _ in $(seq 100); do grep -q listening "$work/fatpipe.out" 2>/dev/null && break; sleep 0.05; done
faddr=$(sed -n 's/.*listening on \([^,]*\),.*/\1/p' "$work/fatpipe.out")

# Start and end wall-clock times of a command (bash's EPOCHREALTIME; python does the arithmetic).
span() { local t0=$EPOCHREALTIME; "$@" >/dev/null; echo "$t0 $EPOCHREALTIME"; }
: > "$work/times"
for i in $(seq "$runs"); do
    echo "curl $(span curl -s --fail -o /dev/null "ftp://127.0.0.1:$vport/file")" >> "$work/times"
    echo "fatpipe $(span "$bin" cp --quiet "ftp://$faddr/file" /dev/null)" >> "$work/times"
done
python3 - "$work/times" "$size_mib" <<'PY'
import statistics, sys
rows = [(t, float(b) - float(a)) for t, a, b in (l.split() for l in open(sys.argv[1]))]
mib = int(sys.argv[2])
rate = {}
print(f"| tool ({mib} MiB, loopback, tmpfs -> /dev/null) | runs | median Mbit/s | min | max |")
print("|---|---|---|---|---|")
for tool, label in (("curl", "curl from vsftpd"), ("fatpipe", "fatpipe cp from fatpipe serve")):
    r = sorted(mib * 8 * 1.048576 / s for t, s in rows if t == tool)
    rate[tool] = statistics.median(r)
    print(f"| {label} | {len(r)} | {rate[tool]:.0f} | {r[0]:.0f} | {r[-1]:.0f} |")
print(f"\nratio fatpipe / curl (medians): {rate['fatpipe'] / rate['curl']:.2f}")
PY
