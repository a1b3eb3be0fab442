#!/usr/bin/env bash
# The NVIDIA path for real, on a machine with an NVIDIA GPU (never in CI):
# libxccl.so, xcclrun, xccl-perf and the C programs are built elsewhere
# (make gpu-kit) and this script needs only them, a driver, NCCL and the CUDA
# runtime (a system install, or the nvidia-nccl-cu1x and
# nvidia-cuda-runtime Python wheels, found in python3's site-packages).
#
#   bench/gpu/run.sh [BUILD [OUT]]     (defaults: build, $OUT or gpu-out)
#   STEPS="mixed perf_mixed" bench/gpu/run.sh ...     (only those steps)
#
# 1. probe: what xcclrun --probe sees, and that auto picks nvidia;
# 2. conformance through NCCL: xccl-perf -c (every element of the first call,
#    in place and out of place, odd counts) for every collective, every
#    dtype x op NCCL reduces on all-reduce, a dtype per op elsewhere; one rank
#    (one GPU: NCCL refuses two ranks on one device);
#    then the same in XcclMemAlloc's memory (ncclMemAlloc; memalloc);
# 3. Paddle's call sequences (tests/c/paddle_replay.c, every layout) on the GPU,
#    XcclCommSplit (tests/c/split.c: its exchange crosses device memory) and
#    XcclCommInitAll;
# 4. mixed communicators: two processes on the GPU, each its own NCCL
#    cluster, plus two host ranks (xcclrun --devices), every collective checked,
#    all-reduce also forced hierarchical (XCCL_MIXED_ALGO=hier);
# 5. performance (perf, perf_mixed): xccl-perf through NCCL to 1 GiB, the per-call cost xccl
#    adds over calling NCCL directly (forward_overhead), the mixed all-reduce
#    (one GPU rank, three host ranks) on its own plan and forced hierarchical,
#    beside the same 4 ranks on the host device;
# 6. Python: the ctypes package and the torch backend on CUDA tensors.
# Each step's output goes to OUT/<step>.txt; the summary lists what failed.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-${OUT:-gpu-out}}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
fails=0

say() { echo "$*" | tee -a "$SUMMARY"; }

# want NAME: whether step NAME runs (every one unless STEPS names some).
want() { [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" $1 "* ]]; }
for s in ${STEPS:-}; do
	case $s in
	probe | conformance | memalloc | paddle_replay | mixed | perf | perf_mixed | python) ;;
	*)
		echo "bench/gpu/run.sh: unknown step $s in STEPS (probe conformance memalloc paddle_replay mixed perf perf_mixed python)" >&2
		exit 2
		;;
	esac
done

