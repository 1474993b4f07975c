#!/usr/bin/env python3
"""A long run (soak) of a 3-node cluster of the real disque-server at a fixed
rate, with periodic faults (run through scripts/soak.sh; docs/RELIABILITY.md
has the method and the published run).

The cluster is the one scripts/chaos.py builds (each node in its own network
namespace, the bus routed by scripts/chaos_net.py, AOF on with appendfsync
everysec), with one producer and one consumer beside every node:

  producer: ADDJOB soak-q<0|1> <64-byte body> 5000 REPLICATE 2 RETRY 10
            TTL 3600 at a fixed rate (no jitter; a producer that falls
            more than a second behind skips ahead instead of bursting)
  consumer: GETJOB TIMEOUT 500 COUNT 16 FROM soak-q0 soak-q1, then one
            ACKJOB for the whole batch

and a schedule (SCHEDULE ADD soak-tick soak-ticks tick EVERY 1), whose tick
jobs a tick consumer beside every node takes, names by their DEDUP key
(SHOW's dedup-key, sched:soak-tick:<ms>) and acknowledges.

Faults, one every --fault-every seconds after a calm warm-up, rotating over
the nodes: `kill -9` and restart (the node comes back from its AOF) and a
partition (one node cut off from the two others, both directions); once,
at --rolling-at of the run, a rolling restart (SIGTERM each node in turn,
which must exit 0, start it again, wait until the cluster is whole).

Every --sample seconds one row is recorded: each node's RSS
(/proc/<pid>/status VmRSS), ADDJOB / ACKJOB / end-to-end (ADDJOB sent ->
first GETJOB delivery) latency percentiles measured by the clients over
the interval, and counts (added, add errors, delivered, duplicates,
outstanding, faults). At the end the producers stop, the consumers drain,
and the run checks: 0 lost (every ID an ADDJOB returned was delivered),
no node exited unless the harness stopped it, no panic in a log, every node
answers PING, the cluster converged (no queued/active job left), and every
tick of the schedule from the first whole second after SCHEDULE ADD to 5 s
before the producers stopped was delivered (duplicate ticks, possible while
a partition separates nodes, are counted, not failed).

Output in --out DIR: samples.jsonl, summary.json, table.md (Markdown) and
chart.svg. Exit status 1 when a check fails.

Usage: soak.py --bin PATH [--duration S] [--rate R] [--sample S]
               [--fault-every S] [--rolling-at F] [--seed N] [--out DIR]
"""

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from chaos import Net, Node, NodeLoop, log, process_alive
from disque_client import Ledger, RespError
from perf_chart import Svg

NODES = 3
QUEUES = ["soak-q0", "soak-q1"]
REPLICATE = 2
PREFIX = "dqs"
SCHEDULE = "soak-tick"
TICK_QUEUE = "soak-ticks"


class Prof:
    """What chaos.Node reads from a profile, plus the soak's own timings."""

    def __init__(self, args):
        self.node_timeout_ms = 3000
        self.retry_s = 10
        self.addjob_timeout_ms = 5000
        self.rate = args.rate
        self.duration_s = args.duration
        self.sample_s = args.sample
        self.fault_every_s = args.fault_every
        self.rolling_at = args.rolling_at
        self.warmup_s = min(30.0, args.fault_every / 2)
        self.drain_s = 180.0
        self.converge_s = 120.0


def pct(values, p):
    """The p-th percentile (nearest rank) of `values`, None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


class Window:
    """Latencies and counts of the current sampling interval."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.add_ms, self.ack_ms, self.e2e_ms = [], [], []
        self.added = self.add_errors = self.delivered = self.dups = 0
        self.faults = []

    def take(self):
        with self.lock:
            out = (self.add_ms, self.ack_ms, self.e2e_ms, self.added, self.add_errors,
                   self.delivered, self.dups, self.faults)
            self.reset()
            return out


