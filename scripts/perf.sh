#!/usr/bin/env bash
# Reproduces the numbers of docs/PERFORMANCE.md with one command.
#
# usage: scripts/perf.sh [RESULTS_DIR]
#        (default: $CARGO_TARGET_DIR/perf-results/<timestamp>, target/ when unset)
#
# What it does (every workload REPS times, the median is reported):
#   build     cargo build --release (disque-server, disque-benchmark)
#   redis     apt-get installs redis-server/redis-tools when missing
#   servers   one disque-server (--port 0) and one redis-server (free port,
#             no persistence), both fresh; a 3-node disque cluster later
#   (a) 50 clients, 100-byte bodies, unpipelined:
#       ADDJOB vs LPUSH, GETJOB NOHANG vs RPOP (pre-filled)
#   (b) the same with 16 commands pipelined per connection
#   (c) RSS per queued 100-byte job: fresh server, VmRSS before and after
#       1M ADDJOB (disque) / 1M LPUSH (redis), divided by 1M
#   (d) 3-node cluster: ADDJOB REPLICATE 3 (sync and ASYNC, clients spread
#       over the 3 nodes) vs the single node's ADDJOB REPLICATE 1
#   (e) cycle (ADDJOB -> GETJOB -> ACKJOB): saturated throughput, and
#       end-to-end latency percentiles at a fixed rate (--rate CYCLE_RATE)
#       (and LPUSH -> BRPOP on Redis for reference)
#   (f) clients {1,10,50,100} x pipeline {1,16} sweep, both targets, charted
#       with scripts/perf_chart.py into docs/perf-chart.svg
#   (g) persistence: four fresh servers (AOF off, appendonly yes with
#       appendfsync everysec / no / always), ADDJOB 50 clients unpipelined
#       and P=16, interleaved per round; ratios against AOF off
# Results: RESULTS_DIR/raw.csv (every run), summary.csv (medians),
# table.md (markdown with ratios, also printed), machine.txt, sweep.csv.
#
# environment (defaults in brackets):
#   REPS [3]        repetitions per workload
#   N [200000]      requests of an unpipelined run
#   NP [1000000]    requests of a pipelined run
#   NC [100000]     requests of a cluster run
#   RSS_JOBS [1000000]
#   SWEEP_N [60000] requests per sweep point (x4 when pipelined)
#   CYCLE_N [100000], CYCLE_RATE [20000]: the paced cycle run (latency)
#   MAXSECS [15]    hard time bound of every single run (-d)
#   SKIP_BUILD=1    use the existing binaries
#   SKIP_SWEEP=1    skip (f)
#   SECTIONS ["main sweep rss cluster aof"]: which parts run; main = (a),
#                   (b), (e) and the single-node part of (d)
#   NA [N]          requests of an unpipelined AOF run (x5 when pipelined)
#   CHART [docs/perf-chart.svg]
#   CARGO_TARGET_DIR  as for cargo (default: target)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
REPS=${REPS:-3}
N=${N:-200000}
NP=${NP:-1000000}
NC=${NC:-100000}
RSS_JOBS=${RSS_JOBS:-1000000}
SWEEP_N=${SWEEP_N:-60000}
CYCLE_N=${CYCLE_N:-100000}
CYCLE_RATE=${CYCLE_RATE:-20000}
MAXSECS=${MAXSECS:-15}
CHART=${CHART:-docs/perf-chart.svg}
SECTIONS=${SECTIONS:-main sweep rss cluster aof}
NA=${NA:-$N}
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
tdir=${CARGO_TARGET_DIR:-$here/target}
out=${1:-$tdir/perf-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/disque-perf.XXXXXX)
t0=$(date +%s)

log() { printf '[perf %4ss] %s\n' "$(( $(date +%s) - t0 ))" "$*" >&2; }

# ---------------------------------------------------------------- cleanup
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        # Give servers a moment, then make sure.
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- build
if [[ -z "${SKIP_BUILD:-}" ]]; then
    log "cargo build --release"
    cargo build --release --bin disque-server --bin disque-benchmark >&2
