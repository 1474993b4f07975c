#!/usr/bin/env python3
"""Fault scenario against the compose cluster (called by scripts/docker-test.sh).

Talks RESP to the three containers by their network IPs from the host,
drives docker for the faults, and checks that every job whose ADDJOB
returned an ID is delivered; prints how many deliveries were duplicates.
First it checks the probes: every container's HEALTHCHECK
(`disque-server --healthcheck`) turns healthy, /readyz answers 200 on the
HTTP endpoint, and each node's dashboard API shows all three nodes' queue
totals.

Usage: docker_test.py <compose command...> -- <project>
The compose command is e.g. `docker compose -f deploy/compose.yaml -p P`.
"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from disque_client import Client, Ledger, RespError

NODES = ["disque-1", "disque-2", "disque-3"]
PORT = 7711
HTTP_PORT = 7780
JOBS_PER_STEP = 60


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout.strip()


class Cluster:
    def __init__(self, compose, project):
        self.compose = compose
        self.project = project

    def container(self, svc):
        return run(self.compose + ["ps", "-q", svc])

    def ip(self, svc):
        cid = self.container(svc)
        nets = json.loads(run(["docker", "inspect", "-f", "{{json .NetworkSettings.Networks}}", cid]))
        for n in nets.values():
            if n.get("IPAddress"):
                return n["IPAddress"]
        return None

    def network(self, svc):
        cid = self.container(svc)
        nets = json.loads(run(["docker", "inspect", "-f", "{{json .NetworkSettings.Networks}}", cid]))
        return next(iter(nets))

    def client(self, svc, timeout=5.0):
        ip = self.ip(svc)
        if not ip:
            raise ConnectionError("%s has no address" % svc)
        return Client(ip, PORT, timeout)

    def reachable(self, svc):
        try:
            c = self.client(svc, 2.0)
            try:
                info = c.cmd("CLUSTER", "INFO")
            finally:
                c.close()
        except (OSError, ConnectionError, RuntimeError):
            return -1
        if isinstance(info, RespError):
            return -1
        for line in info.splitlines():
            if line.startswith("cluster_reachable_nodes:"):
                return int(line.split(":")[1])
        return -1

    def wait_joined(self, deadline_s=120):
        t0 = time.time()
        while time.time() - t0 < deadline_s:
            if all(self.reachable(s) == len(NODES) - 1 for s in NODES):
                return time.time() - t0
            time.sleep(0.2)
        raise RuntimeError("cluster did not form within %ds: %s\n%s"
                           % (deadline_s, [self.reachable(s) for s in NODES],
                              self.tables()))

    def tables(self):
        """Every node's CLUSTER NODES, for the message of a failure."""
        out = []
        for svc in NODES:
            try:
                c = self.client(svc, 2.0)
                try:
                    out.append("%s:\n%s" % (svc, c.cmd("CLUSTER", "NODES")))
                finally:
                    c.close()
            except (OSError, ConnectionError, RuntimeError) as e:
                out.append("%s: %s" % (svc, e))
        return "\n".join(out)


# ADDJOB replication timeout (ms) of the produced jobs.
ADDJOB_TIMEOUT_MS = 5000


def produce(cl, svc, ledger, step, n=JOBS_PER_STEP):
    """ADDJOB n jobs on one node, half REPLICATE 2 and half REPLICATE 3.

    The socket timeout outlasts ADDJOB's own 5000 ms replication timeout:
    while a peer is cut off but not yet flagged as failing, a REPLICATE 3
    ADDJOB waits those 5 s and then answers NOREPL, which is an answer to
    record, not a hang."""
    c = cl.client(svc, ADDJOB_TIMEOUT_MS / 1000.0 + 10.0)
    ok = 0
    try:
        for i in range(n):
            repl = 2 if i % 2 == 0 else 3
            r = c.cmd("ADDJOB", "q", "%s-%d" % (step, i), ADDJOB_TIMEOUT_MS,
                      "REPLICATE", repl, "RETRY", 5, "TTL", 3600)
            if isinstance(r, RespError):
                ledger.add_error(str(r).split(" ")[0])
                continue
            ledger.add(r)
            ok += 1
    finally:
        c.close()
    log("%s: %d jobs added on %s" % (step, ok, svc))


