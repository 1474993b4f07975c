#!/usr/bin/env python3
"""Large bodies on a small spilling node: refusals and memory.

Starts SERVER (default target/release/disque-server) with `spill yes`,
`spill-whole-jobs WHOLE` and `maxmemory MAXMEM` on a free port, fills
QUEUES queues with bodies of SIZE bytes until PER_QUEUE_MB of each is
queued (one ADDJOB per queue per round trip, as fast as the node answers),
then drains them with GETJOB NOHANG COUNT 20 over every queue and ACKJOB.

Prints one line: ADDJOBs refused (-OOM) during the fill, the highest
used_memory sampled during the fill and during the drain, used_memory_peak
and the drain's time. The spill tier should refuse nothing while the disk
has room and keep memory under maxmemory.

usage: scripts/spill_bigbodies.py SIZE [SIZE ...]
environment: SERVER, WHOLE [yes], MAXMEM [64mb], QUEUES [3], PER_QUEUE_MB [60]
Standard library and scripts/disque_client.py; every socket operation has
a timeout.
"""

import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from disque_client import Client, RespError, free_port  # noqa: E402

SERVER = os.environ.get(
    "SERVER", os.path.join(HERE, "..", "target", "release", "disque-server"))
WHOLE = os.environ.get("WHOLE", "yes")
MAXMEM = os.environ.get("MAXMEM", "64mb")
QUEUES = int(os.environ.get("QUEUES", "3"))
PER_QUEUE = int(os.environ.get("PER_QUEUE_MB", "60")) << 20


def used(c):
    return int(c.info("memory")["used_memory"])


def run(size):
    d = tempfile.mkdtemp(prefix="disque-bigbodies")
    port = free_port()
    log = open(os.path.join(d, "log"), "w")
    p = subprocess.Popen(
        [SERVER, "--port", str(port), "--dir", d, "--spill", "yes",
         "--spill-whole-jobs", WHOLE, "--maxmemory", MAXMEM],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:
            try:
                c = Client("127.0.0.1", port, timeout=30)
                c.cmd("PING")
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        names = ["bigq%d" % q for q in range(QUEUES)]
        body = "x" * size
        rounds = PER_QUEUE // size
        refused = 0
        fill_peak = 0
        for i in range(rounds):
            rs = c.pipeline([["ADDJOB", n, body, "0"] for n in names])
            refused += sum(1 for r in rs if isinstance(r, RespError))
            if i % 50 == 0:
                fill_peak = max(fill_peak, used(c))
        drain_peak = 0
        got = 0
        t0 = time.time()
        while True:
            r = c.cmd("GETJOB", "NOHANG", "COUNT", 20, "FROM", *names)
            if not r:
                if sum(c.cmd("QLEN", n) for n in names) == 0:
                    break
                continue
            got += len(r)
            c.cmd("ACKJOB", *[j[1] for j in r])
            if got % 200 < 20:
                drain_peak = max(drain_peak, used(c))
        secs = time.time() - t0
        peak = int(c.info("memory")["used_memory_peak"])
        print("size=%d whole=%s maxmemory=%s queues=%d: %d of %d ADDJOBs refused; "
              "used_memory fill max %.1f MB, drain max %.1f MB, peak %.1f MB; "
              "%d jobs drained in %.2f s"
              % (size, WHOLE, MAXMEM, QUEUES, refused, rounds * QUEUES,
                 fill_peak / 1e6, drain_peak / 1e6, peak / 1e6, got, secs),
              flush=True)
    finally:
        p.kill()
        p.wait()
        log.close()
        subprocess.run(["rm", "-rf", d], check=False)


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [16384, 61440]
    for size in sizes:
        run(size)


if __name__ == "__main__":
    main()
