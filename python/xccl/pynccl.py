"""vLLM's PyNcclCommunicator contract over xccl, for any device xccl drives.

    from xccl.pynccl import PyXcclCommunicator
    comm = PyXcclCommunicator(group, device="cuda:0")   # or "cpu": the host device
    out = comm.all_reduce(x)                            # out of place, on the current stream
    comm.all_gather(out, x); comm.reduce_scatter(out, x)
    comm.send(x, dst=1); comm.recv(x, src=0); comm.broadcast(x, src=0)

The names, argument order and keywords are pynccl's (output first for
all_gather/reduce_scatter and their v forms, in_tensor/out_tensor,
dst/src, stream), so code written against vLLM's PyNcclCommunicator runs
unchanged with this class (PyNcclCommunicator is an alias). group is a
torch.distributed CPU process group (gloo; None: the default group) or a
StatelessProcessGroup-like object (rank, world_size, broadcast_obj). A
call's stream defaults to the framework's current one for device tensors
(pynccl's current_stream()); on the host device calls are synchronous
unless a stream is given.
"""

import contextlib

from . import _lib
from ._comm import Communicator, get_unique_id, unique_id_size

__all__ = ["PyXcclCommunicator", "PyNcclCommunicator"]

# torch's device types -> xccl's devices ("auto": the one this machine has)
_DEVICES = {"cpu": "host", "npu": "ascend", "mlu": "mlu", "xpu": "auto", "cuda": "auto"}


def _torch_device(device):
    import torch
    if isinstance(device, int):
        return torch.device(f"cuda:{device}")
    if isinstance(device, str):
        return torch.device(device)
    if isinstance(device, torch.device):
        return device
    raise TypeError(f"device: want an int, a str or a torch.device, not {type(device).__name__}")


def _rank_size(group, library=None):
    """(rank in the group, its size, how to broadcast the id from rank 0)."""
    if hasattr(group, "broadcast_obj"):  # vLLM's StatelessProcessGroup
        return group.rank, group.world_size, lambda uid: group.broadcast_obj(uid, src=0)
    import torch
    import torch.distributed as dist
    if not dist.is_initialized():
        raise RuntimeError("PyXcclCommunicator: torch.distributed is not initialized (or pass a "
                           "StatelessProcessGroup)")
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError(f"PyXcclCommunicator: this process (global rank {dist.get_rank()}) is not in the group")
    first = dist.get_process_group_ranks(group)[0] if group is not None else 0

    def bcast(uid):
        n = unique_id_size(library)
        t = torch.zeros(n, dtype=torch.uint8)
        if uid is not None:
            t[:len(uid)] = torch.tensor(list(uid), dtype=torch.uint8)
        dist.broadcast(t, src=first, group=group)  # `src` is the global rank, as pynccl's
        return bytes(t.tolist())
    return rank, size, bcast