class Producer(threading.Thread):
    def __init__(self, node, ledger, win, prof):
        super().__init__(daemon=True)
        self.node, self.ledger, self.win, self.prof = node, ledger, win, prof
        self.stop = threading.Event()
        self.unknown = 0

    def run(self):
        c = None
        n = 0
        interval = 1.0 / self.prof.rate
        next_t = time.time()
        sock_timeout = self.prof.addjob_timeout_ms / 1000.0 + 3.0
        while not self.stop.is_set():
            next_t += interval
            now = time.time()
            if next_t < now - 1.0:
                next_t = now  # fell behind (a fault): skip ahead, no burst
            if next_t > now and self.stop.wait(next_t - now):
                break
            q = QUEUES[n % len(QUEUES)]
            body = ("s%d-%d-" % (self.node.idx, n)).ljust(64, "x")
            n += 1
            t0 = time.time()
            try:
                if c is None:
                    c = self.node.client(sock_timeout)
                r = c.cmd("ADDJOB", q, body, self.prof.addjob_timeout_ms,
                          "REPLICATE", REPLICATE, "RETRY", self.prof.retry_s, "TTL", 3600)
            except (OSError, ConnectionError):
                # The outcome is unknown when the connection broke mid-call:
                # never counted as added (a surviving copy is an orphan).
                if c is not None:
                    self.unknown += 1
                    c.close()
                    c = None
                else:
                    self.ledger.add_error("unreachable")
                with self.win.lock:
                    self.win.add_errors += 1
                continue
            t1 = time.time()
            if isinstance(r, str) and r.startswith("D-"):
                # Added at t0 (when ADDJOB was sent): a consumer may get the
                # job before this reply arrives; whichever side comes second
                # records the add->delivery time.
                with self.ledger.lock:
                    self.ledger.added.add(r)
                    self.ledger.add_time[r] = t0
                    first = self.ledger.deliveries.get(r)
                with self.win.lock:
                    self.win.added += 1
                    self.win.add_ms.append((t1 - t0) * 1000.0)
                    if first:
                        self.win.e2e_ms.append((first[0][0] - t0) * 1000.0)
            else:
                self.ledger.add_error(str(r).split(" ")[0] if isinstance(r, RespError)
                                      else "unexpected")
                with self.win.lock:
                    self.win.add_errors += 1
        if c is not None:
            c.close()


class Consumer(NodeLoop):
    def __init__(self, node, ledger, win):
        super().__init__(node)
        self.ledger, self.win = ledger, win

    def step(self, c):
        r = c.cmd("GETJOB", "TIMEOUT", 500, "COUNT", 16, "FROM", *QUEUES)
        if isinstance(r, RespError):
            self.stop.wait(0.2)
            return
        if not r:
            return
        now = time.time()
        ids = [job[1] for job in r]
        e2e, dups = [], 0
        with self.ledger.lock:
            for jid in ids:
                if jid in self.ledger.deliveries:
                    dups += 1
                elif jid in self.ledger.add_time:
                    e2e.append((now - self.ledger.add_time[jid]) * 1000.0)
                self.ledger.deliveries.setdefault(jid, []).append((now, self.node.idx))
        with self.win.lock:
            self.win.delivered += len(ids) - dups
            self.win.dups += dups
            self.win.e2e_ms.extend(e2e)
        t0 = time.time()
        a = c.cmd("ACKJOB", *ids)
        t1 = time.time()
        if not isinstance(a, RespError):
            for jid in ids:
                self.ledger.acked(jid, t1)
            with self.win.lock:
                self.win.ack_ms.append((t1 - t0) * 1000.0)


class TickConsumer(NodeLoop):
    """Takes the schedule's tick jobs from one node and records, per tick
    key, the IDs delivered for it."""

    def __init__(self, node, ticks):
        super().__init__(node)
        self.ticks = ticks

    def step(self, c):
        r = c.cmd("GETJOB", "TIMEOUT", 500, "COUNT", 16, "FROM", TICK_QUEUE)
        if isinstance(r, RespError):
            self.stop.wait(0.2)
            return
        for job in r or []:
            show = c.cmd("SHOW", job[1])
            key = None
            if isinstance(show, list):
                key = dict(zip(show[::2], show[1::2])).get("dedup-key")
            if isinstance(key, str):
                with self.ticks.lock:
                    self.ticks.seen.setdefault(key, set()).add(job[1])
            c.cmd("ACKJOB", job[1])


