"""Add jobs to a Disque queue with redis-py.

    python producer.py [--host 127.0.0.1] [--port 7711] [--queue demo]
                       [--count 10] [--password PW]

Prints one `<job id> <body>` line per job, then `added <count> jobs to <queue>`.
"""

import argparse

import redis


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7711)
    p.add_argument("--queue", default="demo")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--password")
    args = p.parse_args()

    r = redis.Redis(
        host=args.host,
        port=args.port,
        password=args.password,
        decode_responses=True,
        socket_timeout=10,
        socket_connect_timeout=5,
    )
    for i in range(args.count):
        body = f"job {i}"
        # ADDJOB <queue> <body> <ms-timeout> [options]: RETRY 30 re-delivers
        # the job 30 s after a worker took it without acknowledging it.
        job_id = r.execute_command("ADDJOB", args.queue, body, 5000, "RETRY", 30)
        print(job_id, body)
    print(f"added {args.count} jobs to {args.queue}")


if __name__ == "__main__":
    main()
