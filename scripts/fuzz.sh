#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer on the stable toolchain
# (fuzz/README.md says why this setup, docs/RELIABILITY.md has results).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   run targets (default: all, 60 s)
#   scripts/fuzz.sh seeds                              regenerate the engine-made seeds
#
# Each target runs for SECONDS_PER_TARGET on fuzz/corpus/<target> (the
# working corpus, kept between runs, not committed) plus the committed
# seeds in fuzz/seeds/<target>. A crash, panic, timeout (>10 s per input)
# or RSS above 2 GiB stops that target with its input saved under
# fuzz/artifacts/<target>/, and this script exits non-zero. The timestamped
# libFuzzer output goes to fuzz/logs/<target>.log and a coverage-over-time
# summary (scripts/fuzz_summary.py) is printed at the end.
#
# Needs: cargo (stable), a C++ compiler for libFuzzer's sources
# (libfuzzer-sys builds them), python3. Installs g++ if missing (as root);
# fails loudly otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ALL=(resp bus job_codec aof nodes_conf config)

if ! command -v c++ >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++
    else
        echo "error: no C++ compiler (needed to build libFuzzer): install g++" >&2
        exit 1
    fi
fi
for tool in cargo rustc python3; do
    command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found" >&2; exit 1; }
done

# Sanitizer-coverage instrumentation through LLVM passes that stable rustc
# accepts (no -Zsanitizer, no nightly); `--cfg fuzzing` is what
# libfuzzer-sys and cargo-fuzz set. Debug assertions and overflow checks
# on, so arithmetic a peer can overflow is a finding.
export RUSTFLAGS="-Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# An explicit --target keeps RUSTFLAGS off build scripts and proc macros
# (they would not link without the libFuzzer runtime). The `fuzz` profile
# (root Cargo.toml: release with debug assertions and overflow checks)
# keeps this instrumented build in target/<host>/fuzz, apart from every
# other build of the workspace.
HOST=$(rustc -vV | sed -n 's/^host: //p')
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/$HOST/fuzz"

if [ "${1:-}" = seeds ]; then
    (cd fuzz && cargo run --profile fuzz --target "$HOST" -p disque-fuzz --example gen_seeds -- seeds)
    exit 0
fi

SECS=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
    [[ " ${ALL[*]} " == *" $t "* ]] || { echo "error: unknown target '$t' (have: ${ALL[*]})" >&2; exit 1; }
done

# FUZZ_NO_BUILD=1: use the binaries already built (e.g. a second run
# while a source change that the targets do not care about is pending).
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
    cargo build --profile fuzz --target "$HOST" -p disque-fuzz --bins
fi

failed=()
for t in "${TARGETS[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t" fuzz/logs
    log="fuzz/logs/$t.log"
    echo "== fuzz $t for ${SECS}s (log: $log)"
    # -timeout: one input taking >10 s is a hang; -rss_limit_mb: memory
    # blow-up. Each output line is prefixed with the Unix time (bash's
    # printf %T, no fork per line) for the coverage-over-time summary.
    # A dictionary (fuzz/dicts/<target>.dict: directive names, record
    # framing) lets the mutator splice in whole tokens it would otherwise
    # have to find byte by byte. Config files gain nothing past a few KB
    # but each execution costs more, so that target's inputs stay small.
    extra=()
    [ -f "fuzz/dicts/$t.dict" ] && extra+=("-dict=dicts/$t.dict")
    case $t in config | nodes_conf) maxlen=4096 ;; *) maxlen=65536 ;; esac
    set +e
    (cd fuzz && "$BIN/$t" "corpus/$t" "seeds/$t" "${extra[@]}" \
        -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
        -max_len="$maxlen" -print_final_stats=1 -artifact_prefix="artifacts/$t/" 2>&1) |
        while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done >"$log"
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" -ne 0 ]; then
        echo "!! $t failed (exit $rc); see $log and fuzz/artifacts/$t/" >&2
        grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -20 >&2 || true
        failed+=("$t")
    fi
done
python3 scripts/fuzz_summary.py "${TARGETS[@]}"
if [ ${#failed[@]} -ne 0 ]; then
    echo "error: fuzz targets failed: ${failed[*]}" >&2
    exit 1
fi
