#!/usr/bin/env bash
# Build the disque-rs image without a registry: compile a static
# disque-server on the host (gnu target, crt-static: no musl needed),
# strip it, and build the `prebuilt` stage of the Dockerfile from a
# context holding only that binary. Usage: scripts/docker-image.sh [tag]
# Prints the image size. docs/DEPLOY.md.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-disque-rs:latest}"
command -v docker >/dev/null || { echo "docker-image.sh: docker is not installed" >&2; exit 1; }
target=x86_64-unknown-linux-gnu
RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --release --locked --target "$target" --bin disque-server
bin="target/$target/release/disque-server"
# A static binary: a scratch image has no loader and no libc.
if ldd "$bin" 2>&1 | grep -q '=>'; then
    echo "docker-image.sh: $bin is dynamically linked" >&2
    exit 1
fi
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
strip -o "$ctx/disque-server" "$bin"
mkdir "$ctx/data"
docker build -q --target prebuilt -f Dockerfile -t "$tag" "$ctx" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$tag")
echo "image $tag: $size bytes ($((size / 1024 / 1024)) MiB)"
