#!/usr/bin/env python3
"""Turn disque-benchmark --csv lines into an SVG chart (no third-party deps).

Input columns (a header line is optional; extra trailing columns are ignored):
  target,workload,clients,pipeline,size,ops_per_sec,p50_us,p99_us,p999_us

Top panel: throughput vs clients, one line per (target, workload, pipeline).
Bottom panel: latency percentiles vs clients (log scale), same colours;
p50 solid, p99 dashed, p999 dotted.  Repeated runs of one point are
reduced to their median.

usage: perf_chart.py RESULTS.csv [MORE.csv ...] [-o chart.svg] [--title T]
"""

import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict
from xml.sax.saxutils import escape

COLUMNS = ["target", "workload", "clients", "pipeline", "size",
           "ops_per_sec", "p50_us", "p99_us", "p999_us"]
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
           "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]
PCTS = [("p50_us", "p50", ""), ("p99_us", "p99", "6,4"), ("p999_us", "p99.9", "2,3")]


def read_rows(paths):
    rows = []
    for path in paths:
        with (sys.stdin if path == "-" else open(path, newline="")) as f:
            for lineno, rec in enumerate(csv.reader(f), 1):
                if not rec or rec[0].strip().startswith("#") or rec[0].strip() == "target":
                    continue
                if len(rec) < len(COLUMNS):
                    print(f"{path}:{lineno}: skipped, {len(rec)} columns", file=sys.stderr)
                    continue
                try:
                    row = dict(zip(COLUMNS, (c.strip() for c in rec)))
                    for k in ("clients", "pipeline", "size"):
                        row[k] = int(row[k])
                    for k in ("ops_per_sec", "p50_us", "p99_us", "p999_us"):
                        row[k] = float(row[k])
                except ValueError as e:
                    print(f"{path}:{lineno}: skipped ({e})", file=sys.stderr)
                    continue
                rows.append(row)
    return rows


def series_of(rows):
    """{(target, workload, pipeline, size): {clients: {metric: median}}}"""
    acc = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        key = (r["target"], r["workload"], r["pipeline"], r["size"])
        for m in ("ops_per_sec", "p50_us", "p99_us", "p999_us"):
            acc[key][r["clients"]][m].append(r[m])
    return {k: {c: {m: statistics.median(v) for m, v in ms.items()}
                for c, ms in pts.items()}
            for k, pts in sorted(acc.items())}


def nice_max(v):
    if v <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    for step in (1, 2, 2.5, 5, 10):
        if v <= step * mag:
            return step * mag
    return 10 * mag


def fmt_num(v):
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


class Svg:
    def __init__(self, width, height):
        self.w, self.h, self.parts = width, height, []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=12, anchor="start", weight="normal", color="#222"):
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                 f'font-weight="{weight}" fill="{color}">{escape(str(s))}</text>')

    def line(self, x1, y1, x2, y2, color="#ccc", width=1, dash=""):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                 f'stroke="{color}" stroke-width="{width}"{d}/>')

    def polyline(self, pts, color, dash="", width=2):
        if not pts:
            return
        d = f' stroke-dasharray="{dash}"' if dash else ""
        p = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        self.add(f'<polyline points="{p}" fill="none" stroke="{color}" stroke-width="{width}"{d}/>')
        for x, y in pts:
            self.add(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')

    def render(self):
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}" font-family="sans-serif">\n'
                f'<rect width="100%" height="100%" fill="white"/>\n'
                + "\n".join(self.parts) + "\n</svg>\n")


def panel(svg, top, height, left, width, xs, title, ylabel):
    """Draws axes and the x ticks; returns {clients: x}."""
    svg.text(left, top - 10, title, size=14, weight="bold")
    svg.line(left, top + height, left + width, top + height, "#444")
    svg.line(left, top, left, top + height, "#444")
    n = len(xs)
    x_of = {c: left + (i + 0.5) * width / n for i, c in enumerate(xs)}
    for c, x in x_of.items():
        svg.line(x, top + height, x, top + height + 4, "#444")
        svg.text(x, top + height + 18, c, anchor="middle")
    svg.text(left + width / 2, top + height + 36, "clients", anchor="middle")
    svg.add(f'<text transform="translate({left - 62},{top + height / 2}) rotate(-90)" '
            f'font-size="12" text-anchor="middle">{escape(ylabel)}</text>')
    return x_of


