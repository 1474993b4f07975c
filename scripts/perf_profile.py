#!/usr/bin/env python3
"""Buckets `perf script` call stacks of disque-server into cost categories.

usage: perf script -i perf.data | scripts/perf_profile.py [--top N]

Two views:
  self       each sample goes to one bucket: kernel samples by the syscall
             (or interrupt/scheduler path) they are under, user samples by the
             innermost frame that names a component (allocator, parse, encode,
             engine, command layer, mutex, tokio runtime, ...);
  inclusive  share of samples whose stack contains a component at all
             (e.g. everything under the node mutex, everything under parse).
"""
import re
import sys
from collections import Counter

# (bucket, regex on a user frame), innermost match wins.
USER_RULES = [
    ("alloc (malloc/free + counting allocator)",
     r"^(malloc|free|cfree|realloc|calloc|_int_malloc|_int_free|_int_realloc|malloc_consolidate|"
     r"unlink_chunk|tcache|__libc_malloc|__libc_free|__rust_alloc|__rust_dealloc|__rust_realloc|"
     r"alloc::alloc::|<disque::memory::Counting|disque::memory::)"),
    ("mutex (lock/unlock, futex wrappers)", r"(std::sys::sync::mutex|futex|Mutex<.*>::lock|MutexGuard|parking_lot)"),
    ("RESP parse", r"disque::resp::parse::"),
    ("RESP encode", r"disque::resp::encode::"),
    ("job IDs / rng", r"(JobId::generate|rand::|rand_core|ChaCha|SmallRng|Xoshiro)"),
    ("hashing (SipHash)", r"(core::hash::sip|BuildHasher::hash_one|Hasher>::write|hash_one)"),
    ("engine (jobs, queues, scheduler)", r"disque::(engine|queue|slab|job)::"),
    ("command layer (dispatch, args, stats)", r"disque::(commands|node)::"),
    ("shell: Shared::with / effects / AOF", r"disque::(server::Shared|server::\{|aof::)"),
    ("connection task (buffers, loop)", r"disque::server::connection::"),
    ("bus / cluster messages", r"disque::(server::bus|cluster)::"),
    ("time (clock_gettime)", r"(clock_gettime|SystemTime|Instant::now|__vdso)"),
    ("memcpy/memmove", r"(memcpy|memmove|memset|__memcpy|__memmove)"),
    ("tokio runtime", r"tokio::"),
    ("bytes crate", r"^(bytes::|<bytes::)"),
]
USER_RULES = [(b, re.compile(r)) for b, r in USER_RULES]

KERNEL_RULES = [
    ("kernel: send (write/sendto)", r"(__sys_sendto|__x64_sys_sendto|sys_write|__x64_sys_write|tcp_sendmsg|sock_write_iter|__sys_sendmsg)"),
    ("kernel: recv (read/recvfrom)", r"(__sys_recvfrom|__x64_sys_recvfrom|sys_read|__x64_sys_read|tcp_recvmsg|sock_read_iter)"),
    ("kernel: epoll", r"(epoll_wait|do_epoll|ep_poll|ep_send_events|epoll_ctl)"),
    ("kernel: futex (mutex / thread park)", r"(futex)"),
    ("kernel: page faults", r"(exc_page_fault|do_user_addr_fault|handle_mm_fault)"),
    ("kernel: mmap/munmap/brk", r"(sys_mmap|sys_munmap|sys_brk|sys_madvise|sys_mremap)"),
    ("kernel: softirq / net rx", r"(net_rx_action|do_softirq|__do_softirq|process_backlog)"),
    ("kernel: scheduler / context switch", r"(schedule|finish_task_switch|__switch_to)"),
]
KERNEL_RULES = [(b, re.compile(r)) for b, r in KERNEL_RULES]

INCLUSIVE = [
    ("under the node mutex: Shared::with", r"disque::server::Shared::with"),
    ("  of which drain_effects", r"drain_effects"),
    ("commands::dispatch", r"disque::commands::dispatch"),
    ("engine (any)", r"disque::engine::"),
    ("Engine::addjob", r"disque::engine::addjob::.*addjob"),
    ("Engine::getjob / pop", r"disque::engine::getjob::"),
    ("RESP parse (any)", r"disque::resp::parse::"),
    ("RESP encode (any)", r"disque::resp::encode::"),
    ("allocator (any)", r"^(malloc|free|cfree|realloc|_int_malloc|_int_free|<disque::memory::Counting)"),
    ("syscalls (any kernel entry)", r"(entry_SYSCALL|do_syscall_64)"),
    ("  sendto/write", r"(__sys_sendto|__x64_sys_write\b|ksys_write)"),
    ("  recvfrom/read", r"(__sys_recvfrom|__x64_sys_read\b|ksys_read)"),
    ("  epoll_wait", r"(do_epoll_wait|__x64_sys_epoll_wait)"),
    ("  futex", r"(__x64_sys_futex|do_futex)"),
]
INCLUSIVE = [(b, re.compile(r)) for b, r in INCLUSIVE]

FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def samples(stream):
    cur = None
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if cur is not None:
                yield cur
            cur = None
            continue
        if cur is None:
            cur = {"head": line, "frames": []}
            continue
        m = FRAME.match(line)
        if m:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
            dso = m.group(2)
            cur["frames"].append((sym, dso))
    if cur is not None:
        yield cur


def is_kernel(sym, dso):
    return "kernel" in dso or dso.startswith("[k") or "vmlinux" in dso


def classify(frames):
    if not frames:
        return "unknown"
    leaf_sym, leaf_dso = frames[0]
    if is_kernel(leaf_sym, leaf_dso):
        kern = [s for s, d in frames if is_kernel(s, d)]
        for bucket, rx in KERNEL_RULES:
            if any(rx.search(s) for s in kern):
                return bucket
        return "kernel: other"
    for sym, _ in frames:
        if is_kernel(sym, _):
            continue
        for bucket, rx in USER_RULES:
            if rx.search(sym):
                return bucket
    if "disque" in leaf_dso:
        return "other user (disque binary: std, core)"
    return "other user (libc etc.): " + leaf_sym[:40]


def main():
    top = 25
    if "--top" in sys.argv:
        top = int(sys.argv[sys.argv.index("--top") + 1])
    selfc, incl, leafs = Counter(), Counter(), Counter()
    total = 0
    for s in samples(sys.stdin):
        fr = s["frames"]
        total += 1
        selfc[classify(fr)] += 1
        syms = [f[0] for f in fr]
        for b, rx in INCLUSIVE:
            if any(rx.search(x) for x in syms):
                incl[b] += 1
        if fr:
            leafs[fr[0][0][:90]] += 1
    if not total:
        print("no samples")
        return 1
    print(f"samples: {total}\n")
    print("## self (each sample in one bucket)\n")
    print("| bucket | % of server CPU |\n|---|---:|")
    for b, n in selfc.most_common():
        print(f"| {b} | {100 * n / total:.1f}% |")
    print("\n## inclusive (stack contains)\n")
    print("| component | % of server CPU |\n|---|---:|")
    for b, _ in INCLUSIVE:
        print(f"| {b} | {100 * incl[b] / total:.1f}% |")
    print(f"\n## top {top} leaf functions\n")
    print("| function | % |\n|---|---:|")
    for f, n in leafs.most_common(top):
        print(f"| `{f}` | {100 * n / total:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
