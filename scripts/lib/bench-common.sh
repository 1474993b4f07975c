# Shared set-up of the scripts that compare server builds side by side
# (spill_cluster.sh, spill_slowdisk.sh). Source it after `set -euo pipefail`.
#
# After `bench_init "$@"`:
#   here       the repository root (and the working directory)
#   tdir       CARGO_TARGET_DIR, or $here/target
#   bench      the release disque-benchmark
#   builds     the LABEL=PATH arguments, or now=$tdir/release/disque-server
# It checks for redis-cli and builds the release binaries unless SKIP_BUILD
# is set. Scripts register servers to kill on exit with `pids+=($!)`; the
# EXIT trap kills them and removes $work when set.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tdir=${CARGO_TARGET_DIR:-$here/target}
bench=$tdir/release/disque-benchmark
pids=()
work=

# Kills (-9) and reaps every server in `pids`.
stop_servers() {
    local p
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}

bench_cleanup() {
    stop_servers
    [ -n "$work" ] && rm -rf "$work"
    return 0
}

bench_init() {
    cd "$here"
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    command -v redis-cli >/dev/null || {
        echo "redis-cli is needed (apt-get install redis-tools)" >&2
        exit 1
    }
    if [ -z "${SKIP_BUILD:-}" ]; then
        cargo build --release -q -p disque-rs -p disque-benchmark
    fi
    builds=("$@")
    [ ${#builds[@]} -eq 0 ] && builds=("now=$tdir/release/disque-server")
    return 0
}

# N distinct client ports whose bus ports (+10000) are free too
# (scripts/disque_client.py's free_port), space-separated.
free_ports() {
    PYTHONPATH="$here/scripts" python3 -c '
import sys
from disque_client import free_port
ports = []
while len(ports) < int(sys.argv[1]):
    p = free_port()
    if p not in ports:
        ports.append(p)
print(" ".join(map(str, ports)))' "$1"
}

# Waits up to 10 s until the server on port $1 answers PING.
wait_ping() {
    local _
    for _ in $(seq 100); do
        redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "the server on port $1 did not answer PING within 10 s" >&2
    return 1
}
