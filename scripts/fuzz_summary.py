#!/usr/bin/env python3
"""Coverage-over-time summary of scripts/fuzz.sh runs.

Usage: fuzz_summary.py [--logs DIR] TARGET...   (reads DIR/TARGET.log,
DIR defaulting to fuzz/logs)

Each log line starts with the Unix time it was printed. From libFuzzer's
status lines ("#N NEW/REDUCE/pulse cov: C ft: F corp: K/S exec/s: E") it
prints, per target, a Markdown table row: total execs, run time, execs/s,
final coverage (cov = instrumented edges hit, ft = features), corpus size,
coverage at 25/50/75/100% of the run, and when coverage last grew - the
plateau evidence: a run has plateaued when `cov` stopped growing well
before its end.
"""
import os
import re
import sys

STATUS = re.compile(r"^(\d+) #(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)(?: .*exec/s: (\d+))?")
STAT = re.compile(r"^\d+ stat::(\w+):\s+(\d+)")


LOGS = os.path.join(os.path.dirname(__file__), "..", "fuzz", "logs")


def summarize(target, logs=LOGS):
    path = os.path.join(logs, target + ".log")
    rows, stats, start = [], {}, None
    with open(path, errors="replace") as f:
        for line in f:
            ts = line.split(" ", 1)[0]
            if start is None and ts.isdigit():
                start = int(ts)
            m = STATUS.match(line)
            if m:
                rows.append((int(m[1]) - start, int(m[2]), m[3], int(m[4]), int(m[5]), int(m[6]), m[7]))
            m = STAT.match(line)
            if m:
                stats[m[1]] = int(m[2])
    if not rows:
        return f"| {target} | no status lines (build or start failure?) |"
    end_t = max(rows[-1][0], 1)
    execs = stats.get("number_of_executed_units", rows[-1][1])

    def cov_at(frac):
        t = end_t * frac
        best = rows[0][3]
        for r in rows:
            if r[0] <= t:
                best = r[3]
        return best

    last_growth = 0
    prev = -1
    for r in rows:
        if r[3] > prev:
            prev, last_growth = r[3], r[0]
    final = rows[-1]
    eps = stats.get("average_exec_per_sec", execs // end_t)
    return (
        f"| {target} | {execs:,} | {end_t} s | {eps:,} | {final[3]} | {final[4]} | "
        f"{final[5]} ({final[6]}) | {cov_at(0.25)} / {cov_at(0.5)} / {cov_at(0.75)} / {final[3]} | "
        f"{last_growth} s |"
    )


def main():
    args = sys.argv[1:]
    logs = LOGS
    if args[:1] == ["--logs"]:
        logs, args = args[1], args[2:]
    print("| target | execs | time | execs/s | cov (edges) | ft | corpus | cov at 25/50/75/100% | cov last grew at |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in args:
        try:
            print(summarize(t, logs))
        except OSError as e:
            print(f"| {t} | no log: {e} |")


if __name__ == "__main__":
    main()
