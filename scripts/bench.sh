#!/usr/bin/env bash
# Sweep disque-benchmark over clients {1,10,50,100} x pipeline {1,16} for one
# target/port and append one CSV line per run to OUT.
#
# usage: scripts/bench.sh TARGET PORT [OUT.csv] [extra disque-benchmark args...]
#   TARGET     disque | redis
#   PORT       server port (host: $HOST, default 127.0.0.1)
#   OUT.csv    appended to (default bench-results.csv); header written if new
# environment:
#   BIN        benchmark binary (default: target/release/disque-benchmark next
#              to this script's crate, else disque-benchmark from PATH)
#   WORKLOADS  space-separated workloads (default "addjob getjob")
#   REQUESTS   -n per run (default 100000)
#   CLIENTS    client counts (default "1 10 50 100")
#   PIPELINES  pipeline depths (default "1 16")
#   HOST       default 127.0.0.1
# example: scripts/bench.sh redis 16379 redis.csv -s 100
set -euo pipefail

if [[ $# -lt 2 ]]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 1
fi
target=$1
port=$2
out=${3:-bench-results.csv}
shift $(( $# >= 3 ? 3 : 2 ))

here=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z "${BIN:-}" ]]; then
    if [[ -x "$here/target/release/disque-benchmark" ]]; then
        BIN="$here/target/release/disque-benchmark"
    else
        BIN=disque-benchmark
    fi
fi
workloads=${WORKLOADS:-addjob getjob}
requests=${REQUESTS:-100000}
clients_list=${CLIENTS:-1 10 50 100}
pipelines=${PIPELINES:-1 16}
host=${HOST:-127.0.0.1}

if [[ ! -s "$out" ]]; then
    echo "target,workload,clients,pipeline,size,ops_per_sec,p50_us,p99_us,p999_us,max_us,ops,errors" >"$out"
fi

status=0
for w in $workloads; do
    for c in $clients_list; do
        for p in $pipelines; do
            if line=$("$BIN" --target "$target" -h "$host" -p "$port" -w "$w" \
                -c "$c" -P "$p" -n "$requests" --csv "$@"); then
                echo "$line" | tee -a "$out"
            else
                echo "run failed: target=$target workload=$w clients=$c pipeline=$p" >&2
                status=1
            fi
        done
    done
done
exit $status
