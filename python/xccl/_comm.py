"""xccl.Communicator: every collective of the C API over numpy arrays and
torch tensors, checked in Python before anything reaches C."""

import contextlib
import ctypes
import json
import operator
import os
import threading
import time
import weakref

from . import _lib
from ._lib import XcclError, check

# C_DataType (Paddle's numbering).
BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64 = 1, 2, 3, 4, 5, 6, 7, 8, 9
FLOAT16, FLOAT32, FLOAT64, BFLOAT16, COMPLEX64, COMPLEX128 = 10, 11, 12, 13, 14, 15

# C_CCLReduceOp.
SUM, AVG, MAX, MIN, PRODUCT = 0, 1, 2, 3, 4
PREMUL_SUM_FIRST, PREMUL_SUM_MAX = 64, 192  # Communicator.create_premul_sum's ops (XCCL_PREMUL_SUM_FIRST, _MAX)
_PREMUL_END = PREMUL_SUM_FIRST + PREMUL_SUM_MAX
SPLIT_NOCOLOR = -1  # Communicator.split: join no new communicator (XCCL_SPLIT_NOCOLOR)
_OPS = {"sum": SUM, "avg": AVG, "mean": AVG, "max": MAX, "min": MIN, "prod": PRODUCT, "product": PRODUCT}

_NUMPY = {"bool": BOOL, "uint8": UINT8, "uint16": UINT16, "uint32": UINT32, "uint64": UINT64, "int8": INT8,
          "int16": INT16, "int32": INT32, "int64": INT64, "float16": FLOAT16, "float32": FLOAT32,
          "float64": FLOAT64, "complex64": COMPLEX64, "complex128": COMPLEX128}
_TORCH = {"torch.bool": BOOL, "torch.uint8": UINT8, "torch.int8": INT8, "torch.int16": INT16, "torch.int32": INT32,
          "torch.int64": INT64, "torch.float16": FLOAT16, "torch.float32": FLOAT32, "torch.float64": FLOAT64,
          "torch.bfloat16": BFLOAT16, "torch.complex64": COMPLEX64, "torch.complex128": COMPLEX128,
          "torch.uint16": UINT16, "torch.uint32": UINT32, "torch.uint64": UINT64}


def _index(name, v):
    """v as an int (anything with __index__: numpy's integers too)."""
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(v).__name__}") from None


def reduce_op(op):
    """A C_CCLReduceOp from "sum"/"avg"/"max"/"min"/"prod", an int, or a
    torch.distributed.ReduceOp."""
    if type(op).__module__ == "numpy" and hasattr(op, "__index__"):
        op = operator.index(op)  # a numpy integer
    if type(op) is str:  # the common case first: one lookup
        code = _OPS.get(op)
        if code is not None:
            return code
    elif isinstance(op, int) and not isinstance(op, bool) and (0 <= op <= 4 or PREMUL_SUM_FIRST <= op < _PREMUL_END):
        return int(op)  # xccl's own code (no cache: torch's RedOpType equals ints of other meanings)
    op = getattr(op, "op", op)  # torch.distributed.ReduceOp wraps a RedOpType
    name = str(getattr(op, "name", op)).lower()
    if "." in name:  # ReduceOp.SUM, RedOpType.SUM
        name = name.rsplit(".", 1)[1]
    name = name.strip("<>").split(":")[0].strip()
    if name in _OPS:
        return _OPS[name]
    raise ValueError(f"unknown reduce op {op!r}: want sum, avg, max, min, prod or an op of create_premul_sum()")


# dtype objects -> C_DataType, one cache per framework (str() of a numpy
# dtype costs 2 us a call)
_dtype_caches = {"numpy": {}, "torch": {}}


def _dtype_of(dt, kind, table):
    cache = _dtype_caches[kind]
    v = cache.get(dt)
    if v is None:
        v = table.get(str(dt))
        if v is not None:
            cache[dt] = v
    return v


def _dtype_code(dt):
    """The C_DataType of a numpy or torch dtype, or of its name."""
    name = str(dt)
    code = _NUMPY.get(name) or _TORCH.get(name) or _TORCH.get("torch." + name)
    if code is None:
        raise TypeError(f"unknown dtype {dt!r}")
    return code


_PACK = {UINT8: "<B", UINT16: "<H", UINT32: "<I", UINT64: "<Q", INT8: "<b", INT16: "<h", INT32: "<i", INT64: "<q",
         FLOAT16: "<e", FLOAT32: "<f", FLOAT64: "<d"}


