"""Rank bodies of test_torch.py's test_pynccl_contract: vLLM's PyNcclCommunicator calls, made
on xccl's PyXcclCommunicator over a gloo group (or a store-backed
stateless group), each checked against gloo or a local reference."""

import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from workers import data, local_reduce, same  # noqa: E402


class StoreGroup:
    """vLLM's StatelessProcessGroup shape: rank, world_size, broadcast_obj."""

    def __init__(self, store, rank, world_size):
        self.store, self.rank, self.world_size, self.n = store, rank, world_size, 0

    def broadcast_obj(self, obj, src):
        self.n += 1
        key = f"bcast/{src}/{self.n}"
        if self.rank == src:
            self.store.set(key, pickle.dumps(obj))
            return obj
        self.store.wait([key])
        return pickle.loads(self.store.get(key))


def run(rank, size, store_file, out_dir):
    from xccl.pynccl import PyNcclCommunicator, PyXcclCommunicator
    assert PyNcclCommunicator is PyXcclCommunicator
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=size)
    comm = PyXcclCommunicator(dist.group.WORLD, device="cpu")
    assert (comm.rank, comm.world_size) == (rank, size)
    if size == 1:  # pynccl: one rank is no communicator, every call a no-op
        assert not comm.available and comm.disabled
        assert comm.all_reduce(torch.ones(3)) is None
        open(os.path.join(out_dir, f"ok.{rank}"), "w").close()
        return
    assert comm.available and not comm.disabled and comm.nccl_version > 0

    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        for opname, op in (("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN)):
            for n in (1, 7, 1001):
                x = data(rank, n, dtype, opname)
                keep = x.clone()
                out = comm.all_reduce(x, op=op)  # out of place: a new tensor
                same(out, local_reduce(size, n, dtype, opname), f"all_reduce {dtype} {opname} {n}")
                same(x, keep, "all_reduce's in_tensor is left as it was")
                o2 = torch.empty_like(x)
                assert comm.all_reduce(in_tensor=x, out_tensor=o2, op=op) is o2
                same(o2, out, "all_reduce into out_tensor=")
        # all_gather(output, input) and reduce_scatter(output, input), pynccl's order
        x = data(rank, 6, dtype)
        out = torch.empty(size * 6, dtype=dtype)
        comm.all_gather(out, x)
        same(out, torch.cat([data(r, 6, dtype) for r in range(size)]), f"all_gather {dtype}")
        big = data(rank, size * 5, dtype)
        o = torch.empty(5, dtype=dtype)
        comm.reduce_scatter(output_tensor=o, input_tensor=big)
        same(o, local_reduce(size, size * 5, dtype, "sum")[rank * 5:(rank + 1) * 5], f"reduce_scatter {dtype}")
        # the v forms: a row count per rank, one of them 0
        sizes = [(3 * r + 2) % 4 for r in range(size)]
        rows = sum(sizes)
        mine = data(rank, sizes[rank] * 3, dtype).reshape(sizes[rank], 3)
        out = torch.full((rows, 3), -5, dtype=dtype)
        comm.all_gatherv(out, mine, sizes)
        want = torch.cat([data(r, sizes[r] * 3, dtype).reshape(sizes[r], 3) for r in range(size)])
        same(out, want, f"all_gatherv {dtype} {sizes}")
        whole = data(rank, rows * 3, dtype, salt=3).reshape(rows, 3)
        o = torch.full((sizes[rank], 3), -5, dtype=dtype)
        comm.reduce_scatterv(o, whole, sizes, op=dist.ReduceOp.SUM)
        at = sum(sizes[:rank])
        same(o, local_reduce(size, rows * 3, dtype, "sum", salt=3).reshape(rows, 3)[at:at + sizes[rank]],
             f"reduce_scatterv {dtype} {sizes}")

    # broadcast from every src; send/recv around the ring, in a group
    for src in range(size):
        t = data(rank, 33, torch.float32) if rank == src else torch.zeros(33)
        comm.broadcast(t, src=src)
        same(t, data(src, 33, torch.float32), f"broadcast from {src}")
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = torch.zeros(17, dtype=torch.int32)
    comm.group_start()
    comm.send(data(rank, 17, torch.int32), dst=nxt)
    comm.recv(got, src=prv)
    comm.group_end()
    same(got, data(prv, 17, torch.int32), "send/recv ring in a group")
    got = torch.zeros(19, dtype=torch.float32)  # torch's P2POps, one group (a global peer: the group is WORLD)
    comm.batch_isend_irecv([dist.P2POp(dist.irecv, got, prv), dist.P2POp(dist.isend, data(rank, 19, torch.float32), nxt)])
    same(got, data(prv, 19, torch.float32), "batch_isend_irecv around the ring")
    if rank == 0:
        comm.send(data(0, 9, torch.float64), 1)
    elif rank == 1:
        r = torch.zeros(9, dtype=torch.float64)
        comm.recv(r, 0)
        same(r, data(0, 9, torch.float64), "blocking send/recv")

    # change_state: disabled, every call is a no-op returning None
    with comm.change_state(enable=False):
        assert comm.disabled
        assert comm.all_reduce(torch.ones(2)) is None
    assert not comm.disabled
    w = comm.register_comm_window(torch.zeros(64))
    comm.deregister_comm_window(w)

    # a foreign tensor device is refused before any call
    try:
        comm.all_reduce(torch.ones(2, device="meta"))
        raise AssertionError("a meta tensor was taken")
    except ValueError as e:
        assert "created to work on cpu" in str(e), e
    comm.destroy()

    # the same over a stateless group (a store and broadcast_obj)
    store = dist.FileStore(store_file + ".sg", size)
    c2 = PyXcclCommunicator(StoreGroup(store, rank, size), device=torch.device("cpu"))
    same(c2.all_reduce(torch.full((4,), float(rank + 1))), torch.full((4,), size * (size + 1) / 2),
         "all_reduce over a stateless group")
    c2.destroy()
    dist.destroy_process_group()
    open(os.path.join(out_dir, f"ok.{rank}"), "w").close()
