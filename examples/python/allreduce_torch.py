"""all_reduce through xccl's torch.distributed backend, under torchrun:

    torchrun --nproc_per_node 4 examples/python/allreduce_torch.py

(PYTHONPATH=python, or pip install ./python; libxccl.so from XCCL_LIBRARY,
the package, or build/.) Prints the result and the time per call.
"""

import time

import torch
import torch.distributed as dist

import xccl.torch

dist.init_process_group(xccl.torch.BACKEND)  # torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
rank, size = dist.get_rank(), dist.get_world_size()
x = torch.full((1 << 20,), float(rank + 1))
dist.all_reduce(x)
want = size * (size + 1) / 2
assert torch.all(x == want), f"rank {rank}: got {x[:4].tolist()}, want {want}"
t0 = time.perf_counter()
for _ in range(20):
    dist.all_reduce(x)
dt = (time.perf_counter() - t0) / 20
if rank == 0:
    print(f"all_reduce ok: {size} ranks, 4 MiB float32, {dt * 1e6:.1f} us per call, "
          f"busbw {2 * (size - 1) / size * x.numel() * 4 / dt / 1e9:.2f} GB/s")
dist.destroy_process_group()
