#!/usr/bin/env bash
# ADDJOB / GETJOB throughput with the HTTP endpoint off vs on (same
# session, interleaved rounds). "on" = `--http-port auto` with /metrics
# scraped every second (and /api/queues, what an open dashboard polls)
# during the run. Prints one CSV line per run and a median summary.
# Knobs: REPS (3), N (200000), C (50), P (1).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
N=${N:-200000}
C=${C:-50}
P=${P:-1}
[ "${SKIP_BUILD:-0}" = 1 ] || cargo build --release --bin disque-server --bin disque-benchmark >&2
SRV=target/release/disque-server
BENCH=target/release/disque-benchmark
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT

start() { # $1 = off|on -> sets PID PORT HTTP
    local dir="$OUT/node-$RANDOM"
    mkdir -p "$dir"
    local extra=()
    [ "$1" = on ] && extra=(--http-port auto --http-bind 127.0.0.1)
    "$SRV" --port 0 --dir "$dir" "${extra[@]}" >"$dir/out" 2>&1 &
    PID=$!
    for _ in $(seq 200); do grep -q '^disque-server ready' "$dir/out" && break; sleep 0.05; done
    PORT=$(grep '^disque-server ready' "$dir/out" | sed 's/.* port=\([0-9]*\).*/\1/')
    HTTP=$(grep '^disque-server ready' "$dir/out" | sed -n 's/.* http=\([0-9]*\).*/\1/p')
}

scraper() { # scrape until killed
    while true; do
        curl -s -o /dev/null "http://127.0.0.1:$1/metrics" || true
        curl -s -o /dev/null "http://127.0.0.1:$1/api/queues" || true
        sleep 1
    done
}

echo "mode,workload,ops_per_sec,p50_us,p99_us"
for r in $(seq "$REPS"); do
    for mode in off on; do
        for w in addjob getjob; do
            start "$mode"
            SCR=
            if [ "$mode" = on ]; then scraper "$HTTP" & SCR=$!; fi
            line=$("$BENCH" -p "$PORT" -w "$w" -c "$C" -P "$P" -n "$N" --csv)
            [ -n "$SCR" ] && kill "$SCR" 2>/dev/null
            kill "$PID"; wait "$PID" 2>/dev/null || true
            echo "$line" | awk -F, -v m="$mode" '{print m","$2","$6","$7","$8}'
        done
    done
done | tee "$OUT/runs.csv"
echo
echo "median ops/s (on/off):"
for w in addjob getjob; do
    off=$(awk -F, -v w=$w '$1=="off" && $2==w {print $3}' "$OUT/runs.csv" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    on=$(awk -F, -v w=$w '$1=="on" && $2==w {print $3}' "$OUT/runs.csv" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    awk -v w=$w -v a="$off" -v b="$on" 'BEGIN {printf "%s off=%.0f on=%.0f ratio=%.3f\n", w, a, b, b/a}'
done
