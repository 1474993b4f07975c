#!/usr/bin/env bash
# Interoperability with the stock client (run by .ci/run): `redis-cli --tls`
# (Debian's redis-tools, built with TLS) against the TLS port of a real node,
# with certificates from a private CA made by openssl as docs/SECURITY.md
# does. `cargo test` checks the same behaviour with a rustls client
# (tests/it/tls.rs); this script proves the stock client agrees:
#  * mutual TLS: a client certificate from the node's CA is accepted;
#    ADDJOB, GETJOB and ACKJOB work over it;
#  * AUTH as redis-cli sends it: `--user default --pass` (AUTH default pw)
#    and `-a` (AUTH pw); a wrong user gets WRONGPASS and then NOAUTH; no
#    AUTH gets NOAUTH;
#  * refused: no client certificate, a client certificate from another CA,
#    and a node certificate the client's --cacert did not sign;
#  * `tls-auth-clients no`: no client certificate needed.
# Installs redis-tools and openssl through scripts/ci-deps.sh when missing;
# fails loudly when it cannot. Every redis-cli call is bounded by timeout(1).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "redis-cli-tls.sh: $*" >&2; exit 1; }
bash scripts/ci-deps.sh
[[ "$(redis-cli --help 2>&1)" == *--tls* ]] || die "this redis-cli is built without TLS"
command -v timeout >/dev/null || die "timeout (coreutils) is not installed"
cargo build --bin disque-server
BIN=$PWD/target/debug/disque-server

W=$(mktemp -d "${TMPDIR:-/tmp}/disque-cli-tls.XXXXXX")
PIDS=()
cleanup() {
    local rc=$?
    for p in "${PIDS[@]}"; do
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    if [ "$rc" -ne 0 ]; then
        for f in "$W"/*/out; do
            [ -f "$f" ] && { echo "---- $f ----"; tail -n 30 "$f"; }
        done
    fi
    rm -rf "$W"
    exit "$rc"
}
trap cleanup EXIT INT TERM

# ca NAME: a self-signed CA in $W/NAME.crt / .key.
ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$W/$1.key" -out "$W/$1.crt" -days 2 -subj "/CN=$1" 2>/dev/null
}
# issue CA NAME: a certificate for 127.0.0.1 signed by CA, usable by both
# ends of a connection.
issue() {
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$W/$2.key" -out "$W/$2.csr" -subj "/CN=$2" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' \
        >"$W/$2.ext"
    openssl x509 -req -in "$W/$2.csr" -CA "$W/$1.crt" -CAkey "$W/$1.key" -CAcreateserial \
        -days 2 -out "$W/$2.crt" -extfile "$W/$2.ext" 2>/dev/null
}
ca ca
ca other-ca
issue ca node
issue ca client
issue other-ca intruder

# start NAME ARGS...: a node in $W/NAME; sets TLS_PORT from its ready line.
start() {
    local name=$1; shift
    mkdir -p "$W/$name"
    "$BIN" --port 0 --tls-port 0 --dir "$W/$name" \
        --tls-cert-file "$W/node.crt" --tls-key-file "$W/node.key" \
        --tls-ca-cert-file "$W/ca.crt" "$@" >"$W/$name/out" 2>&1 &
    PIDS+=($!)
    local line=""
    for _ in $(seq 1 200); do
        line=$(grep -m1 '^disque-server ready ' "$W/$name/out" || true)
        [ -n "$line" ] && break
        kill -0 "${PIDS[-1]}" 2>/dev/null || die "node $name exited during startup"
        sleep 0.05
    done
    [ -n "$line" ] || die "node $name not ready within 10 s"
    TLS_PORT=$(grep -oE 'tls=[0-9]+' <<<"$line" | cut -d= -f2)
    [ -n "$TLS_PORT" ] || die "no tls= in the ready line: $line"
}

FAILED=0
check() { # check DESCRIPTION: record a failed expectation, go on
    echo "FAIL: $1" >&2
    FAILED=$((FAILED + 1))
}
# cli CACERT CERT ARGS...: redis-cli --tls on $TLS_PORT (CERT "" = no client
# certificate); stdout+stderr in $OUT, exit status in $RC.
cli() {
    local cacert=$1 cert=$2; shift 2
    local tls=(--tls --cacert "$W/$cacert.crt")
    [ -n "$cert" ] && tls+=(--cert "$W/$cert.crt" --key "$W/$cert.key")
    RC=0
    OUT=$(timeout 20 redis-cli "${tls[@]}" -h 127.0.0.1 -p "$TLS_PORT" \
        --no-auth-warning "$@" 2>&1) || RC=$?
}
expect_out() { # expect_out WANT DESCRIPTION: $OUT is exactly WANT, $RC 0
    if [ "$RC" -ne 0 ] || [ "$OUT" != "$1" ]; then
        check "$2: exit $RC, got [$OUT], want [$1]"
    fi
}
expect_has() { # expect_has NEEDLE DESCRIPTION
    grep -q -- "$1" <<<"$OUT" || check "$2: exit $RC, [$OUT] lacks [$1]"
}
# logged NODE PATTERN: NODE's log matches PATTERN within 5 s (log lines may
# land just after redis-cli saw the connection close).
logged() {
    for _ in $(seq 1 100); do
        grep -q "$2" "$W/$1/out" && return 0
        sleep 0.05
    done
    return 1
}
# expect_refused DESCRIPTION [LOG NODE]: redis-cli failed without a reply
# to its command; with LOG, NODE's log names that reason for the refusal.
expect_refused() {
    if [ "$RC" -eq 124 ]; then
        check "$1: redis-cli hung (timeout)"
    elif [ "$RC" -eq 0 ] || grep -q PONG <<<"$OUT"; then
        check "$1: served: exit $RC, [$OUT]"
    elif [ -n "${2:-}" ] && ! logged "$3" "TLS handshake with a client failed.*$2"; then
        check "$1: the node did not log [$2]"
    fi
}

# Mutual TLS and AUTH.
start auth --requirepass pw
cli ca client --user default --pass pw ADDJOB q "over tls" 0
ID=$OUT
[[ "$RC" -eq 0 && "$ID" == D-* ]] || check "ADDJOB with --user/--pass: exit $RC, [$ID]"
cli ca client -a pw GETJOB FROM q
expect_out "$(printf 'q\n%s\nover tls' "$ID")" "GETJOB with -a"
cli ca client --user default --pass pw ACKJOB "$ID"
expect_out 1 "ACKJOB"
cli ca client --user alice --pass pw PING
expect_has WRONGPASS "a wrong user"
expect_has NOAUTH "PING after a refused AUTH"
cli ca client PING
expect_has NOAUTH "PING without AUTH"
# Client certificates and CAs.
cli ca "" -a pw PING
expect_refused "no client certificate" "peer sent no certificates" auth
cli ca intruder -a pw PING
expect_refused "a client certificate from another CA" "invalid peer certificate" auth
cli other-ca client -a pw PING
expect_refused "a node certificate the client's CA did not sign" "UnknownCA" auth
cli ca client -a pw PING
expect_out PONG "PING after the refused sessions"

# No client certificate asked.
start noclient --tls-auth-clients no
cli ca "" PING
expect_out PONG "tls-auth-clients no, no client certificate"
cli other-ca "" PING
expect_refused "tls-auth-clients no, untrusted node certificate" "UnknownCA" noclient

[ "$FAILED" -eq 0 ] || die "$FAILED check(s) failed"
echo "redis-cli-tls.sh: every redis-cli --tls check passed ($(redis-cli --version))"
