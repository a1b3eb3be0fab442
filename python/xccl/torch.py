"""A torch.distributed backend over xccl.

    import torch.distributed as dist
    import xccl.torch
    dist.init_process_group(xccl.torch.BACKEND, ...)   # torchrun's env, a FileStore, a TCPStore

Importing this module registers the backend (once; only with the arguments
the installed torch's register_backend takes). The name is not "xccl":
torch >= 2.8 has a built-in backend of that name for Intel XPUs.

Each process group is one xccl Communicator, made from the group's store
(rank 0 of the group makes the id). Tensors are CPU tensors on the host
device (the default: XCCL_DEVICE=host unless set), or the vendor device's
tensors with XCCL_DEVICE naming it. Collectives run on the framework's
current stream (the host device's NULL stream: synchronous, on the calling
thread, as gloo's CPU work is); the returned Work wraps a completed torch
Future (torch 1.13's way for a Python process group: DDP's reducer reads
the future). An error raises at the call, async_op or not. Non-contiguous
tensors go through contiguous copies, as with gloo.

Point-to-point calls (send, recv, isend, irecv, batch_isend_irecv's) are
deferred: they run, with every one deferred before them, as one group at
a Work's wait() or is_completed() (which wait for it), or before the
group's next collective. So "post irecv, then isend" on every rank does
not deadlock, as with gloo (an xccl communicator runs its calls in issue
order, a receive waits for its send, and on a vendor library a send may
wait for its receive); a send's tensor is read when the group runs, as
NCCL's may be until wait(). Tags are not matched, as NCCL's backend does
not match them: messages between two ranks arrive in the order they were
sent.
"""

import os

import torch
import torch.distributed as dist
from torch.futures import Future

from . import _comm

BACKEND = "pyxccl"

try:  # torch >= 1.13
    from torch._C._distributed_c10d import _create_work_from_future
except ImportError:  # pragma: no cover - older torch
    _create_work_from_future = None


def _opt(opts, name, default):
    return getattr(opts, name, default) if opts is not None else default


_NAMES = (("SUM", _comm.SUM), ("AVG", _comm.AVG), ("PRODUCT", _comm.PRODUCT), ("MIN", _comm.MIN), ("MAX", _comm.MAX))
_RED = {}  # int(torch's RedOpType, a ReduceOp's .op) -> C_CCLReduceOp, filled once


def _op(opts):
    op = _opt(opts, "reduceOp", None)
    if op is None:
        return _comm.SUM
    if not _RED:
        for name, code in _NAMES:
            member = getattr(dist.ReduceOp, name, None)
            if member is not None:
                _RED[int(getattr(member, "op", member))] = code
    try:
        # an int key: the enum's own hash and == cost about 1 us a call
        return _RED[int(op.op)]
    except (AttributeError, KeyError, TypeError, ValueError):
        pass
    for name, code in _NAMES:
        member = getattr(dist.ReduceOp, name, None)
        if member is not None and op == member:
            return code
    raise ValueError(f"{BACKEND}: reduce op {getattr(op, 'op', op)} is not supported (sum, avg, product, min, max)")


