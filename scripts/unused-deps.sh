#!/usr/bin/env bash
# Unused dependencies: cargo-machete over every package of the workspace
# (server, benchmark, fuzz). It reads the sources, so it needs no build; a
# dependency it cannot see used but that is needed goes in that package's
# `[package.metadata.cargo-machete] ignored` list with a comment saying why.
#
# Installs cargo-machete from crates.io if it is not on PATH; fails loudly
# if that install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo-machete >/dev/null 2>&1; then
    PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
if ! command -v cargo-machete >/dev/null 2>&1; then
    echo "cargo-machete not found: cargo install cargo-machete --locked" >&2
    if ! cargo install cargo-machete --locked; then
        echo "error: could not install cargo-machete (needed for the unused-dependency check)" >&2
        exit 1
    fi
fi
cargo machete --version
# --with-metadata: resolve each dependency's library name from
# `cargo metadata`, so crates whose lib name differs from the package name
# are matched by the name the code uses.
cargo machete --with-metadata .