def consume_once(cl, svc, ledger, timeout_ms=500):
    """One GETJOB (blocking up to timeout_ms) and the ACKJOBs; False on error."""
    try:
        c = cl.client(svc, 5.0)
    except (OSError, ConnectionError, RuntimeError):
        return False
    try:
        r = c.cmd("GETJOB", "TIMEOUT", timeout_ms, "COUNT", 50, "FROM", "q")
        if isinstance(r, RespError) or r is None:
            return not isinstance(r, RespError)
        for job in r:
            jid = job[1]
            ledger.delivered(jid)
            c.cmd("ACKJOB", jid)
        return True
    except (OSError, ConnectionError):
        return False
    finally:
        c.close()


def drain_all(cl, svc, ledger, deadline_s=90):
    t0 = time.time()
    while ledger.missing() and time.time() - t0 < deadline_s:
        consume_once(cl, svc, ledger)
    return not ledger.missing()


class Consumer(threading.Thread):
    """Keeps consuming on whichever node `target` names (a background
    consumer during the rolling restart)."""

    def __init__(self, cl, ledger):
        super().__init__(daemon=True)
        self.cl, self.ledger = cl, ledger
        self.target = NODES[1]
        self.stop = False

    def run(self):
        while not self.stop:
            if not consume_once(self.cl, self.target, self.ledger):
                time.sleep(0.2)


