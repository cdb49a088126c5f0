#!/usr/bin/env bash
# Builds the Debian package of fatpipe (target/debian/fatpipe_*.deb): the release binary with
# the BPF congestion control, its man pages and shell completions, the systemd unit and
# /etc/fatpipe/serve.toml. Needs `cargo install cargo-deb` and the BPF build's packages
# (clang libelf-dev zlib1g-dev pkg-config). Usage: scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb >/dev/null || { echo "needs cargo-deb: cargo install cargo-deb" >&2; exit 1; }
bin=$(bench/fatpipe-bin.sh --features bpf)
gen=dist/generated
rm -rf "$gen"
mkdir -p "$gen/completions"
"$bin" man --dir "$gen/man"
"$bin" completions bash > "$gen/completions/fatpipe.bash"
"$bin" completions zsh > "$gen/completions/_fatpipe"
"$bin" completions fish > "$gen/completions/fatpipe.fish"
cargo deb -p fatpipe --no-build --no-strip
