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
W=$(mktemp -d)
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

# start NAME ARGS...: start a node in $W/NAME, echo "port tls_port".
start() {
    local name=$1; shift
    mkdir -p "$W/$name"
    (cd "$W/$name" && exec "$BIN" --port 0 --dir "$W/$name" "$@" >"$W/$name/out" 2>&1) &
    PIDS+=($!)
    for _ in $(seq 1 200); do
        if grep -q '^disque-server ready' "$W/$name/out"; then
            local line; line=$(grep '^disque-server ready' "$W/$name/out")
            local p t
            p=$(sed -E 's/.* port=([0-9]+).*/\1/' <<<"$line")
            t=$(grep -oE 'tls=[0-9]+' <<<"$line" | cut -d= -f2 || true)
            echo "$p ${t:-0}"
            return
        fi
        sleep 0.05
    done
    echo "node $name did not start" >&2; cat "$W/$name/out" >&2; exit 1
}

BODY=$(printf 'x%.0s' $(seq 1 100))
# rps PORT [TLS] -- CMD...: requests per second of one redis-benchmark run.
rps() {
    local port=$1; shift
    local extra=()
    if [ "$1" = tls ]; then extra=("${CLI_TLS[@]}"); shift; fi
    local n=$1 p=$2; shift 2
    redis-benchmark -h 127.0.0.1 -p "$port" "${extra[@]}" -c 50 -n "$n" -P "$p" --csv "$@" 2>/dev/null \
        | tail -1 | cut -d, -f2 | tr -d '"'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores, $(uname -r), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
read -r PORT TPORT < <(start single --tls-port 0 "${TLSARGS[@]}")
declare -A R
for rep in $(seq 1 "$REPS"); do
    for p in 1 16; do
        for mode in plain tls; do
            port=$PORT; t=""
            [ $mode = tls ] && { port=$TPORT; t=tls; }
            R[$mode,add,$p]+="$(rps "$port" $t "$N" "$p" ADDJOB q "$BODY" 0) "
            R[$mode,get,$p]+="$(rps "$port" $t "$N" "$p" GETJOB NOHANG FROM q) "
        done
    done
done

# Two 3-node clusters: plain bus and tls-cluster yes.
cluster() {
    local tag=$1; shift
    local ports=()
    for i in 0 1 2; do
        read -r p _ < <(start "$tag$i" --cluster-node-timeout 5000 "$@")
        ports+=("$p")
    done
    redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "${ports[1]}" >/dev/null
    redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "${ports[2]}" >/dev/null
    for p in "${ports[@]}"; do
        for _ in $(seq 1 200); do
            redis-cli -p "$p" cluster info | grep -q 'cluster_reachable_nodes:2' && break
            sleep 0.1
        done
    done
    echo "${ports[0]}"
}
PLAIN0=$(cluster plainbus)
TLS0=$(cluster tlsbus --tls-cluster yes "${TLSARGS[@]}")
for rep in $(seq 1 "$REPS"); do
    R[plain,repl]+="$(rps "$PLAIN0" "$NR" 1 ADDJOB rq "$BODY" 0 REPLICATE 3) "
    R[tls,repl]+="$(rps "$TLS0" "$NR" 1 ADDJOB rq "$BODY" 0 REPLICATE 3) "
done

row() {
    local label=$1 a=$2 b=$3
    local ma mb
    ma=$(tr ' ' '\n' <<<"$a" | grep . | median)
    mb=$(tr ' ' '\n' <<<"$b" | grep . | median)
    printf '| %s | %.0f | %.0f | %.2f | %s | %s |\n' "$label" "$ma" "$mb" \
        "$(awk -v a="$ma" -v b="$mb" 'BEGIN{print b/a}')" "$a" "$b"
}
echo
echo "| workload | plain ops/s (median) | TLS ops/s (median) | TLS / plain | plain runs | TLS runs |"
echo "|---|---|---|---|---|---|"
for p in 1 16; do
    row "ADDJOB, 50 clients, -P $p" "${R[plain,add,$p]}" "${R[tls,add,$p]}"
    row "GETJOB NOHANG, 50 clients, -P $p" "${R[plain,get,$p]}" "${R[tls,get,$p]}"
done
row "ADDJOB REPLICATE 3, 3 nodes, bus plain vs tls-cluster yes" "${R[plain,repl]}" "${R[tls,repl]}"
