#!/usr/bin/env bash
# The spill tier's memory figures (docs/PERFORMANCE.md, "Results", run Z):
#
#  ram   - used_memory per queued job with `spill no`, with `spill yes`
#          (spill-watermark 0: every body behind the head window on disk)
#          and with `spill-whole-jobs yes` too (whole jobs on disk), JOBS
#          jobs of SIZE bytes in one queue.
#  fill  - with maxmemory MAXMEM and `spill SPILL` (default watermark),
#          add jobs 50,000 at a time until the first refusal (-NOREPL at
#          75% alone, -OOM at 95%) or TARGET jobs; report jobs accepted,
#          jobs spilled, peak RSS / maxmemory.
#
#  tput  - throughput with and without spill (see `tput` below).
#
#  drain - GETJOB while draining a backlog on disk (see `drain` below).
#
#  drainrate - GETJOB latency while draining a backlog on disk at a
#          steady rate (see `drain` below).
#
#  coldmiss - GETJOBs whose job is on disk when they arrive
#          (scripts/spill_coldmiss.py says how), QUEUES [200] queues of
#          PERQ [1000] jobs, WHOLE as below; as root the page cache is
#          dropped first (DROP_CACHES=no keeps it).
#
#  neighbours - a resident queue's job cycle (4 producers, 4 consumers,
#          1,000 jobs/s, 20 s, end-to-end latency) alone, beside a drain
#          of 200,000 jobs in RAM (`spill no`), and beside the same drain
#          of jobs on disk, at RATE [5000] GETJOBs/s, REPS rounds.
#
#  restart - with the AOF on, JOBS jobs on disk, kill -9, restart: jobs
#          lost, time to the first GETJOB and to the whole load, then every
#          job drained with its body (see `restart` below). KEEP_AOF=<dir>
#          keeps the crashed node's files; FROM_AOF=<dir> restarts from
#          them instead of filling (two builds replay the same file);
#          DRAIN=no stops after the load.
#
#  churn - disk bytes against live bytes over DURATION seconds [3600] of
#          acks, NACK loops and long-TTL stragglers at RATE [2000] jobs/s
#          over a BACKLOG [100000] of 1 KiB jobs, maxmemory MAXMEM
#          (scripts/spill_churn.py says what it does).
#
# usage: scripts/spill_perf.sh ram|fill|tput|drain|drainrate|coldmiss|neighbours|restart|churn
# environment: BIN_DIR [target/release], JOBS [300000], SIZE [1024],
#              MAXMEM [64mb], TARGET [1300000], SPILL [yes],
#              RATE [none: as fast as the clients go; else ADDJOBs/s],
#              CLIENTS [10: drain consumers],
#              WHOLE [no; yes: `spill-whole-jobs yes` in fill, tput, drain]
#              BENCH_CPUS [none; tput: run the load generator under `taskset -c`]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BIN_DIR=${BIN_DIR:-$here/target/release}
JOBS=${JOBS:-300000}
SIZE=${SIZE:-1024}
MAXMEM=${MAXMEM:-64mb}
TARGET=${TARGET:-1300000}
case ${1:-} in drain | drainrate | neighbours)
    command -v redis-server >/dev/null || {
        echo "spill_perf.sh: redis-server missing (apt-get install redis-server)" >&2
        exit 1
    } ;;
