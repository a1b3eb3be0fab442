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

Point-to-point calls on the host device progress as gloo's do,
independently of the collectives: a send (send, isend, batch_isend_irecv's)
runs at the call (an xccl send never waits for its receiver there); a
receive is deferred, and runs at its Work's wait() (after the receives
deferred before it), or in the background once is_completed() was asked
(which answers at once). So "post irecv, then isend" on every rank does not
deadlock, nor does an irecv posted before a collective whose peer sends
only after it, nor an isend left unwaited. gather and scatter are
collectives (XcclGather, XcclScatter), not sends and receives, so that they
never take a message a deferred receive waits for. On a vendor device
sends and receives are deferred alike and run, with every one deferred
before them, as one group at a Work's wait() or is_completed(), or before
the group's next collective, as NCCL needs a send and its receive launched
together. Tags are not matched, as NCCL's backend does not match them:
messages between two ranks arrive in the order they were sent.
"""

import os
import threading

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
        self._deferred = []  # deferred: (call, tensor, peer, copy back, Work), under _recv_lock
        # The host device's sends run at the call and its receives alone
        # (see the module's doc); a vendor's are deferred and grouped.
        self._eager = self.comm.device == "host"
        self._recv_lock = threading.Lock()
        self._recv_run = threading.Lock()  # one runner of a vendor's deferred group at a time
        self._peer_run = {}  # host: peer -> Lock, one runner of its receives at a time (they match in order)
        self._peer_thread = {}  # host: peer -> the background Thread running its receives

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
        On the host device deferred receives stay deferred (their peers may
        send after this); on a vendor device the deferred sends and
        receives run first, as one group."""
        if self._deferred and not self._eager:
            self._run_p2p()
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
        # Several tensors of one process (all_reduce_multigpu): each gets the
        # op over every tensor of every rank, as gloo and NCCL give.
        self._like("all_reduce", dense[1:], dense[0])
        for i, t in enumerate(dense[1:], 1):
            if t.shape != dense[0].shape:
                raise ValueError(f"{BACKEND}: all_reduce: tensor {i} has shape {tuple(t.shape)}, "
                                 f"tensor 0 {tuple(dense[0].shape)}")
        local = {_comm.SUM: torch.add, _comm.AVG: torch.add, _comm.PRODUCT: torch.mul,
                 _comm.MIN: torch.minimum, _comm.MAX: torch.maximum}[op]

        def issue():  # read the tensors when the call runs (after what is deferred before it)
            acc = dense[0].clone()
            for t in dense[1:]:
                acc = local(acc, t)
            self.comm.all_reduce(acc, op=_comm.SUM if op == _comm.AVG else op)
            if op == _comm.AVG:
                acc.div_(self.comm.size * len(dense), rounding_mode=None if acc.is_floating_point() or
                         acc.is_complex() else "trunc")
            for t in dense:
                t.copy_(acc)
        return self._work(issue, tensors, back)

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
        return self._work(lambda: self.comm.all_gather(src, flat), outs, unpack)

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
        """dist.gather (and gather_object): the root gets every rank's tensor
        (XcclGather, through one buffer of size tensors); output_tensors is
        [] off the root."""
        inp = self._one(input_tensors, "gather").contiguous()
        root, me, size = _opt(opts, "rootRank", 0), self.comm.rank, self.comm.size
        self.comm._root(root)
        if me != root:
            return self._work(lambda: self.comm.gather(inp, None, root=root), output_tensors)
        outs = self._list(self._one(output_tensors, "gather"), "gather", "output")
        self._like("gather", outs, inp)
        flat = torch.empty((size,) + tuple(inp.shape), dtype=inp.dtype, device=inp.device)

        def unpack():
            for i, o in enumerate(outs):
                o.copy_(flat[i].reshape(o.shape))
        return self._work(lambda: self.comm.gather(inp, flat, root=root), output_tensors, unpack)

    def scatter(self, output_tensors, input_tensors, opts=None):
        """dist.scatter (and scatter_object_list): rank r gets the root's r-th
        tensor (XcclScatter, through one buffer of size tensors);
        input_tensors is [] off the root."""
        out = self._one(output_tensors, "scatter")
        root, me, size = _opt(opts, "rootRank", 0), self.comm.rank, self.comm.size
        self.comm._root(root)
        (into,), back = self._dense([out])
        flat = None
        if me == root:
            ins = self._list(self._one(input_tensors, "scatter"), "scatter", "input")
            self._like("scatter", ins, out)
            flat = torch.stack([t.reshape(out.shape) for t in ins]) if out.dim() else torch.stack(list(ins))
        return self._work(lambda: self.comm.scatter(flat, into, root=root), output_tensors, back)

    def _list(self, ts, what, kind):
        if len(ts) != self.comm.size:
            raise ValueError(f"{BACKEND}: {what} wants {self.comm.size} {kind} tensors on the root, got {len(ts)}")
        return ts

    def barrier(self, opts=None):
        return self._work(self.comm.barrier, None)

    def send(self, tensors, dst, tag=0):
        """On the host device it runs now (a send never waits for its
        receive there); elsewhere it is deferred."""
        t = self._one(tensors, "send").contiguous()
        dst = self.comm._peer(dst)
        w = _P2PWork(self, tensors)
        if not self._eager:
            return self._defer(self.comm.send, t, dst, None, w)
        self.comm.send(t, dst)
        w._done = True
        return w

    def recv(self, tensors, src, tag=0):
        """Deferred (see the module's doc); a bad peer raises here, at the
        call."""
        (t,), back = self._dense([self._one(tensors, "recv")])
        src = self.comm._peer(src)
        return self._defer(self.comm.recv, t, src, back, _P2PWork(self, tensors, src))

    def _defer(self, call, t, peer, back, w):
        with self._recv_lock:
            self._deferred.append((call, t, peer, back, w))
        return w

    def _run_p2p(self):
        """A vendor device's deferred sends and receives, in order, as one
        group (the caller's thread)."""
        with self._recv_run:
            with self._recv_lock:
                pending, self._deferred = self._deferred, []
            if not pending:
                return
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

    def _run_peer(self, peer, until=None):
        """The host device's deferred receives from peer, one at a time in
        the order they were posted (they match its sends in that order):
        until until is done (a Work's wait(): it runs the receives before
        its own, or waits while another runner runs them, never for one
        posted after it), or until none is left (the background thread,
        which then says it is gone). Receives from other peers are other
        runners'."""
        with self._recv_lock:
            run = self._peer_run.setdefault(peer, threading.Lock())
        while until is None or not until._finished():
            # A waiter never blocks on run: the background thread may hold it
            # (again, the lock is not fair) for a later receive that comes
            # only after this waiter goes on. It polls its own Work instead.
            if not run.acquire(timeout=-1 if until is None else 0.005):
                continue
            try:
                with self._recv_lock:
                    if until is not None and until._finished():
                        return
                    i = next((k for k, e in enumerate(self._deferred) if e[2] == peer), None)
                    if i is None:
                        if until is None:
                            self._peer_thread.pop(peer, None)  # a receive posted now starts another
                        return
                    call, t, _, back, w = self._deferred.pop(i)
                try:
                    call(t, peer)
                    if back is not None:
                        back()
                except Exception as e:  # the Work's; an interrupt goes to the caller
                    w._error = e
                else:
                    w._done = True
            finally:
                run.release()

    def _background(self, peer):
        """Starts peer's deferred receives on a thread of their own, unless
        one runs them already."""
        with self._recv_lock:
            if peer in self._peer_thread:
                return
            th = threading.Thread(target=self._run_peer, args=(peer,), name=f"{BACKEND}-recv-{peer}", daemon=True)
            self._peer_thread[peer] = th
            th.start()

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError(f"{BACKEND}: recv from any source is not supported (name the source rank)")




class _P2PWork(dist.Work):
    """A send's or a receive's Work (ProcessGroupXccl.send, recv): wait()
    runs what is deferred (or waits for the background thread running it)
    and raises the error. On the host device is_completed() answers at
    once, and sets the deferred receives going in the background; on a
    vendor device it runs them (with the sends), as wait()."""

    def __init__(self, pg, result, src=None):
        super().__init__()
        self._pg, self._result, self._done, self._error, self._src = pg, result, False, None, src

    def _finished(self):
        return self._done or self._error is not None

    def wait(self, timeout=None):
        if not self._finished():
            if self._pg._eager:
                self._pg._run_peer(self._src, until=self)
            else:
                self._pg._run_p2p()
        if self._error is not None:
            raise self._error
        if not self._done:
            raise RuntimeError(f"{BACKEND}: the receive from rank {self._src} was never run")
        return True

    def is_completed(self):
        if self._finished():
            return True
        if not self._pg._eager:
            self.wait()
            return True
        self._pg._background(self._src)
        return self._done or self._error is not None

    def source_rank(self):
        if self._src is None:
            raise RuntimeError(f"{BACKEND}: source_rank() is a receive's")
        return self._src

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
