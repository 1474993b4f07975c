#!/usr/bin/env bash
# A walkthrough of Disque's job and queue commands with redis-cli.
#
#     bash examples/redis-cli.sh [port]        (default: $DISQUE_PORT or 7711)
#
# Each step prints the command and the node's reply (redis-cli's raw
# output: one line per element, an empty line for nil) and checks the reply,
# so the script fails if a node does not answer as docs/COMMANDS.md says.
# The queues are named after this shell's PID, so runs do not collide.
set -euo pipefail
PORT=${1:-${DISQUE_PORT:-7711}}
Q="walkthrough-$$"

# Run one command, print it and its reply; the reply is left in $out.
step() {
    local shown="" a
    for a in "$@"; do
        case $a in
        *" "*) shown+=" \"$a\"" ;;
        *) shown+=" $a" ;;
        esac
    done
    echo "\$ redis-cli -p $PORT$shown"
    # Error replies make some redis-cli versions exit 1: the checks below
    # judge the reply itself.
    out=$(redis-cli -p "$PORT" "$@" 2>&1) || true
    echo "$out"
    echo
}

# expect <what> <condition>: evaluate the condition (shell code), and fail
# loudly, naming the step, when it is false.
expect() {
    if ! eval "$2"; then
        echo "walkthrough FAILED: $1 (reply: '$out')" >&2
        exit 1
    fi
}

line() { sed -n "${1}p" <<<"$out"; }

echo "# A node answers:"
step PING
expect "PING" '[ "$out" = PONG ]'

echo "# Add a job: queue, body, and how long (ms) to wait for replication."
step ADDJOB "$Q" "hello world" 0
id=$out
expect "ADDJOB replies a job ID" '[ "${#id}" = 40 ] && [ "${id:0:2}" = D- ]'

echo "# The queue holds it; QPEEK shows it without taking it."
step QLEN "$Q"
expect "QLEN" '[ "$out" = 1 ]'
step QPEEK "$Q" 10
expect "QPEEK" '[ "$(line 2)" = "$id" ]'

echo "# A worker takes it (blocking at most 1000 ms), with its counters."
step GETJOB TIMEOUT 1000 WITHCOUNTERS FROM "$Q"
expect "GETJOB" '[ "$(line 2)" = "$id" ] && [ "$(line 3)" = "hello world" ]'

echo "# Now it is active; SHOW tells everything about it."
step SHOW "$id"
expect "SHOW state" 'grep -qx active <<<"$out"'

echo "# Still working on it: postpone the re-delivery (reply: the RETRY period, s)."
step WORKING "$id"
expect "WORKING" '[ "$out" -gt 0 ]'

echo "# It failed: give it back; it is queued again with one more nack."
step NACK "$id"
expect "NACK" '[ "$out" = 1 ]'
step GETJOB TIMEOUT 1000 WITHCOUNTERS FROM "$Q"
expect "GETJOB after NACK" '[ "$(line 2)" = "$id" ] && [ "$(line 5)" = 1 ]'

echo "# Done: acknowledge it; it is never delivered again."
step ACKJOB "$id"
expect "ACKJOB" '[ "$out" = 1 ]'
step QLEN "$Q"
expect "QLEN after ACKJOB" '[ "$out" = 0 ]'

echo "# Nothing queued: GETJOB with a timeout returns nil."
step GETJOB TIMEOUT 100 FROM "$Q"
expect "GETJOB timeout" '[ -z "$out" ]'

echo "# disque-rs extension DEDUP: a retried ADDJOB with the same key adds nothing."
step ADDJOB "$Q-pay" "pay 7" 0 DEDUP "req-7"
first=$out
step ADDJOB "$Q-pay" "pay 7" 0 DEDUP "req-7"
expect "DEDUP returns the first ID" '[ "$out" = "$first" ]'
step QLEN "$Q-pay"
expect "one job only" '[ "$out" = 1 ]'
step ACKJOB "$first"

echo "# Extension MAXDELIVERIES: after its last allowed delivery a job moves"
echo "# to a dead-letter queue (<queue>:dead) instead of being queued again."
step ADDJOB "$Q-mail" "send welcome" 0 RETRY 60 MAXDELIVERIES 1
mail=$out
step GETJOB TIMEOUT 1000 FROM "$Q-mail"
step NACK "$mail"
step QLEN "$Q-mail:dead"
expect "dead-lettered" '[ "$out" = 1 ]'
echo "# WAITJOB (extension) says how the job ended."
step WAITJOB "$mail" TIMEOUT 1000
expect "WAITJOB" '[ "$out" = dead ]'
echo "# REDRIVE (extension) puts dead jobs back in their queue."
step REDRIVE FROM "$Q-mail:dead"
expect "REDRIVE" '[ "$out" = 1 ]'
step GETJOB TIMEOUT 1000 FROM "$Q-mail"
expect "redriven job delivered" '[ "$(line 2)" = "$mail" ]'
step ACKJOB "$mail"
expect "ACKJOB of the redriven job" '[ "$out" = 1 ]'

echo "# Queue and node statistics."
step QSTAT "$Q-mail"
expect "QSTAT" 'grep -qx jobs-out <<<"$out"'
step INFO jobstats
expect "INFO jobstats" 'grep -q "^jobs_added:" <<<"$out"'

echo "walkthrough complete"