def draw(series, out, title):
    xs = sorted({c for pts in series.values() for c in pts})
    colors = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(series)}
    left, width, legend_w = 90, 620, 300
    h1, h2, gap = 300, 300, 90
    top1 = 60
    top2 = top1 + h1 + gap
    svg = Svg(left + width + legend_w, top2 + h2 + 60)
    svg.text(left, 24, title, size=16, weight="bold")

    # Throughput panel (linear).
    x_of = panel(svg, top1, h1, left, width, xs, "Throughput", "ops/s")
    ymax = nice_max(max((p["ops_per_sec"] for pts in series.values() for p in pts.values()),
                        default=1))
    for i in range(6):
        v = ymax * i / 5
        y = top1 + h1 - h1 * i / 5
        svg.line(left, y, left + width, y, "#eee")
        svg.text(left - 6, y + 4, fmt_num(v), anchor="end")
    for key, pts in series.items():
        svg.polyline([(x_of[c], top1 + h1 - h1 * pts[c]["ops_per_sec"] / ymax)
                      for c in sorted(pts)], colors[key])

    # Latency panel (log10).
    panel(svg, top2, h2, left, width, xs, "Latency percentiles", "microseconds (log)")
    vals = [p[m] for pts in series.values() for p in pts.values()
            for m, _, _ in PCTS if p[m] > 0]
    lo = 10 ** math.floor(math.log10(min(vals))) if vals else 1
    hi = 10 ** math.ceil(math.log10(max(vals))) if vals else 10
    if hi <= lo:
        hi = lo * 10
    span = math.log10(hi) - math.log10(lo)

    def y_log(v):
        v = max(v, lo)
        return top2 + h2 - h2 * (math.log10(v) - math.log10(lo)) / span

    d = int(math.log10(lo))
    while 10 ** d <= hi:
        y = y_log(10 ** d)
        svg.line(left, y, left + width, y, "#eee")
        svg.text(left - 6, y + 4, fmt_num(10 ** d), anchor="end")
        d += 1
    for key, pts in series.items():
        for metric, _, dash in PCTS:
            svg.polyline([(x_of[c], y_log(pts[c][metric])) for c in sorted(pts)
                          if pts[c][metric] > 0], colors[key], dash=dash, width=1.5)

    # Legend.
    lx, ly = left + width + 30, top1
    svg.text(lx, ly, "target / workload / pipeline / size", weight="bold")
    for i, key in enumerate(series):
        y = ly + 22 + i * 20
        svg.line(lx, y - 4, lx + 24, y - 4, colors[key], width=3)
        t, w, p, s = key
        svg.text(lx + 32, y, f"{t} / {w} / P={p} / {s}B")
    ly = top2
    svg.text(lx, ly, "percentile", weight="bold")
    for i, (_, name, dash) in enumerate(PCTS):
        y = ly + 22 + i * 20
        svg.line(lx, y - 4, lx + 24, y - 4, "#333", width=2, dash=dash)
        svg.text(lx + 32, y, name)

    with (sys.stdout if out == "-" else open(out, "w")) as f:
        f.write(svg.render())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", help="CSV files from --csv runs ('-' = stdin)")
    ap.add_argument("-o", "--output", default="perf_chart.svg", help="SVG path ('-' = stdout)")
    ap.add_argument("--title", default="disque-benchmark")
    a = ap.parse_args()
    rows = read_rows(a.csv)
    if not rows:
        print("no data rows", file=sys.stderr)
        return 1
    draw(series_of(rows), a.output, a.title)
    if a.output != "-":
        print(f"wrote {a.output} ({len(rows)} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
