#!/usr/bin/env python3
"""Seeded fault injection against a 5-node cluster of the real disque-server
(run through scripts/chaos.sh; docs/RELIABILITY.md explains the method).

Every node runs in its own Linux network namespace whose only link is a TUN
device routed by scripts/chaos_net.py, which applies loss, delay and
partitions. Beside every node run one producer and one consumer thread
whose sockets are created inside that node's namespace and talk to it over
loopback, so faults hit the cluster bus, not the client link. A run:

  start 5 nodes, CLUSTER MEET, wait until every node reaches the 4 others
  -> calm warm-up -> N cycles of (fault, heal, calm gap) -> producers stop
  -> consumers drain until every added ID was delivered
  -> convergence: QLEN 0 and no queued/active/wait-repl job on any node
  -> checks: lost = 0, no node exited unless we killed it, all answer PING.

The seed drives the fault schedule (which nodes, when, how long) and the
workload (queue, body size, pacing jitter); thread timing is not
reproducible, so counts vary a little between reruns of one seed.

Usage: chaos.py --bin PATH [--quick] [--seed N] [--fault NAME|all]
                [--replicate R] [--spill no|bodies|whole] [--out results.jsonl] [--keep]

Every delivered body is compared with the one sent: a run with a wrong
body fails like one with a lost job (`--spill` puts every queue tail on
disk, so the bodies come back through the spill tier).
       chaos.py --table results.jsonl      (Markdown table of past runs)
"""

import argparse
import ctypes
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from disque_client import Client, Ledger, RespError

NODES = 5
PORT = 7711
SUBNET = "10.77.0."
QUEUES = ["chaos-q0", "chaos-q1", "chaos-q2", "chaos-q3"]
CLONE_NEWNET = 0x40000000
# Spill runs: jobs each node starts with in its first queue, so its tail
# is on disk when the faults hit, and the pause of a consumer after each
# batch, so the backlog lasts into them.
SPILL_BACKLOG = 400
SPILL_CONSUMER_PAUSE_S = 0.5

FAULTS = ["calm", "kill", "pause", "partition", "isolate", "oneway", "loss",
          "aof-always", "aof-everysec", "aof-no", "mix"]
DESCRIPTIONS = {
    "calm": "no fault (baseline)",
    "kill": "kill -9 of 1..REPLICATE-1 nodes (a fixed set per run), restart",
    "pause": "SIGSTOP of 1..REPLICATE-1 nodes for 2-3x node timeout, SIGCONT",
    "partition": "2|3 split, both directions",
    "isolate": "one node cut off from all others",
    "oneway": "one node's packets to 2 peers dropped, the reverse flows",
    "loss": "30% packet loss and 50 ms one-way delay on every link",
    "aof-always": "AOF appendfsync always; whole-cluster kill -9 / SIGTERM, restart",
    "aof-everysec": "AOF appendfsync everysec; whole-cluster kill -9 / SIGTERM, restart",
    "aof-no": "AOF appendfsync no; whole-cluster kill -9 / SIGTERM, restart",
    "mix": "twice the cycles, each a random one of the above network/process faults, "
           "half of them with 10% loss + 20 ms delay at the same time",
}


class Profile:
    """Timings of a run. Full runs are what docs/RELIABILITY.md publishes;
    quick runs (CI) exercise every fault once, briefly."""

    def __init__(self, quick, spill="no"):
        self.quick = quick
        self.node_timeout_ms = 3000
        self.retry_s = 10 if not quick else 5
        if spill == "whole":
            # Replicas' copies leave RAM whole only with a RETRY of 6 s or
            # more (docs/PERSISTENCE.md): a quick run's 5 s would keep
            # every copy out of the path it is meant to exercise.
            self.retry_s = max(self.retry_s, 8)
        self.rate = 10.0 if quick else 20.0  # ADDJOBs per second per producer
        self.warmup_s = 3.0 if quick else 10.0
        self.cycles = 1 if quick else 3
        self.gap_s = 4.0 if quick else 15.0
        self.fault_s = 7.0 if quick else 12.0
        self.loss_fault_s = 10.0 if quick else 30.0
        self.drain_s = 90.0 if quick else 180.0
        self.converge_s = 60.0 if quick else 120.0
        self.addjob_timeout_ms = 5000

    def grace_s(self):
        """How long after a fault heals a duplicate is still blamed on it:
        a job whose ACK could not travel may be re-queued up to one RETRY
        after the cluster re-forms (failure detection: 2 node timeouts)."""
        return self.retry_s + 2 * self.node_timeout_ms / 1000.0


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


