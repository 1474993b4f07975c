#!/usr/bin/env bash
# System tools some CI steps use (`cargo test` needs only the Rust
# toolchain): a C++ compiler, since `cargo clippy --workspace` builds the
# fuzz crate's libfuzzer-sys, which compiles libFuzzer; redis-cli and
# redis-benchmark (Debian's redis-tools, built with TLS) and openssl, for
# scripts/redis-cli-tls.sh and the perf scripts. Installed only if
# missing; fails loudly if they cannot be installed.
set -euo pipefail
missing=()
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    else
        echo "ci-deps.sh: ${missing[*]} missing and not root: cannot apt-get install" >&2
        exit 1
    fi
fi
