#!/usr/bin/env bash
# Replication and federation figures of docs/PERFORMANCE.md ("Results"),
# interleaved so every ratio compares runs that saw the same machine noise.
#
# usage: scripts/repl_perf.sh [NAME=SERVER_BINARY ...]
#        (default: current=target/release/disque-server; several binaries
#        are run round-robin within every round, to compare builds)
#
# Per binary it starts one single node and one 3-node cluster (joined with
# CLUSTER MEET, waits for cluster_reachable_nodes:2 everywhere), and in
# every round runs, one after the other:
#   single-r1        1 node,  -w addjob -c 50 --replicate 1
#   r1-cluster       3 nodes, -w addjob -c 50 --replicate 1 (clients spread;
#                    issue 19's baseline for the two replicated runs)
#   r3-sync          3 nodes, -w addjob -c 50 --replicate 3 (clients spread)
#   r3-async         3 nodes, the same with --async
#   local-cycle      3 nodes, -w cycle, producers and consumers on node 1,
#                    --replicate 1 (the jobs never leave node 1)
#   federated        3 nodes, -w federated: producers on node 1, consumers on
#                    node 2 (every job reaches node 2 through NEEDJOBS/YOURJOBS),
#                    --replicate 1
#   local-paced      local-cycle at a fixed RATE jobs/s (end-to-end latency)
#   federated-paced  federated at the same fixed rate
# For each run: the benchmark's ops/s and the servers' CPU time per
# operation (utime+stime of every server process over the run, from
# /proc/<pid>/stat), which is much less sensitive to other load on the
# machine than throughput.
#
# environment: REPS [3], NC [100000] (addjob runs), NF [50000] (cycle and
#   federated runs), RATE [5000] (paced runs, jobs/s), CLIENTS [50], MAXSECS [20], BENCH [target/release/disque-benchmark],
#   OUT [target/repl-perf.csv], ONLY (space-separated subset of the run names)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
REPS=${REPS:-3}
NC=${NC:-100000}
NF=${NF:-50000}
CLIENTS=${CLIENTS:-50}
MAXSECS=${MAXSECS:-20}
BENCH=${BENCH:-$here/target/release/disque-benchmark}
OUT=${OUT:-$here/target/repl-perf.csv}
RATE=${RATE:-5000}
ONLY=${ONLY:-single-r1 r1-cluster r3-sync r3-async local-cycle federated local-paced federated-paced}
[[ $# -gt 0 ]] || set -- "current=$here/target/release/disque-server"
[[ -x $BENCH ]] || { echo "missing $BENCH (cargo build --release)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "redis-cli missing (scripts/ci-deps.sh installs redis-tools)" >&2; exit 1; }
TCK=$(getconf CLK_TCK)
work=$(mktemp -d /tmp/repl-perf.XXXXXX)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { printf '[repl-perf] %s\n' "$*" >&2; }
cli() { redis-cli -p "$1" "${@:2}"; }

# start BINARY NAME -> PORT PID
start() {
    local dir=$work/$2 line=""
    mkdir -p "$dir"
    "$1" --port 0 --dir "$dir" --loglevel warning >"$dir/stdout" 2>"$dir/stderr" &
    PID=$!
    pids+=("$PID")
    for _ in $(seq 1 200); do
        line=$(grep -m1 '^disque-server ready' "$dir/stdout" 2>/dev/null || true)
        [[ -n $line ]] && break
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n $line ]] || { echo "disque-server $2 did not start" >&2; cat "$dir/stderr" >&2; exit 1; }
    PORT=$(sed -E 's/.* port=([0-9]+).*/\1/' <<<"$line")
}

cpu_ticks() {
    local p t=0
    for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo "$t"
}

declare -A SPORT SPID CPORTS CPIDS
names=()
for spec in "$@"; do
    name=${spec%%=*}
    bin=${spec#*=}
    names+=("$name")
    start "$bin" "$name-single"; SPORT[$name]=$PORT; SPID[$name]=$PID
    ports=() cp=()
    for i in 1 2 3; do start "$bin" "$name-c$i"; ports+=("$PORT"); cp+=("$PID"); done
    cli "${ports[1]}" CLUSTER MEET 127.0.0.1 "${ports[0]}" >/dev/null
    cli "${ports[2]}" CLUSTER MEET 127.0.0.1 "${ports[0]}" >/dev/null
    ok=0
    for _ in $(seq 1 300); do
        ok=1
        for p in "${ports[@]}"; do
            cli "$p" CLUSTER INFO 2>/dev/null | tr -d '\r' | grep -q '^cluster_reachable_nodes:2$' || ok=0
        done
        [[ $ok -eq 1 ]] && break
        sleep 0.2
    done
    [[ $ok -eq 1 ]] || { echo "cluster $name did not form" >&2; exit 1; }
    CPORTS[$name]="${ports[*]}"
    CPIDS[$name]="${cp[*]}"
    log "$name: single ${SPORT[$name]}, cluster ${CPORTS[$name]}"
done

{
    echo "# date $(date -u +%Y-%m-%dT%H:%M:%SZ) nproc $(nproc) loadavg $(cut -d' ' -f1-3 /proc/loadavg) commit $(git rev-parse --short HEAD)"
    echo "round,binary,run,ops,ops_per_sec,p50_us,p99_us,errors,server_cpu_us_per_op"
} >"$OUT"

# one NAME RUN
one() {
    local name=$1 run=$2 ports pids_ args t0 t1 line ops
    read -r -a ports <<<"${CPORTS[$name]}"
    read -r -a pids_ <<<"${CPIDS[$name]}"
    local hosts="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
    case $run in
        single-r1) ports=("${SPORT[$name]}"); pids_=("${SPID[$name]}")
                   args="-p ${SPORT[$name]} -w addjob -c $CLIENTS -n $NC --replicate 1" ;;
        r1-cluster) args="-h $hosts -w addjob -c $CLIENTS -n $NC --replicate 1" ;;
        r3-sync) args="-h $hosts -w addjob -c $CLIENTS -n $NC --replicate 3" ;;
        r3-async) args="-h $hosts -w addjob -c $CLIENTS -n $NC --replicate 3 --async" ;;
        local-cycle) args="-h 127.0.0.1:${ports[0]} -w cycle -c $CLIENTS -n $NF --replicate 1" ;;
        federated) args="-h 127.0.0.1:${ports[0]},127.0.0.1:${ports[1]} -w federated -c $CLIENTS -n $NF --replicate 1" ;;
        local-paced) args="-h 127.0.0.1:${ports[0]} -w cycle -c $CLIENTS -n $NF --replicate 1 --rate $RATE" ;;
        federated-paced) args="-h 127.0.0.1:${ports[0]},127.0.0.1:${ports[1]} -w federated -c $CLIENTS -n $NF --replicate 1 --rate $RATE" ;;
        *) echo "unknown run $run" >&2; exit 1 ;;
    esac
    for p in "${ports[@]}"; do cli "$p" DEBUG FLUSHALL >/dev/null; done
    t0=$(cpu_ticks "${pids_[@]}")
    # shellcheck disable=SC2086
    if ! line=$("$BENCH" --csv -d "$MAXSECS" $args); then
        log "$name $run FAILED"
        return
    fi
    t1=$(cpu_ticks "${pids_[@]}")
    # csv: target,workload,clients,pipeline,size,ops_per_sec,p50,p99,p999,max,ops,errors
    IFS=, read -r _ _ _ _ _ ops_s p50 p99 _ _ ops errs <<<"$line"
    local cpu
    cpu=$(awk -v t="$((t1 - t0))" -v k="$TCK" -v n="$ops" 'BEGIN { printf "%.2f", (n > 0) ? t / k * 1e6 / n : 0 }')
    echo "$r,$name,$run,$ops,$ops_s,$p50,$p99,$errs,$cpu" >>"$OUT"
    log "#$r $name $run: $ops_s ops/s p50=${p50}us cpu=${cpu}us/op errors=$errs"
}

