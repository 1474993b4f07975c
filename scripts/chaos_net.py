#!/usr/bin/env python3
"""The network between the chaos cluster's namespaces (run by scripts/chaos.py).

Each node's network namespace gets one TUN device (its only link besides
loopback). This process holds the other end of every TUN device and routes
IPv4 packets between them, applying the current fault rules: global random
loss, a fixed one-way delay, and per-(source, destination) drop
probabilities (1.0 = a partition; set on one direction only = asymmetric).
Why not veth + bridge + `tc netem`: the kernel here is built without
sch_netem, and a user-space router gives loss, delay, partitions and
one-way faults through one seeded mechanism.

Usage: chaos_net.py <tun-prefix> <seed> <ns>:<ip> [<ns>:<ip> ...]

Control on stdin, one JSON object per line, answered on stdout:
  {"loss": 0.3, "delay_ms": 50, "drop": [[src_ip, dst_ip, prob], ...]}
      replaces the rules; answers "ok"
  {"stats": true}   answers the packet counters as one JSON line
The process prints "ready" once every TUN device is up, and exits when
stdin closes.
"""

import fcntl
import heapq
import json
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MAX_BATCH = 64


def make_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class Rules:
    """The fault rules and the per-packet decision (pure: tested alone)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.loss = 0.0
        self.delay = 0.0
        self.drop = {}

    def set(self, spec):
        self.loss = float(spec.get("loss", 0.0))
        self.delay = float(spec.get("delay_ms", 0.0)) / 1000.0
        self.drop = {}
        for src, dst, prob in spec.get("drop", []):
            key = (socket.inet_aton(src), socket.inet_aton(dst))
            self.drop[key] = max(self.drop.get(key, 0.0), float(prob))

    def verdict(self, src, dst):
        """"drop", "fault" (dropped by a link rule) or "pass"."""
        p = self.drop.get((src, dst))
        if p is not None and (p >= 1.0 or self.rng.random() < p):
            return "fault"
        if self.loss > 0 and self.rng.random() < self.loss:
            return "drop"
        return "pass"


def main():
    prefix, seed = sys.argv[1], int(sys.argv[2])
    nodes = [a.split(":") for a in sys.argv[3:]]
    by_ip = {}
    fds = []
    for i, (ns, ip) in enumerate(nodes):
        name = "%s%d" % (prefix, i + 1)
        fd = make_tun(name)
        sh("ip", "link", "set", name, "netns", ns)
        sh("ip", "-n", ns, "link", "set", name, "mtu", "1500")
        sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", name)
        sh("ip", "-n", ns, "link", "set", name, "up")
        by_ip[socket.inet_aton(ip)] = fd
        fds.append(fd)

    rules = Rules(seed)
    stats = {"forwarded": 0, "lost": 0, "fault_dropped": 0, "unroutable": 0, "write_failed": 0}
    delayed = []
    seq = 0
    inbuf = b""
    print("ready", flush=True)
    stdin = sys.stdin.fileno()
    while True:
        now = time.monotonic()
        timeout = 1.0
        if delayed:
            timeout = max(0.0, min(timeout, delayed[0][0] - now))
        ready, _, _ = select.select(fds + [stdin], [], [], timeout)
        for fd in ready:
            if fd == stdin:
                chunk = os.read(stdin, 65536)
                if not chunk:
                    return
                inbuf += chunk
                while b"\n" in inbuf:
                    line, inbuf = inbuf.split(b"\n", 1)
                    req = json.loads(line)
                    if req.get("stats"):
                        print(json.dumps(stats), flush=True)
                    else:
                        rules.set(req)
                        print("ok", flush=True)
                continue
            for _ in range(MAX_BATCH):
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(pkt) < 20 or pkt[0] >> 4 != 4:
                    continue
                out = by_ip.get(pkt[16:20])
                if out is None:
                    stats["unroutable"] += 1
                    continue
                v = rules.verdict(pkt[12:16], pkt[16:20])
                if v == "fault":
                    stats["fault_dropped"] += 1
                    continue
                if v == "drop":
                    stats["lost"] += 1
                    continue
                if rules.delay > 0:
                    seq += 1
                    heapq.heappush(delayed, (time.monotonic() + rules.delay, seq, out, pkt))
                    continue
                try:
                    os.write(out, pkt)
                    stats["forwarded"] += 1
                except OSError:
                    stats["write_failed"] += 1
        now = time.monotonic()
        while delayed and delayed[0][0] <= now:
            _, _, out, pkt = heapq.heappop(delayed)
            try:
                os.write(out, pkt)
                stats["forwarded"] += 1
            except OSError:
                stats["write_failed"] += 1


if __name__ == "__main__":
    main()
