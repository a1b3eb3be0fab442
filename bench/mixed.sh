#!/usr/bin/env bash
# make bench-mixed: all-reduce on 4 host ranks split by cluster label into
# 2+2 (a mixed communicator: each cluster reduces inside, the leaders
# all-reduce on the host engine, each cluster broadcasts), beside the same
# 4 ranks as one flat communicator, back to back in one run, REPS times,
# medians. The table's ratio is flat time / mixed time (0.5: mixed takes
# twice as long). A last mixed run prints the phase split from the stats.
#
#   REPS=3 MAXB=33554432 OP=all_reduce bench/mixed.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BUILD:-$root/build}
out=${BENCH_OUT:-$B/bench}
REPS=${REPS:-3}
MAXB=${MAXB:-33554432}
OP=${OP:-all_reduce}
mkdir -p "$out"
perf="$B/xccl-perf"
run="$B/xcclrun"
ms= fs=
for rep in $(seq "$REPS"); do
  f="$out/mixed-$OP-2+2-$rep.txt"
  "$run" -n 4 -q --devices host@a:2,host@b:2 "$perf" -o "$OP" -b 8 -e "$MAXB" -f 4 -n 0 -w 20 -c 0 >"$f"
  ms="$ms${ms:+,}$f"
  f="$out/mixed-$OP-flat-$rep.txt"
  "$run" -n 4 -q "$perf" -o "$OP" -b 8 -e "$MAXB" -f 4 -n 0 -w 20 -c 0 >"$f"
  fs="$fs${fs:+,}$f"
done
"$perf" compare -title "$OP, 4 host ranks: clusters 2+2 (mixed) vs flat, float32 sum, median of $REPS (ratio: flat time / mixed time)" \
  "mixed=$ms" "flat=$fs" | tee "$out/mixed-$OP.table"
echo
echo "phase split of the mixed runs (rank 0, every size together):"
"$run" -n 4 -q --devices host@a:2,host@b:2 "$perf" -o "$OP" -b 8 -e "$MAXB" -f 4 -n 0 -w 20 -c 1 -stats | grep -E "^ +[0-9]|phases" | tee "$out/mixed-$OP-stats.txt"
