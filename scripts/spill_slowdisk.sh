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

source "$(dirname "$0")/lib/bench-common.sh"
DELAY=${DELAY:-50}
CLIENTS=${CLIENTS:-1}
PIPE=${PIPE:-200}
N=${N:-40000}
MAXMEM=${MAXMEM:-32mb}
REPS=${REPS:-2}
work=$(mktemp -d /tmp/disque-slowdisk.XXXXXX)
bench_init "$@"

echo "label,round,delay_ms,clients,pipeline,jobs,ops_per_s,p99_us,max_us,refused_oom,spill_memory_waits,used_memory_peak,registered_jobs"
for r in $(seq "$REPS"); do
    for b in "${builds[@]}"; do
        label=${b%%=*} bin=${b#*=}
        port=$(free_ports 1)
        dir=$work/$label-$r
        mkdir -p "$dir"
        "$bin" --port "$port" --maxmemory "$MAXMEM" --spill yes --dir "$dir" >"$dir/log" 2>&1 &
        pids+=($!)
        wait_ping "$port"
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
        stop_servers
    done
done
