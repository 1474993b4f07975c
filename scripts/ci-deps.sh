#!/usr/bin/env bash
# System tools the integration tests use: redis-cli (Debian's redis-tools,
# built with TLS) for the `redis-cli --tls` tests. Installed only if missing;
# fails loudly if it cannot be installed (the tests would fail anyway).
set -euo pipefail
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
