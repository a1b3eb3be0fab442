#!/usr/bin/env bash
# make bench-mixed: all-reduce on 4 host ranks split by cluster label into
# 2+2, as a mixed communicator forced hierarchical (XCCL_MIXED_ALGO=hier:
# each cluster reduces inside, the leaders all-reduce on the host engine,
# each cluster broadcasts) and as one on its own plan (auto: with no
# accelerator cluster, one all-reduce among all ranks on the host engine,
# in the callers' buffers), beside the same 4 ranks as one flat communicator, back
# to back in one run, REPS times, medians. The table's ratios are the
# others' times over the hierarchical one's (2: it takes half as long). A
# last hierarchical run prints the phase split from the stats.
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
ms= as= fs=
for rep in $(seq "$REPS"); do
  f="$out/mixed-$OP-2+2-$rep.txt"
  XCCL_MIXED_ALGO=hier "$run" -n 4 -q --devices host@a:2,host@b:2 "$perf" -o "$OP" -b 8 -e "$MAXB" -f 4 -n 0 -w 20 -c 0 >"$f"
  ms="$ms${ms:+,}$f"
  f="$out/mixed-$OP-2+2-auto-$rep.txt"
  "$run" -n 4 -q --devices host@a:2,host@b:2 "$perf" -o "$OP" -b 8 -e "$MAXB" -f 4 -n 0 -w 20 -c 0 >"$f"
  as="$as${as:+,}$f"
  f="$out/mixed-$OP-flat-$rep.txt"
  "$run" -n 4 -q "$perf" -o "$OP" -b 8 -e "$MAXB" -f 4 -n 0 -w 20 -c 0 >"$f"
  fs="$fs${fs:+,}$f"
done
"$perf" compare -title "$OP, 4 host ranks: clusters 2+2 hierarchical (hier), on the mixed plan (auto), one communicator (flat); float32 sum, median of $REPS (ratio: time / hier time)" \
  "hier=$ms" "auto=$as" "flat=$fs" | tee "$out/mixed-$OP.table"
echo
echo "phase split of the hierarchical runs (rank 0, every size together):"
XCCL_MIXED_ALGO=hier "$run" -n 4 -q --devices host@a:2,host@b:2 "$perf" -o "$OP" -b 8 -e "$MAXB" -f 4 -n 0 -w 20 -c 1 -stats | grep -E "^ +[0-9]|phases" | tee "$out/mixed-$OP-stats.txt"
