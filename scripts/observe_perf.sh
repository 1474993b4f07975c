#!/usr/bin/env bash
# ADDJOB / GETJOB throughput with the HTTP endpoint off vs on, in one
# session, interleaved (docs/PERFORMANCE.md, "Results", the HTTP endpoint
# rows).
#
# Three modes per round, each on a fresh release `disque-server --port 0`:
#   off     no `http-port`
#   on      `--http-port auto`, nobody requests anything
#   scrape  `--http-port auto`, /metrics fetched every second during the
#           run (what a Prometheus scraper does; with DASHBOARD=1 also
#           /api/overview and /api/queues, what an open dashboard polls)
# The order of the modes rotates from round to round so that none always
# runs first (a loaded, shared machine drifts within a round). Each round
# gives ratios on/off and scrape/off; the summary prints the median of
# the per-round ratios (and their range) next to the median throughputs,
# plus the load average before and after, so the noise is on record.
#
# Knobs: REPS (7), N (100000), C (50), P (1), DASHBOARD (0),
# SKIP_BUILD=1 to use the existing target/release binaries (or SRV= and
# BENCH= paths to other builds).
#
# CALLGRIND=1 measures instructions instead of time, for a machine too
# busy for timings: the server runs under `valgrind --tool=callgrind`
# (CG_N operations, default 20000, C=10 clients) once per mode (twice
# for "off", to show the run-to-run noise of the count), and the
# "scrape" mode fetches /metrics CG_SCRAPES times (default 10) between
# equal slices of the workload. Counting starts at the ready line
# (`callgrind_control -z`) and ends with the SIGTERM shutdown. It prints
# the server's instructions per operation for each mode and the
# instructions of one scrape, which turns into a cost at any scrape
# interval and throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-7}
N=${N:-100000}
C=${C:-50}
P=${P:-1}
DASHBOARD=${DASHBOARD:-0}
command -v curl >/dev/null || { echo "observe_perf.sh: curl is not installed" >&2; exit 1; }
[ "${SKIP_BUILD:-0}" = 1 ] || cargo build --release --bin disque-server --bin disque-benchmark >&2
SRV=${SRV:-target/release/disque-server}
BENCH=${BENCH:-target/release/disque-benchmark}
OUT=$(mktemp -d)
PID=
SCR=
cleanup() {
    [ -n "$SCR" ] && kill "$SCR" 2>/dev/null
    [ -n "$PID" ] && kill "$PID" 2>/dev/null
    rm -rf "$OUT"
}
trap cleanup EXIT

start() { # $1 = off|on|scrape -> sets PID PORT HTTP
    local dir="$OUT/node-$RANDOM$RANDOM"
    mkdir -p "$dir"
    local extra=()
    [ "$1" != off ] && extra=(--http-port auto --http-bind 127.0.0.1)
    "$SRV" --port 0 --dir "$dir" "${extra[@]}" >"$dir/out" 2>&1 &
    PID=$!
    for _ in $(seq 400); do grep -q '^disque-server ready' "$dir/out" && break; sleep 0.05; done
    grep -q '^disque-server ready' "$dir/out" || { echo "server did not start" >&2; exit 1; }
    PORT=$(grep '^disque-server ready' "$dir/out" | sed 's/.* port=\([0-9]*\).*/\1/')
    HTTP=$(grep '^disque-server ready' "$dir/out" | sed -n 's/.* http=\([0-9]*\).*/\1/p')
}

scraper() { # fetch once a second until killed
    while true; do
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$1/metrics" || true
        if [ "$DASHBOARD" = 1 ]; then
            curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$1/api/overview" || true
            curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$1/api/queues" || true
        fi
        sleep 1
    done
}

one() { # $1 mode $2 workload -> ops/s
    start "$1"
    SCR=
    if [ "$1" = scrape ]; then scraper "$HTTP" & SCR=$!; fi
    local line
    line=$("$BENCH" -p "$PORT" -w "$2" -c "$C" -P "$P" -n "$N" --csv)
    if [ -n "$SCR" ]; then kill "$SCR" 2>/dev/null; wait "$SCR" 2>/dev/null || true; SCR=; fi
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    echo "$line" | awk -F, '{print $6}'
}

