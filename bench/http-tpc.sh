#!/usr/bin/env bash
# HTTP third-party copy against FTP on the same emulated path: two fatpipe servers, the source in
# namespace b (198.18.0.2), the destination in a (198.18.0.1), 100 ms, 1 Gbit/s, 1-BDP queue,
# stock profile, as root, files in tmpfs. Cases, alternating each round:
#   http-pull    curl sends COPY with Source: to the destination (how FTS3 drives it), 1 stream
#   http-pull-4  the same with X-Number-Of-Streams: 4
#   ftp-3rd      fatpipe cp ftp://B/x ftp://A/y (server to server, MODE E, -p auto), cold
#   ftp-get      fatpipe cp ftp://B/x into A's tree from namespace a (client download), cold
#   xrootd-pull  the same COPY between two XRootD servers (XrdHttp + XrdTpc, anonymous, as
#                nobody) on the same addresses, port 9443
# HTTPS is TLS end to end; the FTP copies run in clear (--tls off: GridFTP's data channel is not
# encrypted by default either), so the FTP rows carry no TLS cost.
# Prints one markdown row per run: seconds of the whole command and Mbit/s.
# Usage (root): bench/http-tpc.sh   (env SIZE=4G, ROUNDS=2,
#               CASES="http-pull http-pull-4 ftp-3rd ftp-get xrootd-pull",
#               LOSS=0, RTT=100ms, RATE=1gbit)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${FATPIPE_BIN:-$(bench/fatpipe-bin.sh)}
tb=fptpc$$
dir=$(mktemp -d -p /dev/shm)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
    "$bin" testbed down --name $tb > /dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/src" "$dir/dst" "$dir/pki" "$dir/cache"
head -c "${SIZE:-4G}" /dev/zero > "$dir/src/x"
size=$(stat -c %s "$dir/src/x")

# A CA and a certificate for both servers' addresses.
(
    cd "$dir/pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
        -out ca.pem -days 2 -subj /CN=bench-ca 2> /dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem \
        -out req.csr -subj /CN=bench 2> /dev/null
    echo "subjectAltName=IP:198.18.0.1,IP:198.18.0.2,IP:127.0.0.1" > ext
    openssl x509 -req -in req.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem \
        -days 2 -extfile ext 2> /dev/null
    cat leaf.pem ca.pem > chain.pem
)
pki=$dir/pki
"$bin" testbed up --name $tb --rtt "${RTT:-100ms}" --rate "${RATE:-1gbit}" --loss "${LOSS:-0}" \
    --profile stock > /dev/null

serve() { # side root address
    "$bin" testbed exec "$1" --name $tb -- "$bin" serve --root "$2" --listen "$3:2811" \
        --https "$3:8443" --tls-cert "$pki/chain.pem" --tls-key "$pki/key.pem" --ca "$pki/ca.pem" \
        --user alice:pw --allow-third-party --third-party-networks 198.18.0.0/15 \
        > /dev/null 2> "$dir/serve-$1.log" &
    pids+=($!)
}
serve b "$dir/src" 198.18.0.2
serve a "$dir/dst" 198.18.0.1

# XRootD on the same addresses and trees; it runs as nobody, with its key and CA its own way.
xrootd_on() { # side root address
    local x=$dir/xrootd-$1
    mkdir -p "$x/admin" "$x/run" "$x/cadir"
    cp "$pki/chain.pem" "$pki/key.pem" "$x/"
    cp "$pki/ca.pem" "$x/cadir/"
    openssl rehash "$x/cadir"
    cat > "$x/xrd.cfg" <<CFG
xrd.port 9094
xrd.protocol XrdHttp:9443 libXrdHttp.so
xrd.tls $x/chain.pem $x/key.pem
xrd.tlsca certdir $x/cadir
all.export /
oss.localroot $2
all.adminpath $x/admin
all.pidpath $x/run
http.exthandler xrdtpc libXrdHttpTPC.so
CFG
    chown -R nobody "$x" "$2"
    chmod 600 "$x/key.pem"
    chmod 755 "$dir" "$x" "$x/cadir"
    "$bin" testbed exec "$1" --name $tb -- xrootd -R nobody -c "$x/xrd.cfg" > "$x/log" 2>&1 &
    pids+=($!)
}
if [[ " ${CASES:-xrootd-pull} " == *" xrootd-pull "* ]] && command -v xrootd > /dev/null; then
    xrootd_on b "$dir/src" 198.18.0.2
    xrootd_on a "$dir/dst" 198.18.0.1
fi
sleep 1
basic=$(printf alice:pw | base64)

run_case() {
    case $1 in
        http-pull | http-pull-4)
            local streams=1
            [ "$1" = http-pull-4 ] && streams=4
            "$bin" testbed exec a --name $tb -- curl -sS --cacert "$pki/ca.pem" -u alice:pw \
                -X COPY -H "Source: https://198.18.0.2:8443/x" \
                -H "TransferHeaderAuthorization: Basic $basic" \
                -H "X-Number-Of-Streams: $streams" https://198.18.0.1:8443/y > "$dir/out"
            tail -1 "$dir/out" | grep -q "success: Created" ;;
        xrootd-pull)
            "$bin" testbed exec a --name $tb -- curl -sS --cacert "$pki/ca.pem" \
                -X COPY -H "Source: https://198.18.0.2:9443/x" \
                https://198.18.0.1:9443/y > "$dir/out"
            tail -1 "$dir/out" | grep -q "success: Created" ;;
        ftp-3rd)
            rm -rf "$dir/cache"; mkdir "$dir/cache"
            XDG_CACHE_HOME=$dir/cache FATPIPE_PASSWORD=pw "$bin" testbed exec a --name $tb -- \
                "$bin" cp --tls off --no-verify ftp://alice@198.18.0.2:2811/x \
                ftp://alice@198.18.0.1:2811/y > /dev/null 2> "$dir/out" ;;
        ftp-get)
            rm -rf "$dir/cache"; mkdir "$dir/cache"
            XDG_CACHE_HOME=$dir/cache FATPIPE_PASSWORD=pw "$bin" testbed exec a --name $tb -- \
                "$bin" cp --tls off --no-verify ftp://alice@198.18.0.2:2811/x "$dir/dst/y" \
                > /dev/null 2> "$dir/out" ;;
    esac
}

echo "| case | s | Mbit/s |"
echo "|---|---|---|"
for _ in $(seq "${ROUNDS:-2}"); do
    for c in ${CASES:-http-pull http-pull-4 ftp-3rd ftp-get xrootd-pull}; do
        rm -f "$dir/dst/y"
        t0=$(date +%s.%N)
        if run_case "$c" && [ "$(stat -c %s "$dir/dst/y" 2> /dev/null)" = "$size" ]; then
            t1=$(date +%s.%N)
            python3 -c "s=$t1-$t0; print(f'| $c | {s:.2f} | {$size*8/s/1e6:.0f} |')"
        else
            echo "| $c | failed | |"
            tail -3 "$dir/out" "$dir/serve-a.log" 2> /dev/null | sed 's/^/    /' >&2 || true
        fi
    done
done
