#!/usr/bin/env bash
# Cost of TLS, measured side by side in one run (docs/PERFORMANCE.md):
#  1. ADDJOB and GETJOB NOHANG throughput over the plain port vs the TLS port
#     of the same node (redis-benchmark, 50 clients, 100-byte bodies,
#     unpipelined and -P 16), runs interleaved plain/TLS;
#  2. ADDJOB ... REPLICATE 3 on a 3-node cluster with `tls-cluster yes` vs a
#     3-node cluster with a plain bus (both clusters up at once, interleaved).
# Certificates come from a private CA made with openssl (docs/SECURITY.md).
# Knobs: REPS (3), N (100000), NR (30000 replicated jobs), SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
N=${N:-100000}
NR=${NR:-30000}
bash scripts/ci-deps.sh >/dev/null
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing (redis-tools)" >&2; exit 1; }
command -v openssl >/dev/null || apt-get install -y -qq openssl
[ "${SKIP_BUILD:-0}" = 1 ] || cargo build --release --bin disque-server >/dev/null
BIN=$PWD/target/release/disque-server
W=$(mktemp -d "${TMPDIR:-/tmp}/disque-tls-perf.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT

# Private CA and one certificate for every node and client (IP SAN 127.0.0.1).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$W/ca.key" -out "$W/ca.crt" -days 2 -subj "/CN=perf CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$W/node.key" -out "$W/node.csr" -subj "/CN=node" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > "$W/node.ext"
openssl x509 -req -in "$W/node.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -CAcreateserial \
    -days 2 -out "$W/node.crt" -extfile "$W/node.ext" 2>/dev/null
TLSARGS=(--tls-cert-file "$W/node.crt" --tls-key-file "$W/node.key" --tls-ca-cert-file "$W/ca.crt")
CLI_TLS=(--tls --cacert "$W/ca.crt" --cert "$W/node.crt" --key "$W/node.key")

# start NAME ARGS...: start a node in $W/NAME; sets PORT_OUT and TLS_OUT.
# (Runs in this shell, so the trap can kill what it started.)
start() {
    local name=$1; shift
    mkdir -p "$W/$name"
    "$BIN" --port 0 --dir "$W/$name" --maxmemory 4gb "$@" >"$W/$name/out" 2>&1 &
    PIDS+=($!)
    PID_OUT=$!
    for _ in $(seq 1 400); do
        if grep -q '^disque-server ready' "$W/$name/out"; then
            local line; line=$(grep '^disque-server ready' "$W/$name/out")
            PORT_OUT=$(sed -E 's/.* port=([0-9]+).*/\1/' <<<"$line")
            TLS_OUT=$(grep -oE 'tls=[0-9]+' <<<"$line" | cut -d= -f2 || true)
            return
        fi
        sleep 0.05
    done
    echo "node $name did not start" >&2; cat "$W/$name/out" >&2; exit 1
}

BODY=$(printf 'x%.0s' $(seq 1 100))
# rps PORT [tls] N PIPELINE CMD...: requests per second of one
# redis-benchmark run (retried up to 3 times if it fails).
rps() {
    local port=$1; shift
    local extra=()
    if [ "$1" = tls ]; then extra=("${CLI_TLS[@]}"); shift; fi
    local n=$1 p=$2; shift 2
    local out=""
    for _ in 1 2 3; do
        out=$(redis-benchmark -h 127.0.0.1 -p "$port" "${extra[@]}" -c 50 -n "$n" -P "$p" \
            --csv "$@" 2>"$W/bench.err" | grep -v '^"test"' | tail -1 | cut -d, -f2 | tr -d '"') || true
        [ -n "$out" ] && break
        echo "redis-benchmark failed: $(head -c 300 "$W/bench.err")" >&2
    done
    echo "${out:-0}"
}
# cpu PID...: user+system CPU ticks used so far by these processes.
cpu() {
    local t=0
    for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo "$t"
}
TCK=$(getconf CLK_TCK)
# measure KEY N PIDS -- rps-args...: run rps, record ops/s in R[KEY] and
# server CPU microseconds per operation in C[KEY].
measure() {
    local key=$1 n=$2; shift 2
    local pids=()
    while [ "$1" != -- ]; do pids+=("$1"); shift; done
    shift
    local c0 c1 r
    c0=$(cpu "${pids[@]}")
    r=$(rps "$@")
    c1=$(cpu "${pids[@]}")
    R[$key]+="$r "
    # Consumed jobs stay in memory until acked: empty the nodes after
    # every run so all runs see the same (empty) server.
    for port in "${FLUSH_PORTS[@]}"; do redis-cli -p "$port" DEBUG FLUSHALL >/dev/null; done
    C[$key]+="$(awk -v d=$((c1 - c0)) -v n="$n" -v t="$TCK" 'BEGIN{printf "%.2f", d*1e6/t/n}') "
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores, $(uname -r), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
start single --tls-port 0 "${TLSARGS[@]}"
PORT=$PORT_OUT
TPORT=$TLS_OUT
SPID=$PID_OUT
declare -A R C
for rep in $(seq 1 "$REPS"); do
    for p in 1 16; do
        for mode in plain tls; do
            port=$PORT; t=()
            [ $mode = tls ] && { port=$TPORT; t=(tls); }
            FLUSH_PORTS=()
            measure "$mode,add,$p" "$N" "$SPID" -- "$port" "${t[@]}" "$N" "$p" ADDJOB q "$BODY" 0
            FLUSH_PORTS=("$PORT")
            measure "$mode,get,$p" "$N" "$SPID" -- "$port" "${t[@]}" "$N" "$p" GETJOB NOHANG FROM q
        done
    done
done

# Two 3-node clusters: plain bus and tls-cluster yes. Sets FIRST_OUT.
cluster() {
    local tag=$1; shift
    local ports=()
    CLUSTER_PIDS=()
    for i in 0 1 2; do
        start "$tag$i" --cluster-node-timeout 5000 "$@"
        ports+=("$PORT_OUT")
        CLUSTER_PIDS+=("$PID_OUT")
    done
    CLUSTER_PORTS=("${ports[@]}")
    redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "${ports[1]}" >/dev/null
    redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "${ports[2]}" >/dev/null
    for p in "${ports[@]}"; do
        local ok=0
        for _ in $(seq 1 300); do
            if redis-cli -p "$p" cluster info | grep -q 'cluster_reachable_nodes:2'; then ok=1; break; fi
            sleep 0.1
        done
        [ $ok = 1 ] || { echo "cluster $tag did not form" >&2; exit 1; }
    done
    FIRST_OUT=${ports[0]}
}
cluster plainbus
PLAIN0=$FIRST_OUT
PLAIN_PIDS=("${CLUSTER_PIDS[@]}")
PLAIN_PORTS=("${CLUSTER_PORTS[@]}")
cluster tlsbus --tls-cluster yes "${TLSARGS[@]}"
TLS0=$FIRST_OUT
TLS_PIDS=("${CLUSTER_PIDS[@]}")
TLS_PORTS=("${CLUSTER_PORTS[@]}")
for rep in $(seq 1 "$REPS"); do
    FLUSH_PORTS=("${PLAIN_PORTS[@]}")
    measure plain,repl "$NR" "${PLAIN_PIDS[@]}" -- "$PLAIN0" "$NR" 1 ADDJOB rq "$BODY" 0 REPLICATE 3
    FLUSH_PORTS=("${TLS_PORTS[@]}")
    measure tls,repl "$NR" "${TLS_PIDS[@]}" -- "$TLS0" "$NR" 1 ADDJOB rq "$BODY" 0 REPLICATE 3
done

# Each round's TLS run follows its plain run, so the per-round ratio
# compares runs under the same background load; the median of those ratios
# is the figure to read on a shared machine.
row() {
    local label=$1 k1=$2 k2=$3
    local ma mb ratios mr ca cb cr
    ma=$(tr ' ' '\n' <<<"${R[$k1]}" | grep . | median)
    mb=$(tr ' ' '\n' <<<"${R[$k2]}" | grep . | median)
    ratios=$(paste <(tr ' ' '\n' <<<"${R[$k1]}" | grep .) <(tr ' ' '\n' <<<"${R[$k2]}" | grep .) \
        | awk '{printf "%.2f ", $2/$1}')
    mr=$(tr ' ' '\n' <<<"$ratios" | grep . | median)
    ca=$(tr ' ' '\n' <<<"${C[$k1]}" | grep . | median)
    cb=$(tr ' ' '\n' <<<"${C[$k2]}" | grep . | median)
    cr=$(awk -v a="$ca" -v b="$cb" 'BEGIN{printf "%.2f", b/a}')
    printf '| %s | %.0f | %.0f | %s | %s | %s | %s | %s |\n' "$label" "$ma" "$mb" "$mr" "$ca" "$cb" "$cr" "$ratios"
}
echo
echo "| workload | plain ops/s | TLS ops/s | TLS/plain ops/s (median of rounds) | plain server CPU µs/op | TLS server CPU µs/op | CPU ratio | per-round ops/s ratios |"
echo "|---|---|---|---|---|---|---|---|"
for p in 1 16; do
    row "ADDJOB, 50 clients, -P $p" "plain,add,$p" "tls,add,$p"
    row "GETJOB NOHANG, 50 clients, -P $p" "plain,get,$p" "tls,get,$p"
done
row "ADDJOB REPLICATE 3 (3 nodes; bus plain vs tls-cluster yes; CPU of all 3)" plain,repl tls,repl
