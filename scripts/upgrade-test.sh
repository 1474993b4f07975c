#!/usr/bin/env bash
# Rolling upgrade from the previous commit to this tree (docs/DEPLOY.md,
# "Rolling upgrades"): builds the previous commit's disque-server in a
# temporary git worktree, this tree's, and runs scripts/upgrade_test.py
# (old and new nodes in one cluster exchanging jobs, then each old node
# restarted on the new binary with its nodes.conf and AOF).
#
#   scripts/upgrade-test.sh [--from COMMIT] [--keep]
#
# The previous commit: --from (or $UPGRADE_FROM) when given; on a branch
# other than main, the merge base with main (or origin/main: the main
# commit the branch started from); otherwise HEAD~1 (on main: the commit
# before the tip). A
# shallow clone is deepened by one commit when the parent is missing.
# The old build has its own target directory (target/upgrade-base), seeded
# from target/release so only the project's own crates compile again; its
# binary is kept there per commit.
# Needs git, cargo and python3; no root.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "upgrade-test.sh: $*" >&2; exit 1; }
for tool in git cargo python3; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done

from=${UPGRADE_FROM:-}
keep=()
while [ $# -gt 0 ]; do
    case "$1" in
        --from) from=${2:?--from needs a commit}; shift 2 ;;
        --keep) keep=(--keep); shift ;;
        *) die "unknown argument $1" ;;
    esac
done

git rev-parse --git-dir >/dev/null 2>&1 || die "not a git checkout"
if [ -z "$from" ]; then
    branch=$(git symbolic-ref --short -q HEAD || true)
    if [ -n "$branch" ] && [ "$branch" != main ]; then
        for ref in main origin/main; do
            if git rev-parse -q --verify "$ref" >/dev/null; then
                from=$(git merge-base HEAD "$ref" || true)
                break
            fi
        done
    fi
    if [ -z "$from" ] || [ "$from" = "$(git rev-parse HEAD)" ]; then
        from=HEAD~1
    fi
fi
if ! git rev-parse -q --verify "$from^{commit}" >/dev/null; then
    if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
        git fetch -q --deepen=1 || true
    fi
    git rev-parse -q --verify "$from^{commit}" >/dev/null \
        || die "cannot resolve the previous commit '$from' (a clone without history? pass --from)"
fi
base=$(git rev-parse --verify "$from^{commit}")
head=$(git rev-parse HEAD)
echo "upgrade-test: from $(git log -1 --format='%h %s' "$base")"
echo "upgrade-test:   to $(git log -1 --format='%h %s' HEAD)$(git diff --quiet HEAD || echo ' (+ uncommitted changes)')"

# This tree's server.
cargo build --release --quiet --bin disque-server
new="$PWD/target/release/disque-server"

# The previous commit's server, built in a temporary worktree (kept per
# commit in target/upgrade-base, so a rerun does not build it again).
base_target="$PWD/target/upgrade-base"
old="$base_target/disque-server-$base"
if [ ! -x "$old" ]; then
    wt=$(mktemp -d "${TMPDIR:-/tmp}/disque-upgrade-base.XXXXXX")
    cleanup() {
        git worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"
        git worktree prune >/dev/null 2>&1 || true
    }
    trap cleanup EXIT
    git worktree add -q --detach "$wt" "$base"
    if [ ! -d "$base_target/release" ] && [ -d target/release/deps ]; then
        # Dependencies built once are reused (same lock file: nothing to do).
        mkdir -p "$base_target"
        cp -a target/release "$base_target/release"
        rm -f "$base_target/release/disque-server"
    fi
    (cd "$wt" && CARGO_TARGET_DIR="$base_target" cargo build --release --quiet --bin disque-server)
    cp "$base_target/release/disque-server" "$old.tmp"
    mv "$old.tmp" "$old"
fi
[ "$base" != "$head" ] || echo "upgrade-test: note: the previous commit is this commit"

python3 scripts/upgrade_test.py --old "$old" --new "$new" ${keep[@]+"${keep[@]}"}
