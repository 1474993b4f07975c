#!/bin/bash
# Compares plain ADDJOB/GETJOB across builds (docs/PERFORMANCE.md,
# "Results", the job extensions row): builds disque-server at each COMMIT
# (release, in a detached worktree) and runs the workloads round-robin
# over the binaries, REPS rounds, so every binary sees the same machine
# noise. Per run it records the benchmark's ops/s and the server's CPU time per operation (utime +
# stime from /proc/<pid>/stat over the measured run only; a getjob run is
# pre-filled by a separate, unmeasured addjob run).
#
# usage: scripts/ext_perf.sh REPS COMMIT...      (results: $OUT, default
#        target/ext-perf.csv; the benchmark is built from the first COMMIT)
set -u
REPS=$1; shift
COMMITS=("$@")
here=$(cd "$(dirname "$0")/.." && pwd)
bins=$here/target/ext-perf-bins
out=${OUT:-$here/target/ext-perf.csv}
mkdir -p "$bins"
wt=$(mktemp -d /tmp/ext-perf-wt.XXXX)
git -C "$here" worktree add --detach "$wt" "${COMMITS[0]}" >/dev/null
trap 'git -C "$here" worktree remove --force "$wt"' EXIT
for c in "${COMMITS[@]}"; do
  if [ ! -x "$bins/disque-server-$c" ]; then
    git -C "$wt" checkout -q --detach "$c"
    (cd "$wt" && CARGO_TARGET_DIR=$here/target/ext-perf-build cargo build --release -q --bin disque-server --bin disque-benchmark)
    cp "$here/target/ext-perf-build/release/disque-server" "$bins/disque-server-$c"
    [ -x "$bins/disque-benchmark" ] || cp "$here/target/ext-perf-build/release/disque-benchmark" "$bins/disque-benchmark"
  fi
done
BENCH=$bins/disque-benchmark
echo "round,commit,workload,pipeline,ops,ops_per_sec,server_cpu_us_per_op" > $out
TCK=$(getconf CLK_TCK)
start() {
  DIR=$(mktemp -d /tmp/perfsrv.XXXX)
  $bins/disque-server-$1 --port 0 --dir $DIR > $DIR/out.log 2>&1 &
  PID=$!
  PORT=""
  for i in $(seq 1 200); do
    PORT=$(grep -o "ready port=[0-9]*" $DIR/out.log 2>/dev/null | cut -d= -f2)
    [ -n "$PORT" ] && break
    sleep 0.05
  done
}
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
stop() { kill $PID; wait $PID 2>/dev/null; rm -rf $DIR; }
for r in $(seq 1 $REPS); do
  for c in "${COMMITS[@]}"; do
    for spec in "addjob 1 100000" "getjob 1 100000" "addjob 16 500000" "getjob 16 500000"; do
      read -r w p n <<<"$spec"
      start $c
      if [ $w = getjob ]; then
        $BENCH --csv -p $PORT -w addjob -c 50 -P 16 -n $n >/dev/null
        extra="--prefill 0"
      else
        extra=""
      fi
      c0=$(cpu)
      line=$($BENCH --csv -d 60 -p $PORT -w $w -c 50 -P $p -n $n $extra)
      c1=$(cpu)
      ops=$(echo $line | cut -d, -f11)
      rate=$(echo $line | cut -d, -f6)
      us=$(awk -v a=$c0 -v b=$c1 -v t=$TCK -v n=$ops 'BEGIN{ if (n>0) printf "%.2f", (b-a)*1e6/t/n; else print "nan"}')
      echo "$r,$c,$w,$p,$ops,$rate,$us" >> $out
      echo "$r $c $w P$p: $rate ops/s, $us us CPU/op (ops=$ops)"
      stop
    done
  done
done