class PyXcclCommunicator:
    """One communicator over group's ranks on device, pynccl's way: with one
    rank, or where the library cannot be loaded, it is not available
    (available False, disabled True) and every collective and send or
    receive returns None, as pynccl's. After the init it is enabled (disabled False); change_state()
    switches it and its stream for a block."""

    def __init__(self, group, device, library_path=None):
        self.group = group
        self.rank, self.world_size, bcast = _rank_size(group, library_path)
        self.device = _torch_device(device)
        self.available, self.disabled, self.stream, self.comm = False, True, None, None
        if self.world_size == 1:
            return
        try:
            _lib.load(library_path)
        except Exception:  # as pynccl: no usable library, no communicator
            return
        kind = _DEVICES.get(self.device.type)
        if kind is None:
            raise ValueError(f"PyXcclCommunicator: xccl has no device for torch's {self.device.type!r}")
        self.unique_id = bcast(get_unique_id(library_path, device=kind) if self.rank == 0 else None)
        with self._on_device():
            self.comm = Communicator(self.rank, self.world_size, self.unique_id, device=kind, library=library_path)
            self.stream = self._new_stream()
        self.available, self.disabled = True, False
        import torch
        data = torch.zeros(1, device=self.device)  # a small all-reduce: every rank is there
        self.all_reduce(data)
        self._synchronize(self._current_stream(None))
        from . import version
        self.nccl_version = version(library_path)

    # ---- plumbing ----
    def _on_device(self):
        import torch
        mod = getattr(torch, self.device.type, None) if self.device.type != "cpu" else None
        if mod is not None and hasattr(mod, "device") and self.device.index is not None:
            return mod.device(self.device)
        return contextlib.nullcontext()

    def _new_stream(self):
        import torch
        mod = getattr(torch, self.device.type, None) if self.device.type != "cpu" else None
        return mod.Stream() if mod is not None and hasattr(mod, "Stream") else None

    @staticmethod
    def _synchronize(stream):
        if stream is not None:
            stream.synchronize()

    def _current_stream(self, stream):
        """pynccl's default: the framework's current stream (None on the host)."""
        if stream is not None or self.device.type == "cpu":
            return stream
        import torch
        return getattr(torch, self.device.type).current_stream(self.device)

    def _check(self, *tensors):
        for t in tensors:
            if t.device != self.device:
                raise ValueError(f"this communicator is created to work on {self.device}, but the tensor is on "
                                 f"{t.device}")

    # ---- collectives (pynccl's names and argument order) ----
    def all_reduce(self, in_tensor, out_tensor=None, op="sum", stream=None):
        """out_tensor (a new one when None) = op over every rank's in_tensor;
        returns out_tensor. in_tensor itself is in place."""
        if self.disabled:
            return None
        self._check(in_tensor)
        if out_tensor is None:
            import torch
            out_tensor = torch.empty_like(in_tensor)
        self._check(out_tensor)
        self.comm.all_reduce(in_tensor, out_tensor, op=op, stream=self._current_stream(stream))
        return out_tensor

    def all_gather(self, output_tensor, input_tensor, stream=None):
        if self.disabled:
            return
        self._check(output_tensor, input_tensor)
        self.comm.all_gather(input_tensor, output_tensor, stream=self._current_stream(stream))

    def all_gatherv(self, output_tensor, input_tensor, sizes, stream=None):
        """sizes: each rank's rows (first dimension) of output_tensor."""
        if self.disabled:
            return
        self._check(output_tensor, input_tensor)
        self.comm.all_gatherv(input_tensor, output_tensor, sizes, stream=self._current_stream(stream))

    def reduce_scatter(self, output_tensor, input_tensor, op="sum", stream=None):
        if self.disabled:
            return
        self._check(output_tensor, input_tensor)
        self.comm.reduce_scatter(input_tensor, output_tensor, op=op, stream=self._current_stream(stream))

    def reduce_scatterv(self, output_tensor, input_tensor, sizes, op="sum", stream=None):
        """sizes: each rank's rows (first dimension) of input_tensor."""
        if self.disabled:
            return
        self._check(output_tensor, input_tensor)
        self.comm.reduce_scatterv(input_tensor, output_tensor, sizes, op=op,
                                  stream=self._current_stream(stream))

    def send(self, tensor, dst, stream=None):
        if self.disabled:
            return
        self._check(tensor)
        self.comm.send(_bytes_if_fp8(tensor), dst, stream=self._current_stream(stream))

    def recv(self, tensor, src, stream=None):
        if self.disabled:
            return
        self._check(tensor)
        self.comm.recv(_bytes_if_fp8(tensor), src, stream=self._current_stream(stream))

    def batch_isend_irecv(self, p2p_ops, stream=None):
        """torch.distributed.P2POp's (isend / irecv, a tensor and a peer) as
        one group; the peer is the op's group_peer, or its global peer
        translated into the group."""
        if self.disabled:
            return
        import torch.distributed as dist
        stream = self._current_stream(stream)
        self.group_start()
        try:
            for op in p2p_ops:
                peer = getattr(op, "group_peer", None)
                if peer is None:
                    peer = self._group_rank(op.peer)
                if op.op is dist.isend:
                    self.send(op.tensor, peer, stream)
                elif op.op is dist.irecv:
                    self.recv(op.tensor, peer, stream)
                else:
                    raise ValueError(f"batch_isend_irecv: want isend or irecv ops, got {op.op!r}")
        finally:
            self.group_end()

    def _group_rank(self, global_rank):
        if hasattr(self.group, "broadcast_obj"):  # a stateless group's ranks are its own
            return global_rank
        import torch.distributed as dist
        ranks = dist.get_process_group_ranks(self.group) if self.group is not None else None
        return ranks.index(global_rank) if ranks is not None else global_rank

    def broadcast(self, tensor, src, stream=None):
        """tensor (in place) = src's tensor; src is the rank in the group."""
        if self.disabled:
            return
        self._check(tensor)
        self.comm.broadcast(tensor, root=src, stream=self._current_stream(stream))

    def group_start(self):
        self.comm.group_start()

    def group_end(self):
        self.comm.group_end()

    # ---- memory windows: registration (ncclCommRegister where the library has one) ----
    def register_comm_window(self, tensor):
        return self.comm.register(tensor)

    def register_comm_window_raw(self, ptr, size):
        return self.comm.register_raw(ptr, size)

    def deregister_comm_window(self, window):
        self.comm.deregister(window)

    @contextlib.contextmanager
    def change_state(self, enable=None, stream=None):
        """Enables (or disables) the communicator and sets its stream for the
        block; enable None: as available."""
        if enable is None:
            enable = self.available
        if stream is None:
            stream = self.stream
        old = self.disabled, self.stream
        self.disabled, self.stream = not enable, stream
        try:
            yield
        finally:
            self.disabled, self.stream = old

    def destroy(self):
        if self.comm is not None:
            self.comm.destroy()
            self.comm = None
        self.available, self.disabled = False, True


def _bytes_if_fp8(t):
    """A float8 tensor as its bytes (uint8), as pynccl sends them: xccl has
    no float8 type, and a send or receive moves bytes."""
    if "float8" in str(t.dtype):
        import torch
        return t.view(torch.uint8)
    return t


PyNcclCommunicator = PyXcclCommunicator
