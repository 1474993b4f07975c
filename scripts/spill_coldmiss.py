"""Cold misses of the spill tier (issue 21, target 4; docs/PERFORMANCE.md).

A cold miss is a GETJOB whose next job is on disk when it arrives: the
consumer waits for the page-in. Drives a running node started with
`spill yes` and `spill-watermark 0`:

1. adds JOBS jobs of 1 KiB to each of QUEUES queues and waits until every
   tail past the head window is written (INFO spill);
2. if this user may, drops the page cache (/proc/sys/vm/drop_caches), so
   the reads go to the disk, not to cached pages; the report says which;
3. per queue: one GETJOB NOHANG with a COUNT larger than the queue takes
   every job that is in RAM (GETJOB never pops a job whose body is on
   disk), then a blocking GETJOB COUNT 1 on the same queue is timed: its
   job is on disk when the command arrives.

Prints the percentiles of the timed GETJOBs, those of the NOHANG ones
(resident jobs, for reference) and the disk reads the node counted.

usage: python3 scripts/spill_coldmiss.py PORT [QUEUES] [JOBS]
"""

import os
import sys
import time

from disque_client import Client

BODY = b"x" * 1024


def settle(c, deadline_s=300):
    """Wait until no spill write is pending and the spilled count is stable."""
    last = -1
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        s = c.info("spill")
        now = int(s.get("spilled_jobs", "0"))
        if s.get("spill_pending_writes") == "0" and now == last:
            return now
        last = now
        time.sleep(0.5)
    raise SystemExit("spill did not settle")


def drop_caches():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def main():
    port = int(sys.argv[1])
    queues = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    c = Client("127.0.0.1", port, timeout=30)
    for q in range(queues):
        for _ in range(jobs // 500):
            for r in c.pipeline([("ADDJOB", f"cold:{q}", BODY, 0)] * 500):
                if not (isinstance(r, str) and r.startswith("D-")):
                    raise SystemExit(f"ADDJOB refused: {r!r}")
    spilled = settle(c)
    dropped = os.environ.get("DROP_CACHES", "yes") == "yes" and drop_caches()
    reads0 = int(c.info("spill").get("spill_disk_reads", "0"))
    resident, misses, empty = [], [], 0
    for q in range(queues):
        name = f"cold:{q}"
        t0 = time.perf_counter()
        got = c.cmd("GETJOB", "NOHANG", "COUNT", jobs + 1, "FROM", name)
        resident.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        r = c.cmd("GETJOB", "TIMEOUT", 5000, "COUNT", 1, "FROM", name)
        misses.append(time.perf_counter() - t0)
        if not r:
            empty += 1
        if q == 0:
            print(f"queue 0: {len(got or [])} jobs in RAM, then the timed GETJOB", flush=True)
    reads = int(c.info("spill").get("spill_disk_reads", "0")) - reads0

    def ms(xs):
        return " ".join(f"{k}={pct(xs, p) * 1e3:.3f}" for k, p in (("p50", 50), ("p99", 99))) + (
            f" max={max(xs) * 1e3:.3f} ms"
        )

    print(
        f"queues={queues} jobs_per_queue={jobs} spilled={spilled} "
        f"reads_from={'disk (page cache dropped)' if dropped else 'page cache (not dropped)'}"
    )
    print(f"cold miss GETJOB: {ms(misses)} timed_out={empty} disk_reads={reads}")
    print(f"resident NOHANG GETJOB COUNT {jobs + 1}: {ms(resident)}")
    worst = sorted(range(queues), key=lambda q: -misses[q])[:5]
    print("slowest misses (queue: ms): " + " ".join(f"{q}:{misses[q] * 1e3:.1f}" for q in worst))


if __name__ == "__main__":
    main()