def http_get(host, path):
    """(status, body) of GET http://host:HTTP_PORT/path."""
    try:
        with urllib.request.urlopen("http://%s:%d%s" % (host, HTTP_PORT, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_probes(cl, deadline_s=90):
    """HEALTHCHECK healthy, /readyz 200 and the cluster view complete on every node."""
    t0 = time.time()
    pending = set(NODES)
    while pending and time.time() - t0 < deadline_s:
        for svc in sorted(pending):
            health = run(["docker", "inspect", "-f", "{{.State.Health.Status}}", cl.container(svc)])
            ip = cl.ip(svc)
            ready = http_get(ip, "/readyz")[0] == 200 if ip else False
            if health == "healthy" and ready:
                pending.discard(svc)
        time.sleep(0.5)
    if pending:
        raise RuntimeError("probes: not healthy and ready within %ds: %s" % (deadline_s, sorted(pending)))
    log("probes: every container healthy (HEALTHCHECK) and /readyz 200 after %.1fs" % (time.time() - t0))
    # Queue totals of every node on every node's dashboard API.
    adds = {"disque-1": 1, "disque-2": 2, "disque-3": 3}
    for svc, n in adds.items():
        c = cl.client(svc)
        try:
            for i in range(n):
                r = c.cmd("ADDJOB", "probe:" + svc, "p%d" % i, "0", "REPLICATE", "1")
                if not (isinstance(r, str) and r.startswith("D-")):
                    raise RuntimeError("probes: ADDJOB on %s: %r" % (svc, r))
        finally:
            c.close()
    ids = {}
    for svc in NODES:
        c = cl.client(svc)
        try:
            ids[svc] = c.cmd("CLUSTER", "MYID")
        finally:
            c.close()
    want = {ids[svc]: n for svc, n in adds.items()}
    for svc in NODES:
        got = None
        t1 = time.time()
        while time.time() - t1 < 30:
            st, body = http_get(cl.ip(svc), "/api/cluster")
            if st == 200:
                got = {n["id"]: (n["totals"] or {}).get("queued") for n in json.loads(body)["nodes"]}
                if all(got.get(i) is not None and got[i] >= q for i, q in want.items()):
                    break
            time.sleep(0.5)
        else:
            raise RuntimeError("probes: %s /api/cluster shows %r, want at least %r" % (svc, got, want))
    log("probes: every dashboard shows all three nodes' queue totals")
    # Consume them so the delivery ledger below starts from empty queues.
    for svc in NODES:
        c = cl.client(svc)
        try:
            jobs = c.cmd("GETJOB", "NOHANG", "COUNT", "10", "FROM", "probe:" + svc) or []
            for j in jobs:
                c.cmd("ACKJOB", j[1])
        finally:
            c.close()


def main():
    sep = sys.argv.index("--")
    compose, project = sys.argv[1:sep], sys.argv[sep + 1]
    cl = Cluster(compose, project)
    ledger = Ledger()
    figures = {}

    cl.wait_joined()
    up_t0 = float(os.environ.get("UP_T0", "0") or 0)
    joined_s = time.time() - up_t0
    figures["up_to_joined_s"] = round(joined_s, 2)
    log("cluster joined %.1fs after `compose up` started" % joined_s)
    check_probes(cl)

    # 1. Replicated jobs added on one node, consumed on another.
    produce(cl, "disque-1", ledger, "basic")
    if not drain_all(cl, "disque-2", ledger):
        raise RuntimeError("basic: %d jobs not delivered" % len(ledger.missing()))
    log("basic: all delivered, duplicates so far %d" % ledger.duplicates())

    # 2. docker kill the node holding the queued jobs, then restart it.
    produce(cl, "disque-1", ledger, "kill")
    run(["docker", "kill", cl.container("disque-1")])
    log("kill: disque-1 killed")
    # Replicas re-queue the jobs after RETRY; consume them elsewhere.
    drain_all(cl, "disque-2", ledger, 60)
    run(["docker", "start", cl.container("disque-1")])
    cl.wait_joined()
    log("kill: disque-1 back and joined")
    if not drain_all(cl, "disque-2", ledger):
        raise RuntimeError("kill: %d jobs not delivered" % len(ledger.missing()))
    log("kill: all delivered, duplicates so far %d" % ledger.duplicates())

    # 3. Cut disque-3 off the network, then heal.
    produce(cl, "disque-1", ledger, "partition")
    net = cl.network("disque-3")
    cid3 = cl.container("disque-3")
    run(["docker", "network", "disconnect", net, cid3])
    log("partition: disque-3 disconnected from %s" % net)
    drain_all(cl, "disque-2", ledger, 30)
    produce(cl, "disque-2", ledger, "partition-during")
    run(["docker", "network", "connect", "--alias", "disque-3", net, cid3])
    log("partition: healed")
    cl.wait_joined()
    if not drain_all(cl, "disque-1", ledger):
        raise RuntimeError("partition: %d jobs not delivered" % len(ledger.missing()))
    log("partition: all delivered, duplicates so far %d" % ledger.duplicates())

    # 4. Rolling restart with drain while a consumer keeps working.
    produce(cl, "disque-1", ledger, "rolling")
    produce(cl, "disque-3", ledger, "rolling3")
    consumer = Consumer(cl, ledger)
    consumer.start()
    roll_t0 = time.time()
    for i, svc in enumerate(NODES):
        consumer.target = NODES[(i + 1) % len(NODES)]
        t0 = time.time()
        run(cl.compose + ["stop", "-t", "30", svc])
        stopped = time.time() - t0
        run(cl.compose + ["start", svc])
        cl.wait_joined()
        log("rolling: %s stopped in %.1fs (drain), back and joined" % (svc, stopped))
    figures["rolling_s"] = time.time() - roll_t0
    consumer.stop = True
    consumer.join(10)
    if not drain_all(cl, "disque-2", ledger):
        raise RuntimeError("rolling: %d jobs not delivered" % len(ledger.missing()))

    figures["added"] = len(ledger.added)
    figures["add_errors"] = ledger.add_errors
    figures["lost"] = len(ledger.missing())
    figures["duplicates"] = ledger.duplicates()
    log("RESULT %s" % json.dumps(figures, sort_keys=True))
    log("every one of %d acknowledged ADDJOBs delivered; %d duplicate deliveries"
        % (len(ledger.added), ledger.duplicates()))


if __name__ == "__main__":
    main()
