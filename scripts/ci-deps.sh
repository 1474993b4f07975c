#!/usr/bin/env bash
# System tools the integration tests use: redis-cli (Debian's redis-tools,
# built with TLS) for the `redis-cli --tls` tests; and a C++ compiler,
# since `cargo clippy --workspace` builds the fuzz crate's libfuzzer-sys,
# which compiles libFuzzer. Installed only if missing; fails loudly if
# they cannot be installed (the checks would fail anyway).
set -euo pipefail
if ! command -v c++ >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++
    else
        echo "c++ missing and not root: install g++" >&2
        exit 1
    fi
fi
if ! command -v redis-cli >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools
    else
        echo "redis-cli missing and not root: install redis-tools" >&2
        exit 1
    fi
fi
redis-cli --version
