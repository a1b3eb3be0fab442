"""The framework protocol: a tensor-parallel linear layer (row parallel, as
in Megatron / vLLM) whose partial outputs are summed with the backend's
all_reduce. Each rank holds a slice of the weight's input dimension.

    xcclrun -n 4 python3 examples/python/tp_linear.py      # or torchrun / mpirun

(PYTHONPATH=python.) The comm backend comes from the factory the framework
protocol names: create_comm_backend("auto") — here joined through the
launcher's environment (XcclCommInitFromEnv).
"""

import torch

import xccl

comm = xccl.create_comm_backend("auto")
rank, size = comm.rank, comm.size

torch.manual_seed(0)
d_in, d_out, batch = 64 * size, 48, 5
w = torch.randn(d_out, d_in)  # the full weight, the same on every rank (seeded)
x = torch.randn(batch, d_in)
shard = slice(rank * d_in // size, (rank + 1) * d_in // size)

partial = x[:, shard] @ w[:, shard].T  # this rank's share of x @ w.T
comm.all_reduce(partial, op="sum")     # the row-parallel layer's one collective

full = x @ w.T
err = (partial - full).abs().max().item()
assert err < 1e-3, f"rank {rank}: tensor-parallel output differs by {err}"
stats = comm.get_stats()
if rank == 0:
    print(f"tp_linear ok: {size} ranks, max error {err:.2e}, device {stats['device']}")
comm.destroy()
