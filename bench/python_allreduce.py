"""make bench-python: dist.all_reduce of torch CPU tensors through xccl's
torch backend beside gloo, in the same processes, one run; medians of 3
repetitions per size; ratio = gloo time / xccl time. Then the Python call
overhead: xccl.Communicator.all_reduce of 8 bytes against the same call
timed inside the C library's benchmark (xccl-perf) in the same run.

    bench/python_allreduce.py NPROCS MAXBYTES
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("XCCL_DEVICE", "host")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def iters_for(nbytes):
    return 2000 if nbytes < (1 << 16) else 200 if nbytes < (1 << 20) else 40 if nbytes < (8 << 20) else 10


def timed(fn, n):
    fn()
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def worker(rank, size, maxb, store, q):
    import xccl.torch
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=size)
    xg = dist.new_group(backend=xccl.torch.BACKEND)
    gl = dist.new_group(backend="gloo")
    rows = []
    b = 8
    while b <= maxb:
        t = torch.ones(b // 4)
        res = {}
        for name, g in (("xccl", xg), ("gloo", gl)):
            reps = []
            for _ in range(3):
                dist.barrier(group=gl)
                dt = timed(lambda: dist.all_reduce(t, group=g), iters_for(b))
                box = torch.tensor([dt], dtype=torch.float64)
                dist.all_reduce(box, op=dist.ReduceOp.MAX, group=gl)
                reps.append(box.item())
            res[name] = statistics.median(reps)
        rows.append((b, res["xccl"], res["gloo"]))
        b *= 4
    # the Python-call overhead: the Communicator straight, 8 bytes
    comm = xg.comm
    x = torch.ones(2)
    reps = []
    for _ in range(3):
        dist.barrier(group=gl)
        reps.append(timed(lambda: comm.all_reduce(x), 5000))
    direct = statistics.median(reps)
    if rank == 0:
        q.put((rows, direct))
    dist.barrier(group=gl)
    dist.destroy_process_group()


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    maxb = int(sys.argv[2]) if len(sys.argv) > 2 else 32 << 20
    store = tempfile.mktemp()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, size, maxb, store, q)) for r in range(size)]
    for p in procs:
        p.start()
    rows, direct = q.get(timeout=1800)
    for p in procs:
        p.join()
    print(f"# dist.all_reduce, {size} processes, torch float32 CPU tensors, median of 3 (ratio: gloo time / xccl time)")
    print(f"# {'bytes':>10} {'xccl us':>10} {'gloo us':>10} {'gloo/xccl':>10}")
    for b, x, g in rows:
        print(f"  {b:>10} {x * 1e6:>10.2f} {g * 1e6:>10.2f} {g / x:>10.2f}")
    build = os.environ.get("BUILD", os.path.join(ROOT, "build"))
    out = subprocess.run([os.path.join(build, "xcclrun"), "-n", str(size), "-q", os.path.join(build, "xccl-perf"),
                          "-b", "8", "-e", "8", "-n", "5000", "-w", "100", "-c", "0"],
                         capture_output=True, text=True, timeout=600).stdout
    row = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("#")]
    c_us = float(row[0].split()[5]) if row else float("nan")
    print(f"# 8-byte all-reduce: Communicator.all_reduce from Python {direct * 1e6:.2f} us, "
          f"xccl-perf (Go/C) {c_us:.2f} us: Python adds {direct * 1e6 - c_us:.2f} us per call")


if __name__ == "__main__":
    main()
