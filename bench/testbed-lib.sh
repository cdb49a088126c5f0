# Shared by bench scripts that run servers on an emulated path; sourced once `bin` (the fatpipe
# binary) and `name` (the testbed's name) are set. Gives: $work, a scratch directory on tmpfs
# removed at exit; $pids, background processes that `cleanup` stops (with the testbed);
# `ex SIDE CMD...`, a command in side a or b of the testbed; and `spawn SIDE CMD...`, the same in
# the background, its PID (the command's own: the subshell execs it) added to $pids.
work=$(mktemp -d -p /dev/shm "fatpipe-$name.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    pids=()
    "$bin" testbed down --name "$name" >/dev/null 2>&1 || true
}
trap 'cleanup; rm -rf "$work"' EXIT INT TERM
ex() { local side=$1; shift; "$bin" testbed exec "$side" --name "$name" -- "$@"; }
spawn() {
    local side=$1; shift
    (exec "$bin" testbed exec "$side" --name "$name" -- "$@") &
    pids+=($!)
}