esac
command -v redis-cli >/dev/null || {
    echo "spill_perf.sh: redis-cli missing (apt-get install redis-tools, or scripts/ci-deps.sh)" >&2
    exit 1
}
work=$(mktemp -d /tmp/disque-spill.XXXXXX)
pid=
cleanup() {
    [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
    sleep 0.5
    [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
    # The last server's log outlives the run (spill_perf-last.log).
    cp "$work/log" /tmp/spill_perf-last.log 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { # below 55536: the bus port is the client port + 10000
    python3 -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    if p < 55000: print(p); break'
}

start() { # args...
    port=$(free_port)
    rm -rf "$work/d" && mkdir -p "$work/d"
    launch "$@"
}

launch() { # args... (on $port and $work/d as they are)
    "$BIN_DIR/disque-server" --port "$port" --dir "$work/d" "$@" >>"$work/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    cat "$work/log" >&2
    exit 1
}

stop() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
}

field() { # section name
    redis-cli -p "$port" INFO "$1" | tr -d '\r' | awk -F: -v k="$2" '$1==k {print $2}'
}

rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$pid/status"; }
peak_rss() { awk '/VmHWM/ {print $2 * 1024}' "/proc/$pid/status"; }

settle() { # wait until no spill write is in flight and the backfill is done
    local last=-1 now
    for _ in $(seq 1 600); do
        now=$(field spill spilled_jobs)
        if [[ $(field spill spill_pending_writes) == 0 && $now == "$last" ]]; then
            return 0
        fi
        last=$now
        sleep 0.5
    done
}

ram() {
    for mode in no yes whole; do
        if [[ $mode == whole ]]; then
            start --maxmemory 8gb --spill yes --spill-watermark 0 --spill-whole-jobs yes
        else
            start --maxmemory 8gb --spill "$mode" --spill-watermark 0
        fi
        local u0 r0 u1 r1 q s
        u0=$(field memory used_memory); r0=$(rss)
        "$BIN_DIR/disque-benchmark" -p "$port" -w addjob -s "$SIZE" -n "$JOBS" -c 20 -P 16 -q >/dev/null
        [[ $mode != no ]] && settle
        u1=$(field memory used_memory); r1=$(rss)
        q=$(redis-cli -p "$port" QLEN dqbench:0)
        s=$(field spill spilled_jobs)
        echo "spill=$mode jobs=$q spilled=${s:-0} used_per_job=$(( (u1 - u0) / q )) rss_per_job=$(( (r1 - r0) / q )) disk_bytes=$(field spill spill_disk_bytes)"
        stop
    done
}

fill() {
    start --maxmemory "$MAXMEM" --spill "${SPILL:-yes}" --spill-whole-jobs "${WHOLE:-no}"
    local max peak=0 n=0 r
    max=$(redis-cli -p "$port" CONFIG GET maxmemory | tail -1)
    while (( n < TARGET )); do
        out=$("$BIN_DIR/disque-benchmark" -p "$port" -w addjob -s "$SIZE" -n 50000 -c 20 -P 16 ${RATE:+--rate "$RATE"} --csv 2>&1 || true)
        n=$(redis-cli -p "$port" QLEN dqbench:0)
        r=$(rss); (( r > peak )) && peak=$r
        refused=$(( $(field jobstats refused_oom) + $(field jobstats refused_norepl) ))
        if [[ $refused != 0 ]]; then
            echo "first refusal after ~$n jobs"
            break
        fi
    done
    settle
    r=$(rss); (( r > peak )) && peak=$r
    echo "maxmemory=$max size=$SIZE accepted=$n spilled=$(field spill spilled_jobs) whole=$(field spill spilled_whole_jobs) used_memory=$(field memory used_memory) peak_rss=$peak peak_rss/maxmemory=$(python3 -c "print(round($peak/$max,3))") disk_bytes=$(field spill spill_disk_bytes) refused_oom=$(field jobstats refused_oom) refused_norepl=$(field jobstats refused_norepl) status=$(field spill spill_status)"
    stop
}

# Throughput, `spill no` vs `spill yes` (watermark 0: every tail on disk),
# interleaved REPS times on fresh servers:
#  addjob: JOBS jobs of SIZE bytes, 20 clients, pipeline 16;
#  cycle:  a backlog of JOBS jobs first, then 10 s of the job cycle (20
#          clients, half consuming with GETJOB COUNT 16 and ACKJOB), so
#          consumers drain a backlog that is on disk.
threads() { # one line per server thread: tid name cpu-ticks involuntary-switches
    local t
    for t in /proc/"$pid"/task/*; do
        echo "${t##*/} $(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat") $(awk '/^nonvoluntary/ {print $2}' "$t/status")"
    done 2>/dev/null | sort
}

# The cycle's per-thread cost: CPU per consumed job of the owner (the
# busiest worker) and of the spill thread, the owner's share of the wall
# time, and how often it was preempted. With 2 cores shared with the load
# generator, the owner loses that share to the generator's threads (`perf
# sched`): BENCH_CPUS (e.g. 1) runs the generator under `taskset -c`, as a
# client on another machine would not take the server's core.
cycle_cost() { # before-file after-file jobs seconds
    join "$1" "$2" | awk -v jobs="$3" -v secs="$4" -v hz="$(getconf CLK_TCK)" '
        { ticks = $6 - $3; inv = $7 - $4; name = $2 }
        name == "spill-io" { spill = ticks }
        name ~ /tokio-rt-worker/ && ticks > owner { owner = ticks; oinv = inv }
        END { printf "owner_us_per_job=%.2f spill_us_per_job=%.2f owner_busy=%.2f owner_preempted_per_s=%d",
                     owner / hz * 1e6 / jobs, spill / hz * 1e6 / jobs, owner / hz / secs, oinv / secs }'
}

tput() {
    local bench=("$BIN_DIR/disque-benchmark")
    [[ -n ${BENCH_CPUS:-} ]] && bench=(taskset -c "$BENCH_CPUS" "$BIN_DIR/disque-benchmark")
    for rep in $(seq 1 "${REPS:-3}"); do
        for mode in no yes; do
            start --maxmemory 8gb --spill "$mode" --spill-watermark 0 --spill-whole-jobs "${WHOLE:-no}"
            a=$("${bench[@]}" -p "$port" -w addjob -s "$SIZE" -n "$JOBS" -c 20 -P 16 --csv)
            [[ $mode == yes ]] && settle
            threads >"$work/t0"
            t0=$(date +%s.%N)
            b=$("${bench[@]}" -p "$port" -w cycle -s "$SIZE" -d 10 -c 20 -P 16 --csv)
            secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
            threads >"$work/t1"
            echo "rep=$rep spill=$mode addjob,$a"
            echo "rep=$rep spill=$mode cycle,$b spilled_left=$(field spill spilled_jobs) reads=$(field spill spill_disk_reads)"
            echo "rep=$rep spill=$mode cycle_cost $(cycle_cost "$work/t0" "$work/t1" "$(echo "$b" | cut -d, -f11)" "$secs")"
            stop
        done
    done
}

# Draining a backlog on disk: 200,000 jobs, then 10 consumers doing
# GETJOB NOHANG + ACKJOB (`-w getjob`):
#  drain:     closed loop, 190,000 operations; prints the benchmark line
#             plus what is left queued (jobs/s consumed = (200000 -
#             qlen_left) / elapsed, an empty NOHANG reply counts as an
#             operation);
#  drainrate: paced at RATE (default 5000) operations/s for 100,000
#             operations; the latency percentiles are the GETJOB's, from
#             its scheduled send time.
# Each round ends with the baseline: Redis RPOP (redis-server from
# Debian) draining a list of the same backlog, same clients and pacing.
drain() { # label benchmark-args...
    local label=$1
    shift
    for rep in $(seq 1 "${REPS:-2}"); do
        for mode in no yes; do
            start --maxmemory 8gb --spill "$mode" --spill-watermark 0 --spill-whole-jobs "${WHOLE:-no}"
            "$BIN_DIR/disque-benchmark" -p "$port" -w addjob -s "$SIZE" -n 200000 -c 20 -P 16 -q >/dev/null
            [[ $mode == yes ]] && settle
            r=$("$BIN_DIR/disque-benchmark" -p "$port" -w getjob --prefill 0 -c "${CLIENTS:-10}" -P 1 --ack --csv "$@" 2>&1 | tail -1)
            echo "rep=$rep spill=$mode $label,$r qlen_left=$(redis-cli -p "$port" QLEN dqbench:0) spilled_left=$(field spill spilled_jobs) reads=$(field spill spill_disk_reads)"
            stop
        done
        # The baseline of the same round: Redis RPOP from a list of the
        # same backlog, with the same clients and pacing (no ACK).
        port=$(free_port)
        redis-server --port "$port" --save '' --appendonly no --dir "$work" >>"$work/log" 2>&1 &
        pid=$!
        for _ in $(seq 1 100); do
            redis-cli -p "$port" PING >/dev/null 2>&1 && break
            sleep 0.1
        done
        "$BIN_DIR/disque-benchmark" -p "$port" --target redis -w addjob -s "$SIZE" -n 200000 -c 20 -P 16 -q >/dev/null
        r=$("$BIN_DIR/disque-benchmark" -p "$port" --target redis -w getjob --prefill 0 -c "${CLIENTS:-10}" -P 1 --csv "$@" 2>&1 | tail -1)
        echo "rep=$rep redis-rpop $label,$r"
        stop
    done
}

# Restart after kill -9 with the AOF on (appendfsync everysec), maxmemory
# MAXMEM, `spill yes` (default watermark): JOBS jobs of SIZE bytes added
# (20 clients, pipeline 16, paced at RATE if set), the spill settled, kill -9, the same command
# line again with `aof-enqueue-jobs-once yes` (RECIPE=no: without it, and
# only the load is reported). Reports the jobs back (QLEN) against those accepted, the
# time from exec to the first GETJOB answered with a job (probed every
# 10 ms) and to INFO loading:0, RSS after the load, then drains every job
# (GETJOB NOHANG + FASTACK, 20 clients, pipeline 16) down to QLEN 0.
restart() {
    local args=(--maxmemory "$MAXMEM" --appendonly yes --appendfsync everysec
        --spill yes --spill-whole-jobs "${WHOLE:-no}")
    local n aof
    if [[ -n ${FROM_AOF:-} ]]; then
        # A kept crash (KEEP_AOF below): the same file replayed by another
        # build, without filling again.
        port=$(free_port)
        rm -rf "$work/d" && mkdir -p "$work/d"
        find "$FROM_AOF" -maxdepth 1 -type f ! -name accepted -exec cp {} "$work/d/" \;
        n=$(cat "$FROM_AOF/accepted")
        echo "before: accepted=$n (kept in $FROM_AOF)"
    else
        start "${args[@]}"
        "$BIN_DIR/disque-benchmark" -p "$port" -w addjob -s "$SIZE" -n "$JOBS" -c 20 -P 16 ${RATE:+--rate "$RATE"} -q >/dev/null || true
        settle
        n=$(redis-cli -p "$port" QLEN dqbench:0)
        aof=$(du -sb "$work/d" | cut -f1)
        echo "before: accepted=$n spilled=$(field spill spilled_jobs) whole=$(field spill spilled_whole_jobs) used_memory=$(field memory used_memory) rss=$(rss) dir_bytes=$aof"
        kill -9 "$pid"
        wait "$pid" 2>/dev/null || true
        if [[ -n ${KEEP_AOF:-} ]]; then
            # The crashed node's files but its spill segments (a cache
            # the restart deletes), for FROM_AOF runs.
            rm -rf "$KEEP_AOF" && mkdir -p "$KEEP_AOF"
            find "$work/d" -maxdepth 1 -type f -exec cp {} "$KEEP_AOF/" \;
            echo "$n" >"$KEEP_AOF/accepted"
        fi
    fi
    local t0 first= loaded=
    t0=$(date +%s.%N)
    # The controlled-restart recipe: queued jobs come back queued (without
    # it they come back active and are queued again after their RETRY).
    # RECIPE=no: a plain crash restart; jobs come back active (and spill
    # as they load) until their RETRY queues them, so no GETJOB is probed.
    if [[ ${RECIPE:-yes} == yes ]]; then
        launch "${args[@]}" --aof-enqueue-jobs-once yes
    else
        launch "${args[@]}"
        first=none
    fi
    while [[ -z $loaded ]]; do
        if [[ -z $first ]] && redis-cli -p "$port" GETJOB NOHANG FROM dqbench:0 2>/dev/null | grep -q '^D-'; then
            first=$(date +%s.%N)
        fi
        # Connections are accepted before the load starts: loaded is
        # INFO loading:0 once QLEN no longer answers -LOADING.
        if [[ ( -n $first && $first != none ) || $(redis-cli -p "$port" QLEN dqbench:0 2>/dev/null) =~ ^[0-9]+$ ]] &&
            [[ $(field persistence loading 2>/dev/null) == 0 ]]; then
            loaded=$(date +%s.%N)
        fi
        sleep 0.01
    done
    [[ -z $first ]] && first=$loaded
    if [[ $first == none ]]; then
        echo "after (no recipe): registered=$(field jobs registered_jobs) lost=$(( n - $(field jobs registered_jobs) )) loaded_s=$(python3 -c "print(round($loaded - $t0, 2))") rss=$(rss) peak_rss=$(peak_rss) used_memory=$(field memory used_memory) used_memory_peak=$(field memory used_memory_peak) spilled=$(field spill spilled_jobs) whole=$(field spill spilled_whole_jobs)"
        # The replay's last writes land after it: the same a second later.
        sleep 1
        echo "after (no recipe, 1 s later): rss=$(rss) used_memory=$(field memory used_memory) spilled=$(field spill spilled_jobs) whole=$(field spill spilled_whole_jobs)"
        stop
        return 0
    fi
    local back
    back=$(redis-cli -p "$port" QLEN dqbench:0)
    # The probe above took (and did not ack) at most one job: it is back
    # in the queue after its retry, so count it as present.
    # registered_jobs counts the whole jobs on disk too.
    local active
    active=$(field jobs registered_jobs)
    echo "after: back=$back registered=$active lost=$(( n - active )) first_getjob_s=$(python3 -c "print(round($first - $t0, 2))") loaded_s=$(python3 -c "print(round($loaded - $t0, 2))") rss=$(rss) peak_rss=$(peak_rss) spilled=$(field spill spilled_jobs) whole=$(field spill spilled_whole_jobs) used_memory=$(field memory used_memory) used_memory_peak=$(field memory used_memory_peak)"
    # DRAIN=no: the load's figures alone (a second round of the same file).
    if [[ ${DRAIN:-yes} == no ]]; then
        stop
        return 0
    fi
    # An empty NOHANG reply (the head being read back) counts as an
    # operation: rounds until the queue is empty.
    local left=$back d0 round=0
    d0=$(date +%s.%N)
    while (( left > 0 && round < 50 )); do
        "$BIN_DIR/disque-benchmark" -p "$port" -w getjob --prefill 0 -c 20 -P 16 --fastack -n $(( left + 1000 )) -q >/dev/null 2>&1 || true
        left=$(redis-cli -p "$port" QLEN dqbench:0)
        round=$(( round + 1 ))
    done
    echo "drain_s=$(python3 -c "print(round($(date +%s.%N) - $d0, 1))") rounds=$round"
    echo "drained: qlen_left=$(redis-cli -p "$port" QLEN dqbench:0) registered_left=$(field jobs registered_jobs) reads=$(field spill spill_disk_reads)"
    stop
}

coldmiss() {
    start --maxmemory 8gb --spill yes --spill-watermark 0 --spill-whole-jobs "${WHOLE:-no}"
    python3 "$here/scripts/spill_coldmiss.py" "$port" "${QUEUES:-200}" "${PERQ:-1000}"
    stop
}

# A resident queue's cycle (its jobs never leave RAM: the queue stays
# shorter than its head window) alone, beside a drain of a backlog held
# in RAM (`spill no`), and beside the same drain of a backlog on disk.
neighbours() {
    local rate=${RATE:-5000}
    for rep in $(seq 1 "${REPS:-2}"); do
        for beside in none drain-ram drain-disk; do
            local mode=yes
            [[ $beside == drain-ram ]] && mode=no
            start --maxmemory 8gb --spill "$mode" --spill-watermark 0 --spill-whole-jobs "${WHOLE:-no}"
            "$BIN_DIR/disque-benchmark" -p "$port" -w addjob -s "$SIZE" -n 200000 -c 20 -P 16 -q >/dev/null
            [[ $mode == yes ]] && settle
            d=
            if [[ $beside != none ]]; then
                "$BIN_DIR/disque-benchmark" -p "$port" -w getjob --prefill 0 -c 10 -P 1 --ack --csv -n $((rate * 25)) --rate "$rate" >"$work/drain.csv" 2>&1 &
                d=$!
            fi
            r=$("$BIN_DIR/disque-benchmark" -p "$port" -w cycle --queue-prefix resident -c 8 --consumers 4 -d 20 --rate 1000 --csv 2>&1 | tail -1)
            echo "rep=$rep beside=$beside resident-cycle@1000/s,$r reads=$(field spill spill_disk_reads)"
            if [[ -n $d ]]; then
                wait "$d" || true
                echo "rep=$rep $beside@${rate}/s,$(tail -1 "$work/drain.csv")"
            fi
            stop
        done
    done
}

churn() {
    start --maxmemory "$MAXMEM" --spill yes --spill-whole-jobs "${WHOLE:-no}"
    python3 "$here/scripts/spill_churn.py" "$port" "${DURATION:-3600}" "${RATE:-2000}" "${BACKLOG:-100000}"
    echo "rss=$(rss) used_memory=$(field memory used_memory)"
    stop
}

case ${1:-} in
    restart) restart ;;
    churn) churn ;;
    ram) ram ;;
    drainrate) drain "getjob+ack@${RATE:-5000}/s" -n 100000 --rate "${RATE:-5000}" ;;
    drain) drain getjob+ack -n 190000 ;;
    coldmiss) coldmiss ;;
    neighbours) neighbours ;;
    fill) fill ;;
    tput) tput ;;
    *) echo "usage: $0 ram|fill|tput|drain|drainrate|coldmiss|neighbours|restart|churn" >&2; exit 2 ;;
esac
