#!/usr/bin/env bash
# make bench: the host device's collectives (xccl-perf under xcclrun, one
# process per rank) and the peers, back to back in one run on this machine:
# OpenMPI (bench/mpi_coll.c: all-reduce, all-gather, reduce-scatter,
# broadcast, reduce, sendrecv), torch-Gloo all-reduce (../shared/bench/peers/gloo_allreduce.py),
# single-core memcpy (../shared/bench/peers/memcpy_bw.c) and the one-way
# shared-memory ping-pong with a bare 8-byte exchange (bench/pingpong.c),
# the floors of a small call. Every
# measurement is repeated REPS times and each size keeps its median; the
# tables give peer time / xccl time (above 1: xccl is faster), and a plot
# per collective and rank count lands next to the raw files.
#
# Sizes up to SMALLB (and the fusion runs) get SMALL_REPS more runs, in turn.
# A small sweep lasts milliseconds, so one run sees one state of the
# machine, and on a shared VM the cost of a cross-core trip flips between
# two states for seconds at a time (bench/pingpong: 0.07 or 0.28 us one
# way); with three runs each, which side got the slow state decided the
# ratio. More runs, interleaved, give both sides the same mix.
#
#   NPS="2 4" MAXB=33554432 REPS=3 COLLS="all_reduce all_gather" NOGLOO=1 bench/run.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BUILD:-$root/build}
out=${BENCH_OUT:-$B/bench}
peers=${PEERS:-$root/../shared/bench/peers}
NPS=${NPS:-2 4}
MAXB=${MAXB:-33554432}
REPS=${REPS:-3}
SMALLB=${SMALLB:-65536}
SMALL_REPS=${SMALL_REPS:-12}
COLLS=${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce sendrecv}
mkdir -p "$out"
perf="$B/xccl-perf"
run="$B/xcclrun"

if ! command -v mpicc >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
have_mpi=; command -v mpicc >/dev/null && have_mpi=1
if [ -n "$have_mpi" ]; then mpicc -O2 -o "$out/mpi_coll" "$root/bench/mpi_coll.c"; fi
# The same collectives through the C API (what C, Python and Paddle callers
# pay: each call crosses from C into Go), beside xccl-perf's Go calls.
have_capi=; cc -O2 -I"$root/include" -o "$out/capi_coll" "$root/bench/capi_coll.c" -L"$B" -lxccl -Wl,-rpath,"$B" && have_capi=1
have_gloo=
if [ -z "${NOGLOO:-}" ] && [ -f "$peers/gloo_allreduce.py" ]; then
  if ! /usr/bin/python3 -c "import torch" 2>/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null || true
  fi
  /usr/bin/python3 -c "import torch" 2>/dev/null && have_gloo=1
fi

if [ -f "$peers/memcpy_bw.c" ]; then
  cc -O3 -o "$out/memcpy_bw" "$peers/memcpy_bw.c"
  "$out/memcpy_bw" | tee "$out/memcpy.txt"
fi

cc -O2 -o "$out/pingpong" "$root/bench/pingpong.c"
"$out/pingpong" | tee "$out/pingpong.txt"
# The floor of the fusion runs below: 2 KiB and 20 KiB exchanged in one
# round, as one exchange and as 10, with nothing but the data.
cc -O3 -march=native -o "$out/exchange" "$root/bench/exchange.c"
"$out/exchange" 2048 20480 | tee "$out/exchange.txt"

# sweep NAME MAXBYTES: one run of xccl and one of OpenMPI ($np ranks,
# $coll, 8 B to MAXBYTES) into files named after NAME, listed in xs and ms.
sweep() {
  local f="$out/$coll-np$np-xccl-$1.txt"
  "$run" -n "$np" -q "$perf" -o "$coll" -b 8 -e "$2" -f 4 -n 0 -w 20 -c 0 >"$f"
  xs="$xs${xs:+,}$f"
  if [ -n "$have_mpi" ]; then
    f="$out/$coll-np$np-mpi-$1.txt"
    mpirun --allow-run-as-root --oversubscribe -np "$np" --bind-to none "$out/mpi_coll" "$coll" 8 "$2" >"$f"
    ms="$ms${ms:+,}$f"
  fi
}