fi
SERVER=$tdir/release/disque-server
BENCH=$tdir/release/disque-benchmark
[[ -x $SERVER && -x $BENCH ]] || { echo "missing $SERVER or $BENCH" >&2; exit 1; }

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    log "installing redis-server redis-tools (apt-get)"
    if [[ $(id -u) -eq 0 ]]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >&2
fi

# ---------------------------------------------------------------- helpers
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# start_disque NAME [EXTRA ARGS...] -> sets DPORT DPID
start_disque() {
    local name=$1 dir=$work/$1
    mkdir -p "$dir"
    "$SERVER" --port 0 --dir "$dir" --loglevel warning "${@:2}" >"$dir/stdout" 2>"$dir/stderr" &
    local pid=$!
    pids+=("$pid")
    local line=""
    for _ in $(seq 1 100); do
        line=$(grep -m1 '^disque-server ready' "$dir/stdout" 2>/dev/null || true)
        [[ -n $line ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $line ]]; then
        echo "disque-server $name did not start:" >&2
        cat "$dir/stdout" "$dir/stderr" >&2
        exit 1
    fi
    DPORT=$(sed -E 's/.* port=([0-9]+).*/\1/' <<<"$line")
    DPID=$(sed -E 's/.* pid=([0-9]+).*/\1/' <<<"$line")
}

stop_pid() {
    kill "$1" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
}

# start_redis -> sets RPORT RPID
start_redis() {
    RPORT=$(free_port)
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$work" --daemonize no --logfile "$work/redis-$RPORT.log" >/dev/null 2>&1 &
    RPID=$!
    pids+=("$RPID")
    for _ in $(seq 1 100); do
        redis-cli -p "$RPORT" PING >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "redis-server did not start" >&2
    cat "$work/redis-$RPORT.log" >&2
    exit 1
}

cli() { redis-cli -p "$1" "${@:2}"; }

raw=$out/raw.csv
echo "section,label,rep,target,workload,clients,pipeline,size,ops_per_sec,p50_us,p99_us,p999_us,max_us,ops,errors" >"$raw"

# once SECTION LABEL REP RESET_CMD ARGS: one benchmark run, appended to raw.csv.
#   RESET_CMD (a shell snippet) empties the server first; ARGS is a string of
#   disque-benchmark arguments without spaces inside any one argument.
once() {
    local section=$1 label=$2 r=$3 reset=$4 line
    eval "$reset" >/dev/null
    # shellcheck disable=SC2086
    if line=$("$BENCH" --csv -d "$MAXSECS" $5); then
        echo "$section,$label,$r,$line" >>"$raw"
        log "$section $label #$r: $(cut -d, -f6 <<<"$line") ops/s p50=$(cut -d, -f7 <<<"$line")us errors=$(cut -d, -f12 <<<"$line")"
    else
        log "$section $label #$r FAILED"
    fi
}

# run SECTION LABEL RESET ARGS [LABEL2 RESET2 ARGS2 ...]: REPS rounds; each
# round runs every listed workload once, so a disque run and the Redis run
# it is compared with are interleaved and see the same machine noise.
run() {
    local section=$1 r i
    shift
    for r in $(seq 1 "$REPS"); do
        for ((i = 1; i <= $#; i += 3)); do
            local j=$((i + 1)) k=$((i + 2))
            once "$section" "${!i}" "$r" "${!j}" "${!k}"
        done
    done
}

# ---------------------------------------------------------------- machine
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "kernel: $(uname -r)"
    echo "mem: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "loadavg_at_start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "redis: $(redis-server --version | head -1)"
    echo "rustc: $(rustc --version 2>/dev/null || echo n/a)"
    echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo n/a)$(
        [[ -n $(git -C "$here" status --porcelain --untracked-files=no 2>/dev/null) ]] && echo ' (+ uncommitted changes)')"
} >"$out/machine.txt"
cat "$out/machine.txt" >&2

