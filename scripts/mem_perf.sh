#!/usr/bin/env bash
# RSS per queued 100-byte job, several disque-server builds and Redis side
# by side (workload (c) of scripts/perf.sh on its own, and faster).
#
# usage: scripts/mem_perf.sh [LABEL=PATH/TO/disque-server ...]
#        (default: now=$CARGO_TARGET_DIR/release/disque-server, built here)
#
# Every round starts each listed server fresh (--port 0, no persistence),
# reads VmRSS, adds RSS_JOBS 100-byte jobs with `disque-benchmark -w addjob
# -c 50 -P 16`, reads VmRSS again and divides the growth by QLEN; then the
# same for a fresh redis-server with LPUSH. The servers alternate within a
# round, so they share the machine's noise. Prints one CSV line per run and
# the median bytes/job per label.
#
# environment: REPS [3], RSS_JOBS [1000000], SKIP_BUILD=1, SKIP_REDIS=1,
#              CARGO_TARGET_DIR [target]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
REPS=${REPS:-3}
RSS_JOBS=${RSS_JOBS:-1000000}
tdir=${CARGO_TARGET_DIR:-$here/target}
work=$(mktemp -d /tmp/disque-mem.XXXXXX)

pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
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

if [[ -z "${SKIP_BUILD:-}" ]]; then
    cargo build --release --bin disque-server --bin disque-benchmark >&2
fi
BENCH=$tdir/release/disque-benchmark
[[ -x $BENCH ]] || { echo "missing $BENCH" >&2; exit 1; }
servers=("$@")
[[ ${#servers[@]} -gt 0 ]] || servers=("now=$tdir/release/disque-server")
for s in "${servers[@]}"; do
    [[ -x ${s#*=} ]] || { echo "missing ${s#*=}" >&2; exit 1; }
done
if [[ -z "${SKIP_REDIS:-}" ]]; then
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
        echo "redis-server/redis-cli missing: apt-get install redis-server redis-tools" >&2
        exit 1
    }
fi

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cli() { redis-cli -p "$1" "${@:2}"; }
stop_pid() {
    kill "$1" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
}

csv=$work/rss.csv
echo "label,rep,jobs,rss_before_kb,rss_after_kb,bytes_per_job"
run_disque() { # LABEL SERVER REP
    local dir=$work/$1-$3 line="" pid port
    mkdir -p "$dir"
    "$2" --port 0 --dir "$dir" --loglevel warning >"$dir/stdout" 2>"$dir/stderr" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 100); do
        line=$(grep -m1 '^disque-server ready' "$dir/stdout" 2>/dev/null || true)
        [[ -n $line ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n $line ]] || { echo "disque-server $1 did not start" >&2; cat "$dir/stderr" >&2; exit 1; }
    port=$(sed -E 's/.* port=([0-9]+).*/\1/' <<<"$line")
    sleep 0.3
    local before after qlen
    before=$(rss_kb "$pid")
    "$BENCH" --csv -p "$port" -w addjob -c 50 -P 16 -n "$RSS_JOBS" >/dev/null
    sleep 0.5
    after=$(rss_kb "$pid")
    qlen=$(cli "$port" QLEN dqbench:0)
    echo "$1,$3,$qlen,$before,$after,$(( (after - before) * 1024 / qlen ))" | tee -a "$csv"
    stop_pid "$pid"
}
run_redis() { # REP
    local rp pid before after qlen
    rp=$(free_port)
    redis-server --port "$rp" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$work" --daemonize no --logfile "$work/redis.log" >/dev/null 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 100); do cli "$rp" PING >/dev/null 2>&1 && break; sleep 0.1; done
    sleep 0.3
    before=$(rss_kb "$pid")
    "$BENCH" --csv --target redis -p "$rp" -w addjob -c 50 -P 16 -n "$RSS_JOBS" >/dev/null
    sleep 0.5
    after=$(rss_kb "$pid")
    qlen=$(cli "$rp" LLEN dqbench:0)
    echo "redis,$1,$qlen,$before,$after,$(( (after - before) * 1024 / qlen ))" | tee -a "$csv"
    stop_pid "$pid"
}

for r in $(seq 1 "$REPS"); do
    for s in "${servers[@]}"; do run_disque "${s%%=*}" "${s#*=}" "$r"; done
    [[ -n "${SKIP_REDIS:-}" ]] || run_redis "$r"
done

echo
echo "median bytes/job over $REPS rounds ($RSS_JOBS jobs):"
python3 - "$csv" <<'EOF'
import csv, statistics, sys
by = {}
rows = list(csv.reader(open(sys.argv[1])))
for label, _rep, _jobs, _b, _a, bpj in rows:
    by.setdefault(label, []).append(int(bpj))
base = statistics.median(by["redis"]) if "redis" in by else None
for label, v in by.items():
    m = statistics.median(v)
    ratio = f"  ({m / base:.2f}x Redis)" if base and label != "redis" else ""
    print(f"  {label}: {m:.0f} B/job  runs {v}{ratio}")
EOF