# find NAME DIRS...: the first file called NAME under DIRS.
find_lib() {
	local name=$1
	shift
	find "$@" -name "$name" \( -type f -o -type l \) 2>/dev/null | sort | head -1
}
sites=$($PY -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
libdirs="$sites /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/lib/x86_64-linux-gnu /usr/local/lib"
export XCCL_NCCL_LIBRARY=${XCCL_NCCL_LIBRARY:-$(find_lib 'libnccl.so.2' $libdirs)}
export XCCL_CUDART_LIBRARY=${XCCL_CUDART_LIBRARY:-$(find_lib 'libcudart.so.1[0-9]*' $libdirs)}
export XCCL_TIMEOUT=${XCCL_TIMEOUT:-120}
# the C programs find libxccl.so.1 beside them, whatever rpath they were linked with
export LD_LIBRARY_PATH=$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say "# bench/gpu/run.sh $(date -u +%FT%TZ) on $(hostname)"
say "# NCCL: $XCCL_NCCL_LIBRARY"
say "# CUDA runtime: $XCCL_CUDART_LIBRARY"
command -v nvidia-smi >/dev/null && nvidia-smi -L | tee -a "$SUMMARY"
if [ -z "$XCCL_NCCL_LIBRARY" ] || [ -z "$XCCL_CUDART_LIBRARY" ]; then
	say "FAIL: no NCCL or CUDA runtime found (set XCCL_NCCL_LIBRARY, XCCL_CUDART_LIBRARY)"
	exit 1
fi

# step NAME CMD...: runs CMD with its output in OUT/NAME.txt; a failure is
# counted and the output's tail shown.
step() {
	local name=$1
	shift
	local t0=$SECONDS
	if "$@" >>"$OUT/$name.txt" 2>&1; then
		return 0
	fi
	fails=$((fails + 1))
	say "FAIL $name: $* (${SECONDS}s; tail of $name.txt:)"
	tail -15 "$OUT/$name.txt" | sed 's/^/    /' | tee -a "$SUMMARY"
	return 1
}

# 1. probe
if want probe; then
	step probe "$BUILD/xcclrun" --probe
	grep -E '^nvidia' "$OUT/probe.txt" | sed 's/^/probe: /' | tee -a "$SUMMARY"
	if step probe env XCCL_DEVICE=auto "$BUILD/xccl-perf" -b 8 -e 8 -n 1 -w 0 && ! grep -q 'device nvidia' "$OUT/probe.txt"; then
		say "FAIL probe: auto did not pick nvidia"
		fails=$((fails + 1))
	fi
fi

# 2. conformance through NCCL, one rank (sizes 4 B·7^k: odd float counts)
if want conformance; then
	perf() { "$BUILD/xccl-perf" -device nvidia -c 1 -n 2 -w 1 -settle 10 "$@"; }
	n0=$fails
	refused=0
	for d in float half bfloat16 double int8 uint8 int32 uint32 int64 uint64; do
		for r in sum prod max min avg; do
			if ! perf -o all_reduce -d "$d" -r "$r" -b 4 -e 4M -f 7 >"$OUT/tmp.txt" 2>&1; then
				if grep -q 'refuse\|not supported\|does not reduce' "$OUT/tmp.txt"; then
					refused=$((refused + 1))
					echo "refused: all_reduce $d $r: $(grep -m1 -i 'refuse\|not supported' "$OUT/tmp.txt")" >>"$OUT/conformance.txt"
					continue
				fi
				fails=$((fails + 1))
				say "FAIL conformance all_reduce $d $r:"
				tail -5 "$OUT/tmp.txt" | sed 's/^/    /' | tee -a "$SUMMARY"
			fi
			cat "$OUT/tmp.txt" >>"$OUT/conformance.txt"
		done
	done
	for c in reduce reduce_scatter; do
		for dr in float:sum half:max bfloat16:min double:prod int32:sum int64:max uint8:min float:avg; do
			step conformance perf -o "$c" -d "${dr%:*}" -r "${dr#*:}" -b 4 -e 4M -f 7 -root 0
		done
	done
	for c in all_gather broadcast alltoall sendrecv; do
		for d in float half int8 int64 double; do
			step conformance perf -o "$c" -d "$d" -b 4 -e 4M -f 7
		done
	done
	say "conformance through NCCL (1 rank): $(grep -c 'Out of bounds values : 0 OK' "$OUT/conformance.txt") runs OK, $refused dtype/op pairs refused, $((fails - n0)) failed"
fi

# 2b. the buffers from XcclMemAlloc (NCCL's ncclMemAlloc where the library
#     has it), freed with XcclMemFree
if want memalloc; then
	n0=$fails
	for c in all_reduce reduce_scatter all_gather broadcast reduce alltoall sendrecv; do
		step memalloc "$BUILD/xccl-perf" -device nvidia -memalloc -c 1 -n 2 -w 1 -settle 10 -o "$c" -b 4 -e 64M -f 7
	done
	step memalloc "$BUILD/xccl-perf" -device nvidia -memalloc -c 1 -n 2 -w 1 -settle 10 -o all_reduce -d bfloat16 -r max -b 4 -e 4M -f 7
	say "memalloc (XcclMemAlloc's memory through NCCL): $(grep -c 'Out of bounds values : 0 OK' "$OUT/memalloc.txt") runs OK, $((fails - n0)) failed"
fi

# 3. Paddle's call sequences on the GPU
if want paddle_replay; then
	n0=$fails
	for layout in 904 912 1032; do
		d=$(mktemp -d)
		step paddle_replay env XCCL_DEVICE=nvidia "$BUILD/xcclrun" -n 1 "$BUILD/paddle_replay" "$BUILD/libxccl.so" "$layout" "$d"
		rm -rf "$d"
	done
	say "paddle_replay on nvidia: $(grep -c 'paddle replay OK' "$OUT/paddle_replay.txt") of 3 layouts OK"
	if [ -x "$BUILD/split" ]; then
		step split env XCCL_DEVICE=nvidia "$BUILD/xcclrun" -n 1 "$BUILD/split" one-device
		say "split and init-all on nvidia: $(grep -c 'ok   rank' "$OUT/split.txt") of 4 OK"
	fi
fi

# 4. mixed: two NCCL clusters on the GPU and two host ranks
if want mixed; then
	n0=$fails
	mixed="nvidia@g0,nvidia@g1,host:2"
	for c in all_reduce reduce all_gather reduce_scatter broadcast alltoall sendrecv; do
		for d in float half bfloat16 int32; do
			step mixed "$BUILD/xcclrun" -n 4 --devices "$mixed" "$BUILD/xccl-perf" -c 1 -n 2 -w 1 -settle 10 \
				-o "$c" -d "$d" -b 4 -e 16M -f 7 -root 1
		done
	done
	step mixed "$BUILD/xcclrun" -n 4 --devices "$mixed" "$BUILD/xccl-perf" -c 1 -n 2 -w 1 -o all_reduce -r avg -b 4 -e 4M -f 7
	step mixed "$BUILD/xcclrun" -n 4 --devices "$mixed" "$BUILD/xccl-perf" -c 1 -n 2 -w 1 -o all_reduce -r max -d int8 -b 4 -e 4M -f 7
	# no NCCL cluster has two ranks here, so all-reduce goes through the
	# host engine on its own plan: forced hierarchical too
	for rd in float:sum half:max bfloat16:sum int32:min float:avg; do
		step mixed env XCCL_MIXED_ALGO=hier "$BUILD/xcclrun" -n 4 --devices "$mixed" "$BUILD/xccl-perf" -c 1 -n 2 -w 1 \
			-o all_reduce -d "${rd%:*}" -r "${rd#*:}" -b 4 -e 16M -f 7
	done
	say "mixed ($mixed): $(grep -c 'Out of bounds values : 0 OK' "$OUT/mixed.txt") runs OK, $((fails - n0)) failed"
fi

# 5. performance
if want perf; then
	step perf_nccl "$BUILD/xccl-perf" -device nvidia -c 1 -b 8 -e 1G -f 4 -n 20 -w 5
	step perf_nccl "$BUILD/xccl-perf" -device nvidia -c 0 -stream -b 8 -e 8 -n 2000 -w 100
	step forward "$BUILD/forward_overhead" 20000
	grep -h 'ns/call' "$OUT/forward.txt" | sed 's/^/forward: /' | tee -a "$SUMMARY"
fi
if want perf_mixed; then
	# (one GPU process beside three host ranks: two processes on one GPU take
	# turns on it, each switch about 100 us, which is not what a job of one
	# process per GPU sees)
	step perf_mixed "$BUILD/xcclrun" -n 4 --devices nvidia,host:3 "$BUILD/xccl-perf" -c 1 -b 8 -e 256M -f 4 -n 10 -w 2 -stats
	step perf_mixed env XCCL_MIXED_ALGO=hier "$BUILD/xcclrun" -n 4 --devices nvidia,host:3 "$BUILD/xccl-perf" -c 1 -b 8 -e 256M -f 4 -n 10 -w 2 -stats
	step perf_mixed env XCCL_DEVICE=host "$BUILD/xcclrun" -n 4 "$BUILD/xccl-perf" -c 1 -b 8 -e 256M -f 4 -n 10 -w 2
	grep -h 'Avg bus bandwidth\|device' "$OUT/perf_mixed.txt" | sed 's/^/perf_mixed: /' | tee -a "$SUMMARY"
fi

# 6. Python on CUDA tensors, and the package's own tests under this torch
if want python; then
	if $PY -c 'import torch' 2>/dev/null; then
		step python env XCCL_LIBRARY="$BUILD/libxccl.so" PYTHONUNBUFFERED=1 $PY "$HERE/torch_cuda.py"
		grep -h '^ok\|^FAIL\|^torch' "$OUT/python.txt" | sed 's/^/python: /' | tee -a "$SUMMARY"
		if $PY -c 'import pytest' 2>/dev/null; then
			step pytest env XCCL_LIBRARY="$BUILD/libxccl.so" XCCL_DEVICE=host $PY -m pytest -q -p no:cacheprovider "$ROOT/python/tests"
			tail -1 "$OUT/pytest.txt" | sed 's/^/pytest (host device, this torch): /' | tee -a "$SUMMARY"
		fi
	else
		say "python: SKIPPED (no torch)"
	fi
fi

rm -f "$OUT/tmp.txt"
say "# $fails failed"
[ "$fails" = 0 ]

