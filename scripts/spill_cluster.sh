#!/usr/bin/env bash
# A backlog larger than RAM on a 3-node cluster: how many ADDJOBs the
# cluster refuses, and how many jobs each node spilled, for several server
# builds side by side.
#
# usage: scripts/spill_cluster.sh [LABEL=PATH/TO/disque-server ...]
#        (default: now=$CARGO_TARGET_DIR/release/disque-server, built here)
#
# Every round starts three fresh nodes of each listed build (`--spill yes
# --maxmemory $MAXMEM`, no AOF), joins them (CLUSTER MEET, waits until each
# reaches the other two), runs `disque-benchmark -w addjob -s 1024 -c 12
# -P 8 -n $N` with the clients spread over the three nodes (REPLICATE is
# Disque's default: 3 on three nodes), then reads per node used_memory,
# spilled_jobs, refused_oom and registered_jobs. The builds alternate
# within a round. One line per node and run.
#
# WHOLE=yes starts the nodes with `--spill-whole-jobs yes` and adds the
# whole-job counters. RETRY=S adds the jobs with RETRY S and, with no
# consumer, reads the counters again after three RETRY periods (`after_`
# columns): every replica asks about each job once per RETRY (WILLQUEUE),
# and a node must answer without bringing its jobs on disk back to RAM.
#
# DRAIN=S then drains the cluster for S seconds (`-w getjob --ack -c 12`,
# GETJOB NOHANG + ACKJOB spread over the three nodes): jobs acknowledged
# per second in the cluster, and per node the disk reads it made and the
# jobs left queued there (`drain_` columns).
#
# WATCH=S samples every node's used_memory once a second for S seconds
# after the fill (with RETRY=S' short enough, the copies come due then):
# the highest sample, the highest used_memory_rss sample, used_memory_peak
# and spill_whole_table_bytes at the end (`watch_` columns).
#
# environment: N [60000], MAXMEM [32mb], REPS [2], WHOLE [no], RETRY,
#              DRAIN, WATCH, SKIP_BUILD=1, CARGO_TARGET_DIR [target]
set -euo pipefail

source "$(dirname "$0")/lib/bench-common.sh"
N=${N:-60000}
MAXMEM=${MAXMEM:-32mb}
REPS=${REPS:-2}
WHOLE=${WHOLE:-no}
RETRY=${RETRY:-}
DRAIN=${DRAIN:-}
WATCH=${WATCH:-}
work=$(mktemp -d /tmp/disque-spillcluster.XXXXXX)
bench_init "$@"

field() { redis-cli -p "$1" info everything | tr -d '\r' | sed -n "s/^$2:\(.*\)/\1/p"; }

cols="used_memory,spilled_jobs,spilled_whole_jobs,spilled_whole_copies,spill_disk_reads,refused_oom,registered_jobs"
# table_jobs: registered_jobs less the whole jobs on disk (records in RAM)
counters() { # port: the $cols fields, comma-separated, then table_jobs
    local c v line="" reg=0 whole=0
    for c in ${cols//,/ }; do
        v=$(field "$1" "$c")
        line="$line,${v:-}"
        [ "$c" = registered_jobs ] && reg=${v:-0}
        [ "$c" = spilled_whole_jobs ] && whole=${v:-0}
    done
    echo "${line#,},$((reg - whole))"
}
after=""
[ -n "$RETRY" ] && after=",$(echo "$cols,table_jobs" | sed 's/\([a-z_]*\)/after_\1/g')"
[ -n "$WATCH" ] && after="$after,watch_max_used,watch_max_rss,watch_peak,watch_table_bytes"
[ -n "$DRAIN" ] && after="$after,drain_jobs_per_s,drain_reads,drain_left"
echo "label,round,node,ops_per_s,client_errors,$cols,table_jobs$after"
declare -A before
for r in $(seq "$REPS"); do
    for b in "${builds[@]}"; do
        label=${b%%=*} bin=${b#*=}
        read -r -a ports <<<"$(free_ports 3)"
        for p in "${ports[@]}"; do
            mkdir -p "$work/$label-$r-$p"
            "$bin" --port "$p" --maxmemory "$MAXMEM" --spill yes --spill-whole-jobs "$WHOLE" \
                --dir "$work/$label-$r-$p" \
                >"$work/$label-$r-$p/log" 2>&1 &
            pids+=($!)
        done
        for p in "${ports[@]}"; do wait_ping "$p"; done
        for p in "${ports[@]:1}"; do
            redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "$p" >/dev/null
        done
        for p in "${ports[@]}"; do
            for _ in $(seq 100); do
                [ "$(redis-cli -p "$p" cluster info | tr -d '\r' | sed -n 's/^cluster_reachable_nodes://p')" = 2 ] && break
                sleep 0.1
            done
        done
        hosts=$(printf '127.0.0.1:%s,' "${ports[@]}")
        retry=()
        [ -n "$RETRY" ] && retry=(--retry "$RETRY")
        out=$("$bench" -h "${hosts%,}" -w addjob -s 1024 -c 12 -P 8 -n "$N" "${retry[@]}" \
            --timeout-ms 20000 --json)
        read -r ops errors < <(echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)["results"]
print(round(r["ops_per_sec"]), r["errors"])')
        before=()
        for p in "${ports[@]}"; do before[$p]=$(counters "$p"); done
        declare -A most=() rss=()
        if [ -n "$WATCH" ]; then
            for p in "${ports[@]}"; do most[$p]=0 rss[$p]=0; done
            for _ in $(seq "$WATCH"); do
                for p in "${ports[@]}"; do
                    # one INFO a sample: used_memory and used_memory_rss
                    read -r u v < <(redis-cli -p "$p" info memory | tr -d '\r' |
                        awk -F: '$1=="used_memory"{u=$2} $1=="used_memory_rss"{v=$2} END{print u, v}')
                    [ "$u" -gt "${most[$p]}" ] && most[$p]=$u
                    [ "$v" -gt "${rss[$p]}" ] && rss[$p]=$v
                done
                sleep 1
            done
        fi
        [ -n "$RETRY" ] && sleep $((3 * RETRY + 1))
        lines=()
        for p in "${ports[@]}"; do
            line="$label,$r,$p,$ops,$errors,${before[$p]}"
            [ -n "$RETRY" ] && line="$line,$(counters "$p")"
            [ -n "$WATCH" ] && line="$line,${most[$p]},${rss[$p]},$(field "$p" used_memory_peak),$(field "$p" spill_whole_table_bytes)"
            lines+=("$line")
        done
        if [ -n "$DRAIN" ]; then
            queued=0 reads=()
            for p in "${ports[@]}"; do
                queued=$((queued + $(redis-cli -p "$p" qlen dqbench:0)))
                reads+=("$(field "$p" spill_disk_reads)")
            done
            "$bench" -h "${hosts%,}" -w getjob --prefill 0 --ack -s 1024 -c 12 -d "$DRAIN" \
                --timeout-ms 20000 -q >/dev/null
            left=0
            for p in "${ports[@]}"; do left=$((left + $(redis-cli -p "$p" qlen dqbench:0))); done
            rate=$(((queued - left) / DRAIN))
            for i in "${!ports[@]}"; do
                p=${ports[$i]}
                d=$(($(field "$p" spill_disk_reads) - ${reads[$i]}))
                lines[i]="${lines[$i]},$rate,$d,$(redis-cli -p "$p" qlen dqbench:0)"
            done
        fi
        printf '%s\n' "${lines[@]}"
        stop_servers
    done
done
