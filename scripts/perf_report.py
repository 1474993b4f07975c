#!/usr/bin/env python3
"""Summarise a scripts/perf.sh results directory into a markdown table.

Reads RESULTS/raw.csv (one line per benchmark run, prefixed by
section,label,rep), RESULTS/rss.csv and RESULTS/machine.txt; writes
RESULTS/summary.csv (medians) and prints markdown with ratios (ours / Redis)
and the target ratios.

usage: perf_report.py RESULTS_DIR
"""

import csv
import os
import statistics
import sys
from collections import defaultdict


def load_runs(path):
    runs = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for k in ("ops_per_sec", "p50_us", "p99_us", "p999_us", "max_us"):
                row[k] = float(row[k])
            row["errors"] = int(row["errors"])
            runs[(row["section"], row["label"])].append(row)
    return runs


def med(rows, key):
    return statistics.median(r[key] for r in rows) if rows else float("nan")


def spread(rows):
    """min-max of ops/s as a +-% of the median, a noise gauge."""
    if len(rows) < 2:
        return ""
    m = med(rows, "ops_per_sec")
    lo = min(r["ops_per_sec"] for r in rows)
    hi = max(r["ops_per_sec"] for r in rows)
    return f"{(lo - m) / m * 100:+.0f}/{(hi - m) / m * 100:+.0f}%"


def paired(a, b):
    """Per-round ratios a/b (runs of a round are interleaved), as text."""
    rb = {r["rep"]: r["ops_per_sec"] for r in b}
    out = [f"{r['ops_per_sec'] / rb[r['rep']]:.2f}" for r in a if rb.get(r["rep"])]
    return " ".join(out)


def kops(v):
    return f"{v / 1000:.1f}k" if v == v else "n/a"


def us(v):
    if v != v:
        return "n/a"
    return f"{v / 1000:.2f} ms" if v >= 10000 else f"{v:.0f} µs"