class Ticks:
    """Tick keys delivered, and the window of ticks the run must deliver."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = {}
        self.first_ms = self.last_ms = 0

    def expected(self):
        return ["sched:%s:%d" % (SCHEDULE, t)
                for t in range(self.first_ms, self.last_ms + 1, 1000)]

    def missing(self):
        with self.lock:
            return [k for k in self.expected() if k not in self.seen]

    def duplicated(self):
        """The keys of the run's ticks delivered as more than one job."""
        with self.lock:
            return [k for k in self.expected() if len(self.seen.get(k, ())) > 1]


def schedule(prof, seed):
    """(start time in s, kind, node index 1..3, duration s) of every fault,
    drawn from the seed: kill and partition alternate, the node rotates,
    and the slot nearest --rolling-at is the rolling restart."""
    rng = random.Random("soak/%d" % seed)
    out = []
    t = prof.warmup_s
    i = 0
    rolling_t = prof.duration_s * prof.rolling_at
    rolled = False
    # A fault needs time to heal and the cluster to re-form before the
    # producers stop: no fault starts in the last fault-every seconds.
    while t + prof.fault_every_s <= prof.duration_s:
        if not rolled and t + prof.fault_every_s > rolling_t:
            out.append((t, "rolling", 0, 0.0))
            rolled = True
        else:
            kind = "kill" if i % 2 == 0 else "partition"
            node = (i // 2) % NODES + 1 if kind == "kill" else (i // 2 + 1) % NODES + 1
            dur = rng.uniform(8.0, 15.0) if kind == "kill" else rng.uniform(15.0, 25.0)
            out.append((t, kind, node, round(dur, 1)))
            i += 1
        t += prof.fault_every_s
    return out


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        pass
    return None


class Soak:
    def __init__(self, args):
        self.args = args
        self.prof = Prof(args)
        self.prefix = "%s%d" % (PREFIX, os.getpid())
        self.root = tempfile.mkdtemp(prefix="soak-")
        self.ledger = Ledger()
        self.ticks = Ticks()
        self.win = Window()
        self.nodes = []
        self.net = None
        self.samples = []
        self.stopped = threading.Event()
        self.busy = threading.Lock()  # held while the harness restarts nodes

    # ---- cluster ---------------------------------------------------------------

    def start_cluster(self):
        for i in range(1, NODES + 1):
            self.nodes.append(Node(i, self.prefix, self.root, self.args.bin, self.prof,
                                   "everysec"))
        self.net = Net(self.prefix, self.args.seed, self.nodes)
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            self.wait_serving(n)
        for n in self.nodes[1:]:
            r = self.nodes[0].cmd("CLUSTER", "MEET", n.ip, 7711)
            if isinstance(r, RespError):
                raise RuntimeError("CLUSTER MEET %s: %s" % (n.ip, r))
        self.wait_joined("formation")

    def wait_serving(self, n, deadline_s=60):
        t0 = time.time()
        while time.time() - t0 < deadline_s:
            n.check_exit()
            try:
                if n.cmd("PING", timeout=1.0) == "PONG":
                    return
            except (OSError, ConnectionError):
                pass
            time.sleep(0.1)
        raise RuntimeError("node %d not serving after %ds" % (n.idx, deadline_s))

    def wait_joined(self, why, deadline_s=90):
        t0 = time.time()
        while time.time() - t0 < deadline_s:
            if all(n.reachable() == NODES - 1 for n in self.nodes):
                log("%s: all %d nodes reach each other (%.1fs)" % (why, NODES, time.time() - t0))
                return
            time.sleep(0.2)
        raise RuntimeError("%s: cluster did not re-form in %ds: %s"
                           % (why, deadline_s, [n.reachable() for n in self.nodes]))

    def teardown(self):
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.expected_exit = True
                try:
                    os.kill(n.proc.pid, signal.SIGCONT)
                    os.kill(n.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                n.proc.wait(10)
        if self.net is not None:
            self.net.close()

    # ---- faults ------------------------------------------------------------------

    def fault(self, kind, idx, dur):
        node = self.nodes[idx - 1] if idx else None
        t0 = time.time()
        with self.win.lock:
            self.win.faults.append(kind)
        if kind == "kill":
            desc = "kill -9 node %d, restart after %.0fs" % (idx, dur)
            with self.busy:
                node.signal(signal.SIGKILL)
            self.stopped.wait(dur)
            with self.busy:
                node.start()
                self.wait_serving(node)
        elif kind == "partition":
            desc = "node %d cut off for %.0fs" % (idx, dur)
            others = [n for n in self.nodes if n is not node]
            drop = []
            for o in others:
                drop += [(node.ip, o.ip, 1.0), (o.ip, node.ip, 1.0)]
            self.net.set(drop=drop)
            self.stopped.wait(dur)
            self.net.heal()
        else:
            desc = "rolling restart (SIGTERM, start, rejoin; nodes 1..%d)" % NODES
            for n in self.nodes:
                with self.busy:
                    n.signal(signal.SIGTERM)
                    rc = n.proc.wait(60)
                    if rc != 0:
                        n.crashes.append("exit status %d after SIGTERM" % rc)
                        log("CRASH: node %d exited with status %d after SIGTERM" % (n.idx, rc))
                    n.start()
                    self.wait_serving(n)
                self.wait_joined("rolling restart, node %d" % n.idx)
        self.wait_joined("heal of '%s'" % desc)
        log("fault: %s (whole again after %.1fs)" % (desc, time.time() - t0))
        return {"t": round(t0 - self.t_start, 1), "kind": kind, "desc": desc,
                "healed": round(time.time() - self.t_start, 1)}

    # ---- sampling ----------------------------------------------------------------

    def sample(self, final=False):
        add_ms, ack_ms, e2e_ms, added, errs, deliv, dups, faults = self.win.take()
        now = time.time()
        if final and not (added or errs or deliv or dups or faults):
            return  # nothing happened since the last sample
        span = max(1e-3, now - self.last_sample)
        self.last_sample = now
        with self.ledger.lock:
            total_added = len(self.ledger.added)
            outstanding = len(self.ledger.added - set(self.ledger.deliveries))
        row = {
            "t_min": round((now - self.t_start) / 60.0, 2),
            "rss_mb": [None if n.proc is None or n.proc.poll() is not None
                       else (round(rss_mb(n.proc.pid), 1) if rss_mb(n.proc.pid) else None)
                       for n in self.nodes],
            "add_p50": pct(add_ms, 50), "add_p99": pct(add_ms, 99),
            "add_max": max(add_ms) if add_ms else None,
            "ack_p50": pct(ack_ms, 50), "ack_p99": pct(ack_ms, 99),
            "e2e_p50": pct(e2e_ms, 50), "e2e_p99": pct(e2e_ms, 99),
            "added": added, "add_errors": errs, "delivered": deliv, "dups": dups,
            "added_per_s": round(added / span, 1), "delivered_per_s": round(deliv / span, 1),
            "total_added": total_added, "outstanding": outstanding,
            "faults": faults, "final": final,
        }
        for k in list(row):
            if isinstance(row[k], float) and k.endswith(("p50", "p99", "max")):
                row[k] = round(row[k], 2)
        self.samples.append(row)
        with open(os.path.join(self.args.out, "samples.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        log("sample %5.1f min: rss %s MB, addjob p50/p99 %s/%s ms, e2e p99 %s ms, "
            "+%d added, %d errors, %d delivered, %d dups, %d outstanding, faults %s"
            % (row["t_min"], row["rss_mb"], row["add_p50"], row["add_p99"], row["e2e_p99"],
               added, errs, deliv, dups, outstanding, faults or "-"))

    def sampler(self):
        while not self.stop_sampler.wait(self.prof.sample_s):
            self.sample()

    def monitor(self):
        while not self.stop_sampler.wait(0.2):
            if self.busy.acquire(blocking=False):
                try:
                    for n in self.nodes:
                        n.check_exit()
                finally:
                    self.busy.release()

    # ---- the run -------------------------------------------------------------------

    def execute(self):
        p = self.prof
        plan = schedule(p, self.args.seed)
        log("soak: %d nodes, %.0f ADDJOB/s per node, %ds, sample every %ds, dir %s"
            % (NODES, p.rate, p.duration_s, p.sample_s, self.root))
        log("plan: %s" % json.dumps(plan))
        self.start_cluster()
        r = self.nodes[0].cmd("SCHEDULE", "ADD", SCHEDULE, TICK_QUEUE, "tick", "EVERY", 1,
                              "RETRY", 5)
        if isinstance(r, RespError):
            raise RuntimeError("SCHEDULE ADD: %s" % r)
        self.ticks.first_ms = (int(time.time() * 1000) // 1000 + 1) * 1000
        self.t_start = self.last_sample = time.time()
        self.stop_sampler = threading.Event()
        threads = [threading.Thread(target=self.sampler, daemon=True),
                   threading.Thread(target=self.monitor, daemon=True)]
        producers = [Producer(n, self.ledger, self.win, p) for n in self.nodes]
        consumers = [Consumer(n, self.ledger, self.win) for n in self.nodes]
        consumers += [TickConsumer(n, self.ticks) for n in self.nodes]
        for t in threads + producers + consumers:
            t.start()
        events = []
        for (at, kind, idx, dur) in plan:
            wait = self.t_start + at - time.time()
            if wait > 0:
                time.sleep(wait)
            events.append(self.fault(kind, idx, dur))
        wait = self.t_start + p.duration_s - time.time()
        if wait > 0:
            time.sleep(wait)
        for t in producers:
            t.stop.set()
        for t in producers:
            t.join(30)
        t_stop = time.time()
        # Ticks of the last seconds may still wait for their rank's turn.
        self.ticks.last_ms = (int(t_stop * 1000) // 1000 - 5) * 1000
        log("producers stopped: %d added, add errors %s, %d unknown outcomes"
            % (len(self.ledger.added), self.ledger.error_kinds,
               sum(pr.unknown for pr in producers)))
        while ((self.ledger.missing() or self.ticks.missing())
               and time.time() - t_stop < p.drain_s):
            time.sleep(0.5)
        drain_s = time.time() - t_stop
        for n in self.nodes:
            try:
                if not isinstance(n.cmd("SCHEDULE", "DEL", SCHEDULE, timeout=2.0), RespError):
                    break
            except (OSError, ConnectionError):
                continue
        converged, leftovers = self.converge()
        for t in consumers:
            t.stop.set()
        for t in consumers:
            t.join(10)
        self.stop_sampler.set()
        for t in threads:
            t.join(10)
        self.sample(final=True)
        for n in self.nodes:
            n.check_exit()
        not_serving = []
        for n in self.nodes:
            try:
                if n.cmd("PING", timeout=2.0) != "PONG":
                    not_serving.append(n.idx)
            except (OSError, ConnectionError):
                not_serving.append(n.idx)
        panics = []
        for n in self.nodes:
            try:
                with open(os.path.join(n.dir, "stdout.log"), errors="replace") as f:
                    if "panicked" in f.read():
                        panics.append(n.idx)
            except OSError:
                pass
        L = self.ledger
        lost = sorted(L.missing())
        crashes = {n.idx: n.crashes for n in self.nodes if n.crashes}
        res = {
            "nodes": NODES, "replicate": REPLICATE, "aof": "everysec",
            "rate_per_node": p.rate, "duration_s": p.duration_s,
            "added": len(L.added), "add_errors": dict(L.error_kinds),
            "unknown_outcome": sum(pr.unknown for pr in producers),
            "delivered": len(L.added) - len(lost), "lost": len(lost), "lost_ids": lost[:20],
            "duplicates": L.duplicates(), "orphans": len(L.orphans()),
            "faults": events, "crashes": crashes, "panics": panics,
            "not_serving": not_serving, "converged": converged, "leftover_jobs": leftovers,
            "drain_s": round(drain_s, 1), "seed": self.args.seed,
            "ticks": len(self.ticks.expected()), "ticks_lost": self.ticks.missing(),
            "ticks_duplicated": self.ticks.duplicated(), "t_start": self.t_start,
            "commit": self.args.commit, "load_avg": os.getloadavg(),
        }
        res["ok"] = (res["lost"] == 0 and not crashes and not panics and not not_serving
                     and converged and not res["ticks_lost"] and res["ticks"] > 0)
        return res

    def converge(self):
        """Poll until QLEN is 0 everywhere and no node holds a queued,
        active or wait-repl job. Returns (ok, live jobs left)."""
        t0 = time.time()
        live = None
        while time.time() - t0 < self.prof.converge_s:
            if not self.ledger.missing():
                live = self.census()
                if live == 0:
                    log("converged: queues empty, no job queued/active (%.1fs)"
                        % (time.time() - t0))
                    return True, 0
            time.sleep(1.0)
        return False, self.census() if live is None else live

    def census(self):
        live = 0
        for n in self.nodes:
            try:
                for q in QUEUES + [TICK_QUEUE]:
                    r = n.cmd("QLEN", q)
                    live += r if isinstance(r, int) else 1
                r = n.cmd("JSCAN", 0, "BUSYLOOP", "STATE", "queued", "STATE", "active",
                          "STATE", "wait-repl")
                live += len(r[1]) if isinstance(r, list) else 1
            except (OSError, ConnectionError):
                live += 1
        return live


# ---- reports ---------------------------------------------------------------------------


def fmt(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, float):
        return ("%%.%df" % nd) % v
    return str(v)


def table(samples):
    """The per-sample Markdown table."""
    out = ["| min | RSS MB (n1 / n2 / n3) | ADDJOB p50 / p99 / max ms | ACKJOB p50 / p99 ms "
           "| add→deliver p50 / p99 ms | added/s | delivered/s | add errors | dups "
           "| outstanding | faults |",
           "|" + "---|" * 11]
    for r in samples:
        out.append("| %s%s | %s | %s / %s / %s | %s / %s | %s / %s | %s | %s | %d | %d | %d | %s |" % (
            fmt(r["t_min"]), " (end)" if r.get("final") else "",
            " / ".join(fmt(x, 0) for x in r["rss_mb"]),
            fmt(r["add_p50"]), fmt(r["add_p99"]), fmt(r["add_max"], 0),
            fmt(r["ack_p50"]), fmt(r["ack_p99"]), fmt(r["e2e_p50"]), fmt(r["e2e_p99"], 0),
            fmt(r["added_per_s"]), fmt(r["delivered_per_s"]), r["add_errors"], r["dups"],
            r["outstanding"], ", ".join(r["faults"]) or ""))
    return "\n".join(out) + "\n"


def chart(samples, res, path):
    """Three panels over time: RSS per node, ADDJOB and end-to-end latency
    (p50, p99; log scale), throughput; faults as marks on every panel."""
    rows = [r for r in samples if not r.get("final")] or samples
    left, width, ph, gap = 80, 820, 170, 70
    svg = Svg(left + width + 170, 60 + 3 * (ph + gap) + 20)
    svg.text(left, 26, "Soak: %d nodes, %g ADDJOB/s per node, %d min, seed %d — %d added, "
             "%d lost" % (NODES, res["rate_per_node"], res["duration_s"] // 60, res["seed"],
                          res["added"], res["lost"]), size=15, weight="bold")
    tmax = max([r["t_min"] for r in rows] + [res["duration_s"] / 60.0])

    def x_of(t):
        return left + width * t / tmax

    colors = ["#1f77b4", "#d62728", "#2ca02c"]
    fault_color = {"kill": "#d62728", "partition": "#ff7f0e", "rolling": "#9467bd"}

    def frame(top, title, ylabel, ticks, y_of):
        svg.text(left, top - 10, title, size=13, weight="bold")
        for v in ticks:
            y = y_of(v)
            svg.line(left, y, left + width, y, "#eee")
            svg.text(left - 6, y + 4, "%g" % v, anchor="end")
        svg.line(left, top + ph, left + width, top + ph, "#444")
        svg.line(left, top, left, top + ph, "#444")
        step = 5 if tmax > 20 else 1
        m = 0
        while m <= tmax + 1e-9:
            svg.line(x_of(m), top + ph, x_of(m), top + ph + 4, "#444")
            svg.text(x_of(m), top + ph + 17, "%d" % m, anchor="middle")
            m += step
        svg.add('<text transform="translate(%d,%d) rotate(-90)" font-size="12" '
                'text-anchor="middle">%s</text>' % (left - 50, top + ph / 2, ylabel))
        for ev in res["faults"]:
            x = x_of(ev["t"] / 60.0)
            svg.line(x, top, x, top + ph, fault_color.get(ev["kind"], "#999"), 1, "3,3")

    def nice_max(v):
        if v <= 0:
            return 1.0
        e = 10 ** math.floor(math.log10(v))
        for m in (1, 2, 5, 10):
            if v <= m * e:
                return m * e
        return 10 * e

    # RSS
    top = 60
    rmax = nice_max(max([x for r in rows for x in r["rss_mb"] if x] + [1]))
    frame(top, "RSS per node (MB)", "MB", [rmax * i / 4 for i in range(5)],
          lambda v: top + ph - ph * v / rmax)
    for i in range(NODES):
        pts = [(x_of(r["t_min"]), top + ph - ph * r["rss_mb"][i] / rmax)
               for r in rows if r["rss_mb"][i]]
        svg.polyline(pts, colors[i])
    # latency, log scale
    top += ph + gap
    lat = [r[k] for r in rows for k in ("add_p50", "add_p99", "e2e_p50", "e2e_p99") if r[k]]
    lo = 10 ** math.floor(math.log10(max(0.01, min(lat + [1.0]))))
    hi = 10 ** math.ceil(math.log10(max(lat + [10.0])))

    def y_log(v):
        v = min(max(v, lo), hi)
        return top + ph - ph * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    ticks = []
    d = lo
    while d <= hi * 1.0001:
        ticks.append(d)
        d *= 10
    ttop = top
    frame(ttop, "Latency per interval (ms, log): ADDJOB (REPLICATE 2) and add→first delivery",
          "ms", ticks, y_log)
    for key, color, dash in (("add_p50", "#1f77b4", ""), ("add_p99", "#1f77b4", "6,4"),
                             ("e2e_p50", "#2ca02c", ""), ("e2e_p99", "#2ca02c", "6,4")):
        svg.polyline([(x_of(r["t_min"]), y_log(r[key])) for r in rows if r[key]], color, dash)
    # throughput
    top += ph + gap
    tp = nice_max(max([r["added_per_s"] for r in rows] + [r["delivered_per_s"] for r in rows] + [1]))
    frame(top, "Throughput per interval (jobs/s)", "jobs/s", [tp * i / 4 for i in range(5)],
          lambda v: top + ph - ph * v / tp)
    svg.polyline([(x_of(r["t_min"]), top + ph - ph * r["added_per_s"] / tp) for r in rows],
                 "#1f77b4")
    svg.polyline([(x_of(r["t_min"]), top + ph - ph * r["delivered_per_s"] / tp) for r in rows],
                 "#2ca02c", "6,4")
    svg.text(left + width / 2, top + ph + 36, "minutes since the workload started",
             anchor="middle")
    # legend
    lx, ly = left + width + 20, 70
    for i in range(NODES):
        svg.line(lx, ly - 4, lx + 24, ly - 4, colors[i], 3)
        svg.text(lx + 30, ly, "node %d RSS" % (i + 1))
        ly += 18
    ly = ttop + 10
    for name, color, dash in (("ADDJOB p50", "#1f77b4", ""), ("ADDJOB p99", "#1f77b4", "6,4"),
                              ("add→deliver p50", "#2ca02c", ""),
                              ("add→deliver p99", "#2ca02c", "6,4")):
        svg.line(lx, ly - 4, lx + 24, ly - 4, color, 2, dash)
        svg.text(lx + 30, ly, name)
        ly += 18
    ly = top + 10
    for name, color, dash in (("added/s", "#1f77b4", ""), ("delivered/s", "#2ca02c", "6,4")):
        svg.line(lx, ly - 4, lx + 24, ly - 4, color, 2, dash)
        svg.text(lx + 30, ly, name)
        ly += 18
    ly += 10
    svg.text(lx, ly, "faults", weight="bold")
    for kind, color in fault_color.items():
        ly += 18
        svg.line(lx, ly - 4, lx + 24, ly - 4, color, 1, "3,3")
        svg.text(lx + 30, ly, {"kill": "kill -9 + restart", "partition": "1 | 2 partition",
                               "rolling": "rolling restart"}[kind])
    with open(path, "w") as f:
        f.write(svg.render())


def summary_lines(res):
    return [
        "added %d, delivered %d, lost %d, duplicates %d, orphans %d, add errors %s, "
        "unknown outcomes %d" % (res["added"], res["delivered"], res["lost"], res["duplicates"],
                                 res["orphans"], res["add_errors"], res["unknown_outcome"]),
        "faults %d (%s), crashes %s, panics %s, not serving %s, converged %s, drain %ss"
        % (len(res["faults"]), ", ".join(sorted({f["kind"] for f in res["faults"]})),
           res["crashes"] or "none", res["panics"] or "none", res["not_serving"] or "none",
           res["converged"], res["drain_s"]),
        "schedule: %d ticks, %d lost %s, %d duplicated (s into the run: %s)"
        % (res["ticks"], len(res["ticks_lost"]), res["ticks_lost"][:10],
           len(res["ticks_duplicated"]),
           [round(int(k.rsplit(":", 1)[1]) / 1000.0 - res["t_start"], 1)
            for k in res["ticks_duplicated"]]),
    ]


def cleanup_stale():
    """Remove namespaces a killed soak run left behind (its servers too)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(PREFIX) and "-n" in name:
            pid = name[len(PREFIX):].split("-")[0]
            if pid.isdigit() and not process_alive(int(pid)):
                for p in subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                                        text=True).stdout.split():
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", name], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="disque-server binary")
    ap.add_argument("--duration", type=int, default=3600, help="seconds of load (3600)")
    ap.add_argument("--rate", type=float, default=20.0, help="ADDJOB/s per node (20)")
    ap.add_argument("--sample", type=int, default=60, help="seconds between samples (60)")
    ap.add_argument("--fault-every", type=int, default=120, help="seconds between faults (120)")
    ap.add_argument("--rolling-at", type=float, default=0.5,
                    help="fraction of the run at which the rolling restart happens (0.5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="soak-results", help="output directory")
    ap.add_argument("--keep", action="store_true", help="keep node directories and logs")
    ap.add_argument("--commit", default="")
    args = ap.parse_args()
    if args.duration < 2 * args.fault_every:
        ap.error("--duration must be at least twice --fault-every")
    os.makedirs(args.out, exist_ok=True)
    for name in ("samples.jsonl",):
        try:
            os.remove(os.path.join(args.out, name))
        except FileNotFoundError:
            pass
    cleanup_stale()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    s = Soak(args)
    try:
        res = s.execute()
    except Exception as e:  # a harness step failed: a failed run, logs kept
        log("ERROR: %s" % e)
        res = None
        err = str(e)
    finally:
        s.teardown()
    if res is None:
        log("FAILED (harness error: %s); logs kept in %s" % (err, s.root))
        return 1
    res["command"] = " ".join(sys.argv)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table(s.samples))
        f.write("\n" + "\n".join("* " + line for line in summary_lines(res)) + "\n")
    chart(s.samples, res, os.path.join(args.out, "chart.svg"))
    print(table(s.samples))
    for line in summary_lines(res):
        log(line)
    keep = args.keep or not res["ok"]
    if keep:
        log("logs kept in %s" % s.root)
    else:
        shutil.rmtree(s.root, ignore_errors=True)
    if not res["ok"]:
        log("FAILED: lost %d, crashes %s, panics %s, not serving %s, converged %s, "
            "ticks lost %d of %d"
            % (res["lost"], res["crashes"], res["panics"], res["not_serving"],
               res["converged"], len(res["ticks_lost"]), res["ticks"]))
        return 1
    log("ok: results in %s (table.md, chart.svg, samples.jsonl, summary.json)" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
