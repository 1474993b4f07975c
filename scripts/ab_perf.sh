#!/usr/bin/env bash
# Interleaved A/B of servers under one disque-benchmark workload, with the
# server's own CPU per operation read from /proc (user + system).
#
# usage: scripts/ab_perf.sh LABEL=SERVER[:EXTRA ARGS] ...
#   SERVER is a disque-server binary, or `redis` (Debian's redis-server,
#   no persistence unless EXTRA ARGS say so, e.g. `redis:--appendonly yes`;
#   the workload then drives lists: --target redis).
#   Each round starts every server fresh (--port 0, a temporary --dir),
#   runs the workload once against it, and stops it.
#
# environment (defaults in brackets):
#   W ["-w addjob -c 50 -P 16 -n 1000000"]  disque-benchmark arguments
#   REPS [3]     rounds
#   MAXSECS [30] hard time bound of every run (-d)
#   BENCH [target/release/disque-benchmark]
#
# Prints one line per run: label, ops/s, p50/p99 (ms) and server CPU µs/op.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$here/target/release/disque-benchmark}
W=${W:--w addjob -c 50 -P 16 -n 1000000}
REPS=${REPS:-3}
MAXSECS=${MAXSECS:-30}
[ -x "$BENCH" ] || { echo "ab_perf.sh: $BENCH missing (cargo build --release)" >&2; exit 1; }
ticks_per_s=$(getconf CLK_TCK)
pid=
dir=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ -n "$dir" ] && rm -rf "$dir"
    pid= dir=
}
trap cleanup EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
start_server() { # binary extra-args -> sets pid, port, target
    dir=$(mktemp -d /tmp/disque-ab.XXXXXX)
    if [ "$1" = redis ]; then
        command -v redis-server >/dev/null || { echo "ab_perf.sh: redis-server missing (apt-get install redis-server)" >&2; exit 1; }
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        # shellcheck disable=SC2086
        redis-server --port "$port" --save "" --appendonly no --dir "$dir" $2 >"$dir/log" 2>&1 &
        pid=$!
        target="--target redis"
        for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
        echo "ab_perf.sh: redis-server did not start" >&2; exit 1
    fi
    # shellcheck disable=SC2086
    "$1" --port 0 --dir "$dir" $2 >"$dir/out" 2>&1 &
    pid=$!
    target=""
    for _ in $(seq 200); do
        port=$(grep -o 'ready port=[0-9]*' "$dir/out" | cut -d= -f2 || true)
        [ -n "$port" ] && return
        sleep 0.05
    done
    echo "ab_perf.sh: $1 did not start: $(cat "$dir/out")" >&2; exit 1
}
for r in $(seq 1 "$REPS"); do
    for spec in "$@"; do
        label=${spec%%=*}
        rest=${spec#*=}
        bin=${rest%%:*}
        extra=""
        [[ "$rest" == *:* ]] && extra=${rest#*:}
        start_server "$bin" "$extra"
        c0=$(cpu_ticks "$pid")
        # shellcheck disable=SC2086
        out=$("$BENCH" -p "$port" $target $W -d "$MAXSECS" --json 2>/dev/null | tail -1)
        c1=$(cpu_ticks "$pid")
        python3 - "$label" "$r" "$((c1 - c0))" "$ticks_per_s" "$out" <<'EOF'
import json, sys
label, rnd, ticks, hz, raw = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    j = json.loads(raw)
except ValueError:
    print(f"round {rnd} {label}: no result: {raw[:200]}")
    sys.exit(0)
res = j.get("results", {})
ops = res.get("ops") or 0
ops_s = res.get("ops_per_sec") or 0
lat = res.get("latency") or {}
p50, p99 = lat.get("p50_us"), lat.get("p99_us")
cpu = ticks / hz * 1e6 / ops if ops else float("nan")
fmt = lambda v: "-" if v is None else f"{v / 1000:.2f}"
print(f"round {rnd} {label:<12} {ops_s:>12.0f} ops/s  p50 {fmt(p50)} ms  p99 {fmt(p99)} ms  cpu {cpu:.2f} us/op")
EOF
        cleanup
    done
done