_libc = ctypes.CDLL(None, use_errno=True)


def socket_in_ns(ns):
    """A TCP socket created inside network namespace `ns`. setns changes
    only the calling thread, so it runs in a short-lived thread; the socket
    stays in that namespace wherever it is used afterwards."""
    import socket
    box = {}

    def make():
        try:
            fd = os.open("/var/run/netns/" + ns, os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns " + ns)
            finally:
                os.close(fd)
            box["s"] = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as e:
            box["e"] = e

    t = threading.Thread(target=make)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["s"]


def run(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


class Node:
    def __init__(self, idx, prefix, root, binary, prof, aof, spill="no"):
        self.idx = idx
        self.ns = "%s-n%d" % (prefix, idx)
        self.ip = SUBNET + str(10 + idx)
        self.dir = os.path.join(root, "n%d" % idx)
        self.binary = binary
        self.proc = None
        self.expected_exit = False
        self.crashes = []
        self.paused = False
        os.makedirs(self.dir)
        conf = [
            "port %d" % PORT,
            "bind 0.0.0.0",
            "protected-mode no",
            "dir %s" % self.dir,
            "pidfile %s/disque.pid" % self.dir,
            "logfile %s/disque.log" % self.dir,
            "cluster-config-file nodes.conf",
            "cluster-node-timeout %d" % prof.node_timeout_ms,
            "appendonly %s" % ("yes" if aof else "no"),
            "appendfsync %s" % (aof or "everysec"),
        ]
        if spill != "no":
            # Every queue tail past its head window goes to disk, whatever
            # the memory: the faults then hit jobs read back from disk.
            conf += ["spill yes", "spill-watermark 0",
                     "spill-whole-jobs %s" % ("yes" if spill == "whole" else "no")]
        self.conf = os.path.join(self.dir, "disque.conf")
        with open(self.conf, "w") as f:
            f.write("\n".join(conf) + "\n")

    def start(self):
        out = open(os.path.join(self.dir, "stdout.log"), "a")
        # `ip netns exec` execs the server (no fork): proc.pid is the server.
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, self.binary, self.conf],
                                     stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.expected_exit = False

    def client(self, timeout=5.0):
        return Client("127.0.0.1", PORT, timeout, make_socket=lambda: socket_in_ns(self.ns))

    def cmd(self, *args, timeout=3.0):
        c = self.client(timeout)
        try:
            return c.cmd(*args)
        finally:
            c.close()

    def signal(self, sig):
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.expected_exit = True
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGKILL:
            self.proc.wait(10)
            self.paused = False
        elif sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False

    def check_exit(self):
        """Record an exit we did not cause (a crash)."""
        if self.proc is not None and not self.expected_exit:
            rc = self.proc.poll()
            if rc is not None:
                self.crashes.append(rc)
                self.expected_exit = True
                log("CRASH: node %d exited with status %s" % (self.idx, rc))

    def reachable(self):
        """Peers this node reaches: not failing by its own account
        (cluster_reachable_nodes) *and* with a bus link up (CLUSTER NODES
        says connected; right after a restart nodes.conf lists peers that
        are not failing yet but not linked either). -1 if not answering."""
        try:
            info = self.cmd("CLUSTER", "INFO", timeout=2.0)
            nodes = self.cmd("CLUSTER", "NODES", timeout=2.0)
        except (OSError, ConnectionError):
            return -1
        if not isinstance(info, str) or not isinstance(nodes, str):
            return -1
        linked = sum(1 for line in nodes.splitlines()
                     if line.strip() and "myself" not in line and line.rstrip().endswith(" connected"))
        for line in info.splitlines():
            if line.startswith("cluster_reachable_nodes:"):
                return min(int(line.split(":")[1]), linked)
        return -1


class Net:
    """The namespaces and the router process."""

    def __init__(self, prefix, seed, nodes):
        self.prefix = prefix
        self.nodes = nodes
        for n in nodes:
            run("ip", "netns", "add", n.ns)
            run("ip", "-n", n.ns, "link", "set", "lo", "up")
        here = os.path.dirname(os.path.abspath(__file__))
        args = [sys.executable, os.path.join(here, "chaos_net.py"),
                "%st" % prefix.replace("-", ""), str(seed)]
        args += ["%s:%s" % (n.ns, n.ip) for n in nodes]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError("chaos_net.py did not start (%r)" % line)
        self.lock = threading.Lock()

    def _ask(self, req):
        with self.lock:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("chaos_net.py exited")
            return line.strip()

    def set(self, loss=0.0, delay_ms=0.0, drop=()):
        r = self._ask({"loss": loss, "delay_ms": delay_ms, "drop": [list(d) for d in drop]})
        if r != "ok":
            raise RuntimeError("chaos_net.py: %s" % r)

    def heal(self):
        self.set()

    def stats(self):
        return json.loads(self._ask({"stats": True}))

    def close(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for n in self.nodes:
            subprocess.run(["ip", "netns", "del", n.ns], capture_output=True)


class Producer(threading.Thread):
    """ADDJOB at a steady seeded pace on the node beside it."""

    def __init__(self, node, ledger, prof, replicate, rng):
        super().__init__(daemon=True)
        self.node, self.ledger, self.prof = node, ledger, prof
        self.replicate, self.rng = replicate, rng
        self.stop = threading.Event()
        self.unknown = 0

    def run(self):
        c = None
        n = 0
        interval = 1.0 / self.prof.rate
        next_t = time.time()
        sock_timeout = self.prof.addjob_timeout_ms / 1000.0 + 3.0
        while not self.stop.is_set():
            next_t += interval * self.rng.uniform(0.5, 1.5)
            delay = next_t - time.time()
            if delay > 0 and self.stop.wait(delay):
                break
            q = self.rng.choice(QUEUES)
            body = ("n%d-%d-" % (self.node.idx, n)).ljust(self.rng.randint(16, 256), "x")
            n += 1
            try:
                if c is None:
                    c = self.node.client(sock_timeout)
                r = c.cmd("ADDJOB", q, body, self.prof.addjob_timeout_ms,
                          "REPLICATE", self.replicate, "RETRY", self.prof.retry_s,
                          "TTL", 3600)
            except (OSError, ConnectionError):
                # Outcome unknown: the job may exist (it then shows up as
                # an orphan delivery) or not. Never counted as added.
                if c is not None:
                    self.unknown += 1
                    c.close()
                    c = None
                else:
                    self.ledger.add_error("unreachable")
                self.stop.wait(0.2)
                next_t = time.time()
                continue
            if isinstance(r, RespError):
                self.ledger.add_error(str(r).split(" ")[0])
            elif isinstance(r, str) and r.startswith("D-"):
                self.ledger.add(r, body=body)
            else:
                self.ledger.add_error("unexpected")
        if c is not None:
            c.close()


class NodeLoop(threading.Thread):
    """A client thread beside one node: `step(conn)` again and again until
    stopped, with a fresh connection (after a short pause) whenever the
    last one broke."""

    def __init__(self, node):
        super().__init__(daemon=True)
        self.node = node
        self.stop = threading.Event()

    def step(self, c):
        raise NotImplementedError

    def run(self):
        c = None
        while not self.stop.is_set():
            try:
                if c is None:
                    c = self.node.client(5.0)
                self.step(c)
            except (OSError, ConnectionError):
                if c is not None:
                    c.close()
                    c = None
                self.stop.wait(0.2)
        if c is not None:
            c.close()


class Consumer(NodeLoop):
    """GETJOB from every queue on the node beside it and ACKJOB each batch
    at once (a prompt worker)."""

    def __init__(self, node, ledger, pause=0.0):
        super().__init__(node)
        self.ledger = ledger
        self.pause = pause

    def step(self, c):
        r = c.cmd("GETJOB", "TIMEOUT", 500, "COUNT", 16, "FROM", *QUEUES)
        if isinstance(r, RespError):
            self.stop.wait(0.2)
            return
        if not r:
            return
        now = time.time()
        ids = [job[1] for job in r]
        for job in r:
            self.ledger.delivered(job[1], now, self.node.idx, job[2])
        a = c.cmd("ACKJOB", *ids)
        if not isinstance(a, RespError):
            now = time.time()
            for jid in ids:
                self.ledger.acked(jid, now)
        if self.pause:
            self.stop.wait(self.pause)


MIX_KINDS = ["kill", "pause", "partition", "isolate", "oneway", "loss"]


def plan(fault, seed, prof, replicate):
    """The run's fault schedule, drawn from the seed before anything starts:
    one step per cycle with its kind, the nodes involved (1-based), the
    fault's duration and the calm gap after the cluster re-forms. `mix`
    draws each step's kind, and half of its non-loss steps also get 10%
    loss + 20 ms delay on every link at the same time."""
    rng = random.Random("%s/%d/schedule" % (fault, seed))
    ids = list(range(1, NODES + 1))
    # kill: a fixed set of R-1 nodes, so no job loses R copies over the run
    kill_set = sorted(rng.sample(ids, max(1, replicate - 1)))
    steps = []
    cycles = prof.cycles * (2 if fault == "mix" else 1)
    for _ in range(cycles):
        kind = rng.choice(MIX_KINDS) if fault == "mix" else fault
        step = {"kind": kind, "dur": prof.fault_s * rng.uniform(1.0, 1.5)}
        if kind == "kill":
            step["nodes"] = sorted(rng.sample(kill_set, rng.randint(1, len(kill_set))))
        elif kind == "pause":
            step["nodes"] = sorted(rng.sample(ids, rng.randint(1, max(1, replicate - 1))))
            step["dur"] = prof.node_timeout_ms / 1000.0 * rng.uniform(2.0, 3.0)
        elif kind in ("partition", "isolate"):
            step["nodes"] = sorted(rng.sample(ids, 2 if kind == "partition" else 1))
        elif kind == "oneway":
            step["src"] = rng.choice(ids)
            step["nodes"] = sorted(rng.sample([i for i in ids if i != step["src"]], 2))
        elif kind == "loss":
            step["dur"] = prof.loss_fault_s * rng.uniform(1.0, 1.2)
        elif kind.startswith("aof-"):
            step["dur"] = rng.uniform(1.0, 3.0)
            # kill -9 first (the harder case), then alternate with SIGTERM
            step["how"] = "kill" if len(steps) % 2 == 0 else "term"
        if fault == "mix" and kind != "loss" and rng.random() < 0.5:
            step["overlay_loss"] = True
        step["gap"] = prof.gap_s * rng.uniform(1.0, 1.5)
        step = {k: round(v, 2) if isinstance(v, float) else v for k, v in step.items()}
        steps.append(step)
    return steps


class Run:
    def __init__(self, args, fault, seed):
        self.args = args
        self.fault = fault
        self.seed = seed
        self.prof = Profile(args.quick, args.spill)
        if args.cycles:
            self.prof.cycles = args.cycles
        self.replicate = args.replicate
        self.spill_counts = {"written": 0, "reads": 0}
        self.whole_copies = 0
        self.plan = plan(fault, seed, self.prof, args.replicate)
        self.aof = fault[4:] if fault.startswith("aof-") else None
        self.prefix = "dqc%d" % os.getpid()
        self.root = tempfile.mkdtemp(prefix="chaos-%s-%d-" % (fault, seed))
        self.ledger = Ledger()
        self.nodes = []
        self.net = None
        self.windows = []  # (fault name, start, heal)
        self.events = []
        self.stop_monitor = threading.Event()

    # ---- cluster lifecycle -------------------------------------------------

    def start_cluster(self):
        for i in range(1, NODES + 1):
            self.nodes.append(Node(i, self.prefix, self.root, self.args.bin, self.prof, self.aof,
                                   self.args.spill))
        self.net = Net(self.prefix, self.seed, self.nodes)
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            self.wait_serving(n)
        first = self.nodes[0]
        for n in self.nodes[1:]:
            r = first.cmd("CLUSTER", "MEET", n.ip, PORT)
            if isinstance(r, RespError):
                raise RuntimeError("CLUSTER MEET %s: %s" % (n.ip, r))
        self.wait_joined("formation")

    def wait_serving(self, n, deadline_s=30):
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

    def wait_joined(self, why, deadline_s=60):
        t0 = time.time()
        while time.time() - t0 < deadline_s:
            if all(n.reachable() == NODES - 1 for n in self.nodes):
                log("%s: all %d nodes reach each other (%.1fs)" % (why, NODES, time.time() - t0))
                return
            time.sleep(0.2)
        raise RuntimeError("%s: cluster did not re-form in %ds: %s"
                           % (why, deadline_s, [n.reachable() for n in self.nodes]))

    def monitor(self):
        while not self.stop_monitor.wait(0.2):
            for n in self.nodes:
                n.check_exit()

    def teardown(self):
        self.stop_monitor.set()
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

    # ---- faults --------------------------------------------------------------

    def pairs_across(self, a, b):
        out = []
        for x in a:
            for y in b:
                out.append((x.ip, y.ip, 1.0))
                out.append((y.ip, x.ip, 1.0))
        return out

    def inject(self, step):
        """Apply one planned fault; returns (description, heal action)."""
        kind = step["kind"]
        node = {n.idx: n for n in self.nodes}
        involved = [node[i] for i in step.get("nodes", [])]
        drop, loss, delay = [], 0.0, 0.0
        heal_procs = None
        if kind == "kill":
            for n in involved:
                n.signal(signal.SIGKILL)
            desc = "kill -9 nodes %s" % step["nodes"]

            def heal_procs():
                for n in involved:
                    n.start()
                for n in involved:
                    self.wait_serving(n)
        elif kind == "pause":
            for n in involved:
                n.signal(signal.SIGSTOP)
            desc = "SIGSTOP nodes %s" % step["nodes"]

            def heal_procs():
                for n in involved:
                    n.signal(signal.SIGCONT)
        elif kind in ("partition", "isolate"):
            rest = [n for n in self.nodes if n not in involved]
            drop = self.pairs_across(involved, rest)
            desc = "partition %s | %s" % (step["nodes"], [n.idx for n in rest])
        elif kind == "oneway":
            src = node[step["src"]]
            drop = [(src.ip, d.ip, 1.0) for d in involved]
            desc = "one-way: node %d -> %s dropped" % (src.idx, step["nodes"])
        elif kind == "loss":
            loss, delay = 0.3, 50
            desc = "30% loss + 50 ms delay on all links"
        elif kind.startswith("aof-"):
            if step["how"] == "kill":
                for n in self.nodes:
                    n.signal(signal.SIGKILL)
            else:
                for n in self.nodes:
                    n.signal(signal.SIGTERM)
                for n in self.nodes:
                    rc = n.proc.wait(30)
                    if rc != 0:
                        n.crashes.append("exit status %d after SIGTERM" % rc)
                        log("CRASH: node %d exited with status %d after SIGTERM" % (n.idx, rc))
            desc = "%s of all %d nodes (appendfsync %s)" % (
                "kill -9" if step["how"] == "kill" else "SIGTERM (clean shutdown)", NODES, self.aof)

            def heal_procs():
                for n in self.nodes:
                    n.start()
                for n in self.nodes:
                    self.wait_serving(n)
        else:
            raise ValueError(kind)
        if step.get("overlay_loss"):
            loss, delay = 0.1, 20
            desc += " + 10% loss, 20 ms delay"
        net_fault = bool(drop) or loss > 0
        if net_fault:
            self.net.set(loss=loss, delay_ms=delay, drop=drop)

        def heal():
            if net_fault:
                self.net.heal()
            if heal_procs is not None:
                heal_procs()
        return desc, heal

    # ---- the run -------------------------------------------------------------

    def execute(self):
        t_start = self.t_start = time.time()
        log("run: fault=%s seed=%d replicate=%d aof=%s spill=%s dir=%s"
            % (self.fault, self.seed, self.replicate, self.aof or "off", self.args.spill, self.root))
        log("plan: %s" % json.dumps(self.plan))
        self.start_cluster()
        mon = threading.Thread(target=self.monitor, daemon=True)
        mon.start()
        producers = [Producer(n, self.ledger, self.prof, self.replicate,
                              random.Random("%s/%d/producer%d" % (self.fault, self.seed, n.idx)))
                     for n in self.nodes]
        pause = 0.0
        if self.args.spill != "no":
            self.add_backlog()
            pause = SPILL_CONSUMER_PAUSE_S
        consumers = [Consumer(n, self.ledger, pause) for n in self.nodes]
        for t in producers + consumers:
            t.start()
        time.sleep(self.prof.warmup_s)
        # Replicas' copies on disk whole before the first fault (each node
        # holds copies of the others' backlogs).
        self.whole_copies = self.spill_totals()["copies"]
        for i, step in enumerate(self.plan):
            t0 = time.time()
            if self.fault == "calm":
                desc, heal = "none", (lambda: None)
            else:
                desc, heal = self.inject(step)
            log("fault %d: %s for %.1fs" % (i + 1, desc, step["dur"]))
            if self.fault != "calm":
                self.events.append({"t": round(t0 - self.t_start, 1), "fault": desc,
                                    "s": round(step["dur"], 1)})
            time.sleep(step["dur"])
            heal()
            if self.fault != "calm":
                log("fault %d: healed" % (i + 1))
                self.wait_joined("heal %d" % (i + 1))
                self.windows.append((t0, time.time()))
                self.events[-1]["reformed"] = round(time.time() - self.t_start, 1)
            time.sleep(step["gap"])
        for t in producers:
            t.stop.set()
        for t in producers:
            t.join(30)
        t_stop = time.time()
        log("producers stopped: %d added, %d add errors %s, %d unknown outcomes"
            % (len(self.ledger.added), self.ledger.add_errors, self.ledger.error_kinds,
               sum(p.unknown for p in producers)))

        # Drain: every added ID delivered (bounded).
        while self.ledger.missing() and time.time() - t_stop < self.prof.drain_s:
            time.sleep(0.5)
        drained_s = time.time() - t_stop
        # Convergence: queues empty, nothing left queued/active anywhere.
        converged, leftovers, acked_left = self.converge()
        for t in consumers:
            t.stop.set()
        for t in consumers:
            t.join(10)
        self.stop_monitor.set()
        mon.join(5)
        for n in self.nodes:
            n.check_exit()
        not_serving = []
        for n in self.nodes:
            try:
                if n.cmd("PING", timeout=2.0) != "PONG":
                    not_serving.append(n.idx)
            except (OSError, ConnectionError):
                not_serving.append(n.idx)
        self.spill_counts = self.spill_totals()
        panics = []
        for n in self.nodes:
            try:
                with open(os.path.join(n.dir, "stdout.log"), errors="replace") as f:
                    if "panicked" in f.read():
                        panics.append(n.idx)
            except OSError:
                pass
        return self.result(t_start, drained_s, converged, leftovers, acked_left,
                           producers, not_serving, panics)

    def add_backlog(self):
        """Spill runs: SPILL_BACKLOG jobs pipelined into every node's first
        queue (bodies of 64 to 960 bytes), its tail past the head window
        written to disk at once (watermark 0), the copies on the replicas
        too."""
        for n in self.nodes:
            bodies = [("b%d-%d-" % (n.idx, i)).ljust(64 + (i * 37) % 900, "b")
                      for i in range(SPILL_BACKLOG)]
            cmds = [("ADDJOB", QUEUES[0], b, self.prof.addjob_timeout_ms,
                     "REPLICATE", self.replicate, "RETRY", self.prof.retry_s, "TTL", 3600)
                    for b in bodies]
            c = n.client(60.0)
            try:
                replies = c.pipeline(cmds)
            finally:
                c.close()
            for b, r in zip(bodies, replies):
                if isinstance(r, str) and r.startswith("D-"):
                    self.ledger.add(r, body=b)
                else:
                    self.ledger.add_error("backlog")
        log("backlog: %d jobs a node in %s" % (SPILL_BACKLOG, QUEUES[0]))

    def spill_totals(self):
        """Summed over the nodes: jobs written to disk and read back (each
        node's counters since its last start), and replicas' copies whole on
        disk now (a gauge; only the sample taken before the first fault is
        reported)."""
        totals = {"written": 0, "reads": 0, "copies": 0}
        if self.args.spill == "no":
            return totals
        for n in self.nodes:
            try:
                c = n.client(3.0)
                try:
                    info = c.info("spill")
                finally:
                    c.close()
                totals["written"] += int(info.get("spill_jobs_written", 0))
                totals["reads"] += int(info.get("spill_disk_reads", 0))
                totals["copies"] += int(info.get("spilled_whole_copies", 0))
            except (OSError, ConnectionError, ValueError):
                pass
        return totals

    def converge(self):
        """Poll until QLEN is 0 on every node for every queue and no node
        holds a queued, active or wait-repl job. Returns (ok, leftovers,
        acked jobs still held)."""
        t0 = time.time()
        leftovers = None
        acked = 0
        while time.time() - t0 < self.prof.converge_s:
            if not self.ledger.missing():
                leftovers, acked = self.census()
                if leftovers == 0:
                    log("converged: queues empty, no job queued/active (%.1fs), "
                        "%d acked jobs still held" % (time.time() - t0, acked))
                    return True, 0, acked
            time.sleep(1.0)
        if leftovers is None:
            leftovers, acked = self.census()
        return False, leftovers, acked

    def census(self):
        live = 0
        acked = 0
        for n in self.nodes:
            try:
                for q in QUEUES:
                    r = n.cmd("QLEN", q)
                    live += r if isinstance(r, int) else 1
                r = n.cmd("JSCAN", 0, "BUSYLOOP", "STATE", "queued", "STATE", "active",
                          "STATE", "wait-repl")
                live += len(r[1]) if isinstance(r, list) else 1
                r = n.cmd("JSCAN", 0, "BUSYLOOP", "STATE", "acked")
                acked += len(r[1]) if isinstance(r, list) else 0
            except (OSError, ConnectionError):
                live += 1
        return live, acked

    def write_duplicates(self, dups):
        """<run dir>/duplicates.jsonl: every ID delivered more than once, with
        its add time, deliveries (seconds since the run started, consumer's
        node) and first ack time, to find where duplicates come from."""
        L, t0 = self.ledger, self.t_start

        def rel(t):
            return None if t is None else round(t - t0, 3)

        ids = sorted({d[0] for d in dups})
        with L.lock, open(os.path.join(self.root, "duplicates.jsonl"), "w") as f:
            for jid in ids:
                f.write(json.dumps({
                    "id": jid,
                    "added": rel(L.add_time.get(jid)),
                    "deliveries": [[rel(t), node] for t, node in L.deliveries[jid]],
                    "first_ack": rel(L.ack_time.get(jid)),
                    "faults": self.events,
                }) + "\n")

    def result(self, t_start, drained_s, converged, leftovers, acked_left,
               producers, not_serving, panics):
        L, p = self.ledger, self.prof
        grace = p.grace_s()

        def in_fault(t):
            return any(a <= t <= b + grace for a, b in self.windows)

        dups = L.duplicate_deliveries()
        dup_fault = sum(1 for _, t1, t2, _ in dups if in_fault(t1) or in_fault(t2))
        with L.lock:
            # Jobs exposed to a fault: added between a fault's start and its
            # heal (the cluster re-formed).
            exposed = sum(1 for t in L.add_time.values()
                          if any(a <= t <= b for a, b in self.windows))
        with L.lock:
            after_ack = sum(1 for jid, _, t2, _ in dups
                            if jid in L.ack_time and L.ack_time[jid] <= t2)
        lost = sorted(L.missing())
        if self.args.keep:
            self.write_duplicates(dups)
        added = len(L.added)
        delivered = added - len(lost)
        crashes = {n.idx: n.crashes for n in self.nodes if n.crashes}
        res = {
            "fault": self.fault,
            "seed": self.seed,
            "mode": "quick" if p.quick else "full",
            "replicate": self.replicate,
            "aof": self.aof or "off",
            "spill": self.args.spill,
            "spill_jobs_written": self.spill_counts["written"],
            "spill_disk_reads": self.spill_counts["reads"],
            "spill_whole_copies_before_faults": self.whole_copies,
            "node_timeout_ms": p.node_timeout_ms,
            "retry_s": p.retry_s,
            "rate_per_producer": p.rate,
            "added": added,
            "add_errors": dict(L.error_kinds),
            "unknown_outcome": sum(pr.unknown for pr in producers),
            "delivered": delivered,
            "lost": len(lost),
            "lost_ids": lost[:20],
            "deliveries": sum(len(d) for d in L.deliveries.values()),
            "duplicates": len(dups),
            "dup_pct": round(100.0 * len(dups) / added, 3) if added else 0.0,
            "dups_in_fault": dup_fault,
            "dups_calm": len(dups) - dup_fault,
            "added_in_fault": exposed,
            "dup_pct_in_fault": round(100.0 * dup_fault / exposed, 3) if exposed else 0.0,
            "dups_after_ack": after_ack,
            "orphans": len(L.orphans()),
            "wrong_bodies": len(L.wrong_bodies),
            "wrong_body_ids": L.wrong_bodies[:20],
            "crashes": crashes,
            "panics": panics,
            "not_serving": not_serving,
            "converged": converged,
            "leftover_jobs": leftovers,
            "acked_jobs_held": acked_left,
            "drain_s": round(drained_s, 1),
            "duration_s": round(time.time() - t_start, 1),
            "faults": self.events,
            "net": self.net.stats(),
            "commit": self.args.commit,
        }
        # A spilling run that never wrote a job to disk tested nothing of
        # the tier: it fails too, and so does a whole-job run whose
        # replicas' copies never left RAM whole.
        spilled = self.args.spill == "no" or res["spill_jobs_written"] > 0
        if self.args.spill == "whole" and self.whole_copies == 0:
            spilled = False
        res["ok"] = (res["lost"] == 0 and not res["wrong_bodies"] and not crashes and not panics
                     and not not_serving and converged and spilled)
        return res


def run_one(args, fault, seed):
    r = Run(args, fault, seed)
    try:
        res = r.execute()
    except Exception as e:  # a harness step failed: report it as a failed run
        log("ERROR: %s" % e)
        res = {"fault": fault, "seed": seed, "ok": False, "error": str(e),
               "replicate": args.replicate, "mode": "quick" if args.quick else "full"}
    finally:
        r.teardown()
    keep = args.keep or not res.get("ok")
    if keep:
        log("logs kept in %s" % r.root)
    else:
        shutil.rmtree(r.root, ignore_errors=True)
    res["dir"] = r.root if keep else None
    return res


def table(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print("| fault | seed | R | AOF fsync | added | add errors | delivered | lost | dups | dup % "
          "| dups in fault / calm | added in fault | dup % of those | dups after ack | orphans "
          "| crashes | converged | duration | commit |")
    print("|" + "---|" * 19)
    for r in rows:
        if "error" in r:
            print("| %s | %d | %s | | error: %s ||||||||||||||" % (r["fault"], r["seed"],
                                                                r.get("replicate"), r["error"]))
            continue
        print("| %s | %d | %d | %s | %d | %d | %d | %d | %d | %.2f | %d / %d | %s | %s | %d | %d "
              "| %d | %s | %ds | %s |"
              % (r["fault"], r["seed"], r["replicate"], r["aof"], r["added"],
                 sum(r["add_errors"].values()), r["delivered"], r["lost"], r["duplicates"],
                 r["dup_pct"], r["dups_in_fault"], r["dups_calm"],
                 r.get("added_in_fault", "–"),
                 "%.2f" % r["dup_pct_in_fault"] if "dup_pct_in_fault" in r else "–",
                 r["dups_after_ack"], r["orphans"], len(r["crashes"]) + len(r["panics"]),
                 "yes" if r["converged"] else "NO", r["duration_s"], r.get("commit", "")))


def process_alive(pid):
    """True if `pid` runs (a zombie awaiting its reaper does not count)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cleanup_stale():
    """Remove namespaces left by a chaos run whose process is gone."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith("dqc") and "-n" in name:
            pid = name[3:].split("-")[0]
            if pid.isdigit() and not process_alive(int(pid)):
                # Servers of a killed run still live in its namespaces.
                pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                                      text=True).stdout.split()
                for p in pids:
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", name], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="disque-server binary")
    ap.add_argument("--quick", action="store_true", help="short runs (CI)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fault", default="all", help="|".join(FAULTS) + " or all")
    ap.add_argument("--replicate", type=int, default=3)
    ap.add_argument("--spill", choices=["no", "bodies", "whole"], default="no",
                    help="spill tier on every node, watermark 0: queue tails' bodies or whole jobs on disk")
    ap.add_argument("--cycles", type=int, help="fault cycles per run (default 3, 1 with --quick)")
    ap.add_argument("--out", help="append each run's JSON result to this file")
    ap.add_argument("--keep", action="store_true", help="keep node directories and logs")
    ap.add_argument("--commit", default="", help="recorded in the results")
    ap.add_argument("--table", metavar="RESULTS", help="print a Markdown table and exit")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return 0
    if not args.bin:
        ap.error("--bin is required")
    if not 2 <= args.replicate <= NODES:
        ap.error("--replicate must be 2..%d" % NODES)
    faults = FAULTS if args.fault == "all" else args.fault.split(",")
    for f in faults:
        if f not in FAULTS:
            ap.error("unknown fault %r (one of %s)" % (f, ", ".join(FAULTS)))
    cleanup_stale()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    results = []
    for f in faults:
        res = run_one(args, f, args.seed)
        results.append(res)
        log("RESULT %s" % json.dumps(res, sort_keys=True))
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(res, sort_keys=True) + "\n")
    failed = [r for r in results if not r.get("ok")]
    log("summary:")
    for r in results:
        if "error" in r:
            log("  %-13s seed %d  ERROR %s" % (r["fault"], r["seed"], r["error"]))
        else:
            log("  %-13s seed %d  added %d lost %d wrong bodies %d dups %d (%.2f%%; %d in fault, %d calm) "
                "orphans %d crashes %s converged %s  %ss"
                % (r["fault"], r["seed"], r["added"], r["lost"], r["wrong_bodies"], r["duplicates"],
                   r["dup_pct"], r["dups_in_fault"], r["dups_calm"], r["orphans"], r["crashes"] or "none",
                   r["converged"], r["duration_s"]))
    if failed:
        log("FAILED: %s" % ", ".join("%s(seed %d)" % (r["fault"], r["seed"]) for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
