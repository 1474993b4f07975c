#!/usr/bin/env bash
# Fault injection against 5-node clusters of the real disque-server, each
# node in its own network namespace (docs/RELIABILITY.md).
#
#   scripts/chaos.sh [--quick] [--seed N] [--fault NAME|all] [--replicate R]
#                    [--out results.jsonl] [--keep]
#
# Builds the release server, runs scripts/chaos.py as root, and exits
# non-zero if any run lost a job, saw a node crash, or did not converge.
# --quick (called by .ci/run) runs every fault once, briefly (a few
# minutes in all). Fails loudly when not root or a tool is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "chaos.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, TUN devices)"
for tool in ip python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is not installed (ip: iproute2)"
done
[ -c /dev/net/tun ] || die "/dev/net/tun is missing (kernel without CONFIG_TUN?)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' || die "python3 >= 3.8 required"
# Namespaces work here? (fails on kernels without CONFIG_NET_NS)
probe="dqcprobe$$"
ip netns add "$probe" || die "cannot create a network namespace"
ip netns del "$probe"

cargo build --release --quiet --bin disque-server
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
exec python3 scripts/chaos.py --bin target/release/disque-server --commit "$commit" "$@"
