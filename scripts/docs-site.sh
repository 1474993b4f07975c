#!/usr/bin/env bash
# The documentation site: builds docs/ (book.toml at the repository root,
# docs/SUMMARY.md) with mdBook into target/book, fails on any mdBook
# warning, then checks every link of the built HTML with
# scripts/docs_linkcheck.py: each relative link and #anchor must resolve
# inside the book; external links are only syntax-checked (no network).
# Installs mdBook from crates.io with cargo unless this version is on
# PATH already, and fails loudly when it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.4.52
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$PATH:$CARGO_BIN"

if ! mdbook --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
    echo "docs-site: installing mdbook $MDBOOK_VERSION with cargo install" >&2
    if ! cargo install mdbook --locked --version "$MDBOOK_VERSION"; then
        echo "docs-site: FAIL: cargo install mdbook --version $MDBOOK_VERSION failed" >&2
        exit 1
    fi
fi
mdbook --version | grep -qx "mdbook v$MDBOOK_VERSION" || {
    echo "docs-site: FAIL: mdbook $MDBOOK_VERSION is not the one on PATH ($(command -v mdbook))" >&2
    exit 1
}

rm -rf target/book
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! mdbook build 2>&1 | tee "$log"; then
    echo "docs-site: FAIL: mdbook build failed" >&2
    exit 1
fi
if grep -E '\b(WARN|ERROR)\b' "$log" >/dev/null; then
    echo "docs-site: FAIL: mdbook build warnings (above)" >&2
    exit 1
fi
[ -f target/book/index.html ] || { echo "docs-site: FAIL: no target/book/index.html" >&2; exit 1; }
python3 scripts/docs_linkcheck.py target/book
echo "docs-site: OK (target/book/index.html)"
