#!/usr/bin/env bash
# Producers faster than the spill disk: how many ADDJOBs a spilling node
# refuses with -OOM when every spill write is delayed (`DEBUG DISK-FAULT
# slow-writes`), for several server builds side by side.
#
# usage: scripts/spill_slowdisk.sh [LABEL=PATH/TO/disque-server ...]
#        (default: now=$CARGO_TARGET_DIR/release/disque-server, built here)
#
# Every round starts each listed server fresh (`--spill yes --maxmemory
# $MAXMEM`, no AOF), sets the write delay, runs `disque-benchmark -w addjob
# -s 1024 -c $CLIENTS -P $PIPE -n $N` and reads refused_oom,
# spill_memory_waits, used_memory_peak and registered_jobs from INFO. The
# builds alternate within a round. One line per run.
#
# environment: DELAY [50] (ms a write), CLIENTS [1], PIPE [200], N [40000],
#              MAXMEM [32mb], REPS [2], SKIP_BUILD=1, CARGO_TARGET_DIR [target]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
DELAY=${DELAY:-50}
CLIENTS=${CLIENTS:-1}
PIPE=${PIPE:-200}
N=${N:-40000}
MAXMEM=${MAXMEM:-32mb}
REPS=${REPS:-2}
tdir=${CARGO_TARGET_DIR:-$here/target}
work=$(mktemp -d /tmp/disque-slowdisk.XXXXXX)

pid=
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v redis-cli >/dev/null || {
    echo "redis-cli is needed (apt-get install redis-tools)" >&2
    exit 1
}
if [ -z "${SKIP_BUILD:-}" ]; then
    cargo build --release -q -p disque-rs -p disque-benchmark
fi
bench=$tdir/release/disque-benchmark
builds=("$@")
[ ${#builds[@]} -eq 0 ] && builds=("now=$tdir/release/disque-server")

# A free client port whose bus port (+10000) is valid too.
free_port() {
    python3 -c 'import socket
for _ in range(100):
    s=socket.socket(); s.bind(("127.0.0.1",0)); p=s.getsockname()[1]; s.close()
    if p < 55000:
        print(p); break'
}

echo "label,round,delay_ms,clients,pipeline,jobs,ops_per_s,p99_us,max_us,refused_oom,spill_memory_waits,used_memory_peak,registered_jobs"
for r in $(seq "$REPS"); do
    for b in "${builds[@]}"; do
        label=${b%%=*} bin=${b#*=}
        port=$(free_port)
        dir=$work/$label-$r
        mkdir -p "$dir"
        "$bin" --port "$port" --maxmemory "$MAXMEM" --spill yes --dir "$dir" >"$dir/log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            redis-cli -p "$port" ping >/dev/null 2>&1 && break
            sleep 0.1
        done
        redis-cli -p "$port" debug disk-fault slow-writes "$DELAY" >/dev/null
        out=$("$bench" -p "$port" -w addjob -s 1024 -c "$CLIENTS" -P "$PIPE" -n "$N" --json)
        info=$(redis-cli -p "$port" info everything | tr -d '\r')
        field() { echo "$info" | sed -n "s/^$1:\(.*\)/\1/p"; }
        echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)["results"]
lat = r["latency"]
row = sys.argv[1:7] + [round(r["ops_per_sec"]), round(lat["p99_us"]), round(lat["max_us"])]
print(",".join(str(x) for x in row), end=",")
' "$label" "$r" "$DELAY" "$CLIENTS" "$PIPE" "$N"
        echo "$(field refused_oom),$(field spill_memory_waits),$(field used_memory_peak),$(field registered_jobs)"
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=
    done
done
