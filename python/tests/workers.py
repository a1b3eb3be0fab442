"""Rank bodies of the multi-process tests (spawned by test_torch.py): every
check runs the same collective through xccl's torch backend and through
gloo (or, where gloo lacks the type or op, a reference computed locally
from every rank's known inputs) and compares."""

import os
import time
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def data(rank, n, dtype, op="sum", salt=0):
    """rank's input: small integers (exact in every type and order); for
    product, ones and twos so the product stays small."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * n + salt)
    if op == "product":
        x = torch.randint(1, 3, (n,), generator=g)
    else:
        x = torch.randint(-8, 9, (n,), generator=g)
    return x.to(dtype)


def local_reduce(size, n, dtype, op, salt=0):
    xs = torch.stack([data(r, n, torch.float64, op, salt) for r in range(size)])
    out = {"sum": xs.sum(0), "product": xs.prod(0), "min": xs.min(0).values, "max": xs.max(0).values,
           "avg": xs.sum(0) / size}[op]
    return out.to(dtype)


def gloo_or_local(fn, local):
    """gloo's answer where gloo does it, else the local reference."""
    try:
        return fn()
    except (RuntimeError, ValueError):
        return local()


def same(a, b, what):
    if a.dtype.is_floating_point:
        ok = torch.allclose(a.double(), b.double(), rtol=1e-2 if a.element_size() == 2 else 1e-6, atol=1e-3)
    else:
        ok = torch.equal(a, b)
    assert ok, f"{what}: xccl {a.tolist()[:8]} vs reference {b.tolist()[:8]}"