def _scalar_bytes(x, code):
    """x as one element of C_DataType code, little-endian."""
    import struct
    if code == BFLOAT16:  # float32 rounded to its top 16 bits, ties to even
        (u,) = struct.unpack("<I", struct.pack("<f", float(x)))
        if (u & 0x7FFFFFFF) > 0x7F800000:
            return struct.pack("<H", (u >> 16) | 0x40)
        return struct.pack("<H", ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
    fmt = _PACK.get(code)
    if fmt is None:
        raise TypeError(f"a pre-multiplied sum takes integer and floating types, not C_DataType {code}")
    try:
        return struct.pack(fmt, float(x) if fmt[1] in "fde" else operator.index(x))
    except (struct.error, OverflowError, TypeError) as e:
        raise ValueError(f"scalar {x!r} is not a value of C_DataType {code}: {e}") from None


class _Buf:
    """One checked buffer: pointer, element count, C_DataType, and the
    object kept alive while the call may still use it."""

    __slots__ = ("ptr", "count", "dtype", "obj", "nbytes", "kind", "stream")

    def __init__(self, obj, name, device):
        self.obj, self.stream = obj, None
        mod = type(obj).__module__
        if mod.startswith("torch"):
            self._torch(obj, name, device)
        elif mod.startswith("numpy") or hasattr(obj, "__array_interface__"):
            self.kind = "numpy"
            dt = _dtype_of(obj.dtype, "numpy", _NUMPY)
            if dt is None:
                raise TypeError(f"{name}: numpy dtype {obj.dtype} is not supported by xccl")
            if not obj.flags.c_contiguous:
                raise ValueError(f"{name}: the array is not C-contiguous (use numpy.ascontiguousarray)")
            if device != "host":
                raise ValueError(f"{name}: a numpy array is host memory, but this communicator's device is {device}")
            self.ptr, self.count, self.dtype = obj.__array_interface__["data"][0], obj.size, dt
            self.nbytes = obj.nbytes
        elif _is_tensor(obj):  # a subclass of torch.Tensor, from another module
            self._torch(obj, name, device)
        else:
            raise TypeError(f"{name}: want a numpy array or a torch tensor, got {type(obj).__name__}")

    def _torch(self, obj, name, device):
        self.kind = "torch"
        dt = _dtype_of(obj.dtype, "torch", _TORCH)
        if dt is None:
            raise TypeError(f"{name}: torch dtype {obj.dtype} is not supported by xccl")
        if obj.layout is not _strided():
            raise TypeError(f"{name}: a {obj.layout} tensor has no dense memory to send (call .to_dense() first)")
        if obj.is_conj() or obj.is_neg():  # lazy views: the memory holds the other values
            raise ValueError(f"{name}: a lazily conjugated or negated view (call .resolve_conj() or "
                             ".resolve_neg() first)")
        if not obj.is_contiguous():
            raise ValueError(f"{name}: the tensor is not contiguous (call .contiguous() first)")
        on_cpu = obj.is_cpu if hasattr(obj, "is_cpu") else obj.device.type == "cpu"
        if device == "host" and not on_cpu:
            raise ValueError(f"{name}: the tensor is on {obj.device}, but this communicator's device is "
                             "the host (CPU): move it with .cpu()")
        if device != "host" and on_cpu:
            raise ValueError(f"{name}: the tensor is in host memory, but this communicator's device is "
                             f"{device}: move it to the device first")
        self.ptr, self.count, self.dtype = obj.data_ptr(), obj.numel(), dt
        self.nbytes = obj.numel() * obj.element_size()
        if not on_cpu:
            self.stream = _torch_stream(obj)

    def writable(self, name):
        if self.kind == "numpy" and not self.obj.flags["WRITEABLE"]:
            raise ValueError(f"{name}: the array is read-only")
        return self


def _is_tensor(obj):
    """Whether obj is a torch tensor (a subclass's too) where torch is loaded."""
    import sys
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


_strided_layout = None


def _strided():
    global _strided_layout
    if _strided_layout is None:
        import torch
        _strided_layout = torch.strided
    return _strided_layout


def _stream_handle(stream):
    """A stream argument as the C call takes it: None (the default), an int
    or ctypes pointer, or a framework stream object (its .cuda_stream, as
    vLLM passes torch.cuda.Stream, or .stream)."""
    if stream is None or isinstance(stream, (int, ctypes.c_void_p)):
        return stream
    for attr in ("cuda_stream", "npu_stream", "stream", "value"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError(f"stream: want None, an int handle or a stream object with .cuda_stream, "
                    f"not {type(stream).__name__}")


def _overlaps(a, b):
    """Whether buffers a and b share a byte."""
    return a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes


def _block(call, part, whole, rank):
    """Refuses a part (all_gather's tensor, reduce_scatter's out) that
    overlaps whole unless it is exactly this rank's block of it (NCCL's in
    place)."""
    if part.nbytes and _overlaps(part, whole) and part.ptr != whole.ptr + rank * part.nbytes:
        raise ValueError(f"{call}: the rank's buffer overlaps the whole one without being block {rank} of it "
                         "(in place is only the rank's own block)")


_made_here = {}  # (id(store), key, rank, size) -> (store, count): for stores without add()


def _made_under(store, key, rank, size):
    """The key of the n-th communicator of size ranks made under key in
    store: key/size/n. Each rank counts, in the store itself (add), the
    communicators of that size it took rank's place in, so the ranks of one
    agree however their store objects were made, and a later communicator
    never reads an earlier one's id (its bootstrap closed: a wait until the
    timeout). Communicators under one key are made one at a time."""
    add = getattr(store, "add", None)
    if add is not None:
        n = int(add(f"{key}/made/{size}/{rank}", 1))
    else:
        _, n = _made_here.get((id(store), key, rank, size), (store, 0))
        n += 1
        _made_here[(id(store), key, rank, size)] = (store, n)
    return f"{key}/{size}/{n}"


def _overlap(call, a, b):
    """Refuses buffers that overlap but are not the same (in place)."""
    if a.ptr != b.ptr and _overlaps(a, b):
        raise ValueError(f"{call}: tensor and out overlap without being the same buffer")


def _torch_stream(t):
    """The framework's current stream for a device tensor (None: default)."""
    import torch
    kind = t.device.type
    if kind == "cuda":
        return torch.cuda.current_stream(t.device).cuda_stream
    mod = getattr(torch, kind, None)  # torch_npu, torch_mlu, ... register torch.<kind>
    cur = getattr(mod, "current_stream", None) if mod is not None else None
    if cur is None:
        return None
    s = cur(t.device)
    for attr in (f"{kind}_stream", "cuda_stream", "stream"):
        v = getattr(s, attr, None)
        if isinstance(v, int):
            return v
    return None


_groups = threading.local()  # the thread's open group(): depth, async_op Works to record at its end


class Work:
    """The handle of an async_op=True call: wait() blocks until the call is
    done (raising its error), is_completed() polls. Like torch's Work, it
    keeps the buffers alive until then."""

    def __init__(self, comm, event, bufs, grouped=False, stream=None):
        self._comm, self._event, self._bufs = comm, event, bufs
        self._stream, self._unrecorded = stream, grouped  # grouped: the event is recorded on stream at the group's end
        self._done, self._error = event is None, None

    def __del__(self):
        # Dropped unwaited: the call may still use the buffers, which the
        # communicator keeps until its event says done (or its destroy).
        try:
            if not self._done and self._event is not None:
                self._comm._orphan(self._event, self._bufs)
        except Exception:
            pass

    def _record(self):
        self._unrecorded = False
        st = self._comm._lib.XcclEventRecord(self._event, self._stream)
        if st != _lib.C_SUCCESS:
            self._finish(st, "XcclEventRecord")

    def _check_recorded(self):
        if self._unrecorded:
            raise RuntimeError("the call is in an open group: it runs at the group's end (wait after it)")

    def is_completed(self):
        self._check_recorded()
        if self._done:
            return True
        st = self._comm._lib.XcclEventQuery(self._event)
        if st == _lib.C_FAILED:
            return False
        self._finish(st, "XcclEventQuery")
        return True

    def wait(self, timeout=None):
        """Blocks until the call is done and raises its error (at every
        wait of a failed call). timeout (seconds or a timedelta; 0 or None:
        none): raises TimeoutError if it is not done by then, the call going
        on. Where the device's event query blocks (ascend, kunlun, mlu
        without cnrtQueryNotifier) it cannot cut the wait short."""
        self._check_recorded()
        secs = None if timeout is None else \
            timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        if not self._done and secs:  # 0: none, as torch's
            end, nap = time.monotonic() + secs, 1e-5
            while not self.is_completed():
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the call was not done within {secs:g} s")
                time.sleep(min(nap, left))
                nap = min(nap * 2, 0.01)
        if not self._done:
            self._finish(self._comm._lib.XcclEventSynchronize(self._event), "XcclEventSynchronize")
        if self._error is not None:
            raise self._error
        return True

    def _finish(self, st, call):
        ev, self._event, self._done, self._bufs = self._event, None, True, None
        self._comm._lib.XcclEventDestroy(ev)
        try:
            check(call, st)
            if not self._comm._closed:  # a destroyed one waited for its work: the event said how it went
                self._comm._raise_async()
        except Exception as e:
            self._error = e
            raise

    def result(self):
        self.wait()
        return None


class Communicator:
    """A communicator of size ranks; this process is rank.

    Make one from (rank, size, unique_id) where rank 0's get_unique_id()
    bytes reached every rank, or with from_store / from_group / from_env.
    device is the xccl device ("host", "nvidia", "ascend", ..., or "auto"):
    XCCL_DEVICE, read when the library loads, so it must agree with the
    first communicator of the process."""

    def __init__(self, rank, size, unique_id, device=None, library=None, timeout=None):
        if device:
            _select_device(device)
        self._lib = _lib.load(library)
        if not isinstance(unique_id, (bytes, bytearray)):
            raise TypeError("unique_id: want bytes (rank 0's xccl.get_unique_id())")
        rank, size = _index("rank", rank), _index("size", size)
        if not (0 < size < 1 << 31):
            raise ValueError(f"size {size} out of range (1 to {(1 << 31) - 1} ranks)")
        if not (0 <= rank < size):
            raise ValueError(f"rank {rank} out of range for {size} ranks")
        raw = ctypes.create_string_buffer(bytes(unique_id), len(unique_id))
        rid = _lib.RootId(len(unique_id), ctypes.cast(raw, ctypes.c_void_p))
        comm = ctypes.c_void_p()
        if timeout is None:
            check("XcclCommInitRank", self._lib.XcclCommInitRank(size, ctypes.byref(rid), rank, ctypes.byref(comm)))
        else:  # seconds: the init's, and every later operation's on the host engine
            cfg = _lib.Config(ctypes.sizeof(_lib.Config), float(timeout))
            check("XcclCommInitRankConfig", self._lib.XcclCommInitRankConfig(size, ctypes.byref(rid), rank,
                                                                             ctypes.byref(cfg), ctypes.byref(comm)))
        self._setup(comm, rank, size)

    @classmethod
    def from_env(cls, device=None, library=None):
        """Joins the job this process was started in (xcclrun, mpirun, srun,
        torchrun): XcclCommInitFromEnv."""
        if device:
            _select_device(device)
        self = cls.__new__(cls)
        self._lib = _lib.load(library)
        comm, r, n, lr = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        check("XcclCommInitFromEnv", self._lib.XcclCommInitFromEnv(ctypes.byref(comm), ctypes.byref(r),
                                                                   ctypes.byref(n), ctypes.byref(lr)))
        self._setup(comm, r.value, n.value)
        self.local_rank = lr.value
        return self

    @classmethod
    def from_store(cls, store, rank, size, key="xccl/unique_id", device=None, library=None, timeout=None):
        """Rank 0 makes the id and sets it in a torch store (TCPStore,
        FileStore, a prefix store); the others wait for it there. timeout
        (seconds) bounds the init and every later operation."""
        if device:
            _select_device(device)
        key = _made_under(store, key, rank, size)
        if rank == 0:
            uid = get_unique_id(library)
            store.set(key, uid)
        else:
            store.wait([key])
            uid = store.get(key)
        return cls(rank, size, bytes(uid), library=library, timeout=timeout)

    @classmethod
    def from_group(cls, group=None, device=None, library=None):
        """Over a torch CPU process group (gloo): rank 0 of the group makes
        the id and broadcasts it; ranks are the group's."""
        import torch.distributed as dist
        if device:
            _select_device(device)
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise ValueError(f"from_group: this process (global rank {dist.get_rank()}) is not in the group")
        box = [get_unique_id(library) if rank == 0 else None]
        src = 0 if group is None else dist.distributed_c10d._get_global_rank(group, 0) \
            if hasattr(dist.distributed_c10d, "_get_global_rank") else dist.get_global_rank(group, 0)
        dist.broadcast_object_list(box, src=src, group=group)
        return cls(rank, size, box[0], library=library)

    def split(self, color, key=None, timeout=None):
        """As ncclCommSplit: every rank calls it; the ranks passing the same
        color (>= 0) form a new Communicator on their devices, ranked by key
        (default: this rank), then by their rank here. color None or
        SPLIT_NOCOLOR (-1) joins none and returns None. timeout (seconds):
        the new communicator's; by default this one's."""
        if self._closed:
            raise XcclError("XcclCommSplit", _lib.C_ERROR, "the communicator is destroyed")
        color = SPLIT_NOCOLOR if color is None else int(color)
        key = self.rank if key is None else int(key)
        cfg = None if timeout is None else ctypes.byref(_lib.Config(ctypes.sizeof(_lib.Config), float(timeout)))
        comm = ctypes.c_void_p()
        check("XcclCommSplit", self._lib.XcclCommSplit(self._comm, color, key, ctypes.byref(comm), cfg))
        if not comm.value:
            return None
        new = type(self).__new__(type(self))
        new._lib = self._lib
        r, n = ctypes.c_int(), ctypes.c_int()
        try:
            check("XcclCommUserRank", self._lib.XcclCommUserRank(comm, ctypes.byref(r)))
            check("XcclCommCount", self._lib.XcclCommCount(comm, ctypes.byref(n)))
        except XcclError:
            self._lib.XcclDestroyComm(comm)
            raise
        new._setup(comm, r.value, n.value)
        return new

    def _setup(self, comm, rank, size):
        self._comm, self.rank, self.size = comm, rank, size
        self.local_rank = rank
        self._stream = None
        self._registered = {}  # register()'s memory, kept alive while registered
        self._premul = {}  # create_premul_sum()'s device scalars, kept alive until destroy_op()
        self._orphans = []  # (event, buffers) of Works dropped before their call was done
        self._orphans_mu = threading.RLock()  # a Work's __del__ may run inside _reap (a collection)
        self._works = []  # weak references to the async_op Works on its own stream, in issue order, for destroy()
        self._closed = False
        stats = json.loads(self._stats_text())
        self.device = stats.get("device", "host")
        global _process_device
        if _process_device is None and self.device != "mixed":
            _process_device = self.device

    # ---- life ----
    def destroy(self):
        """Releases the communicator (waiting for its async work)."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        if self._stream is not None:
            # The async work on the communicator's own stream ends here: each
            # Work still pending takes its own outcome from its event, in
            # issue order (an event reports the first failure at or before
            # it), before the stream goes (an event left on a destroyed
            # stream says done).
            for ref in self._works:
                w = ref()
                if w is not None and not w._done and not w._unrecorded:
                    try:
                        w._finish(self._lib.XcclEventSynchronize(w._event), "XcclEventSynchronize")
                    except XcclError:
                        pass  # kept on the Work: its wait() raises it
            self._works = []
            self._lib.XcclStreamSynchronize(self._stream)
            self._lib.XcclStreamDestroy(self._stream)
            self._stream = None
        check("XcclDestroyComm", self._lib.XcclDestroyComm(self._comm))
        self._registered.clear()
        self._premul.clear()
        with self._orphans_mu:  # their work is done: the destroy waited for it
            orphans, self._orphans = self._orphans, []
        for ev, _ in orphans:
            self._lib.XcclEventDestroy(ev)

    def _keep_until_done(self, bufs, stream):
        """Keeps a grouped call's buffers until the work on stream (its, at
        the group's end) is done."""
        if self._closed:
            return
        ev = ctypes.c_void_p()
        if self._lib.XcclEventCreate(ctypes.byref(ev)) != _lib.C_SUCCESS:
            self._lib.XcclStreamSynchronize(stream)
            return
        if self._lib.XcclEventRecord(ev, stream) != _lib.C_SUCCESS:
            self._lib.XcclEventDestroy(ev)
            self._lib.XcclStreamSynchronize(stream)
            return
        self._orphan(ev, bufs)

    def _orphan(self, ev, bufs):
        """Keeps a dropped Work's buffers until its event says done."""
        if self._closed:
            self._lib.XcclEventDestroy(ev)
            return
        with self._orphans_mu:
            self._orphans.append((ev, bufs))

    def _reap(self):
        """Lets go of the dropped Works' buffers whose calls are done."""
        with self._orphans_mu:
            pending, self._orphans = self._orphans, []  # Works dropped meanwhile go to the new list
            keep = []
            for ev, bufs in pending:
                if self._lib.XcclEventQuery(ev) == _lib.C_FAILED:  # not ready
                    keep.append((ev, bufs))
                else:
                    self._lib.XcclEventDestroy(ev)
            self._orphans.extend(keep)

    close = destroy

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass

    def finalize(self):
        """XcclCommFinalize (ncclCommFinalize): later calls fail, destroy()
        is left; on the host device every operation issued (async_op too)
        is done when it returns."""
        check("XcclCommFinalize", self._lib.XcclCommFinalize(self._comm))

    def register(self, tensor):
        """XcclCommRegister (ncclCommRegister) of the tensor's memory: a
        handle for deregister(); the library's registration where it has
        one (NCCL), else recorded only."""
        b = self._buf(tensor, "tensor")
        h = self.register_raw(b.ptr, b.nbytes)
        self._registered[h] = tensor  # alive until deregister() or destroy()
        return h

    def register_raw(self, ptr, size):
        """XcclCommRegister of size bytes at address ptr: a handle for
        deregister(); the memory is the caller's to keep alive until then."""
        h = ctypes.c_void_p()
        check("XcclCommRegister", self._lib.XcclCommRegister(self._comm, ptr, size, ctypes.byref(h)))
        return h.value

    def deregister(self, handle):
        """XcclCommDeregister of a handle register() gave."""
        check("XcclCommDeregister", self._lib.XcclCommDeregister(self._comm, handle))
        self._registered.pop(handle, None)

    def create_premul_sum(self, scalar, dtype=None):
        """XcclRedOpCreatePreMulSum (ncclRedOpCreatePreMulSum): a reduce op
        (an int for op=) of this communicator's all_reduce, reduce and
        reduce_scatter of one dtype that multiplies each rank's input by
        that rank's scalar, then sums the products. scalar: a one-element
        array or tensor on the communicator's device, read when each call
        runs (kept alive until destroy_op), or a number with its dtype
        (e.g. "float32", numpy's or torch's), read now. destroy_op() frees
        the op; destroy() frees them all."""
        mod = type(scalar).__module__
        if mod.startswith("torch") or (mod == "numpy" and getattr(scalar, "ndim", 0) > 0) or \
                type(scalar).__name__ == "ndarray":  # an array or tensor (0-d too): device memory
            b = self._buf(scalar, "scalar")
            if b.count != 1:
                raise ValueError(f"scalar: {b.count} elements, want one")
            if dtype is not None and _dtype_code(dtype) != b.dtype:
                raise TypeError(f"scalar: its dtype is {scalar.dtype}, not {dtype}")
            code, ptr, keep, residence = b.dtype, b.ptr, scalar, 0
        else:
            if dtype is None:
                dtype = getattr(scalar, "dtype", None)  # a numpy scalar
            if dtype is None:
                raise TypeError("create_premul_sum: a number needs its dtype (e.g. dtype=\"float32\")")
            code = _dtype_code(dtype)
            raw = _scalar_bytes(scalar, code)
            keep = ctypes.create_string_buffer(raw, 16)
            ptr, residence = ctypes.addressof(keep), 1
        op = ctypes.c_int()
        check("XcclRedOpCreatePreMulSum", self._lib.XcclRedOpCreatePreMulSum(
            ctypes.byref(op), ptr, code, residence, self._comm))
        if residence == 0:
            self._premul[op.value] = keep
        return op.value

    def destroy_op(self, op):
        """XcclRedOpDestroy (ncclRedOpDestroy) of an op create_premul_sum()
        gave: calls issued with it (async_op too) keep it."""
        check("XcclRedOpDestroy", self._lib.XcclRedOpDestroy(int(op), self._comm))
        self._premul.pop(int(op), None)

    @property
    def device_id(self):
        """The device index the communicator was made on (XcclCommDevice)."""
        d = ctypes.c_int()
        check("XcclCommDevice", self._lib.XcclCommDevice(self._comm, ctypes.byref(d)))
        return d.value

    def abort(self):
        """Breaks the communicator at once: pending and later calls fail."""
        check("XcclCommAbort", self._lib.XcclCommAbort(self._comm))

    def set_timeout(self, seconds):
        check("XcclCommSetTimeout", self._lib.XcclCommSetTimeout(self._comm, float(seconds)))

    def _raise_async(self):
        st = ctypes.c_int()
        check("XcclCommGetAsyncError", self._lib.XcclCommGetAsyncError(self._comm, ctypes.byref(st)))
        if st.value != _lib.C_SUCCESS:
            msg = self._lib.XcclGetLastError()  # XcclCommGetAsyncError leaves the error's text there
            raise XcclError("async error", st.value, msg.decode(errors="replace") if msg else "the communicator is broken")

    # ---- stats ----
    def _stats_text(self):
        n = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(n)
            st = self._lib.XcclCommGetStats(self._comm, buf, n)
            if st == _lib.C_SUCCESS:
                return buf.value.decode()
            if n >= 1 << 24:
                check("XcclCommGetStats", st)
            n *= 4

    def enable_stats(self, on=True):
        check("XcclCommEnableStats", self._lib.XcclCommEnableStats(self._comm, 1 if on else 0))

    def get_stats(self):
        """The communicator's statistics as a dict (XcclCommGetStats)."""
        return json.loads(self._stats_text())

    def capabilities(self):
        buf = ctypes.create_string_buffer(1 << 16)
        check("XcclCommGetCapabilities", self._lib.XcclCommGetCapabilities(self._comm, buf, len(buf)))
        return buf.value.decode()

    # ---- plumbing ----
    # ---- memory ----
    def empty(self, shape, dtype="float32"):
        """A numpy array of shape and dtype in XcclMemAlloc's memory: on the
        host device shared with the ranks of this machine, so collectives on
        it (fused ones too) copy once between them, where numpy's own memory
        is private to the process. torch.from_numpy(a) shares it. Freed when
        the array and every view of it are gone."""
        import numpy as np
        if self.device != "host":
            raise ValueError(f"empty: a numpy array is host memory, but this communicator's device is {self.device}")
        dt = np.dtype(dtype)
        if str(dt) not in _NUMPY:
            raise TypeError(f"empty: numpy dtype {dt} is not supported by xccl")
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        count = 1
        for d in shape:
            if int(d) < 0:
                raise ValueError(f"empty: negative dimension in {shape}")
            count *= int(d)
        nbytes = max(count * dt.itemsize, 1)
        ptr = ctypes.c_void_p()
        check("XcclMemAlloc", self._lib.XcclMemAlloc(ctypes.byref(ptr), nbytes))
        raw = (ctypes.c_char * nbytes).from_address(ptr.value)
        # Freed when no array holds raw; not at exit, where work still queued
        # on a stream or a torch tensor's deleter may yet touch it.
        weakref.finalize(raw, self._lib.XcclMemFree, ptr.value).atexit = False
        return np.frombuffer(raw, dtype=dt, count=count).reshape(shape)

    def _buf(self, obj, name, writable=False):
        b = _Buf(obj, name, self.device)
        return b.writable(name) if writable else b

    def _issue(self, call, fn, bufs, async_op, stream, result=None, op=None):
        """Runs fn(stream) on the right stream: the caller's, the framework's
        current one for device tensors, or (async on the host) the
        communicator's own; returns result (the call's output, as pynccl's
        collectives return theirs), or with async_op a Work."""
        if self._closed:
            raise XcclError(call, _lib.C_ERROR, "the communicator is destroyed")
        if self._orphans:
            self._reap()
        stream = self._stream_for(bufs, async_op, stream)
        st = fn(stream)
        if st:
            check(call, st)
        if not async_op:
            if getattr(_groups, "depth", 0):  # it runs at XcclGroupEnd: its buffers (temporaries too) live until then
                _groups.keep.append((self, bufs, stream))
            return result
        keep = self._premul.get(op) if op is not None and op >= PREMUL_SUM_FIRST else None
        if keep is not None:
            bufs = bufs + [keep]  # a device scalar the call reads when it runs: destroy_op() may come first
        ev = ctypes.c_void_p()
        check("XcclEventCreate", self._lib.XcclEventCreate(ctypes.byref(ev)))
        if getattr(_groups, "depth", 0):  # the call runs at XcclGroupEnd: group() records the event then
            w = Work(self, ev, bufs, grouped=True, stream=stream)
            _groups.pending.append(w)
        else:
            st = self._lib.XcclEventRecord(ev, stream)
            if st != _lib.C_SUCCESS:
                self._lib.XcclEventDestroy(ev)
                check("XcclEventRecord", st)
            w = Work(self, ev, bufs)
        if stream is self._stream:
            if len(self._works) >= 1024:  # those done or gone leave
                self._works = [r for r in self._works if r() is not None and not r()._done]
            self._works.append(weakref.ref(w))
        return w

    def _stream_for(self, bufs, async_op, stream):
        """The stream a call runs on: the caller's, the framework's current
        one for device tensors, or (async on the host) the communicator's
        own; None: the default (synchronous on the host)."""
        stream = _stream_handle(stream)
        if stream is None:
            for b in bufs:
                if b.stream is not None:
                    stream = b.stream
                    break
        if stream is None and async_op:
            if self._stream is None:
                s = ctypes.c_void_p()
                check("XcclStreamCreate", self._lib.XcclStreamCreate(ctypes.byref(s)))
                self._stream = s
            stream = self._stream
        return stream

    @staticmethod
    def _same_type(call, *bufs):
        for b in bufs[1:]:
            if b.dtype != bufs[0].dtype:
                raise TypeError(f"{call}: the buffers' data types differ ({bufs[0].obj.dtype} and {b.obj.dtype})")

    def _root(self, root):
        root = _index("root", root)
        if not (0 <= root < self.size):
            raise ValueError(f"root {root} out of range for {self.size} ranks")
        return root

    def _peer(self, peer):
        peer = _index("peer", peer)
        if not (0 <= peer < self.size):
            raise ValueError(f"peer {peer} out of range for {self.size} ranks")
        return peer

    # ---- collectives ----
    def all_reduce(self, tensor, out=None, op="sum", async_op=False, stream=None):
        """out (default: tensor, in place) = op over every rank's tensor."""
        src = self._buf(tensor, "tensor", writable=out is None)
        dst = self._buf(out, "out", writable=True) if out is not None else src
        self._same_type("all_reduce", src, dst)
        if dst.count != src.count:
            raise ValueError(f"all_reduce: out has {dst.count} elements, tensor {src.count}")
        _overlap("all_reduce", src, dst)
        o = reduce_op(op)
        return self._issue("XcclAllReduce", lambda s: self._lib.XcclAllReduce(
            src.ptr, dst.ptr, src.count, src.dtype, o, self._comm, s), [src, dst], async_op, stream,
            tensor if out is None else out, op=o)

    def broadcast(self, tensor, root=0, async_op=False, stream=None):
        b = self._buf(tensor, "tensor", writable=True)
        r = self._root(root)
        return self._issue("XcclBroadcast", lambda s: self._lib.XcclBroadcast(
            b.ptr, b.count, b.dtype, r, self._comm, s), [b], async_op, stream, tensor)

    def reduce(self, tensor, out=None, op="sum", root=0, async_op=False, stream=None):
        """On root, out (default: tensor) = op over every rank's tensor."""
        src = self._buf(tensor, "tensor", writable=out is None)
        dst = self._buf(out, "out", writable=True) if out is not None else src
        self._same_type("reduce", src, dst)
        if dst.count != src.count:
            raise ValueError(f"reduce: out has {dst.count} elements, tensor {src.count}")
        _overlap("reduce", src, dst)
        r, o = self._root(root), reduce_op(op)
        return self._issue("XcclReduce", lambda s: self._lib.XcclReduce(
            src.ptr, dst.ptr, src.count, src.dtype, o, r, self._comm, s), [src, dst], async_op, stream,
            tensor if out is None else out, op=o)

    def all_gather(self, tensor, out, async_op=False, stream=None):
        """out holds size × tensor, rank r's at r × tensor.numel()."""
        src, dst = self._buf(tensor, "tensor"), self._buf(out, "out", writable=True)
        self._same_type("all_gather", src, dst)
        if dst.count != src.count * self.size:
            raise ValueError(f"all_gather: out has {dst.count} elements, want {self.size} × {src.count}")
        _block("all_gather", src, dst, self.rank)
        return self._issue("XcclAllGather", lambda s: self._lib.XcclAllGather(
            src.ptr, dst.ptr, src.count, src.dtype, self._comm, s), [src, dst], async_op, stream, out)

    def reduce_scatter(self, tensor, out, op="sum", async_op=False, stream=None):
        """out = op over every rank's block r of tensor (size × out)."""
        src, dst = self._buf(tensor, "tensor"), self._buf(out, "out", writable=True)
        self._same_type("reduce_scatter", src, dst)
        if src.count != dst.count * self.size:
            raise ValueError(f"reduce_scatter: tensor has {src.count} elements, want {self.size} × {dst.count}")
        _block("reduce_scatter", dst, src, self.rank)
        o = reduce_op(op)
        return self._issue("XcclReduceScatter", lambda s: self._lib.XcclReduceScatter(
            src.ptr, dst.ptr, dst.count, src.dtype, o, self._comm, s), [src, dst], async_op, stream, out, op=o)

    def _rows(self, call, tensor, out, sizes, mine):
        """Checks a v-collective's buffers: sizes (one per rank) cut the
        first dimension of the whole buffer (all_gatherv's out,
        reduce_scatterv's tensor), the part (the other) has sizes[rank]
        rows of the same shape. Returns the checked buffers (part, whole)
        and each rank's element offset and count."""
        part_obj, whole_obj = (tensor, out) if mine == "tensor" else (out, tensor)
        part = self._buf(part_obj, mine, writable=mine == "out")
        whole = self._buf(whole_obj, "out" if mine == "tensor" else "tensor", writable=mine == "tensor")
        self._same_type(call, *((part, whole) if mine == "tensor" else (whole, part)))
        sizes = [_index("sizes[]", k) for k in sizes]
        if len(sizes) != self.size or any(k < 0 for k in sizes):
            raise ValueError(f"{call}: want {self.size} sizes of 0 or more rows, got {sizes}")
        ps, ws = tuple(part_obj.shape), tuple(whole_obj.shape)
        if not ws or not ps:
            raise ValueError(f"{call}: a 0-d buffer has no first dimension to cut")
        if ws[0] != sum(sizes) or ps[0] != sizes[self.rank] or ps[1:] != ws[1:]:
            raise ValueError(f"{call}: sizes {sizes} want {'x'.join(map(str, (sum(sizes),) + ws[1:]))} in the whole "
                             f"buffer and {'x'.join(map(str, (sizes[self.rank],) + ws[1:]))} in the rank's, got "
                             f"{'x'.join(map(str, ws))} and {'x'.join(map(str, ps))}")
        row = 1
        for d in ws[1:]:
            row *= int(d)
        offs, at = [], 0
        for k in sizes:
            offs.append(at)
            at += k * row
        if part.nbytes and _overlaps(part, whole):
            esize = whole.nbytes // whole.count
            if part.ptr != whole.ptr + offs[self.rank] * esize:
                raise ValueError(f"{call}: the rank's buffer overlaps the whole one without being its own rows "
                                 "(in place is only the rank's own rows)")
        return part, whole, offs, [k * row for k in sizes]

    def all_gatherv(self, tensor, out, sizes, async_op=False, stream=None):
        """all_gather with a row count per rank (pynccl's all_gatherv):
        out's first dimension is sum(sizes), rank r's tensor (sizes[r]
        rows) lands at rows sum(sizes[:r]). One XcclAllToAll: the tensor to
        every rank, each rank's rows from it."""
        src, dst, offs, counts = self._rows("all_gatherv", tensor, out, sizes, "tensor")
        n, esize = self.size, (dst.nbytes // dst.count if dst.count else 1)
        sp, sc = (ctypes.c_void_p * n)(*([src.ptr] * n)), (ctypes.c_size_t * n)(*([src.count] * n))
        rp = (ctypes.c_void_p * n)(*[dst.ptr + o * esize for o in offs])
        rc, dts = (ctypes.c_size_t * n)(*counts), (ctypes.c_int * n)(*([src.dtype] * n))
        return self._issue("XcclAllToAll", lambda s: self._lib.XcclAllToAll(
            sp, sc, dts, rp, rc, dts, self.rank, n, self._comm, s), [src, dst], async_op, stream, out)

    def reduce_scatterv(self, tensor, out, sizes, op="sum", async_op=False, stream=None):
        """reduce_scatter with a row count per rank (pynccl's
        reduce_scatterv): tensor's first dimension is sum(sizes), rank r's
        out (sizes[r] rows) gets op over every rank's rows sum(sizes[:r])
        on. A group of XcclReduce calls, one rooted at each rank."""
        dst, src, offs, counts = self._rows("reduce_scatterv", tensor, out, sizes, "out")
        o, esize = reduce_op(op), (src.nbytes // src.count if src.count else 1)
        stream = self._stream_for([src, dst], async_op, stream)
        last = None
        with self.group():
            for r in range(self.size):
                at = src.ptr + offs[r] * esize  # out is read only at the root (NCCL's contract)
                last = self._issue("XcclReduce", lambda s, at=at, r=r, k=counts[r]: self._lib.XcclReduce(
                    at, dst.ptr, k, src.dtype, o, r, self._comm, s), [src, dst], async_op and r == self.size - 1,
                    stream, out, op=o)
        return last

    def gather(self, tensor, out=None, root=0, async_op=False, stream=None):
        """As ncclGather: on root, out (size × tensor) gets rank r's tensor at
        r × tensor.numel(); out is not used (may be None) elsewhere."""
        r = self._root(root)
        src = self._buf(tensor, "tensor")
        bufs, ptr = [src], None
        if self.rank == r:
            dst = self._whole("gather", out, "out", src, written=True)
            bufs, ptr = [src, dst], dst.ptr
        return self._issue("XcclGather", lambda s: self._lib.XcclGather(
            src.ptr, ptr, src.count, src.dtype, r, self._comm, s), bufs, async_op, stream, out)

    def scatter(self, tensor, out, root=0, async_op=False, stream=None):
        """As ncclScatter: rank r's out gets block r of the root's tensor
        (size × out); tensor is not used (may be None) off the root."""
        r = self._root(root)
        dst = self._buf(out, "out", writable=True)
        bufs, ptr = [dst], None
        if self.rank == r:
            src = self._whole("scatter", tensor, "tensor", dst, written=False)
            bufs, ptr = [src, dst], src.ptr
        return self._issue("XcclScatter", lambda s: self._lib.XcclScatter(
            ptr, dst.ptr, dst.count, dst.dtype, r, self._comm, s), bufs, async_op, stream, out)

    def _whole(self, call, obj, name, each, written):
        """The root's buffer of size × each for gather (out, written) or
        scatter (tensor, read), checked against each rank's buffer."""
        if obj is None:
            raise ValueError(f"{call}: the root needs {name}")
        b = self._buf(obj, name, writable=written)
        self._same_type(call, *((each, b) if written else (b, each)))  # the send buffer first
        if b.count != each.count * self.size:
            raise ValueError(f"{call}: {name} has {b.count} elements, want {self.size} × {each.count}")
        return b

    def all_to_all(self, inputs, outputs, async_op=False, stream=None):
        """inputs[p] goes to rank p, outputs[p] comes from rank p (lists of
        size buffers; sizes may differ per peer, the self entry included)."""
        if len(inputs) != self.size or len(outputs) != self.size:
            raise ValueError(f"all_to_all: want {self.size} inputs and outputs, got {len(inputs)} and {len(outputs)}")
        ins = [self._buf(x, f"inputs[{i}]") for i, x in enumerate(inputs)]
        outs = [self._buf(x, f"outputs[{i}]", writable=True) for i, x in enumerate(outputs)]
        n = self.size
        sp, sc, sd = (ctypes.c_void_p * n)(*[b.ptr for b in ins]), (ctypes.c_size_t * n)(*[b.count for b in ins]), \
            (ctypes.c_int * n)(*[b.dtype for b in ins])
        rp, rc, rd = (ctypes.c_void_p * n)(*[b.ptr for b in outs]), (ctypes.c_size_t * n)(*[b.count for b in outs]), \
            (ctypes.c_int * n)(*[b.dtype for b in outs])
        return self._issue("XcclAllToAll", lambda s: self._lib.XcclAllToAll(
            sp, sc, sd, rp, rc, rd, self.rank, n, self._comm, s), ins + outs, async_op, stream, outputs)

    def all_to_all_single(self, tensor, out, in_splits=None, out_splits=None, async_op=False, stream=None):
        """torch's all_to_all_single: tensor cut into size blocks (or
        in_splits rows each), block p to rank p; out likewise."""
        def cut(t, splits, name):
            if len(t.shape) == 0:
                raise ValueError(f"all_to_all_single: {name} is 0-d: it needs a first dimension to cut")
            if splits is None:
                if t.shape[0] % self.size:
                    raise ValueError(f"all_to_all_single: {name}'s first dimension {t.shape[0]} is not a multiple of "
                                     f"{self.size}; give the splits")
                splits = [t.shape[0] // self.size] * self.size
            if len(splits) != self.size or sum(splits) != t.shape[0]:
                raise ValueError(f"all_to_all_single: {name} splits {list(splits)} do not cut {t.shape[0]} rows "
                                 f"into {self.size}")
            parts, at = [], 0
            for k in splits:
                parts.append(t[at:at + k])
                at += k
            return parts
        self._buf(tensor, "tensor")
        self._buf(out, "out", writable=True)
        w = self.all_to_all(cut(tensor, in_splits, "tensor"), cut(out, out_splits, "out"), async_op, stream)
        return w if async_op else out

    def send(self, tensor, peer, async_op=False, stream=None):
        b, p = self._buf(tensor, "tensor"), self._peer(peer)
        return self._issue("XcclSend", lambda s: self._lib.XcclSend(
            b.ptr, b.count, b.dtype, p, self._comm, s), [b], async_op, stream)

    def recv(self, tensor, peer, async_op=False, stream=None):
        b, p = self._buf(tensor, "tensor", writable=True), self._peer(peer)
        return self._issue("XcclRecv", lambda s: self._lib.XcclRecv(
            b.ptr, b.count, b.dtype, p, self._comm, s), [b], async_op, stream, tensor)

    @contextlib.contextmanager
    def group(self):
        """Calls inside run as one unit at the end (XcclGroupStart/End):
        sends and receives in any order never deadlock. The group is the
        thread's, as XcclGroupStart's is: calls of other communicators on
        this thread join it. An async_op call's Work inside is done once the
        group's work is (its event is recorded after XcclGroupEnd); waiting
        for it inside the group is an error."""
        check("XcclGroupStart", self._lib.XcclGroupStart())
        if not getattr(_groups, "depth", 0):
            _groups.depth, _groups.pending, _groups.keep = 0, [], []
        _groups.depth += 1
        ok = False
        try:
            yield self
            ok = True
        finally:
            st = self._lib.XcclGroupEnd()
            _groups.depth -= 1
            first = None
            if not _groups.depth:
                pending, _groups.pending = _groups.pending, []
                keep, _groups.keep = _groups.keep, []
                for comm, bufs, stream in keep:
                    if stream is not None:  # queued on a stream: kept until it has run
                        comm._keep_until_done(bufs, stream)
                for w in pending:  # after the group's work on its stream
                    try:
                        w._record()
                    except XcclError as e:
                        first = first or e
            if ok:
                check("XcclGroupEnd", st)
                if first is not None:
                    raise first

    def group_start(self):
        """XcclGroupStart, as pynccl's group_start(): group_end() closes it
        (the group() context manager pairs them)."""
        if not hasattr(self, "_open_groups"):
            self._open_groups = []
        cm = self.group()
        cm.__enter__()
        self._open_groups.append(cm)

    def group_end(self):
        """XcclGroupEnd of the group group_start() opened: its calls run."""
        if not getattr(self, "_open_groups", None):
            raise RuntimeError("group_end: no group_start() is open on this communicator")
        self._open_groups.pop().__exit__(None, None, None)

    @property
    def world_size(self):
        """size, by pynccl's name."""
        return self.size

    def barrier(self):
        """Returns once every rank has called it."""
        import array
        a = array.array("f", [0.0])
        addr, _ = a.buffer_info()
        if self.device == "host":
            check("XcclAllReduce", self._lib.XcclAllReduce(addr, addr, 1, FLOAT32, SUM, self._comm, None))
        else:
            self._device_barrier()

    def _device_barrier(self):
        import torch
        t = torch.zeros(1, dtype=torch.float32, device=self._torch_device())
        self.all_reduce(t)
        if t.device.type == "cuda":
            torch.cuda.synchronize(t.device)

    def _torch_device(self):
        import torch
        for kind in ("cuda", "npu", "mlu", "xpu"):
            mod = getattr(torch, kind, None)
            if mod is not None and getattr(mod, "is_available", lambda: False)():
                return kind
        raise XcclError("barrier", _lib.C_ERROR, f"no torch device for xccl device {self.device}")

    def fused_all_reduce(self, tensors, outs=None, op="sum", async_op=False, stream=None):
        """Every tensor all-reduced (in place, or into outs) in one call
        (XcclAllReduceFused): one data type for all."""
        if not tensors:
            return None
        srcs = [self._buf(t, f"tensors[{i}]", writable=outs is None) for i, t in enumerate(tensors)]
        dsts = srcs if outs is None else [self._buf(t, f"outs[{i}]", writable=True) for i, t in enumerate(outs)]
        if len(dsts) != len(srcs):
            raise ValueError(f"fused_all_reduce: {len(srcs)} tensors but {len(dsts)} outs")
        self._same_type("fused_all_reduce", *(srcs + dsts))
        for i, (a, b) in enumerate(zip(srcs, dsts)):
            if a.count != b.count:
                raise ValueError(f"fused_all_reduce: outs[{i}] has {b.count} elements, tensors[{i}] {a.count}")
        n, o = len(srcs), reduce_op(op)
        sp = (ctypes.c_void_p * n)(*[b.ptr for b in srcs])
        rp = (ctypes.c_void_p * n)(*[b.ptr for b in dsts])
        cn = (ctypes.c_size_t * n)(*[b.count for b in srcs])
        return self._issue("XcclAllReduceFused", lambda s: self._lib.XcclAllReduceFused(
            sp, rp, cn, n, srcs[0].dtype, o, self._comm, s), srcs + dsts, async_op, stream,
            tensors if outs is None else outs, op=o)


# The device of this process's first communicator: a process has one.
_process_device = None


def _select_device(device):
    """XCCL_DEVICE for this process, read by the library at its first
    communicator (not when it loads: an id may be made before). "auto"
    leaves a device the environment already names (XCCL_DEVICE=host keeps
    a CPU job on the host device on a machine with GPUs). Once a
    communicator exists, another device is an error."""
    want = str(device).lower()
    have = os.environ.get("XCCL_DEVICE", "")
    if want == "auto" and have:
        want = have.lower()
    if _process_device is not None:
        if want not in ("auto", _process_device, have.lower()):
            raise XcclError("device", _lib.C_ERROR, f"this process already uses device {_process_device!r} (its "
                            f"first communicator's); a process has one device: {want!r} must be chosen before "
                            f"its first communicator (device=, or XCCL_DEVICE)")
        return
    if want != "auto":
        os.environ["XCCL_DEVICE"] = want


def get_unique_id(library=None, device=None):
    """A fresh unique id (bytes) naming a bootstrap served by this process:
    make it on one rank, hand it to every rank. xccl's ids are one kind for
    every device: the device may be named here or later, at the first
    communicator."""
    if device:
        _select_device(device)
    lib = _lib.load(library)
    n = unique_id_size(library)
    raw = ctypes.create_string_buffer(n)
    rid = _lib.RootId(n, ctypes.cast(raw, ctypes.c_void_p))
    check("XcclGetUniqueId", lib.XcclGetUniqueId(ctypes.byref(rid)))
    return raw.raw[:rid.sz]


def unique_id_size(library=None):
    """The bytes of a unique id (XcclGetUniqueIdSize)."""
    n = ctypes.c_size_t()
    check("XcclGetUniqueIdSize", _lib.load(library).XcclGetUniqueIdSize(ctypes.byref(n)))
    return n.value


def create_comm_backend(kind="auto", rank=None, world_size=None, store=None, group=None, unique_id=None,
                        library=None):
    """The framework protocol's factory: a Communicator on device kind
    ("auto", "host", or a vendor: nvidia, ascend, mlu, dcu, kunlun, ...),
    joined through a torch store, a CPU process group, an id, or (none of
    them) the launcher's environment."""
    _select_device(kind)
    if unique_id is not None:
        return Communicator(rank, world_size, unique_id, library=library)
    if store is not None:
        return Communicator.from_store(store, rank, world_size, library=library)
    if group is not None:
        return Communicator.from_group(group, library=library)
    return Communicator.from_env(library=library)