if has main || has sweep; then
start_disque single
D1=$DPORT
D1PID=$DPID
start_redis
R1=$RPORT
log "disque port=$D1, redis port=$R1"
dflush="cli $D1 DEBUG FLUSHALL"
rflush="cli $R1 FLUSHALL"
fi

if has main; then
# ---------------------------------------------------------------- (a) + (b)
for P in 1 16; do
    n=$N; [[ $P -gt 1 ]] && n=$NP
    sec=$([[ $P -eq 1 ]] && echo unpipelined || echo pipelined)
    run "$sec" \
        addjob "$dflush" "-p $D1 -w addjob -c 50 -P $P -n $n" \
        lpush "$rflush" "--target redis -p $R1 -w addjob -c 50 -P $P -n $n"
    run "$sec" \
        getjob "$dflush" "-p $D1 -w getjob -c 50 -P $P -n $n" \
        rpop "$rflush" "--target redis -p $R1 -w getjob -c 50 -P $P -n $n"
done

# ---------------------------------------------------------------- (e) cycle
# Saturated: producers outrun consumers (GETJOB + ACKJOB is two round trips
# against one), so the end-to-end latency there is queueing time; only its
# throughput is reported. Latency is measured open-loop at CYCLE_RATE jobs/s.
run cycle \
    cycle "$dflush" "-p $D1 -w cycle -c 50 -n $N" \
    redis-cycle "$rflush" "--target redis -p $R1 -w cycle -c 50 -n $N"
run cycle-paced \
    cycle "$dflush" "-p $D1 -w cycle -c 50 -n $CYCLE_N --rate $CYCLE_RATE" \
    redis-cycle "$rflush" "--target redis -p $R1 -w cycle -c 50 -n $CYCLE_N --rate $CYCLE_RATE"

# ---------------------------------------------------------------- (d) replication
run replication single-r1 "$dflush" "-p $D1 -w addjob -c 50 -n $NC --replicate 1"
fi

# ---------------------------------------------------------------- (f) sweep
sweep=$out/sweep.csv
if [[ -z "${SKIP_SWEEP:-}" ]] && has sweep; then
    echo "target,workload,clients,pipeline,size,ops_per_sec,p50_us,p99_us,p999_us,max_us,ops,errors" >"$sweep"
    for w in addjob getjob; do
        for c in 1 10 50 100; do
            for P in 1 16; do
                n=$SWEEP_N; [[ $P -gt 1 ]] && n=$((SWEEP_N * 4))
                cli "$D1" DEBUG FLUSHALL >/dev/null
                "$BENCH" --csv -d "$MAXSECS" -p "$D1" -w "$w" -c "$c" -P "$P" -n "$n" >>"$sweep" || true
                cli "$R1" FLUSHALL >/dev/null
                "$BENCH" --csv -d "$MAXSECS" --target redis -p "$R1" -w "$w" -c "$c" -P "$P" -n "$n" >>"$sweep" || true
            done
        done
        log "sweep $w done"
    done
    python3 scripts/perf_chart.py "$sweep" -o "$CHART" \
        --title "disque-rs vs Redis $(redis-server --version | sed -E 's/.*v=([0-9.]+).*/\1/'), 100-byte bodies, $(nproc) cores (median of runs)" >&2
    cp "$CHART" "$out/" 2>/dev/null || true
fi

# ---------------------------------------------------------------- (c) memory
if has main || has sweep; then
    stop_pid "$D1PID"
    stop_pid "$RPID"