if [ "${CALLGRIND:-0}" = 1 ]; then
    command -v callgrind_control >/dev/null || { echo "observe_perf.sh: valgrind is not installed" >&2; exit 1; }
    CG_N=${CG_N:-20000}
    CG_SCRAPES=${CG_SCRAPES:-10}
    cg() { # $1 mode $2 workload -> instructions of the whole server run
        local dir="$OUT/cg-$RANDOM$RANDOM"
        mkdir -p "$dir"
        local extra=()
        [ "$1" != off ] && extra=(--http-port auto --http-bind 127.0.0.1)
        valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
            "$SRV" --port 0 --dir "$dir" "${extra[@]}" >"$dir/out" 2>"$dir/err" &
        PID=$!
        for _ in $(seq 1200); do grep -q "^disque-server ready" "$dir/out" 2>/dev/null && break; sleep 0.1; done
        grep -q '^disque-server ready' "$dir/out" || { echo "server did not start under valgrind" >&2; exit 1; }
        PORT=$(grep '^disque-server ready' "$dir/out" | sed 's/.* port=\([0-9]*\).*/\1/')
        HTTP=$(grep '^disque-server ready' "$dir/out" | sed -n 's/.* http=\([0-9]*\).*/\1/p')
        # Count from here: startup (and binding the HTTP port) is not the hot path.
        callgrind_control -z "$PID" >/dev/null 2>&1
        if [ "$1" = scrape ]; then
            for _ in $(seq "$CG_SCRAPES"); do
                "$BENCH" -p "$PORT" -w "$2" -c 10 -n $((CG_N / CG_SCRAPES)) --csv >/dev/null
                curl -s -o /dev/null --max-time 60 "http://127.0.0.1:$HTTP/metrics"
            done
        else
            "$BENCH" -p "$PORT" -w "$2" -c 10 -n "$CG_N" --csv >/dev/null
        fi
        kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=
        awk '/^(summary|totals):/ {print $2; exit}' "$dir/cg.out"
    }
    echo "workload,mode,instructions,instructions_per_op"
    for w in addjob getjob; do
        declare -A ins=()
        # "off" runs twice (first and last): their difference is the
        # run-to-run noise of the count (timers, thread interleaving).
        for mode in off on scrape off2; do
            ins[$mode]=$(cg "${mode%2}" "$w")
            echo "$w,$mode,${ins[$mode]},$(( ins[$mode] / CG_N ))"
        done
        awk -v w="$w" -v off="${ins[off]}" -v off2="${ins[off2]}" -v on="${ins[on]}" -v sc="${ins[scrape]}" -v k="$CG_SCRAPES" -v n="$CG_N" 'BEGIN {
            printf "%s: off2/off %.4f (noise), on/off %.4f, scrape/off %.4f, one /metrics scrape ~ %.0f instructions (~ %.0f operations)\n",
                w, off2 / off, on / off, sc / off, (sc - on) / k, (sc - on) / k / (off / n) }'
    done
    exit 0
fi

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
orders=("off on scrape" "on scrape off" "scrape off on")
echo "round,workload,mode,ops_per_sec"
for r in $(seq "$REPS"); do
    order=${orders[$(( (r - 1) % 3 ))]}
    for w in addjob getjob; do
        for mode in $order; do
            echo "$r,$w,$mode,$(one "$mode" "$w")"
        done
    done
done | tee "$OUT/runs.csv"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
echo
echo "workload,mode,median_ops,min_ops,max_ops,median_ratio_vs_off,min_ratio,max_ratio"
for w in addjob getjob; do
    for mode in off on scrape; do
        ops=$(awk -F, -v w=$w -v m=$mode '$2==w && $3==m {print $4}' "$OUT/runs.csv")
        med=$(echo "$ops" | median)
        lo=$(echo "$ops" | sort -g | head -1)
        hi=$(echo "$ops" | sort -g | tail -1)
        ratios=$(awk -F, -v w=$w -v m=$mode '$2==w && $3=="off" {off[$1]=$4} $2==w && $3==m {x[$1]=$4}
            END {for (r in x) if (off[r] > 0) printf "%.4f\n", x[r]/off[r]}' "$OUT/runs.csv")
        rmed=$(echo "$ratios" | median)
        rlo=$(echo "$ratios" | sort -g | head -1)
        rhi=$(echo "$ratios" | sort -g | tail -1)
        echo "$w,$mode,$med,$lo,$hi,$rmed,$rlo,$rhi"
    done
done
