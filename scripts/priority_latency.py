#!/usr/bin/env python3
"""Priority latency behind a backlog (docs/PERFORMANCE.md, "Results", run W).

Starts a disque-server (--port 0, a temporary --dir), fills one queue with
a backlog of BACKLOG jobs (PRIORITY 1, or no PRIORITY with --plain-backlog),
prints used_memory, then ROUNDS times adds one PRIORITY 9 job and times the GETJOB NOHANG that
must return it (checked: any other job fails the run), acknowledging it.
Prints p50/p99/max of that GETJOB's round trip in ms. Loopback only,
bounded by the counts given.

usage: scripts/priority_latency.py SERVER [--backlog N] [--rounds N] [--plain-backlog]
(--rounds 0 --plain-backlog works with servers that predate PRIORITY: memory only)
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(1 << 20)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def cmd(self, *args):
        self.s.sendall(encode(*args))
        return self.reply()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("--backlog", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--plain-backlog", action="store_true")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="disque-prio.")
    log = open(os.path.join(d, "out"), "w+")
    p = subprocess.Popen([a.server, "--port", "0", "--dir", d], stdout=log, stderr=log)
    try:
        port = None
        deadline = time.time() + 20
        while port is None and time.time() < deadline:
            log.seek(0)
            m = re.search(r"ready port=(\d+)", log.read())
            port = int(m.group(1)) if m else None
            if port is None:
                time.sleep(0.05)
        if port is None:
            sys.exit("server did not start")
        c = Conn(port)
        extra = [] if a.plain_backlog else ["PRIORITY", "1"]
        batch = 10_000
        t0 = time.time()
        for start in range(0, a.backlog, batch):
            n = min(batch, a.backlog - start)
            c.s.sendall(b"".join(encode("ADDJOB", "q", "low", 0, *extra) for _ in range(n)))
            for _ in range(n):
                c.reply()
        fill = time.time() - t0
        qlen = int(c.cmd("QLEN", "q"))
        assert qlen == a.backlog, qlen
        info = c.cmd("INFO", "memory").decode()
        used = int(re.search(r"used_memory:(\d+)", info).group(1))
        print("backlog %d: used_memory %d bytes (%.1f per job)" % (a.backlog, used, used / max(1, a.backlog)))
        if a.rounds == 0:
            return
        lat = []
        for _ in range(a.rounds):
            jid = c.cmd("ADDJOB", "q", "high", 0, "PRIORITY", 9)
            t = time.perf_counter()
            r = c.cmd("GETJOB", "NOHANG", "FROM", "q")
            lat.append((time.perf_counter() - t) * 1000)
            if r is None or r[0][1] != jid:
                sys.exit("GETJOB returned %r, not the high-priority job %r" % (r, jid))
            c.cmd("ACKJOB", jid)
        lat.sort()
        pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
        kind = "plain" if a.plain_backlog else "PRIORITY 1"
        print(
            "backlog %d (%s, filled in %.1f s): GETJOB of the PRIORITY 9 job, %d rounds: "
            "p50 %.3f ms p99 %.3f ms max %.3f ms"
            % (a.backlog, kind, fill, a.rounds, pct(0.5), pct(0.99), lat[-1])
        )
    finally:
        p.terminate()
        p.wait(timeout=20)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