for np in $NPS; do
  for coll in $COLLS; do
    xs= ms= gs=
    for rep in $(seq "$REPS"); do
      sweep "$rep" "$MAXB"
      if [ -n "$have_gloo" ] && [ "$coll" = all_reduce ]; then
        f="$out/$coll-np$np-gloo-$rep.txt"
        /usr/bin/python3 "$peers/gloo_allreduce.py" "$np" "$MAXB" 2>&1 | grep -v Warn >"$f" || true
        gs="$gs${gs:+,}$f"
      fi
    done
    cs=
    for rep in $(seq "$SMALL_REPS"); do
      sweep "small-$rep" "$SMALLB"
      f="$out/$coll-np$np-capi-$rep.txt"
      if [ -n "$have_capi" ] && "$run" -n "$np" -q "$out/capi_coll" "$coll" 8 "$SMALLB" >"$f"; then
        cs="$cs${cs:+,}$f"
      fi
    done
    set -- "xccl=$xs"
    [ -n "$ms" ] && set -- "$@" "mpi=$ms"
    [ -n "$gs" ] && set -- "$@" "gloo=$gs"
    echo
    "$perf" compare -title "$coll, $np ranks, float32 sum, median of $REPS (up to $SMALLB B: of $((REPS + SMALL_REPS))) (ratio: peer time / xccl time)" "$@" | tee "$out/$coll-np$np.table"
    "$perf" plot -o "$out/$coll-np$np.png" -title "$coll, $np ranks" "$@"
    if [ -n "$cs" ]; then
      set -- "xccl-c=$cs"
      [ -n "$ms" ] && set -- "$@" "mpi=$ms"
      echo
      "$perf" compare -title "$coll, $np ranks, through the C API (bench/capi_coll.c), median of $SMALL_REPS (ratio: peer time / xccl-c time)" "$@" "xccl-go=$xs" | tee "$out/$coll-np$np-capi.table"
    fi
  done
done
# Fusion: 10 all-reduces of 512 floats per iteration, as one
# XcclAllReduceFused call and as 10 calls, in buffers of their own (20 KiB
# allocations: private memory), as pieces of one large allocation, as a
# framework's caching allocator hands them out (-alloc 32M: shared memory
# the peers map, where a fused batch copies once), and in buffers of their
# own from XcclMemAlloc (-memalloc: shared at every size).
for np in $NPS; do
  for mem in private pool xcclmem; do
    alloc=0 flags=
    [ "$mem" = pool ] && alloc=32M
    [ "$mem" = xcclmem ] && flags=-memalloc
    fs= ss=
    for rep in $(seq "$((REPS + SMALL_REPS))"); do
      f="$out/fused-$mem-np$np-$rep.txt"
      "$run" -n "$np" -q "$perf" -alloc "$alloc" $flags -b 2048 -e 2048 -batch 10 -fused -n 0 -w 20 -c 1 >"$f"
      fs="$fs${fs:+,}$f"
      f="$out/separate-$mem-np$np-$rep.txt"
      "$run" -n "$np" -q "$perf" -alloc "$alloc" $flags -b 2048 -e 2048 -batch 10 -n 0 -w 20 -c 1 >"$f"
      ss="$ss${ss:+,}$f"
    done
    echo
    "$perf" compare -title "10 all-reduces of 512 floats, $np ranks, $mem memory, median of $((REPS + SMALL_REPS)) (ratio: 10 calls / 1 fused call)" \
      "fused=$fs" "calls=$ss" | tee "$out/fused-$mem-np$np.table"
  done
done
echo
echo "raw runs, tables and plots: $out"