def verdict(ok):
    return "**met**" if ok else "**not met**"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    d = sys.argv[1]
    runs = load_runs(os.path.join(d, "raw.csv"))

    with open(os.path.join(d, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["section", "label", "runs", "ops_per_sec", "p50_us", "p99_us",
                    "p999_us", "errors", "ops_min", "ops_max"])
        for (sec, lab), rows in sorted(runs.items()):
            w.writerow([sec, lab, len(rows), f"{med(rows, 'ops_per_sec'):.1f}",
                        med(rows, "p50_us"), med(rows, "p99_us"), med(rows, "p999_us"),
                        sum(r["errors"] for r in rows),
                        min(r["ops_per_sec"] for r in rows),
                        max(r["ops_per_sec"] for r in rows)])

    def g(sec, lab):
        return runs.get((sec, lab), [])

    out = []
    p = out.append
    machine = ""
    mpath = os.path.join(d, "machine.txt")
    if os.path.exists(mpath):
        machine = open(mpath).read().strip()
    p("Machine and run:")
    p("")
    p("```")
    p(machine)
    p("```")
    p("")
    p("Throughput: median of the runs (spread = min/max vs median); latency: "
      "median of the runs' percentiles.")
    p("")
    p("| Workload (50 clients, 100 B) | disque-rs ops/s | spread | p50 / p99 | Redis ops/s "
      "| spread | p50 / p99 | ratio ours/Redis | per-round ratios | target | |")
    p("|---|---:|---:|---|---:|---:|---|---:|---|---|---|")
    targets = {"unpipelined": 0.9, "pipelined": 0.5}
    errors = 0
    for sec, name in (("unpipelined", "unpipelined"), ("pipelined", "pipelined P=16")):
        for ours, theirs, what in (("addjob", "lpush", "ADDJOB vs LPUSH"),
                                   ("getjob", "rpop", "GETJOB NOHANG vs RPOP")):
            a, b = g(sec, ours), g(sec, theirs)
            if not a and not b:
                continue  # section not run (SECTIONS)
            errors += sum(r["errors"] for r in a + b)
            ra, rb = med(a, "ops_per_sec"), med(b, "ops_per_sec")
            ratio = ra / rb if rb == rb and rb > 0 else float("nan")
            t = targets[sec]
            p(f"| {what}, {name} | {kops(ra)} | {spread(a)} | {us(med(a, 'p50_us'))} / "
              f"{us(med(a, 'p99_us'))} | {kops(rb)} | {spread(b)} | {us(med(b, 'p50_us'))} / "
              f"{us(med(b, 'p99_us'))} | **{ratio:.2f}×** | {paired(a, b)} | ≥ {t}× | "
              f"{verdict(ratio >= t)} |")
    a, b = g("cycle", "cycle"), g("cycle", "redis-cycle")
    ra, rb = med(a, "ops_per_sec"), med(b, "ops_per_sec")
    if a:
        p(f"| cycle ADDJOB→GETJOB→ACKJOB vs LPUSH→BRPOP (25+25 clients), saturated "
          f"(latency = queueing) | {kops(ra)} | {spread(a)} | – | {kops(rb)} | {spread(b)} | – | "
          f"{ra / rb if rb else float('nan'):.2f}× | {paired(a, b)} | – | |")
    p("")

    # Memory.
    rss_path = os.path.join(d, "rss.csv")
    if os.path.exists(rss_path):
        per = defaultdict(list)
        with open(rss_path, newline="") as f:
            for row in csv.DictReader(f):
                per[row["target"]].append(float(row["bytes_per_job"]))
        dq = statistics.median(per["disque"]) if per["disque"] else float("nan")
        rd = statistics.median(per["redis"]) if per["redis"] else float("nan")
        p("| Memory: RSS per queued 100-byte job (1M jobs, fresh server) | disque-rs | Redis LPUSH "
          "| ratio | target | |")
        p("|---|---:|---:|---:|---|---|")
        p(f"| VmRSS after − before, ÷ jobs (median of {len(per['disque'])}) | {dq:.0f} B | "
          f"{rd:.0f} B | {dq / rd:.2f}× | ≤ 270 B | {verdict(dq <= 270)} |")
        p("")

    # Replication.
    r1 = g("replication", "single-r1")
    s3 = g("replication", "cluster-r3-sync")
    a3 = g("replication", "cluster-r3-async")
    c1 = g("replication", "cluster-r1")
    if r1:
        base = med(r1, "ops_per_sec")
        p("| Replication (ADDJOB, 50 clients, 100 B) | ops/s | spread | p50 / p99 "
          "| ratio vs single-node REPLICATE 1 | target | |")
        p("|---|---:|---:|---|---:|---|---|")
        for rows, what, tgt in ((r1, "single node, REPLICATE 1", None),
                                (s3, "3-node cluster, REPLICATE 3 synchronous", 0.8),
                                (a3, "3-node cluster, REPLICATE 3 ASYNC", None),
                                (c1, "3-node cluster, REPLICATE 1", None)):
            if not rows:
                continue
            errors += sum(r["errors"] for r in rows)
            v = med(rows, "ops_per_sec")
            ratio = v / base
            tcol = f"≥ {tgt}×" if tgt else "–"
            vcol = verdict(ratio >= tgt) if tgt else ""
            p(f"| {what} | {kops(v)} | {spread(rows)} | {us(med(rows, 'p50_us'))} / "
              f"{us(med(rows, 'p99_us'))} | {ratio:.2f}× | {tcol} | {vcol} |")
        p("")
    a, b = g("cycle-paced", "cycle"), g("cycle-paced", "redis-cycle")
    if a:
        p("| Cycle end-to-end latency at a fixed rate (25 producers paced, 25 consumers) "
          "| jobs/s done | p50 | p99 | p99.9 |")
        p("|---|---:|---:|---:|---:|")
        for rows, what in ((a, "disque-rs ADDJOB → GETJOB TIMEOUT → ACKJOB"),
                           (b, "Redis LPUSH → BRPOP")):
            if rows:
                p(f"| {what} | {kops(med(rows, 'ops_per_sec'))} | {us(med(rows, 'p50_us'))} | "
                  f"{us(med(rows, 'p99_us'))} | {us(med(rows, 'p999_us'))} |")
        p("")
    # Persistence.
    if any(sec == "aof" for sec, _ in runs):
        p("| ADDJOB with the AOF (50 clients, 100 B) | pipeline | ops/s | spread | p50 / p99 "
          "| ratio vs AOF off | per-round ratios | target | |")
        p("|---|---:|---:|---:|---|---:|---|---|---|")
        for P in (1, 16):
            base = g("aof", f"off-p{P}")
            for pol, tgt in (("off", None), ("everysec", 0.95), ("no", 0.95),
                             ("always", None)):
                rows = g("aof", f"{pol}-p{P}")
                if not rows:
                    continue
                errors += sum(r["errors"] for r in rows)
                v = med(rows, "ops_per_sec")
                ratio = v / med(base, "ops_per_sec") if base else float("nan")
                what = "AOF off" if pol == "off" else f"appendfsync {pol}"
                tcol = f"≥ {tgt}×" if tgt else "–"
                vcol = verdict(ratio >= tgt) if tgt else ""
                p(f"| {what} | {P} | {kops(v)} | {spread(rows)} | {us(med(rows, 'p50_us'))} / "
                  f"{us(med(rows, 'p99_us'))} | {ratio:.2f}× | {paired(rows, base)} | {tcol} "
                  f"| {vcol} |")
        p("")
    p(f"Errors reported by the benchmark over all runs: {errors}.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
