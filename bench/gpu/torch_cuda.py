"""The Python package and the torch backend on CUDA tensors (bench/gpu/run.sh,
on a machine with an NVIDIA GPU; never in CI). Every result is checked
against torch computing the same thing on the CPU.

    XCCL_LIBRARY=build/libxccl.so XCCL_NCCL_LIBRARY=... XCCL_CUDART_LIBRARY=... \
        python3 bench/gpu/torch_cuda.py

1. One rank, xccl.Communicator on the nvidia device: every collective, every
   dtype torch and NCCL share, every op, in place and out of place, on the
   current stream and on a side stream, sync and async.
2. torch.distributed with the xccl backend, 2 processes on the one GPU,
   each its own cluster (XCCL_CLUSTER): a mixed communicator whose two
   NCCL communicators are joined by the host engine.
Prints one "ok" line per part and exits 0, or the first failure and 1.
"""

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int32,
          torch.int64]
OPS = ["sum", "prod", "max", "min", "avg"]


def data(dtype, n, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randint(-4, 5, (n,), generator=g).to(torch.float32) / 2).to(dtype)
    lo = 0 if dtype == torch.uint8 else -3
    return torch.randint(lo, 4, (n,), generator=g).to(dtype)


def reference(op, xs):
    st = torch.stack([x.double() for x in xs])
    if op == "sum":
        r = st.sum(0)
    elif op == "prod":
        r = st.prod(0)
    elif op == "max":
        r = st.max(0).values
    elif op == "min":
        r = st.min(0).values
    else:
        r = st.sum(0) / len(xs)
        if not xs[0].dtype.is_floating_point:
            r = torch.div(st.sum(0), len(xs), rounding_mode="trunc")
    return r.to(xs[0].dtype)


def same(what, got, want):
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        bad = (got.double() != want.double()).nonzero()
        raise AssertionError(f"{what}: {bad.numel()} elements differ, first at {bad[:1].tolist()}: "
                             f"{got.flatten()[:8].tolist()} vs {want.flatten()[:8].tolist()}")


def one_rank():
    os.environ["XCCL_DEVICE"] = "nvidia"  # read when libxccl.so loads: before the id is made
    import xccl
    comm = xccl.Communicator(0, 1, xccl.get_unique_id(), device="nvidia")
    assert comm.device == "nvidia", comm.device
    dev = torch.device("cuda", 0)
    side = torch.cuda.Stream()
    checked = 0
    for dtype in DTYPES:
        for n in (1, 7, 1001, 262147):
            x = data(dtype, n, n)
            for op in OPS:
                if op == "avg" and not dtype.is_floating_point:
                    continue  # NCCL's ncclAvg is for floating types
                want = reference(op, [x])
                t = x.to(dev)
                comm.all_reduce(t, op=op)  # in place, current stream
                same(f"all_reduce {dtype} {op} n={n}", t, want)
                out = torch.empty_like(t)
                with torch.cuda.stream(side):
                    w = comm.all_reduce(x.to(dev), out=out, op=op, async_op=True)
                w.wait()
                torch.cuda.current_stream().wait_stream(side)
                same(f"all_reduce {dtype} {op} n={n} out of place, side stream, async", out, want)
                checked += 2
            t = x.to(dev)
            comm.broadcast(t, root=0)
            same(f"broadcast {dtype} n={n}", t, x)
            out = torch.empty_like(t)
            comm.all_gather(x.to(dev), out)
            same(f"all_gather {dtype} n={n}", out, x)
            comm.reduce_scatter(x.to(dev), out, op="max")
            same(f"reduce_scatter {dtype} n={n}", out, x)
            t = x.to(dev)
            comm.reduce(t, op="min", root=0)
            same(f"reduce {dtype} n={n}", t, x)
            out = torch.empty_like(t)
            comm.all_to_all_single(x.to(dev), out)
            same(f"all_to_all_single {dtype} n={n}", out, x)
            out = torch.zeros_like(t)
            with comm.group():
                comm.send(x.to(dev), 0)
                comm.recv(out, 0)
            torch.cuda.synchronize()
            same(f"send/recv to self {dtype} n={n}", out, x)
            checked += 6
    ts = [data(torch.float32, n, n).to(dev) for n in (512, 3, 1000)]
    want = [t.cpu() for t in ts]
    comm.fused_all_reduce(ts, op="sum")
    for i, (t, w) in enumerate(zip(ts, want)):
        same(f"fused_all_reduce [{i}]", t, w)
    comm.barrier()
    comm.destroy()
    print(f"ok  one rank on cuda:0 through NCCL: {checked + 1} calls checked")


