"""RESP client and delivery ledger shared by the fault scenarios.

Used by scripts/docker_test.py (the compose cluster), scripts/chaos.py
(the network-namespace cluster) and the load scripts that start their own
nodes. Standard library only.

* `Client`: a minimal RESP2 client; every socket operation has a timeout.
* `free_port`: a loopback client port whose bus port (+10000) is free too.
* `Ledger`: every ID an ADDJOB returned and every delivery a consumer saw,
  with timestamps, so a run can say which jobs were lost and which were
  delivered more than once, and when.
"""

import socket
import threading
import time


def free_port():
    """A loopback client port whose bus port (+10000) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + 10000 > 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 10000))
            return p
        except OSError:
            continue
    raise OSError("no free client and bus port pair")


class RespError(Exception):
    """An error reply (`-ERR ...`); returned, not raised, by `Client.cmd`."""


class Client:
    """A minimal RESP2 client with timeouts on every socket operation.

    `make_socket`, when given, returns an unconnected socket (chaos.py makes
    it inside a node's network namespace); otherwise a plain TCP socket.
    """

    def __init__(self, host, port, timeout=5.0, make_socket=None):
        if make_socket is None:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        else:
            self.sock = make_socket()
            try:
                self.sock.settimeout(timeout)
                self.sock.connect((host, port))
            except OSError:
                self.sock.close()
                raise
        self.sock.settimeout(timeout)
        self.buf = b""
        # Read position in buf: replies are parsed in place, so a large
        # pipelined reply costs linear time, not a copy per line.
        self.pos = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def settimeout(self, timeout):
        self.sock.settimeout(timeout)

    def _fill(self):
        if self.pos:
            self.buf = self.buf[self.pos:]
            self.pos = 0
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ConnectionError("bad reply %r" % line)

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._reply()

    def pipeline(self, cmds):
        """Send every command at once, then read every reply (in order)."""
        out = []
        for args in cmds:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return [self._reply() for _ in cmds]

    def info(self, section):
        """One INFO section as a dict of its fields."""
        out = {}
        for line in self.cmd("INFO", section).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out


class Ledger:
    """Every ID ADDJOB returned, and every delivery seen.

    A *delivery* is one GETJOB reply carrying an ID to a consumer; a
    *duplicate* is every delivery of an ID after its first. IDs delivered
    but never returned by an ADDJOB (the producer saw an error or lost the
    connection, yet the job exists) are *orphans*: not lost, not counted
    as added.
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.added = set()
        self.add_time = {}
        # id -> list of (time, node) of every delivery, in arrival order
        self.deliveries = {}
        # id -> time the first ACKJOB for it returned
        self.ack_time = {}
        self.add_errors = 0
        self.error_kinds = {}
        # id -> body sent, for the jobs added with one (`add(..., body=)`)
        self.bodies = {}
        # (id, node) of every delivery whose body was not the one sent
        self.wrong_bodies = []

    def add(self, jid, t=None, body=None):
        with self.lock:
            self.added.add(jid)
            self.add_time[jid] = time.time() if t is None else t
            if body is not None:
                self.bodies[jid] = body

    def add_error(self, kind="error"):
        with self.lock:
            self.add_errors += 1
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    def delivered(self, jid, t=None, node=None, body=None):
        with self.lock:
            self.deliveries.setdefault(jid, []).append(
                (time.time() if t is None else t, node))
            sent = self.bodies.get(jid)
            if body is not None and sent is not None and body != sent:
                self.wrong_bodies.append((jid, node))

    def acked(self, jid, t=None):
        with self.lock:
            self.ack_time.setdefault(jid, time.time() if t is None else t)

    def missing(self):
        with self.lock:
            return self.added - set(self.deliveries)

    def duplicates(self):
        with self.lock:
            return sum(len(d) - 1 for d in self.deliveries.values() if len(d) > 1)

    def orphans(self):
        with self.lock:
            return set(self.deliveries) - self.added

    def duplicate_deliveries(self):
        """(id, first delivery time, this delivery time, node) of every
        delivery after an ID's first."""
        with self.lock:
            out = []
            for jid, ds in self.deliveries.items():
                for t, node in ds[1:]:
                    out.append((jid, ds[0][0], t, node))
            return out
