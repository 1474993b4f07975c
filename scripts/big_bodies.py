#!/usr/bin/env python3
"""Big job bodies: what they cost the other clients.

Starts a 3-node cluster of SERVER (default target/release/disque-server)
on free loopback ports, then alternates, ROUNDS times, an idle phase and a
load phase of SECS seconds each. In a load phase one producer/consumer
runs the job cycle with bodies of SIZE bytes: ADDJOB REPLICATE 3 on node
1, GETJOB, ACKJOB. In both phases a bystander client on node 1 sends a
PING every 5 ms and the RSS of every node is sampled every 50 ms.

Prints one line per phase: bystander PING latency p50/p99/max (ms), the
jobs cycled, and the highest RSS of any node (MB), then the ratios of the
load phases to the idle ones.

usage: scripts/big_bodies.py [SIZE ...]   (default: 1048576 16777216)
environment: SERVER, ROUNDS [3], SECS [5]
Standard library and scripts/disque_client.py; every socket operation has a
timeout.
"""

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from disque_client import free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.environ.get(
    "SERVER", os.path.join(HERE, "..", "target", "release", "disque-server"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SECS = float(os.environ.get("SECS", "5"))


class Client:
    """RESP2 over a socket with a bytearray buffer (16 MB replies)."""

    def __init__(self, port, timeout=30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.at = 0

    def _fill(self):
        if self.at > 1 << 20:
            del self.buf[:self.at]
            self.at = 0
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.at)
            if i >= 0:
                line = bytes(self.buf[self.at:i])
                self.at = i + 2
                return line
            self._fill()

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return rest.decode()
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) - self.at < n + 2:
                self._fill()
            data = bytes(self.buf[self.at:self.at + n])
            self.at += n + 2
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ConnectionError("bad reply %r" % line)

    def cmd(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts += [b"$%d\r\n" % len(a), a, b"\r\n"]
        self.sock.sendall(b"".join(parts))
        return self._reply()


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def start_cluster(tmp):
    procs, ports = [], []
    for i in range(3):
        port = free_port()
        d = os.path.join(tmp, "n%d" % i)
        os.makedirs(d)
        p = subprocess.Popen(
            [SERVER, "--port", str(port), "--dir", d,
             "--cluster-node-timeout", "5000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        ports.append(port)
    deadline = time.time() + 20
    for port in ports:
        while True:
            try:
                Client(port, 1).cmd("PING")
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("node %d did not start" % port)
                time.sleep(0.05)
    c = Client(ports[0])
    for port in ports[1:]:
        c.cmd("CLUSTER", "MEET", "127.0.0.1", port)
    for port in ports:
        cc = Client(port)
        while b"cluster_reachable_nodes:2" not in cc.cmd("CLUSTER", "INFO"):
            if time.time() > deadline:
                raise SystemExit("cluster did not form")
            time.sleep(0.05)
    return procs, ports


def phase(ports, procs, size, load):
    stop = threading.Event()
    cycled = [0]
    errors = []

    def worker():
        c = Client(ports[0], 60)
        body = bytes(i % 251 for i in range(251)) * (size // 251 + 1)
        body = body[:size]
        while not stop.is_set():
            jid = c.cmd("ADDJOB", "big", body, 60000, "REPLICATE", 3)
            if not isinstance(jid, str) or not jid.startswith("D-"):
                errors.append(jid)
                return
            got = c.cmd("GETJOB", "TIMEOUT", 10000, "FROM", "big")
            if not got or got[0][2] != body:
                errors.append("body mismatch")
                return
            c.cmd("ACKJOB", jid)
            cycled[0] += 1

    t = threading.Thread(target=worker) if load else None
    if t:
        t.start()
    by = Client(ports[0], 10)
    lat, peak = [], 0.0
    end = time.time() + SECS
    last_rss = 0.0
    while time.time() < end:
        t0 = time.perf_counter()
        assert by.cmd("PING") == "PONG"
        lat.append((time.perf_counter() - t0) * 1000)
        if time.time() - last_rss > 0.05:
            last_rss = time.time()
            peak = max(peak, max(rss_mb(p.pid) for p in procs))
        time.sleep(0.005)
    stop.set()
    if t:
        t.join(120)
    if errors:
        raise SystemExit("load phase failed: %r" % errors[:1])
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return pick(0.5), pick(0.99), lat[-1], cycled[0], peak


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1 << 20, 16 << 20]
    with tempfile.TemporaryDirectory() as tmp:
        procs, ports = start_cluster(tmp)
        try:
            print("load average: %s" % open("/proc/loadavg").read().split()[:3])
            print("%-10s %-5s %8s %8s %8s %7s %9s" % (
                "size", "phase", "p50ms", "p99ms", "maxms", "jobs", "peakRSSMB"))
            for size in sizes:
                idle, busy = [], []
                for _ in range(ROUNDS):
                    for load in (False, True):
                        r = phase(ports, procs, size, load)
                        (busy if load else idle).append(r)
                        print("%-10d %-5s %8.2f %8.2f %8.2f %7d %9.1f" % (
                            (size, "load" if load else "idle") + r))
                avg = lambda rs, i: sum(r[i] for r in rs) / len(rs)
                print("%-10d ratio load/idle: p50 %.2f  p99 %.2f  peak RSS %.2f" % (
                    size, avg(busy, 0) / avg(idle, 0), avg(busy, 1) / avg(idle, 1),
                    avg(busy, 4) / avg(idle, 4)))
        finally:
            for p in procs:
                p.kill()
                p.wait(10)


if __name__ == "__main__":
    main()