fi
if has rss; then
rss=$out/rss.csv
echo "target,rep,jobs,rss_before_kb,rss_after_kb,bytes_per_job" >"$rss"
for r in $(seq 1 "$REPS"); do
    start_disque "rss$r"
    sleep 0.3
    before=$(rss_kb "$DPID")
    "$BENCH" --csv -p "$DPORT" -w addjob -c 50 -P 16 -n "$RSS_JOBS" >/dev/null
    sleep 0.5
    after=$(rss_kb "$DPID")
    qlen=$(cli "$DPORT" QLEN dqbench:0)
    echo "disque,$r,$qlen,$before,$after,$(( (after - before) * 1024 / qlen ))" >>"$rss"
    log "rss disque #$r: $before -> $after kB for $qlen jobs"
    stop_pid "$DPID"

    RP=$(free_port)
    redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$work" --daemonize no --logfile "$work/redis-rss.log" >/dev/null 2>&1 &
    rp=$!
    pids+=("$rp")
    for _ in $(seq 1 100); do cli "$RP" PING >/dev/null 2>&1 && break; sleep 0.1; done
    sleep 0.3
    before=$(rss_kb "$rp")
    "$BENCH" --csv --target redis -p "$RP" -w addjob -c 50 -P 16 -n "$RSS_JOBS" >/dev/null
    sleep 0.5
    after=$(rss_kb "$rp")
    qlen=$(cli "$RP" LLEN dqbench:0)
    echo "redis,$r,$qlen,$before,$after,$(( (after - before) * 1024 / qlen ))" >>"$rss"
    log "rss redis #$r: $before -> $after kB for $qlen values"
    stop_pid "$rp"
done
fi

# ---------------------------------------------------------------- (d) cluster
if has cluster; then
start_disque c1; C1=$DPORT
start_disque c2; C2=$DPORT
start_disque c3; C3=$DPORT
cli "$C2" CLUSTER MEET 127.0.0.1 "$C1" >/dev/null
cli "$C3" CLUSTER MEET 127.0.0.1 "$C1" >/dev/null
ok=0
for _ in $(seq 1 150); do
    ok=1
    for p in $C1 $C2 $C3; do
        cli "$p" CLUSTER INFO 2>/dev/null | tr -d '\r' | grep -q '^cluster_reachable_nodes:2$' || ok=0
    done
    [[ $ok -eq 1 ]] && break
    sleep 0.2
done
[[ $ok -eq 1 ]] || { echo "cluster did not form" >&2; exit 1; }
log "cluster formed: $C1 $C2 $C3"
hosts="127.0.0.1:$C1,127.0.0.1:$C2,127.0.0.1:$C3"
cflush="cli $C1 DEBUG FLUSHALL; cli $C2 DEBUG FLUSHALL; cli $C3 DEBUG FLUSHALL"
run replication \
    cluster-r3-sync "$cflush" "-h $hosts -w addjob -c 50 -n $NC --replicate 3" \
    cluster-r3-async "$cflush" "-h $hosts -w addjob -c 50 -n $NC --replicate 3 --async" \
    cluster-r1 "$cflush" "-h $hosts -w addjob -c 50 -n $NC --replicate 1"
fi

# ---------------------------------------------------------------- (g) AOF
# One fresh server per policy, all running at once; every round runs the
# four one after the other, so the ratios see the same machine noise. The
# AOF files live in the work directory (same filesystem as /tmp).
if has aof; then
    declare -A aport
    for pol in off everysec no always; do
        if [[ $pol == off ]]; then
            start_disque "aof-$pol" --appendonly no
        else
            start_disque "aof-$pol" --appendonly yes --appendfsync "$pol"
        fi
        aport[$pol]=$DPORT
    done
    for P in 1 16; do
        n=$NA; [[ $P -gt 1 ]] && n=$((NA * 5))
        args=()
        for pol in off everysec no always; do
            args+=("$pol-p$P" "cli ${aport[$pol]} DEBUG FLUSHALL" "-p ${aport[$pol]} -w addjob -c 50 -P $P -n $n")
        done
        run aof "${args[@]}"
    done
fi

# ---------------------------------------------------------------- report
echo "loadavg_at_end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
python3 scripts/perf_report.py "$out" | tee "$out/table.md"
log "done in $(( $(date +%s) - t0 )) s; results in $out"
