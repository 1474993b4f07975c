#!/usr/bin/env python3
"""QLIMIT rate across a cluster (docs/PERFORMANCE.md, "Results", run Y).

Starts NODES disque-servers (--port 0, temporary --dir each), joins them,
sets `QLIMIT q RATE <rate> 1000` on the first node, waits until every node
has it, preloads enough jobs (REPLICATE 1, spread over the nodes), then
runs CONSUMERS consumers (threads, spread over the nodes) doing
`GETJOB TIMEOUT 1000 FROM q` + FASTACK for SECONDS seconds. Every delivery
is stamped when its reply arrives. Prints the mean rate, the per-second
counts (min/max over whole seconds) and the most deliveries seen in any
sliding window of the client-side stamps, 1 s and a little shorter (a
stamp is late by the reply's trip and the thread's wait for the
interpreter, so stamps of two bursts 1 s apart can fall within 1 s; a
window shorter by the largest such delay bounds the server's figure).
Loopback only, bounded by the counts given.

usage: scripts/qlimit_rate.py SERVER [--nodes 3] [--consumers 50] [--rate 100] [--seconds 60]
"""
import argparse
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from priority_latency import Conn, encode  # noqa: E402


def start(server):
    d = tempfile.mkdtemp(prefix="disque-qlimit.")
    log = open(os.path.join(d, "out"), "w+")
    p = subprocess.Popen([server, "--port", "0", "--dir", d], stdout=log, stderr=log)
    deadline = time.time() + 20
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"ready port=(\d+)", log.read())
        if m:
            return p, d, int(m.group(1))
        time.sleep(0.05)
    sys.exit("server did not start")


def wait(cond, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    sys.exit("timed out waiting for " + what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--consumers", type=int, default=50)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=60)
    a = ap.parse_args()
    procs = [start(a.server) for _ in range(a.nodes)]
    try:
        ports = [port for _, _, port in procs]
        admin = [Conn(p) for p in ports]
        for p in ports[1:]:
            admin[0].cmd("CLUSTER", "MEET", "127.0.0.1", p)

        def reachable(c):
            info = c.cmd("CLUSTER", "INFO").decode()
            return int(re.search(r"cluster_reachable_nodes:(\d+)", info).group(1))

        for c in admin:
            wait(lambda c=c: reachable(c) == a.nodes - 1, "the cluster to form")
        admin[0].cmd("QLIMIT", "q", "RATE", a.rate, 1000)
        for c in admin:
            wait(lambda c=c: c.cmd("QLIMIT", "q") is not None, "the limit to propagate")
        shares = [int(c.cmd("QLIMIT", "q")[7]) for c in admin]
        per_node = (a.rate * (a.seconds + 10)) // a.nodes + 1
        for c in admin:
            c.s.sendall(b"".join(encode("ADDJOB", "q", "x", 0, "REPLICATE", 1) for _ in range(per_node)))
            for _ in range(per_node):
                c.reply()
        stamps = []
        lock = threading.Lock()
        stop = time.time() + a.seconds
        t0 = time.time()

        def consume(port):
            c = Conn(port)
            c.s.settimeout(10)
            while time.time() < stop:
                r = c.cmd("GETJOB", "TIMEOUT", 1000, "FROM", "q")
                now = time.time()
                if r:
                    with lock:
                        stamps.extend([now] * len(r))
                    c.cmd("FASTACK", *[j[1] for j in r])

        threads = [threading.Thread(target=consume, args=(ports[i % a.nodes],)) for i in range(a.consumers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stamps.sort()
        stamps = [s for s in stamps if s < t0 + a.seconds]
        secs = [0] * a.seconds
        for s in stamps:
            secs[min(a.seconds - 1, int(s - t0))] += 1
        def most_within(span):
            return max((bisect.bisect_left(stamps, s + span) - i for i, s in enumerate(stamps)), default=0)

        worst = most_within(1.0)
        # A stamp is late by the reply's trip and the consumer thread's
        # wait for the interpreter, J at most: a window of 1 s - J on the
        # stamps covers deliveries of at most 1 s on the server.
        shorter = " ".join("%dms:%d" % (int(w * 1000), most_within(w)) for w in (0.99, 0.98, 0.95, 0.9))
        load = os.getloadavg()[0]
        print(
            "QLIMIT RATE %d 1000, %d nodes (shares %s), %d consumers, %d s: %d deliveries, "
            "mean %.1f/s; whole seconds min %d max %d; most in any sliding 1 s window %d "
            "(shorter windows %s); load %.1f"
            % (a.rate, a.nodes, shares, a.consumers, a.seconds, len(stamps),
               len(stamps) / a.seconds, min(secs), max(secs), worst, shorter, load)
        )
    finally:
        for p, d, _ in procs:
            p.terminate()
            p.wait(timeout=20)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
