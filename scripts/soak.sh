#!/usr/bin/env bash
# A long run of a 3-node cluster of the real disque-server at a fixed rate
# with kill -9 / restart, partitions and a rolling restart, sampled every
# minute (docs/RELIABILITY.md, "Soak").
#
#   scripts/soak.sh [--quick] [--duration S] [--rate R] [--sample S]
#                   [--fault-every S] [--rolling-at F] [--seed N]
#                   [--out DIR] [--keep]
#
# Builds the release server and runs scripts/soak.py as root (each node in
# its own network namespace, as scripts/chaos.sh does). Defaults: one hour,
# 20 ADDJOB/s per node, a fault every 2 minutes, a sample every minute,
# results in soak-results/ (table.md, chart.svg, samples.jsonl,
# summary.json). --quick (called by .ci/run) is the 5-minute version: a
# fault every 45 s, a sample every 30 s. Exits non-zero if a job was lost,
# a node crashed or panicked, or the cluster did not converge.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "soak.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, TUN devices)"
for tool in ip python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is not installed (ip: iproute2)"
done
[ -c /dev/net/tun ] || die "/dev/net/tun is missing (kernel without CONFIG_TUN?)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' || die "python3 >= 3.8 required"
probe="dqsprobe$$"
ip netns add "$probe" || die "cannot create a network namespace"
ip netns del "$probe"

args=()
for a in "$@"; do
    if [ "$a" = "--quick" ]; then
        args+=(--duration 300 --fault-every 45 --sample 30)
    else
        args+=("$a")
    fi
done

cargo build --release --quiet --bin disque-server
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
exec python3 scripts/soak.py --bin target/release/disque-server --commit "$commit" ${args[@]+"${args[@]}"}
