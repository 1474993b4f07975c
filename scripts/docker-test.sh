#!/usr/bin/env bash
# Container test (docs/DEPLOY.md, run by .ci/run): build the image from
# this checkout without a registry, start deploy/compose.yaml under a
# unique project name, and run scripts/docker_test.py against it:
# replicated jobs added on one node and consumed on another, docker kill +
# restart, docker network disconnect + heal, a rolling restart with drain.
# Every job whose ADDJOB returned an ID must be delivered; duplicates are
# reported. Every container, network, volume and image it made is removed
# on exit, failure included. Fails loudly without docker.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "docker-test.sh: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the docker daemon is not reachable"
command -v python3 >/dev/null || die "python3 is not installed"
if docker compose version >/dev/null 2>&1; then
    compose_bin=(docker compose)
elif command -v docker-compose >/dev/null; then
    compose_bin=(docker-compose)
else
    die "neither 'docker compose' nor docker-compose is installed"
fi

project="disquetest$$$(date +%s)"
tag="disque-rs:$project"
compose=("${compose_bin[@]}" -f deploy/compose.yaml -p "$project")
cleanup() {
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "---- container logs (failure) ----"
        DISQUE_IMAGE="$tag" "${compose[@]}" logs --no-color --tail 60 2>/dev/null || true
    fi
    DISQUE_IMAGE="$tag" "${compose[@]}" down -v --remove-orphans --timeout 5 >/dev/null 2>&1 || true
    docker rmi -f "$tag" >/dev/null 2>&1 || true
    exit "$rc"
}
trap cleanup EXIT INT TERM

scripts/docker-image.sh "$tag"
UP_T0=$(date +%s.%N)
export UP_T0
DISQUE_IMAGE="$tag" "${compose[@]}" up -d
DISQUE_IMAGE="$tag" timeout 900 python3 scripts/docker_test.py "${compose[@]}" -- "$project"
