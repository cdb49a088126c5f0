#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine, then runs all checks and tests.
# Usage: scripts/test.sh            (as root, or with sudo available for apt-get)
set -euo pipefail
cd "$(dirname "$0")/.."

# Real peers the interop tests start: curl, lftp, vsftpd, Python's ftplib, gfal2 (FTS3's library, for copies between
# servers, and its file plugin for copies to and from local files; tcpdump captures the FTPS test's traffic); unshare/setpriv
# (util-linux) for the full-disk and unreadable-file tests; iproute2 and iperf3 for the lab; fonts-dejavu-core for `fatpipe plot`;
# clang, libelf-dev, zlib1g-dev and pkg-config to build the BPF congestion control (the `bpf` feature);
# for the HTTPS front-end: litmus, davix, rclone, gfal2's HTTP plugin, openssl (CA directories),
# XRootD's server with XrdHttp and XrdTpc (third-party copies both ways).
packages=(curl lftp vsftpd python3 util-linux iproute2 iperf3 ca-certificates tcpdump globus-gass-copy-progs globus-gridftp-server-progs gfal2-util-scripts gfal2-plugin-gridftp gfal2-plugin-file fonts-dejavu-core
          clang libelf-dev zlib1g-dev pkg-config
          litmus davix rclone gfal2-plugin-http openssl xrootd-server xrootd-server-plugins)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "==> installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# One build from scratch: incremental state would only add gigabytes to target/.
export CARGO_INCREMENTAL=0

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> no module depends on itself through others (docs/architecture.md)"
python3 scripts/module-cycles.py crates/*/src
echo "==> cargo clippy (the default build, and with every feature: the BPF program)"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --workspace --all-targets --locked --all-features -- -D warnings
echo "==> cargo test (with the BPF program)"
cargo test --workspace --locked --all-features

echo "==> benchmark smoke runs (the full versions are in README.md)"
bench/emulator-capacity.sh --smoke