def run(rank, size, store_file, out_dir):
    import xccl.torch
    dist.init_process_group("gloo", init_method="file://" + store_file, rank=rank, world_size=size)
    xg = dist.new_group(backend=xccl.torch.BACKEND)
    gl = dist.new_group(backend="gloo")
    n = 37  # odd

    for dtype in DTYPES:
        for name, op in OPS.items():
            if name == "avg" and not dtype.is_floating_point:
                continue
            what = f"all_reduce {dtype} {name}"
            x = data(rank, n, dtype, name)
            dist.all_reduce(x, op=op, group=xg)  # in place, as torch is

            def via_gloo():
                if name == "avg":
                    raise ValueError("gloo has no avg")
                y = data(rank, n, dtype, name)
                dist.all_reduce(y, op=op, group=gl)
                return y
            same(x, gloo_or_local(via_gloo, lambda: local_reduce(size, n, dtype, name)), what)

            # reduce to the last rank
            x = data(rank, n, dtype, name, salt=1)
            dist.reduce(x, dst=size - 1, op=op, group=xg)
            if rank == size - 1:
                same(x, local_reduce(size, n, dtype, name, salt=1), f"reduce {dtype} {name}")

            # reduce_scatter (tensor and list)
            big = data(rank, n * size, dtype, name, salt=2)
            out = torch.zeros(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, big, op=op, group=xg)
            want = local_reduce(size, n * size, dtype, name, salt=2)[rank * n:(rank + 1) * n]
            same(out, want, f"reduce_scatter_tensor {dtype} {name}")
            out2 = torch.zeros(n, dtype=dtype)
            dist.reduce_scatter(out2, list(big.chunk(size)), op=op, group=xg)
            same(out2, want, f"reduce_scatter list {dtype} {name}")

        # broadcast from every root
        for root in range(size):
            x = data(rank, n, dtype, salt=3)
            dist.broadcast(x, src=root, group=xg)
            same(x, data(root, n, dtype, salt=3), f"broadcast {dtype} root {root}")
        # all_gather (list and into a tensor)
        x = data(rank, n, dtype, salt=4)
        outs = [torch.zeros(n, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, x, group=xg)
        for r in range(size):
            same(outs[r], data(r, n, dtype, salt=4), f"all_gather {dtype} from {r}")
        flat = torch.zeros(n * size, dtype=dtype)
        dist.all_gather_into_tensor(flat, x, group=xg)
        same(flat, torch.cat([data(r, n, dtype, salt=4) for r in range(size)]), f"all_gather_into_tensor {dtype}")
        # all_to_all_single, even and uneven splits
        x = data(rank, 3 * size, dtype, salt=5)
        y = torch.zeros(3 * size, dtype=dtype)
        dist.all_to_all_single(y, x, group=xg)
        same(y, torch.cat([data(p, 3 * size, dtype, salt=5)[3 * rank:3 * rank + 3] for p in range(size)]),
             f"all_to_all_single {dtype}")
        in_splits = [p + rank + 1 for p in range(size)]          # to p: p+rank+1 rows
        out_splits = [rank + p + 1 for p in range(size)]         # from p: rank+p+1 rows
        x = data(rank, sum(in_splits), dtype, salt=6)
        y = torch.zeros(sum(out_splits), dtype=dtype)
        dist.all_to_all_single(y, x, out_splits, in_splits, group=xg)
        want = []
        for p in range(size):
            xp = data(p, sum(q + p + 1 for q in range(size)), dtype, salt=6)
            off = sum(q + p + 1 for q in range(rank))
            want.append(xp[off:off + rank + p + 1])
        same(y, torch.cat(want), f"all_to_all_single uneven {dtype}")

    # gather to and scatter from every root, and the object collectives on them
    for root in range(size):
        x = data(rank, n, torch.float32, salt=8)
        outs = [torch.zeros(n) for _ in range(size)] if rank == root else None
        dist.gather(x, outs, dst=root, group=xg)
        if rank == root:
            for r in range(size):
                same(outs[r], data(r, n, torch.float32, salt=8), f"gather to {root} from {r}")
        y = torch.zeros(n, dtype=torch.int64)
        ins = [data(r, n, torch.int64, salt=9 + root) for r in range(size)] if rank == root else None
        dist.scatter(y, ins, src=root, group=xg)
        same(y, data(rank, n, torch.int64, salt=9 + root), f"scatter from {root}")
    objs = [None] * size if rank == size - 1 else None
    dist.gather_object({"rank": rank, "s": "x" * rank}, objs, dst=size - 1, group=xg)
    if rank == size - 1:
        assert objs == [{"rank": r, "s": "x" * r} for r in range(size)], f"gather_object: {objs}"
    got = [None]
    dist.scatter_object_list(got, [("to", r) for r in range(size)] if rank == 0 else None, src=0, group=xg)
    assert got == [("to", rank)], f"scatter_object_list: {got}"
    everyone = [None] * size
    dist.all_gather_object(everyone, [rank] * rank, group=xg)
    assert everyone == [[r] * r for r in range(size)], f"all_gather_object: {everyone}"

    # non-contiguous tensors (transposed views, strided slices), as gloo takes them
    x = (torch.arange(6.0).reshape(3, 2) + rank).t()
    dist.all_reduce(x, group=xg)
    same(x, (torch.arange(6.0).reshape(3, 2) * size + size * (size - 1) / 2).t(), "non-contiguous all_reduce")
    x = torch.zeros(10)
    x[::2] = rank + 1
    dist.broadcast(x[::2], src=size - 1, group=xg)
    same(x[::2], torch.full((5,), float(size)), "non-contiguous broadcast")
    same(x[1::2], torch.zeros(5), "non-contiguous broadcast: the other elements")

    # errors raise at the call, async or not: a local one (uneven blocks) and
    # one every rank sees (the ranks disagree on the data type)
    import pytest
    with pytest.raises(ValueError, match="reduce_scatter"):
        dist.reduce_scatter(torch.zeros(2), [torch.zeros(3)] + [torch.zeros(1)] * (size - 1), group=xg)
    with pytest.raises(ValueError, match="all_gather"):
        dist.all_gather([torch.zeros(2) for _ in range(size)], torch.zeros(3), group=xg)
    if size > 1:
        with pytest.raises(RuntimeError, match="mismatch"):
            w = dist.all_reduce(torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32), group=xg,
                                async_op=True)
            w.wait()
    x = torch.ones(3)
    dist.all_reduce(x, group=xg)  # and the group goes on
    same(x, torch.full((3,), float(size)), "all_reduce after the errors")

    # send/recv around a ring (and to self on one rank)
    x = data(rank, n, torch.float32, salt=7)
    y = torch.zeros(n)
    right, left = (rank + 1) % size, (rank - 1) % size
    if size == 1:
        w = dist.isend(x, right, group=xg)
        dist.recv(y, left, group=xg)
        w.wait()
    elif rank % 2 == 0:
        dist.send(x, right, group=xg)
        dist.recv(y, left, group=xg)
    else:
        dist.recv(y, left, group=xg)
        dist.send(x, right, group=xg)
    same(y, data(left, n, torch.float32, salt=7), "send/recv ring")

    # every rank posts its receive first, then sends (irecv; batch_isend_irecv
    # with the receive listed first): no deadlock, as with gloo
    y = torch.zeros(n)
    r = dist.irecv(y, left, group=xg)
    s = dist.isend(x, right, group=xg)
    r.wait()
    s.wait()
    assert r.is_completed()
    same(y, data(left, n, torch.float32, salt=7), "irecv, then isend")
    y = torch.zeros(n)
    ops = [dist.P2POp(dist.irecv, y, left, group=xg), dist.P2POp(dist.isend, x, right, group=xg)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    same(y, data(left, n, torch.float32, salt=7), "batch_isend_irecv, receive first")
    y = torch.zeros(n)
    r = dist.irecv(y, left, group=xg)
    if size == 1:  # torch 2's send refuses this rank itself (its isend not)
        dist.isend(x, right, group=xg).wait()
    else:
        dist.send(x, right, group=xg)
    z = torch.ones(3)
    dist.all_reduce(z, group=xg)
    assert r.wait()
    same(y, data(left, n, torch.float32, salt=7), "irecv before an all_reduce")
    # an irecv posted before a collective whose peer sends only after it
    # (pipeline parallelism), an isend left unwaited across a collective,
    # and is_completed(), which answers at once: as gloo's
    if size > 1:
        y = torch.zeros(n)
        z = torch.ones(3)
        if rank == 0:
            r = dist.irecv(y, 1, group=xg)
            assert not r.is_completed()  # rank 1 sends after the all_reduce
            dist.all_reduce(z, group=xg)
            assert r.wait()
            assert r.source_rank() == 1
            same(y, data(1, n, torch.float32, salt=7), "irecv before a collective its peer sends after")
        elif rank == 1:
            dist.all_reduce(z, group=xg)
            w = dist.isend(data(1, n, torch.float32, salt=7), 0, group=xg)
            dist.barrier(group=xg)
            w.wait()
        else:
            dist.all_reduce(z, group=xg)
        if rank != 1:
            dist.barrier(group=xg)
        same(z, torch.full((3,), float(size)), "the all_reduce between")
        # 1F1B: wait() for a receive whose background run has started, with
        # a later receive from the same peer that comes only after this rank
        # answers the first: the wait does not wait behind the later one
        if rank in (0, 1):
            a, b, c = torch.zeros(2), torch.zeros(2), torch.zeros(2)
            if rank == 0:
                r1 = dist.irecv(a, 1, group=xg)
                r1.is_completed()
                r2 = dist.irecv(c, 1, group=xg)
                r1.wait()
                dist.send(a + 1, 1, group=xg)
                r2.wait()
                same(c, torch.full((2,), 3.0), "1F1B: the second receive")
            else:
                dist.send(torch.full((2,), 1.0), 0, group=xg)
                dist.recv(b, 0, group=xg)
                dist.send(b + 1, 0, group=xg)
        # is_completed() alone makes a receive progress (in the background):
        # polled without wait(), it turns True once the send came
        if rank == 0:
            d = torch.zeros(2)
            r = dist.irecv(d, 1, group=xg)
            for _ in range(20000):
                if r.is_completed():
                    break
                time.sleep(0.001)
            assert r.is_completed(), "a polled receive never completed"
            same(d, torch.full((2,), 5.0), "a polled receive")
        elif rank == 1:
            dist.send(torch.full((2,), 5.0), 0, group=xg)
        # a tensor of no elements is a message too, as with NCCL: its irecv
        # completes only once the peer's send of one is posted (rank 1
        # sends after a barrier that rank 0 enters after its check)
        if rank == 0:
            r = dist.irecv(torch.empty(0), 1, group=xg)
            for _ in range(50):  # polled: it progresses in the background
                assert not r.is_completed(), "a receive of no elements completed before its send"
                time.sleep(0.002)
            dist.barrier(group=xg)
            assert r.wait()
        elif rank == 1:
            dist.barrier(group=xg)
            dist.send(torch.empty(0), 0, group=xg)
        else:
            dist.barrier(group=xg)

    # several tensors of one process (all_reduce_multigpu, gone in torch 2):
    # each gets the sum over every tensor of every rank, as gloo gives
    if hasattr(dist, "all_reduce_multigpu"):
        a, b = torch.full((3,), float(rank + 1)), torch.full((3,), 10.0 * (rank + 1))
        dist.all_reduce_multigpu([a, b], group=xg)
        want = 11.0 * size * (size + 1) / 2
        same(a, torch.full((3,), want), "all_reduce_multigpu, tensor 0")
        same(b, torch.full((3,), want), "all_reduce_multigpu, tensor 1")
    # an async all_gather's future holds the list of outputs, as gloo's
    outs = [torch.zeros(2) for _ in range(size)]
    v = dist.all_gather(outs, torch.full((2,), float(rank)), group=xg, async_op=True).get_future().wait()
    assert len(v) == size and all(isinstance(t, torch.Tensor) for t in v), f"all_gather future: {v}"
    same(torch.stack(v), torch.arange(size, dtype=torch.float32).repeat_interleave(2).reshape(size, 2),
         "all_gather future's value")

    # async handles
    xs = [data(rank, n, torch.float64, salt=10 + k) for k in range(4)]
    works = [dist.all_reduce(x, group=xg, async_op=True) for x in xs]
    for k, w in enumerate(works):
        w.wait()
        assert w.is_completed()
        same(xs[k], local_reduce(size, n, torch.float64, "sum", salt=10 + k), f"async all_reduce {k}")

    # barrier
    dist.barrier(group=xg)

    # new_group of a subset: the even ranks
    evens = list(range(0, size, 2))
    sub = dist.new_group(evens, backend=xccl.torch.BACKEND)
    if rank in evens:
        x = torch.full((5,), float(rank))
        dist.all_reduce(x, group=sub)
        same(x, torch.full((5,), float(sum(evens))), "new_group of the even ranks")

    # DDP: one step over xccl, one over gloo, from the same model
    torch.manual_seed(0)
    m1 = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    m2 = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    m2.load_state_dict(m1.state_dict())
    d1 = torch.nn.parallel.DistributedDataParallel(m1, process_group=xg)
    d2 = torch.nn.parallel.DistributedDataParallel(m2, process_group=gl)
    inp = torch.randn(8, 16, generator=torch.Generator().manual_seed(rank))
    d1(inp).pow(2).sum().backward()
    d2(inp).pow(2).sum().backward()
    for (n1, p1), (_, p2) in zip(m1.named_parameters(), m2.named_parameters()):
        assert torch.allclose(p1.grad, p2.grad, rtol=1e-5, atol=1e-6), f"DDP gradient {n1} differs from gloo's"

    # the framework protocol straight on the Communicator: fused, stats, numpy
    comm = xg.comm if hasattr(xg, "comm") else None
    if comm is None:  # torch wraps nothing in 1.13; find our group object
        comm = xg.comm
    comm.enable_stats(True)
    ts = [data(rank, k + 1, torch.float32, salt=20 + k) for k in range(10)]
    comm.fused_all_reduce(ts)
    for k, t in enumerate(ts):
        same(t, local_reduce(size, k + 1, torch.float32, "sum", salt=20 + k), f"fused buffer {k}")
    a = np.arange(11, dtype=np.int32) * (rank + 1)
    comm.all_reduce(a, op="max")
    assert (a == np.arange(11, dtype=np.int32) * size).all(), f"numpy all_reduce max: {a}"
    st = comm.get_stats()
    assert st["rank"] == rank and st["nranks"] == size and st["ops"]["AllReduce"]["calls"] >= 2, st

    dist.barrier(group=gl)
    open(os.path.join(out_dir, f"ok.{rank}"), "w").close()
    dist.destroy_process_group()