for r in $(seq 1 "$REPS"); do
    for run in $ONLY; do
        for name in "${names[@]}"; do one "$name" "$run"; done
    done
done
echo "# loadavg at end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT"
log "results in $OUT"

# Medians per binary and run, and the two ratios of docs/PERFORMANCE.md.
python3 - "$OUT" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if not l.startswith("#"))][1:]
by = {}
for rnd, b, run, ops, ops_s, p50, p99, errs, cpu in rows:
    by.setdefault((b, run), []).append((float(ops_s), float(p50), float(p99), float(cpu), int(rnd)))
print("| binary | run | ops/s median | p50 µs | p99 µs | server CPU µs/op |")
print("|---|---|---:|---:|---:|---:|")
for (b, run), v in by.items():
    med = lambda i: statistics.median(x[i] for x in v)
    print(f"| {b} | {run} | {med(0):.0f} | {med(1):.0f} | {med(2):.0f} | {med(3):.1f} |")
def ratios(b, run, base):
    a = {x[4]: x for x in by.get((b, run), [])}
    c = {x[4]: x for x in by.get((b, base), [])}
    return [a[r][0] / c[r][0] for r in sorted(a) if r in c]
for b in sorted({k[0] for k in by}):
    for run, base in [("r3-sync", "single-r1"), ("r3-async", "single-r1"),
                      ("r3-sync", "r1-cluster"), ("r3-async", "r1-cluster"), ("federated", "local-cycle")]:
        rs = ratios(b, run, base)
        if rs:
            print(f"{b}: {run} / {base} per round: {' '.join(f'{x:.2f}' for x in rs)} (median {statistics.median(rs):.2f})")
    fp, lp = by.get((b, "federated-paced")), by.get((b, "local-paced"))
    if fp and lp:
        for i, name in [(1, "p50"), (2, "p99")]:
            f, l = statistics.median(x[i] for x in fp), statistics.median(x[i] for x in lp)
            print(f"{b}: paced end-to-end {name}: federated {f:.0f} µs / local {l:.0f} µs = {f / l:.2f}")
PY
