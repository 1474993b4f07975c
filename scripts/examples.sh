#!/usr/bin/env bash
# Runs every example in examples/ against a real node and checks what it
# prints: the Rust producer and worker (client/examples/, the disque-client
# crate), the Python producer and worker (redis-py, installed into a venv
# under a temporary directory), a Python producer feeding the Rust worker,
# and the redis-cli walkthrough (examples/redis-cli.sh, which checks every
# reply itself). Installs redis-cli (Debian's redis-tools) and python3-venv
# when missing; fails loudly if it cannot, never skips.
#
#     bash scripts/examples.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
N=25
tmp=$(mktemp -d "${TMPDIR:-/tmp}/disque-examples.XXXXXX")
node_pid=
cleanup() {
    if [ -n "$node_pid" ]; then
        kill "$node_pid" 2>/dev/null || true
        wait "$node_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "examples: FAILED: $*" >&2
    if [ -f "$tmp/node.log" ]; then
        echo "---- node output ----" >&2
        cat "$tmp/node.log" >&2
    fi
    exit 1
}

apt_install() {
    if [ "$(id -u)" != 0 ]; then
        fail "$* missing and not root: install it"
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- tools ---------------------------------------------------------------
if ! command -v redis-cli >/dev/null 2>&1; then
    apt_install redis-tools
fi
redis-cli --version >/dev/null || fail "redis-cli does not run"
command -v python3 >/dev/null 2>&1 || apt_install python3
if ! python3 -m venv "$tmp/venv" >/dev/null 2>&1; then
    apt_install python3-venv
    python3 -m venv "$tmp/venv" || fail "cannot create a Python venv"
fi
"$tmp/venv/bin/pip" install -q --disable-pip-version-check -r examples/python/requirements.txt ||
    fail "pip install -r examples/python/requirements.txt"
py="$tmp/venv/bin/python"

# --- builds --------------------------------------------------------------
cargo build -q --bin disque-server
cargo build -q --manifest-path client/Cargo.toml --examples

# --- a node on a free port -----------------------------------------------
mkdir -p "$tmp/node"
target/debug/disque-server --port 0 --dir "$tmp/node" >"$tmp/node.log" 2>&1 &
node_pid=$!
port=
for _ in $(seq 1 200); do
    port=$(sed -n 's/^disque-server ready port=\([0-9]*\) .*/\1/p' "$tmp/node.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$node_pid" 2>/dev/null || fail "disque-server exited during startup"
    sleep 0.1
done
[ -n "$port" ] || fail "disque-server not ready within 20 s"
echo "examples: node ready on port $port"
nodes="127.0.0.1:$port"

passed=0
# run <name> <expected line> <command...>: run with a deadline, show the
# output, require the expected line.
run() {
    local name=$1 want=$2
    shift 2
    echo "== $name: $*"
    if ! timeout 120 "$@" >"$tmp/out" 2>&1; then
        cat "$tmp/out"
        fail "$name exited with an error"
    fi
    tail -n 3 "$tmp/out"
    grep -qxF "$want" "$tmp/out" || fail "$name: no line '$want' in its output"
    passed=$((passed + 1))
}
qlen() { redis-cli -p "$port" QLEN "$1"; }
example=(cargo run -q --manifest-path client/Cargo.toml --example)

run "rust producer" "added $N jobs to rust-demo" \
    "${example[@]}" producer -- --nodes "$nodes" --queue rust-demo --count "$N"
[ "$(qlen rust-demo)" = "$N" ] || fail "rust-demo holds $(qlen rust-demo) jobs, not $N"
run "rust worker" "processed $N jobs (0 given back, 0 heartbeats)" \
    "${example[@]}" worker -- --nodes "$nodes" --queue rust-demo --count "$N"
[ "$(qlen rust-demo)" = 0 ] || fail "rust-demo still holds jobs"

run "python producer" "added $N jobs to py-demo" \
    "$py" examples/python/producer.py --port "$port" --queue py-demo --count "$N"
run "python worker" "processed $N jobs" \
    "$py" examples/python/worker.py --port "$port" --queue py-demo --count "$N" --max-seconds 60
[ "$(qlen py-demo)" = 0 ] || fail "py-demo still holds jobs"

run "python producer to rust worker" "added $N jobs to mixed" \
    "$py" examples/python/producer.py --port "$port" --queue mixed --count "$N"
run "rust worker from python producer" "processed $N jobs (0 given back, 0 heartbeats)" \
    "${example[@]}" worker -- --nodes "$nodes" --queue mixed --count "$N"

run "redis-cli walkthrough" "walkthrough complete" bash examples/redis-cli.sh "$port"

echo "examples: $passed passed, 0 failed"
