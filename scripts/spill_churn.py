"""Disk churn of the spill tier (issue 21, target 5; docs/PERFORMANCE.md).

Drives a running node for DURATION seconds with a backlog that keeps
changing on disk, and samples INFO spill every 10 s:

* producers add 1 KiB jobs to `churn` at RATE jobs/s (RETRY 20 s);
* consumers take jobs from its head and, per job, ACK it (60 %), NACK it
  (25 %: back in the queue at once, so a job can loop many times) or
  leave it unacknowledged (15 %: queued again after its RETRY);
* every 100 ms one straggler goes to `stragglers` with a TTL of a day and
  is never consumed: a few long-lived jobs spread over every segment,
  the case that pins a disk without compaction.

Prints one line per sample (`t`, `disk_bytes`, `live_bytes`, their ratio,
jobs and segments on disk, compactions) and a summary: the largest ratio
over the run's second half and the ratio at the end. The target is
disk_bytes <= 2 x live_bytes.

usage: python3 scripts/spill_churn.py PORT [DURATION] [RATE] [BACKLOG]
"""

import random
import sys
import time

from disque_client import Client

BODY = b"x" * 1024


def add_jobs(c, queue, n, ttl):
    cmds = [("ADDJOB", queue, BODY, 0, "RETRY", 20, "TTL", ttl) for _ in range(n)]
    for r in c.pipeline(cmds):
        if not (isinstance(r, str) and r.startswith("D-")):
            raise SystemExit(f"ADDJOB refused: {r!r}")


def main():
    port = int(sys.argv[1])
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 3600
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    backlog = int(sys.argv[4]) if len(sys.argv) > 4 else 100_000
    rng = random.Random(21)
    c = Client("127.0.0.1", port, timeout=30)
    for _ in range(backlog // 500):
        add_jobs(c, "churn", 500, 7 * 86400)
    print(f"prefilled {backlog} jobs; rate {rate}/s for {duration:.0f} s", flush=True)

    counts = {"ack": 0, "nack": 0, "left": 0, "added": backlog, "stragglers": 0}
    samples = []
    t0 = time.monotonic()
    next_sample = t0
    per_tick = max(1, rate // 10)
    while True:
        tick = time.monotonic()
        if tick - t0 >= duration:
            break
        add_jobs(c, "churn", per_tick, 7 * 86400)
        add_jobs(c, "stragglers", 1, 86400)
        counts["added"] += per_tick
        counts["stragglers"] += 1
        # Take enough that the backlog holds: 60 % of what is taken leaves.
        want = int(per_tick / 0.6) + 1
        got = []
        while len(got) < want:
            # Blocking, briefly: NOHANG answers empty while the queue's
            # head is being read back from disk.
            n = min(100, want - len(got))
            r = c.cmd("GETJOB", "TIMEOUT", 50, "COUNT", n, "FROM", "churn")
            if not r:
                break
            got.extend(job[1] for job in r)
        cmds = []
        for jid in got:
            x = rng.random()
            if x < 0.60:
                cmds.append(("ACKJOB", jid))
                counts["ack"] += 1
            elif x < 0.85:
                cmds.append(("NACK", jid))
                counts["nack"] += 1
            else:
                counts["left"] += 1
        if cmds:
            c.pipeline(cmds)
        now = time.monotonic()
        if now >= next_sample:
            s = c.info("spill")
            disk, live = int(s["spill_disk_bytes"]), int(s["spill_live_bytes"])
            ratio = disk / live if live else 0.0
            samples.append((now - t0, ratio))
            qlen = c.cmd("QLEN", "churn")
            print(
                f"t={now - t0:.0f} disk_bytes={disk} live_bytes={live} ratio={ratio:.2f} "
                f"spilled_jobs={s['spilled_jobs']} segments={s['spill_segments']} "
                f"compactions={s['spill_compactions']} moved={s['spill_records_moved']} "
                f"deleted={s['spill_segments_deleted']} qlen={qlen}",
                flush=True,
            )
            next_sample = now + 10
        spare = 0.1 - (time.monotonic() - tick)
        if spare > 0:
            time.sleep(spare)
    half = [r for t, r in samples if t >= duration / 2]
    print(
        f"summary: max_ratio_second_half={max(half, default=0):.2f} "
        f"final_ratio={samples[-1][1] if samples else 0:.2f} "
        + " ".join(f"{k}={v}" for k, v in counts.items()),
        flush=True,
    )


if __name__ == "__main__":
    main()
