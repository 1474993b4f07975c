"""Process jobs from a Disque queue with redis-py.

    python worker.py [--host 127.0.0.1] [--port 7711] [--queue demo]
                     [--count N] [--max-seconds 60] [--password PW]

Takes one job at a time (GETJOB ... WITHCOUNTERS), prints it, and
acknowledges it (ACKJOB); a job whose processing raises is given back with
NACK so that it is delivered again. Stops after --count jobs, after
--max-seconds, or on Ctrl-C, and prints `processed <n> jobs`. Exits 1 when
--count was given and not reached.
"""

import argparse
import sys
import time

import redis


def process(queue, job_id, body, nacks):
    """The work itself: here, print the job."""
    print(f"{job_id} {body} (queue {queue}, nacked {nacks} times)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7711)
    p.add_argument("--queue", default="demo")
    p.add_argument("--count", type=int)
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--password")
    args = p.parse_args()

    r = redis.Redis(
        host=args.host,
        port=args.port,
        password=args.password,
        decode_responses=True,
        # Above GETJOB's own 1000 ms timeout.
        socket_timeout=10,
        socket_connect_timeout=5,
    )
    deadline = time.monotonic() + args.max_seconds
    processed = 0
    try:
        while args.count is None or processed < args.count:
            if time.monotonic() >= deadline:
                break
            # Block at most 1 s so that the loop notices its deadline.
            reply = r.execute_command(
                "GETJOB", "TIMEOUT", 1000, "WITHCOUNTERS", "FROM", args.queue
            )
            if not reply:
                continue
            for queue, job_id, body, *counters in reply:
                fields = dict(zip(counters[0::2], counters[1::2]))
                try:
                    process(queue, job_id, body, fields.get("nacks", 0))
                except Exception as e:  # noqa: BLE001 - any failure gives the job back
                    print(f"{job_id} failed: {e}; giving it back", file=sys.stderr)
                    r.execute_command("NACK", job_id)
                    continue
                r.execute_command("ACKJOB", job_id)
                processed += 1
    except KeyboardInterrupt:
        pass
    print(f"processed {processed} jobs")
    if args.count is not None and processed < args.count:
        sys.exit(1)


if __name__ == "__main__":
    main()