class ProcessGroupXccl(dist.ProcessGroup):
    """torch's ProcessGroup over one xccl Communicator."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        if "XCCL_DEVICE" not in os.environ and _comm._process_device is None:
            os.environ["XCCL_DEVICE"] = "host"
        # The group's timeout bounds the init (a rank that never comes) and,
        # on the host engine, every collective, as gloo's does.
        seconds = timeout.total_seconds() if timeout is not None and timeout.total_seconds() > 0 else None
        self.comm = _comm.Communicator.from_store(store, rank, size, key=f"{BACKEND}/unique_id", timeout=seconds)
        self._deferred = []  # sends and receives deferred: (call, tensor, peer, copy back, Work)

    def getBackendName(self):
        return BACKEND

    # torch >= 2 keeps a group's name in its backends, and a process group
    # made in Python has none ("ProcessGroup name not set": DeviceMesh,
    # DTensor and the functional collectives look groups up by name): this
    # one keeps the name torch gives it.
    def _set_group_name(self, name):
        self._xccl_group_name = name

    @property
    def group_name(self):
        name = getattr(self, "_xccl_group_name", None)
        if name is None:
            raise RuntimeError(f"{BACKEND}: the process group has no name yet")
        return name

    def _get_backend_name(self):
        return BACKEND

    def name(self):
        return BACKEND

    # ---- plumbing ----
    def _work(self, issue, result, then=None):
        """Runs issue() now — synchronous on the host device, ordered on the
        framework's current stream on a vendor device, as NCCL's calls are —
        and returns torch's Work over a completed Future (what DDP's reducer
        and Work.wait() read). An error raises here, at the call: a Work
        made from a future that holds an exception does not raise it (its
        wait() returns True and the future's value is the exception).
        The deferred point-to-point calls run first."""
        if self._deferred:
            self._flush_p2p()
        issue()
        if then is not None:
            then()
        fut = Future()
        fut.set_result(result)
        return _create_work_from_future(fut)

    @staticmethod
    def _one(tensors, what):
        if len(tensors) != 1:
            raise ValueError(f"{BACKEND}: {what} takes one tensor per process, got {len(tensors)}")
        return tensors[0]

    @staticmethod
    def _dense(ts):
        """Contiguous stand-ins for ts (the tensors themselves where they are
        contiguous) and a function that copies the results back, as gloo
        works on non-contiguous tensors."""
        dense = [t if t.is_contiguous() else t.contiguous() for t in ts]
        if all(d is t for d, t in zip(dense, ts)):
            return dense, None

        def back():
            for t, d in zip(ts, dense):
                if d is not t:
                    t.copy_(d)
        return dense, back

    def _like(self, what, ts, ref, numel=None):
        """Checks that every tensor of ts has ref's dtype and numel elements
        (ref's by default), as gloo does, rather than cut blocks across them."""
        numel = ref.numel() if numel is None else numel
        for i, t in enumerate(ts):
            if t.dtype != ref.dtype or t.numel() != numel:
                raise ValueError(f"{BACKEND}: {what}: tensor {i} is {t.dtype} of {t.numel()} elements, "
                                 f"want {ref.dtype} of {numel}")

    # ---- collectives ----
    def allreduce(self, tensors, opts=None):
        op = _op(opts)
        dense, back = self._dense(tensors)
        if len(dense) == 1:
            return self._work(lambda: self.comm.all_reduce(dense[0], op=op), tensors, back)
        return self._work(lambda: self.comm.fused_all_reduce(dense, op=op), tensors, back)

    def allreduce_coalesced(self, tensors, opts=None):
        dense, back = self._dense(tensors)
        return self._work(lambda: self.comm.fused_all_reduce(dense, op=_op(opts)), tensors, back)

    def broadcast(self, tensors, opts=None):
        (t,), back = self._dense([self._one(tensors, "broadcast")])
        root = _opt(opts, "rootRank", 0)
        return self._work(lambda: self.comm.broadcast(t, root=root), tensors, back)

    def reduce(self, tensors, opts=None):
        (t,), back = self._dense([self._one(tensors, "reduce")])
        root, op = _opt(opts, "rootRank", 0), _op(opts)
        return self._work(lambda: self.comm.reduce(t, op=op, root=root), tensors, back)

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = self._one(input_tensors, "all_gather")
        outs = self._one(output_tensors, "all_gather")
        if len(outs) != self.comm.size:
            raise ValueError(f"{BACKEND}: all_gather wants {self.comm.size} output tensors, got {len(outs)}")
        self._like("all_gather", outs, inp)
        flat = torch.empty((self.comm.size,) + tuple(inp.shape), dtype=inp.dtype, device=inp.device)

        def unpack():
            for i, o in enumerate(outs):
                o.copy_(flat[i].reshape(o.shape))
        src = inp.contiguous()
        return self._work(lambda: self.comm.all_gather(src, flat), output_tensors, unpack)

    def _allgather_base(self, output, input, opts=None):
        self._like("all_gather_into_tensor", [output], input, input.numel() * self.comm.size)
        (out,), back = self._dense([output])
        src = input.contiguous()
        return self._work(lambda: self.comm.all_gather(src, out), [output], back)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = self._one(output_tensors, "reduce_scatter")
        ins = self._one(input_tensors, "reduce_scatter")
        if len(ins) != self.comm.size:
            raise ValueError(f"{BACKEND}: reduce_scatter wants {self.comm.size} input tensors, got {len(ins)}")
        self._like("reduce_scatter", ins, out)
        flat = torch.cat([t.reshape(-1) for t in ins])
        (dst,), back = self._dense([out])
        return self._work(lambda: self.comm.reduce_scatter(flat, dst, op=_op(opts)), output_tensors, back)

    def _reduce_scatter_base(self, output, input, opts=None):
        self._like("reduce_scatter_tensor", [input], output, output.numel() * self.comm.size)
        (out,), back = self._dense([output])
        src = input.contiguous()
        return self._work(lambda: self.comm.reduce_scatter(src, out, op=_op(opts)), [output], back)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        ins = list(input_split_sizes) or None
        outs = list(output_split_sizes) or None
        (out,), back = self._dense([output])
        src = input.contiguous()
        return self._work(lambda: self.comm.all_to_all_single(src, out, ins, outs), [output], back)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        outs, back = self._dense(output_tensors)
        ins = [t.contiguous() for t in input_tensors]
        return self._work(lambda: self.comm.all_to_all(ins, outs), output_tensors, back)

    def gather(self, output_tensors, input_tensors, opts=None):
        """dist.gather (and gather_object): the root receives every rank's
        tensor, as ProcessGroupNCCL does, in one group of sends and
        receives; output_tensors is [] off the root."""
        inp = self._one(input_tensors, "gather").contiguous()
        root, me, size = _opt(opts, "rootRank", 0), self.comm.rank, self.comm.size
        if me != root:
            return self._work(lambda: self.comm.send(inp, root), output_tensors)
        outs = self._list(self._one(output_tensors, "gather"), "gather", "output")
        self._like("gather", outs, inp)
        into = [o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format) for o in outs]

        def issue():
            with self.comm.group():
                for r in range(size):
                    if r != root:
                        self.comm.recv(into[r], r)
            into[root].copy_(inp)

        def unpack():
            for o, t in zip(outs, into):
                if o is not t:
                    o.copy_(t)
        return self._work(issue, output_tensors, unpack)

    def scatter(self, output_tensors, input_tensors, opts=None):
        """dist.scatter (and scatter_object_list): rank r receives the root's
        r-th tensor, in one group of sends and receives; input_tensors is []
        off the root."""
        out = self._one(output_tensors, "scatter")
        root, me, size = _opt(opts, "rootRank", 0), self.comm.rank, self.comm.size
        into = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)

        def unpack():
            if into is not out:
                out.copy_(into)
        if me != root:
            return self._work(lambda: self.comm.recv(into, root), output_tensors, unpack)
        ins = [t.contiguous() for t in self._list(self._one(input_tensors, "scatter"), "scatter", "input")]
        self._like("scatter", ins, out)

        def issue():
            with self.comm.group():
                for r in range(size):
                    if r != root:
                        self.comm.send(ins[r], r)
            into.copy_(ins[root])
        return self._work(issue, output_tensors, unpack)

    def _list(self, ts, what, kind):
        if len(ts) != self.comm.size:
            raise ValueError(f"{BACKEND}: {what} wants {self.comm.size} {kind} tensors on the root, got {len(ts)}")
        return ts

    def barrier(self, opts=None):
        return self._work(self.comm.barrier, None)

    def send(self, tensors, dst, tag=0):
        t = self._one(tensors, "send").contiguous()
        return self._defer(self.comm.send, t, dst, None, tensors)

    def recv(self, tensors, src, tag=0):
        (t,), back = self._dense([self._one(tensors, "recv")])
        return self._defer(self.comm.recv, t, src, back, tensors)

    def _defer(self, call, t, peer, back, tensors):
        """Queues call(t, peer) for _flush_p2p (back, if any, after it) and
        returns its Work; a bad peer raises here, at the call."""
        self.comm._peer(peer)
        w = _P2PWork(self, tensors)
        self._deferred.append((call, t, peer, back, w))
        return w

    def _flush_p2p(self):
        """Runs the deferred sends and receives, in order, as one group."""
        pending, self._deferred = self._deferred, []
        try:
            with self.comm.group():
                for call, t, peer, _, _ in pending:
                    call(t, peer)
        except BaseException as e:
            for *_, w in pending:
                w._error = e
            raise
        for *_, back, w in pending:
            if back is not None:
                back()
            w._done = True

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError(f"{BACKEND}: recv from any source is not supported (name the source rank)")




class _P2PWork(dist.Work):
    """A deferred send's or receive's Work (ProcessGroupXccl.send, recv):
    wait() and is_completed() run it (with the others deferred) and wait
    for it; wait() raises its error."""

    def __init__(self, pg, result):
        super().__init__()
        self._pg, self._result, self._done, self._error = pg, result, False, None

    def wait(self, timeout=None):
        if not self._done and self._error is None:
            self._pg._flush_p2p()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        self.wait()
        return True

    def is_success(self):
        return self._done

    def exception(self):
        return self._error

    def get_future(self):
        self.wait()
        fut = Future()
        fut.set_result(self._result)
        return fut

    def result(self):
        self.wait()
        return self._result


def _create(store, rank, size, timeout):
    return ProcessGroupXccl(store, rank, size, timeout)


def _register():
    if _create_work_from_future is None:
        raise ImportError(f"{BACKEND}: torch {torch.__version__} lacks _create_work_from_future (need >= 1.13)")
    if hasattr(dist.Backend, BACKEND.upper()):
        return  # registered already (this module imported twice)
    import inspect
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, _create)


_register()