def dist_worker(rank, size, store, q):
    try:
        os.environ["XCCL_DEVICE"] = "nvidia"
        os.environ["XCCL_CLUSTER"] = f"gpu{rank}"
        import xccl.torch
        dist.init_process_group(xccl.torch.BACKEND, init_method="file://" + store, rank=rank, world_size=size)
        dev = torch.device("cuda", 0)
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32):
            for n in (1, 7, 65537, 1 << 22):
                xs = [data(dtype, n, 10 * r + n) for r in range(size)]
                for op, dop in (("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN)):
                    t = xs[rank].to(dev)
                    dist.all_reduce(t, op=dop)
                    same(f"rank {rank}: all_reduce {dtype} {op} n={n}", t, reference(op, xs))
                t = xs[rank].to(dev)
                dist.broadcast(t, src=1)
                same(f"rank {rank}: broadcast {dtype} n={n}", t, xs[1])
                outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(size)]
                dist.all_gather(outs, xs[rank].to(dev))
                for r in range(size):
                    same(f"rank {rank}: all_gather[{r}] {dtype} n={n}", outs[r], xs[r])
                out = torch.empty(n, dtype=dtype, device=dev)
                dist.reduce_scatter(out, [data(dtype, n, 100 * rank + 10 * k + n).to(dev) for k in range(size)])
                want = reference("sum", [data(dtype, n, 100 * r + 10 * rank + n) for r in range(size)])
                same(f"rank {rank}: reduce_scatter {dtype} n={n}", out, want)
        # point to point on CUDA tensors: isend/irecv both ways, waited for
        # in either order; batch_isend_irecv; blocking send and recv in turn
        peer = 1 - rank
        for dtype in (torch.float32, torch.bfloat16, torch.int64):
            for n in (1, 1001, 1 << 20):
                mine, theirs = data(dtype, n, 3 * rank + n), data(dtype, n, 3 * peer + n)
                y = torch.zeros(n, dtype=dtype, device=dev)
                ws = [dist.isend(mine.to(dev), peer), dist.irecv(y, peer)]
                for w in reversed(ws) if rank else ws:
                    w.wait()
                same(f"rank {rank}: isend/irecv {dtype} n={n}", y, theirs)
                y = torch.zeros(n, dtype=dtype, device=dev)
                ops = [dist.P2POp(dist.isend, mine.to(dev), peer), dist.P2POp(dist.irecv, y, peer)]
                for w in dist.batch_isend_irecv(ops if rank else ops[::-1]):
                    w.wait()
                same(f"rank {rank}: batch_isend_irecv {dtype} n={n}", y, theirs)
                y = torch.zeros(n, dtype=dtype, device=dev)
                for turn in (0, 1):
                    if rank == turn:
                        dist.send(mine.to(dev), peer)
                    else:
                        dist.recv(y, peer)
                same(f"rank {rank}: send/recv {dtype} n={n}", y, theirs)
        dist.barrier()
        dist.destroy_process_group()
        q.put((rank, None))
    except BaseException as e:  # reported by the parent
        q.put((rank, f"{type(e).__name__}: {e}"))


def two_processes():
    size = 2
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        ps = [ctx.Process(target=dist_worker, args=(r, size, store, q)) for r in range(size)]
        for p in ps:
            p.start()
        res = dict(q.get(timeout=600) for _ in ps)
        for p in ps:
            p.join(60)
    errs = [f"rank {r}: {e}" for r, e in sorted(res.items()) if e]
    if errs:
        raise AssertionError("; ".join(errs))
    print(f"ok  torch.distributed ({size} processes on cuda:0, one cluster each: mixed over the host engine)")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("torch_cuda: SKIPPED: no CUDA device")
        sys.exit(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    failed = False
    for part in (one_rank, two_processes):
        try:
            part()
        except Exception as e:  # noqa: BLE001 - every part runs; the first failure is printed
            print(f"FAIL {part.__name__}: {type(e).__name__}: {e}")
            failed = True
    sys.exit(1 if failed else 0)
