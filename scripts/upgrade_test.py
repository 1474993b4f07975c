#!/usr/bin/env python3
"""A rolling upgrade against real processes (run through
scripts/upgrade-test.sh; docs/DEPLOY.md, "Rolling upgrades").

Three nodes on loopback: A and C run the OLD binary (the previous commit),
B the NEW one (this tree), AOF on. Then:

 1. Mixed cluster: on every node, ADDJOB with REPLICATE 3 (every copy
    crosses versions), consumed with GETJOB + ACKJOB on *another* node (the
    jobs move through NEEDJOBS / YOURJOBS across versions); the
    acknowledgement must reach every copy (SHOW is nil on all three nodes).
 2. Jobs that stay: REPLICATE 1 jobs on A and on C (only their own AOF
    holds them) and REPLICATE 3 jobs everywhere (RETRY 3: a job loaded from
    an AOF is active until its retry timer queues it again).
 3. Rolling upgrade: A, then C, stopped cleanly (SIGTERM, exit 0) and
    started on the NEW binary in the same directory: same node ID (from the
    old nodes.conf), every job it held is back (from the old AOF), and the
    cluster is whole again before the next node.
 4. All new: every kept job is consumed and acknowledged; the upgraded
    nodes' nodes.conf carries the format version, and BGREWRITEAOF gives
    their old AOF the version record.

Checks throughout: no process exits unless stopped, no panic in a log.
Exit status 0 when everything held.

Usage: upgrade_test.py --old PATH --new PATH [--keep]
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from disque_client import Client, RespError, free_port

AOF_VERSION_RECORD = b"*2\r\n$10\r\nAOFVERSION\r\n$"
WAIT = 60.0


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


class Failed(Exception):
    """A check did not hold."""


def check(cond, what):
    if not cond:
        raise Failed(what)


def wait_for(what, cond, deadline=WAIT, every=0.1):
    t0 = time.time()
    while time.time() - t0 < deadline:
        if cond():
            return
        time.sleep(every)
    raise Failed("timed out after %.0fs waiting for %s" % (deadline, what))


class Node:
    def __init__(self, name, root, binary, label):
        self.name = name
        self.binary = binary
        self.label = label
        self.port = free_port()
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.conf = os.path.join(self.dir, "disque.conf")
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "port %d" % self.port,
                "bind 127.0.0.1",
                "dir %s" % self.dir,
                "cluster-config-file nodes.conf",
                "cluster-node-timeout 3000",
                "appendonly yes",
                "appendfilename disque.aof",
                "appendfsync everysec",
            ]) + "\n")
        self.proc = None
        self.versions = []

    def start(self, binary=None, label=None):
        if binary:
            self.binary, self.label = binary, label
        out = open(os.path.join(self.dir, "stdout.log"), "a")
        out.write("=== start %s\n" % self.binary)
        out.flush()
        self.proc = subprocess.Popen([self.binary, self.conf], stdout=out,
                                     stderr=subprocess.STDOUT)
        out.close()
        wait_for("%s to answer PING" % self.name, lambda: self.ping() == "PONG")
        log("%s: %s build serving on port %d" % (self.name, self.label, self.port))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ping(self):
        if not self.alive():
            raise Failed("%s exited with status %s" % (self.name, self.proc.returncode))
        try:
            return self.cmd("PING", timeout=1.0)
        except (OSError, ConnectionError):
            return None

    def cmd(self, *args, timeout=5.0):
        c = Client("127.0.0.1", self.port, timeout)
        try:
            return c.cmd(*args)
        finally:
            c.close()

    def stop(self):
        """SIGTERM: a clean shutdown, which must exit 0."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            raise Failed("%s did not exit within %.0fs of SIGTERM" % (self.name, WAIT))
        check(rc == 0, "%s exited with status %d after SIGTERM" % (self.name, rc))

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)

    def myid(self):
        r = self.cmd("CLUSTER", "MYID")
        check(isinstance(r, str) and len(r) == 40, "%s: CLUSTER MYID gave %r" % (self.name, r))
        return r

    def linked(self):
        """Peers this node reaches (not failing) with a bus link up."""
        try:
            info = self.cmd("CLUSTER", "INFO", timeout=2.0)
            nodes = self.cmd("CLUSTER", "NODES", timeout=2.0)
        except (OSError, ConnectionError):
            return -1
        if not isinstance(info, str) or not isinstance(nodes, str):
            return -1
        linked = sum(1 for line in nodes.splitlines()
                     if line.strip() and "myself" not in line
                     and line.rstrip().endswith(" connected"))
        for line in info.splitlines():
            if line.startswith("cluster_reachable_nodes:"):
                return min(int(line.split(":")[1]), linked)
        return -1

    def file(self, name):
        try:
            with open(os.path.join(self.dir, name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def panicked(self):
        return b"panicked" in self.file("stdout.log")


def add(node, queue, n, replicate, retry=300):
    ids = []
    for i in range(n):
        r = node.cmd("ADDJOB", queue, "%s-%d" % (queue, i), 5000, "REPLICATE", replicate,
                     "RETRY", retry, timeout=10.0)
        check(isinstance(r, str) and r.startswith("D-"),
              "ADDJOB %s on %s (REPLICATE %d): %r" % (queue, node.name, replicate, r))
        ids.append(r)
    return ids


def consume(node, queues, want):
    """GETJOB on `node` until every ID of `want` came; ACKJOB each batch."""
    got = set()
    t0 = time.time()
    c = Client("127.0.0.1", node.port, 10.0)
    try:
        while not want <= got:
            check(time.time() - t0 < WAIT, "%s delivered %d of %d jobs in %.0fs"
                  % (node.name, len(got & want), len(want), WAIT))
            r = c.cmd("GETJOB", "TIMEOUT", 1000, "COUNT", 50, "FROM", *queues)
            if isinstance(r, RespError):
                raise Failed("GETJOB on %s: %s" % (node.name, r))
            if not r:
                continue
            ids = [j[1] for j in r]
            got.update(ids)
            a = c.cmd("ACKJOB", *ids)
            check(isinstance(a, int), "ACKJOB on %s: %r" % (node.name, a))
    finally:
        c.close()
    check(got <= want, "unexpected jobs delivered: %s" % sorted(got - want)[:5])


def gone_everywhere(nodes, ids):
    def check_all():
        for n in nodes:
            for jid in ids:
                if n.cmd("SHOW", jid) is not None:
                    return False
        return True
    wait_for("every copy of %d acknowledged jobs to be deleted" % len(ids), check_all,
             every=0.5)


class Test:
    def __init__(self, args):
        self.args = args
        self.root = tempfile.mkdtemp(prefix="upgrade-")
        self.a = Node("A", self.root, args.old, "old")
        self.b = Node("B", self.root, args.new, "new")
        self.c = Node("C", self.root, args.old, "old")
        self.nodes = [self.a, self.b, self.c]

    def whole(self, why):
        t0 = time.time()
        wait_for("the cluster to be whole (%s)" % why,
                 lambda: all(n.linked() == 2 for n in self.nodes), every=0.2)
        log("%s: every node reaches the 2 others (%.1fs)" % (why, time.time() - t0))

    def run(self):
        a, b, c = self.nodes
        for n in self.nodes:
            n.start()
        for n in (b, c):
            r = a.cmd("CLUSTER", "MEET", "127.0.0.1", n.port)
            check(r == "OK", "CLUSTER MEET: %r" % r)
        self.whole("formation, old A and C, new B")
        for n in self.nodes:
            info = n.cmd("INFO", "server")
            ver = [line for line in info.splitlines() if line.startswith("disque_version")]
            log("%s: %s" % (n.name, ver[0] if ver else "?"))

        # 1. Jobs cross versions in both directions.
        for src, dst in ((a, b), (b, c), (c, a), (b, a)):
            q = "cross-%s%s" % (src.name, dst.name)
            ids = add(src, q, 25, 3)
            for n in self.nodes:
                check(n.cmd("SHOW", ids[0]) is not None,
                      "job %s added on %s (REPLICATE 3) has no copy on %s"
                      % (ids[0], src.name, n.name))
            consume(dst, [q], set(ids))
            gone_everywhere(self.nodes, ids)
            log("mixed: 25 jobs added on %s (%s build), consumed and acked on %s (%s build), "
                "deleted everywhere" % (src.name, src.label, dst.name, dst.label))

        # 2. Jobs that stay across the upgrade. A job loaded from the AOF
        # is active and queued again by its retry timer: a short RETRY
        # brings the kept jobs back to their queues within the test.
        kept = {
            "A": add(a, "keep-A", 20, 1, retry=3),
            "C": add(c, "keep-C", 20, 1, retry=3),
            "all": add(b, "keep-all", 20, 3, retry=3),
        }
        ids_before = {n.name: n.myid() for n in self.nodes}

        # 3. Rolling upgrade, one node at a time.
        for n in (a, c):
            n.stop()
            n.versions.append(n.file("disque.aof").startswith(AOF_VERSION_RECORD))
            n.start(self.args.new, "new")
            check(n.myid() == ids_before[n.name],
                  "%s came back as %s, was %s" % (n.name, n.myid(), ids_before[n.name]))
            for jid in kept[n.name] + kept["all"]:
                check(n.cmd("SHOW", jid) is not None,
                      "%s lost job %s across the upgrade (not loaded from its AOF)"
                      % (n.name, jid))
            self.whole("%s upgraded" % n.name)
            log("%s: restarted on the new binary with its ID, its %d own jobs and %d "
                "replicated ones (AOF written by the old binary: version record %s)"
                % (n.name, len(kept[n.name]), len(kept["all"]),
                   "present" if n.versions[-1] else "absent"))

        # 4. All new: the kept jobs are consumed; formats carry versions.
        consume(b, ["keep-A", "keep-C", "keep-all"],
                set(kept["A"] + kept["C"] + kept["all"]))
        gone_everywhere(self.nodes, kept["A"] + kept["C"] + kept["all"])
        log("all new: %d kept jobs consumed and acknowledged"
            % sum(len(v) for v in kept.values()))
        for n in (a, c):
            wait_for("%s's nodes.conf to carry its format version" % n.name,
                     lambda: b"vars nodes-conf-version " in n.file("nodes.conf"))
            r = n.cmd("BGREWRITEAOF")
            check(not isinstance(r, RespError), "BGREWRITEAOF on %s: %s" % (n.name, r))
            wait_for("%s's rewritten AOF to start with its version record" % n.name,
                     lambda: n.file("disque.aof").startswith(AOF_VERSION_RECORD))
        log("formats: nodes.conf and the rewritten AOF carry their version")
        for n in self.nodes:
            check(n.alive(), "%s is not running" % n.name)
            check(not n.panicked(), "%s panicked (see %s)" % (n.name, n.dir))

    def teardown(self):
        for n in self.nodes:
            n.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="disque-server of the previous commit")
    ap.add_argument("--new", required=True, help="disque-server of this tree")
    ap.add_argument("--keep", action="store_true", help="keep the node directories")
    args = ap.parse_args()
    t = Test(args)
    ok = False
    try:
        t.run()
        ok = True
    except Failed as e:
        log("FAILED: %s" % e)
    except Exception as e:  # a harness step failed
        log("ERROR: %r" % e)
    finally:
        t.teardown()
    if ok and not args.keep:
        shutil.rmtree(t.root, ignore_errors=True)
    else:
        log("node directories and logs kept in %s" % t.root)
    if ok:
        log("rolling upgrade: ok")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
