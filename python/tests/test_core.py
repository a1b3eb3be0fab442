"""The ctypes package without torch's backend: library lookup, checks that
stop bad buffers before C, numpy arrays, groups, errors from C."""

import ctypes
import multiprocessing as mp
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import xccl

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(HERE), "xccl")


LOAD = ("import xccl\n"
        "try:\n    print(xccl.load_library())\n"
        "except xccl.LibraryNotFound as e:\n    print(e)\n    raise SystemExit(3)\n")


def test_missing_library_lists_every_path(tmp_path):
    # A copy of the package away from the repository: no copy inside it,
    # no build/ beside it, nothing on the loader path.
    shutil.copytree(PKG, tmp_path / "pkg" / "xccl")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkg"), LD_LIBRARY_PATH="")
    env.pop("XCCL_LIBRARY", None)
    p = subprocess.run([sys.executable, "-c", LOAD], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stdout + p.stderr
    for want in [str(tmp_path / "pkg" / "xccl" / "libxccl.so"), "build/libxccl.so", "libxccl.so.1", "XCCL_LIBRARY"]:
        assert want in p.stdout, p.stdout


def test_a_wrong_xccl_library_is_an_error(tmp_path):
    # The package in the repository (its build/ has a library), but
    # XCCL_LIBRARY names one that is not there: no other is taken instead.
    env = dict(os.environ, XCCL_LIBRARY=str(tmp_path / "libxccl.so"), PYTHONPATH=os.path.dirname(PKG))
    p = subprocess.run([sys.executable, "-c", LOAD], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stdout + p.stderr
    assert str(tmp_path / "libxccl.so") + ": no such file" in p.stdout, p.stdout
    assert "build/libxccl.so" not in p.stdout, p.stdout


@pytest.fixture(scope="module")
def comm():
    c = xccl.Communicator(0, 1, xccl.get_unique_id(), device="host")
    c.enable_stats(True)
    yield c
    c.destroy()


def calls(c):
    return sum(op["calls"] for op in c.get_stats().get("ops", {}).values())


def test_bad_buffers_never_reach_c(comm):
    torch = pytest.importorskip("torch")
    before = calls(comm)
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    with pytest.raises(ValueError, match="not contiguous"):
        comm.all_reduce(t.t())
    with pytest.raises(ValueError, match="on meta"):
        comm.all_reduce(torch.empty(4, device="meta"))
    with pytest.raises(TypeError, match="not supported"):
        comm.all_reduce(torch.zeros(4, dtype=torch.complex32))
    with pytest.raises(TypeError, match="not supported"):
        comm.all_reduce(np.array(["a", "b"]))
    comm._buf(np.zeros(4, np.float32), "warm")  # the machine's float32 is cached now
    for _ in range(2):  # the other byte order is still refused, each time
        with pytest.raises(TypeError, match="not supported"):
            comm.all_reduce(np.zeros(4, ">f4" if np.little_endian else "<f4"))  # not the machine's byte order
    with pytest.raises(ValueError, match="not C-contiguous"):
        comm.all_reduce(np.zeros((4, 4), dtype=np.float32)[:, 1])
    with pytest.raises(ValueError, match="read-only"):
        a = np.zeros(4, dtype=np.float32)
        a.setflags(write=False)
        comm.all_reduce(a)
    with pytest.raises(TypeError, match="data types differ"):
        comm.all_reduce(np.zeros(4, np.float32), out=np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="want 1 × 4"):
        comm.all_gather(np.zeros(4, np.float32), np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="unknown reduce op"):
        comm.all_reduce(np.zeros(4, np.float32), op="xor")
    with pytest.raises(ValueError, match="root 1 out of range"):
        comm.broadcast(np.zeros(4, np.float32), root=1)
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        comm.all_reduce([1.0, 2.0])
    # torch's lazy views hold other values than they show (gloo refuses them too)
    z = torch.tensor([1 + 2j, 3 - 1j])
    with pytest.raises(ValueError, match="lazily conjugated or negated"):
        comm.all_reduce(z.conj())
    with pytest.raises(ValueError, match="lazily conjugated or negated"):
        comm.send(z.conj().imag, 0)
    with pytest.raises(TypeError, match="no dense memory"):
        comm.all_reduce(torch.zeros(4).to_sparse())
    with pytest.raises(ValueError, match="overlap"):
        b = np.zeros(9, np.float32)
        comm.all_reduce(b[0:8], out=b[1:9])
    with pytest.raises(TypeError, match="stream: want None"):
        comm.all_reduce(np.zeros(4, np.float32), stream="s")
    assert calls(comm) == before, "a refused buffer reached C"


def test_tensor_subclasses_and_stream_objects(comm):
    torch = pytest.importorskip("torch")

    class Sub(torch.Tensor):
        pass

    t = torch.ones(4).as_subclass(Sub)
    comm.all_reduce(t)
    assert t.tolist() == [1.0] * 4

    class Stream:  # as vLLM passes torch.cuda.Stream: its handle in .cuda_stream
        cuda_stream = 0

    a = np.ones(4, np.float32)
    comm.all_reduce(a, stream=Stream())
    assert a.tolist() == [1.0] * 4


def _on_threads(n, fn):
    """fn(r) for r = 0 .. n-1, each on a thread of this process; any
    thread's exception fails the test."""
    import threading
    errs = []

    def run(r):
        try:
            fn(r)
        except BaseException as e:  # noqa: B036 (reported below)
            errs.append(e)
    ts = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errs, errs


def _two_ranks(fn):
    """fn(comm) on ranks 0 and 1, two threads of this process."""
    uid = xccl.get_unique_id()

    def rank(r):
        c = xccl.Communicator(r, 2, uid, device="host", timeout=60)
        try:
            fn(c)
        finally:
            c.destroy()
    _on_threads(2, rank)


def test_a_dropped_work_keeps_its_buffers():
    """An async_op call's Work dropped unwaited, its buffer too: the
    communicator keeps the buffer until the call is done (it crashed)."""
    import gc
    import time
    import weakref

    def fn(c):
        if c.rank == 1:
            time.sleep(0.3)  # rank 0's call waits for it meanwhile
        a = np.full(1 << 16, c.rank + 1, np.float32)
        ref = weakref.ref(a)
        c.all_reduce(a, async_op=True)  # neither the Work nor the array kept
        del a
        gc.collect()
        if c.rank == 0:
            assert ref() is not None, "the buffer of a call still running was let go"
        b = np.ones(4, np.float32)
        c.all_reduce(b, async_op=True).wait()  # after the first on the stream
        c.all_reduce(b)  # reaps what is done
        gc.collect()
        assert ref() is None, "the buffer is kept after its call is done"
        assert b.tolist() == [4.0] * 4
    _two_ranks(fn)


def test_a_work_waited_after_destroy():
    """destroy() waits for the async work: its Works then report done."""
    import time

    def fn(c):
        if c.rank == 1:
            time.sleep(0.2)
        a = np.full(5, c.rank + 1, np.float32)
        w = c.all_reduce(a, async_op=True)
        c.destroy()
        assert w.wait() and w.is_completed()
        assert a.tolist() == [3.0] * 5
    _two_ranks(fn)


def test_errors_from_c_carry_the_message(comm):
    # MAX of complex numbers is refused by the host device: C_ERROR, with XcclGetLastError's text.
    with pytest.raises(xccl.XcclError) as e:
        comm.all_reduce(np.zeros(4, dtype=np.complex64), op="max")
    assert e.value.status == 3 and "COMPLEX64" in str(e.value), str(e.value)


def test_one_rank_everything(comm):
    a = np.arange(7, dtype=np.float64)
    out = np.zeros_like(a)
    comm.all_reduce(a, out=out, op="prod")
    assert (out == a).all()
    w = comm.all_reduce(a, op="avg", async_op=True)
    w.wait()
    assert w.is_completed() and (a == np.arange(7)).all()
    with comm.group():
        comm.send(a, 0)
        comm.recv(out, 0)
    assert (out == a).all()
    comm.barrier()
    g = np.zeros(7)
    comm.all_gather(a, g)
    assert (g == a).all()
    assert "FLOAT32" in comm.capabilities() and comm.device == "host"
    assert comm.get_stats()["nranks"] == 1


def _numpy_rank(rank, size, uid):
    c = xccl.Communicator(rank, size, uid, device="host")
    a = np.full(1001, rank + 1, dtype=np.int64)
    c.all_reduce(a)
    b = np.zeros(1001 * size, dtype=np.int64)
    c.all_gather(a, b)
    ins = [np.full(p + 1, rank, dtype=np.int32) for p in range(size)]
    outs = [np.zeros(rank + 1, dtype=np.int32) for _ in range(size)]
    c.all_to_all(ins, outs)
    c.destroy()
    return bool((a == size * (size + 1) // 2).all() and (b == a[0]).all()
                and all((outs[p] == p).all() for p in range(size)))


def _answer(body, rank, size, uid, q):
    """Puts (rank, body's answer), or its exception's repr, on q."""
    try:
        q.put((rank, body(rank, size, uid)))
    except Exception as e:  # noqa: BLE001
        q.put((rank, repr(e)))


def _across_processes(body, size):
    """Runs body(rank, size, uid) as rank 0 here and ranks 1.. in spawned
    processes; every rank's answer (or exception), by rank."""
    uid = xccl.get_unique_id()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_answer, args=(body, r, size, uid, q)) for r in range(1, size)]
    for p in ps:
        p.start()
    _answer(body, 0, size, uid, q)
    got = dict(q.get(timeout=120) for _ in range(size))
    for p in ps:
        p.join(60)
    return got


def test_numpy_across_processes():
    got = _across_processes(_numpy_rank, 3)
    assert got == {r: True for r in range(3)}, got


def _shared_rank(rank, size, uid):
    c = xccl.Communicator(rank, size, uid, device="host")
    c.enable_stats(True)
    ins = [c.empty(512, "float32") for _ in range(10)]
    outs = [c.empty((16, 32), np.float32) for _ in range(10)]
    ok = all(a.shape == (512,) and b.shape == (16, 32) for a, b in zip(ins, outs))
    for k in range(5):
        for i, a in enumerate(ins):
            a[:] = np.arange(512) + 1000 * i + rank + k
        c.fused_all_reduce(ins, [o.reshape(-1) for o in outs])
        for i, o in enumerate(outs):
            want = (np.arange(512) + 1000 * i + k) * size + size * (size - 1) // 2
            ok = ok and bool((o.reshape(-1) == want).all())
    once = c.get_stats().get("engine", {}).get("allreduce.single_copy", 0)
    del ins, outs
    c.destroy()
    return ok, once


def test_empty_is_shared_memory():
    # Two ranks' fused all-reduce of ten arrays from Communicator.empty copies
    # once (numpy's own memory never does); every element checked.
    got = _across_processes(_shared_rank, 2)
    assert got == {0: (True, 5), 1: (True, 5)}, got


def _split_rank(rank, size, uid):
    c = xccl.Communicator(rank, size, uid, device="host")
    # even and odd ranks, highest first; the last rank joins none
    color = None if rank == size - 1 else rank % 2
    sub = c.split(color, key=-rank)
    got = None
    if sub is not None:
        a = np.array([rank + 1], dtype=np.int64)
        sub.all_reduce(a)
        got = (sub.rank, sub.size, int(a[0]))
        sub.destroy()
    try:
        c.split(-7 if rank == 1 else 0)
        bad = "no error"
    except xccl.XcclError as e:
        bad = "rank 1 passed color -7" in str(e)
    c.destroy()
    return got, bad


def test_split_across_processes():
    # Communicator.split (XcclCommSplit) over 4 processes: colors 0 (ranks 2,
    # 0) and 1 (rank 1), rank 3 none; then a bad color fails every rank.
    got = _across_processes(_split_rank, 4)
    assert got == {0: ((1, 2, 4), True), 1: ((0, 1, 2), True), 2: ((0, 2, 4), True), 3: (None, True)}, got


def _gather_scatter_rank(rank, size, uid):
    c = xccl.Communicator(rank, size, uid, device="host")
    mine = np.arange(5, dtype=np.float64) + 10 * rank
    whole = np.zeros(5 * size) if rank == 1 else None
    c.gather(mine, whole, root=1)
    got = whole.tolist() if whole is not None else None
    back = np.zeros(5)
    c.scatter(whole, back, root=1)
    try:
        c.gather(mine, None, root=rank)  # every rank its own root: the root has no out
        bad = "no error"
    except ValueError as e:
        bad = "root needs out" in str(e)
    c.destroy()
    return got, (back == mine).all().item(), bad


def test_gather_scatter_across_processes():
    # Communicator.gather / scatter (XcclGather, XcclScatter) over 3
    # processes, root 1; the others pass None for the buffer they do not use.
    got = _across_processes(_gather_scatter_rank, 3)
    whole = [float(10 * r + i) for r in range(3) for i in range(5)]
    assert got == {0: (None, True, True), 1: (whole, True, True), 2: (None, True, True)}, got


def _premul_rank(rank, size, uid):
    c = xccl.Communicator(rank, size, uid, device="host")
    dev = np.array([0.5 * (rank + 1)], np.float32)  # read at each call
    op_dev = c.create_premul_sum(dev)
    op_num = c.create_premul_sum(rank + 2, dtype="int32")  # read now
    dev[0] = rank + 1.0
    a = np.arange(7, dtype=np.float32) + rank
    out = c.all_reduce(a, np.zeros(7, np.float32), op=op_dev)
    b = np.arange(4 * size, dtype=np.int32) + rank
    rs = c.reduce_scatter(b, np.zeros(4, np.int32), op=op_num)
    try:
        c.all_reduce(a, op=op_num)  # an INT32 op on FLOAT32
        wrong_type = "no error"
    except xccl.XcclError as e:
        wrong_type = "pre-multiplied sum of INT32" in str(e)
    c.destroy_op(op_dev)
    c.destroy_op(op_num)
    try:
        c.all_reduce(a, op=op_dev)
        gone = "no error"
    except xccl.XcclError as e:
        gone = "not a pre-multiplied sum" in str(e)
    c.destroy()
    return out.tolist(), rs.tolist(), wrong_type, gone


def test_premul_sum_across_processes():
    # Communicator.create_premul_sum (XcclRedOpCreatePreMulSum): each rank's
    # input times its own scalar, summed; a one-element array is read when
    # the call runs, a number when the op is made.
    size = 3
    got = _across_processes(_premul_rank, size)
    want_ar = [sum((q + 1.0) * (i + q) for q in range(size)) for i in range(7)]
    for r in range(size):
        want_rs = [sum((q + 2) * (4 * r + i + q) for q in range(size)) for i in range(4)]
        assert got[r] == (want_ar, want_rs, True, True), (r, got[r])


def _group_async_rank(rank, size, uid):
    c = xccl.Communicator(rank, size, uid, device="host")
    a = np.full(1 << 20, rank + 1.0, np.float32)
    with c.group():
        w = c.all_reduce(a, async_op=True)
    w.wait()
    got = float(a[0]), float(a[-1])
    b, peer = np.zeros(4, np.float64), 1 - rank
    with c.group():
        r = c.recv(b, peer, async_op=True)
        c.send(np.full(4, rank + 10.0), peer)
    r.wait()
    c.destroy()
    return got, b.tolist()


def test_async_op_inside_a_group():
    # an async_op call inside group() runs at the group's end: its Work is
    # done once that work is, not when the call returned
    got = _across_processes(_group_async_rank, 2)
    assert got == {0: ((3.0, 3.0), [11.0] * 4), 1: ((3.0, 3.0), [10.0] * 4)}, got


def test_wait_inside_the_group_is_an_error(comm):
    a = np.arange(4, dtype=np.float32)
    with comm.group():
        w = comm.all_reduce(a, async_op=True)
        with pytest.raises(RuntimeError, match="open group"):
            w.wait()
    assert w.wait() and (a == np.arange(4)).all()
    op = comm.create_premul_sum(np.array([2.0], np.float32))  # a device scalar the Work keeps
    w = comm.all_reduce(a, op=op, async_op=True)
    comm.destroy_op(op)
    w.wait()
    assert (a == 2 * np.arange(4)).all()
    with pytest.raises(ValueError, match="not a value of"):
        comm.create_premul_sum(300, dtype="int8")


def test_integer_arguments(comm):
    # numpy integers are integers; a float root or peer is a TypeError
    with pytest.raises(ValueError, match="size 1180591620717411303424 out of range"):
        xccl.Communicator(0, 2**70, xccl.get_unique_id())
    with pytest.raises(TypeError, match="rank must be an integer"):
        xccl.Communicator(0.0, 2, xccl.get_unique_id())
    with pytest.raises(ValueError, match="0-d"):
        comm.all_to_all_single(np.float32(1.0), np.zeros(1, np.float32))
    a = np.arange(4, dtype=np.float32)
    comm.all_reduce(a, op=np.int64(2))  # MAX
    with pytest.raises(TypeError, match="root must be an integer"):
        comm.broadcast(a, root=0.0)
    with pytest.raises(TypeError, match="peer must be an integer"):
        comm.send(a, 0.0)
    comm.broadcast(a, root=np.int32(0))


def test_premul_sum_arguments(comm):
    with pytest.raises(TypeError, match="needs its dtype"):
        comm.create_premul_sum(2.0)
    with pytest.raises(xccl.XcclError, match="BOOL has no pre-multiplied sum"):
        comm.create_premul_sum(np.array([True]))
    with pytest.raises(ValueError, match="want one"):
        comm.create_premul_sum(np.ones(2, np.float32))
    op = comm.create_premul_sum(np.float64(3))  # a numpy scalar: its own dtype, read now
    a = np.arange(5, dtype=np.float64)
    assert (comm.all_reduce(a, op=op) == 3 * np.arange(5)).all()
    comm.destroy_op(op)
    with pytest.raises(xccl.XcclError, match="not a pre-multiplied sum"):
        comm.destroy_op(op)


def test_reduce_op_codes():
    # torch's RedOpType numbers differ from xccl's (its PRODUCT is 2, xccl's
    # MAX): an int is always xccl's code, whatever was looked up before.
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from xccl._comm import reduce_op
    for _ in range(2):
        assert reduce_op(dist.ReduceOp.PRODUCT) == xccl.PRODUCT
        assert reduce_op(dist.ReduceOp.MAX) == xccl.MAX
        assert reduce_op(2) == xccl.MAX and reduce_op(4) == xccl.PRODUCT
        assert reduce_op("prod") == xccl.PRODUCT and reduce_op("max") == xccl.MAX
    with pytest.raises(ValueError):
        reduce_op(True)
    assert torch is not None


def test_calls_return_their_output(comm):
    # As pynccl's: the output (out, or the tensor in place); send None.
    a, out = np.arange(6, dtype=np.float32), np.zeros(6, np.float32)
    assert comm.all_reduce(a) is a
    assert comm.all_reduce(a, out) is out and (out == a).all()
    assert comm.broadcast(a) is a
    assert comm.reduce(a, out) is out
    assert comm.all_gather(a, out) is out
    assert comm.reduce_scatter(a, out) is out
    assert comm.all_to_all_single(a, out) is out
    assert comm.all_to_all([a], [out]) == [out]
    assert comm.gather(a, out) is out and (out == a).all()
    assert comm.scatter(a, out) is out
    assert comm.fused_all_reduce([a, out]) == [a, out]
    with comm.group():
        assert comm.send(a, 0) is None
        assert comm.recv(out, 0) is out
    w = comm.all_reduce(a, async_op=True)
    assert isinstance(w, xccl.Work)
    w.wait()


def test_empty_checks_its_arguments(comm):
    with pytest.raises(TypeError, match="not supported"):
        comm.empty(4, "U3")
    with pytest.raises(ValueError, match="negative"):
        comm.empty((2, -1))
    a = comm.empty((3, 0))
    assert a.shape == (3, 0) and a.size == 0


def test_device_chosen_with_the_unique_id():
    # XCCL_DEVICE unset: the id loads the library but opens no device, so the
    # device may be named with the id or at the first communicator; once one
    # exists, another device is refused (Python first, then the library).
    code = ("import os, xccl\n"
            "uid = xccl.get_unique_id({uid_args})\n"
            "c = xccl.Communicator(0, 1, uid, device='host')\n"
            "print('device', c.device)\n"
            "try:\n"
            "    xccl.Communicator(0, 1, xccl.get_unique_id(), device='nvidia')\n"
            "except xccl.XcclError as e:\n"
            "    print('python refused:', e)\n"
            "os.environ['XCCL_DEVICE'] = 'nvidia'\n"
            "try:\n"
            "    xccl.Communicator(0, 1, xccl.get_unique_id())\n"
            "except xccl.XcclError as e:\n"
            "    print('library refused:', e)\n"
            "c.destroy()\n")
    env = {k: v for k, v in os.environ.items() if k != "XCCL_DEVICE"}
    env["PYTHONPATH"] = os.path.dirname(HERE)
    for uid_args in ("device='host'", ""):
        p = subprocess.run([sys.executable, "-c", code.format(uid_args=uid_args)], env=env, capture_output=True,
                           text=True, timeout=60)
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "device host" in p.stdout, out
        assert "python refused:" in out and "already uses device 'host'" in out, out
        assert "library refused:" in out and 'XCCL_DEVICE is "nvidia"' in out, out


def test_create_comm_backend_from_store(tmp_path):
    torch = pytest.importorskip("torch")
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    c = xccl.create_comm_backend("auto", rank=0, world_size=1, store=store)
    assert os.environ["XCCL_DEVICE"] == "host"  # "auto" keeps the device the environment names
    assert c.device == "host"
    t = torch.ones(3)
    c.all_reduce(t, op="sum")
    assert t.tolist() == [1.0, 1.0, 1.0]
    c.destroy()


def test_version():
    assert xccl.version() >= 100
    assert isinstance(ctypes.CDLL, type)


def test_finalize_register_device_id():
    # XcclCommFinalize: async work done when it returns, later calls refused;
    # XcclCommDevice: the device index the communicator was made on;
    # XcclCommRegister / Deregister: a handle, refused once deregistered.
    c = xccl.Communicator(0, 1, xccl.get_unique_id(), device="host")
    assert c.device_id == 0
    h = c.register(np.zeros(64, np.float32))
    c.deregister(h)
    with pytest.raises(xccl.XcclError, match="not registered"):
        c.deregister(h)
    a = np.arange(1 << 16, dtype=np.float32)
    w = c.all_reduce(a, async_op=True)
    c.finalize()
    assert w.is_completed()
    assert (a == np.arange(1 << 16)).all()
    with pytest.raises(xccl.XcclError, match="finalized"):
        c.all_reduce(a)
    c.destroy()


def test_a_group_keeps_its_temporaries():
    """A synchronous call inside group() runs at its end: a temporary
    passed to it (a send's, an all-reduce's, a receive's) lives until then
    (they were freed first: garbage sent, a heap corrupted)."""
    import gc

    def fn(c):
        peer = 1 - c.rank
        got = np.zeros(1 << 12, np.float32)
        out = np.zeros(1 << 12, np.float32)
        for it in range(3):
            with c.group():
                c.send(np.full(1 << 12, 9.0 + c.rank + it, np.float32), peer)
                c.recv(got, peer)
                c.all_reduce(np.full(1 << 12, float(c.rank + 1), np.float32) * 2, out=out)
                c.recv(np.zeros(1 << 12, np.float32), peer)  # into a temporary: dropped, nothing broken
                c.send(np.ones(1 << 12, np.float32), peer)
                gc.collect()
            assert got.tolist() == [9.0 + peer + it] * (1 << 12), got[:4]
            assert out.tolist() == [6.0] * (1 << 12), out[:4]
        c.group_start()  # pynccl's spelling
        c.send(np.full(8, 5.0, np.float32), peer)
        c.recv(got[:8], peer)
        c.group_end()
        assert got[:8].tolist() == [5.0] * 8 and c.world_size == 2
        with pytest.raises(RuntimeError):
            c.group_end()
    _two_ranks(fn)


def test_from_store_twice_gets_a_new_id(tmp_path):
    """Two communicators made one after the other from one store, with
    the default key: the second reads its own id, not the first's (it
    waited for the first's closed bootstrap until the timeout)."""
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "store")

    def rank(r):
        store = torch.distributed.FileStore(path, 2)
        for k in range(3):
            c = xccl.Communicator.from_store(store, r, 2, device="host", timeout=20)
            a = np.full(4, r + k, np.float32)
            c.all_reduce(a)
            assert a.tolist() == [1.0 + 2 * k] * 4
            c.destroy()
    _on_threads(2, rank)


def test_in_place_is_the_rank_block_only(comm):
    """all_gather's tensor (reduce_scatter's out) may overlap the whole
    buffer only as this rank's own block, as NCCL's in place."""
    whole = np.arange(6, dtype=np.float32)
    comm.all_gather(whole[0:6], whole)  # one rank: block 0 is the whole
    part = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="block 0"):
        comm.all_gather(part[2:6], part[0:4])
    with pytest.raises(ValueError, match="block 0"):
        comm.reduce_scatter(part[0:4], part[1:5])


def test_work_wait_timeout_and_a_failure_every_wait():
    """wait(timeout) gives up (TimeoutError) while the call goes on; a
    failed call raises at every wait, not the first only."""
    import datetime
    import threading
    import time
    go = threading.Event()

    def fn(c):
        a = np.full(4, c.rank + 1, np.float32)
        if c.rank == 1:
            go.wait(30)
        w = c.all_reduce(a, async_op=True)
        if c.rank == 0:
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                w.wait(timeout=0.2)
            with pytest.raises(TimeoutError):
                w.wait(timeout=datetime.timedelta(milliseconds=100))
            assert time.monotonic() - t0 < 5
            go.set()
            assert w.wait(timeout=30) and a.tolist() == [3.0] * 4
        else:
            w.wait()
        c.set_timeout(1)
        if c.rank == 0:  # rank 1 never comes: the call times out
            w = c.all_reduce(a, async_op=True)
            for _ in range(3):
                with pytest.raises(xccl.XcclError):
                    w.wait()
        else:
            time.sleep(2)
    _two_ranks(fn)


def test_a_work_failed_at_destroy_says_so():
    """A Work whose call failed while destroy() waited for it (its peer
    never came within the timeout) raises at wait(); it reported done. A
    Work before it, which went well, still says so."""
    import time

    def fn(c):
        c.set_timeout(1)
        a = np.ones(3, np.float32)
        if c.rank == 1:
            c.all_reduce(a)
            time.sleep(2)
            return
        good = c.all_reduce(a, async_op=True)
        bad = c.all_reduce(np.ones(3, np.float32), async_op=True)
        c.destroy()
        assert good.is_completed() and bad.is_completed()
        assert good.wait() and a.tolist() == [2.0] * 3
        for _ in range(2):
            with pytest.raises(xccl.XcclError):
                bad.wait()
    _two_ranks(fn)


def test_a_zero_timeout_is_none():
    """wait(timeout=0) waits, as torch's Work.wait(timedelta(0))."""
    import datetime

    def fn(c):
        a = np.full(3, c.rank + 1.0, np.float32)
        assert c.all_reduce(a, async_op=True).wait(timeout=0)
        assert c.all_reduce(a, async_op=True).wait(timeout=datetime.timedelta(0))
        assert a.tolist() == [6.0] * 3  # (1 + 2) twice
    _two_ranks(fn)


def test_from_store_sizes_in_turn(tmp_path):
    """A communicator of 2 ranks, then one of 3, from one store and key:
    the third rank, which was in none before, reads the new id (it read
    the first's, and the others waited for it until the timeout)."""
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "store")

    def rank(r):
        store = torch.distributed.FileStore(path, 3)
        if r < 2:
            c = xccl.Communicator.from_store(store, r, 2, device="host", timeout=20)
            c.barrier()
            c.destroy()
        c = xccl.Communicator.from_store(store, r, 3, device="host", timeout=20)
        a = np.full(2, r + 1.0, np.float32)
        c.all_reduce(a)
        assert a.tolist() == [6.0] * 2
        c.destroy()
    _on_threads(3, rank)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_v_collectives(n):
    """all_gatherv / reduce_scatterv with a row count per rank (one of
    them 0), every dtype's kind, in and out of place, async."""
    uid = xccl.get_unique_id()
    sizes = [(3 * k + 1) % 4 for k in range(n)]
    rows = sum(sizes)

    def rank(r):
        c = xccl.Communicator(r, n, uid, device="host", timeout=60)
        try:
            at = sum(sizes[:r])
            for dt in (np.float32, np.int64, np.float64, np.int8):
                def part(p, salt=0):
                    return (np.arange(sizes[p] * 3).reshape(sizes[p], 3) % 50 + 7 * p + salt).astype(dt)
                want = np.concatenate([part(p) for p in range(n)])
                out = np.full((rows, 3), -1, dt)
                assert c.all_gatherv(part(r), out, sizes) is out
                assert (out == want).all(), (r, dt, out)
                out = np.full((rows, 3), -1, dt)  # in place: the rank's rows of out
                out[at:at + sizes[r]] = part(r)
                c.all_gatherv(out[at:at + sizes[r]], out, sizes, async_op=True).wait()
                assert (out == want).all(), (r, dt, out)
                whole = (np.arange(rows * 3).reshape(rows, 3) % 9 + r).astype(dt)
                keep = whole.copy()
                o = np.full((sizes[r], 3), -1, dt)
                c.reduce_scatterv(whole, o, sizes, op="max")
                ref = np.max([(np.arange(rows * 3).reshape(rows, 3) % 9 + p).astype(dt) for p in range(n)], axis=0)
                assert (o == ref[at:at + sizes[r]]).all(), (r, dt, o)
                assert (whole == keep).all()
                c.reduce_scatterv(whole, o, sizes, async_op=True).wait()
                ref = np.sum([(np.arange(rows * 3).reshape(rows, 3) % 9 + p).astype(dt) for p in range(n)], axis=0,
                             dtype=dt)
                assert (o == ref[at:at + sizes[r]]).all(), (r, dt, o)
        finally:
            c.destroy()
    _on_threads(n, rank)


def test_v_collectives_check_their_arguments(comm):
    before = calls(comm)
    x, out = np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="want 1 sizes"):
        comm.all_gatherv(x, out, [1, 1])
    with pytest.raises(ValueError, match="want 3x3 in the whole"):
        comm.all_gatherv(x, out, [3])
    with pytest.raises(ValueError, match="in the rank's"):
        comm.reduce_scatterv(out, np.zeros((2, 4), np.float32), [2])
    with pytest.raises(ValueError, match="0-d"):
        comm.all_gatherv(np.float32(1).reshape(()), out, [2])
    with pytest.raises(TypeError, match="differ"):
        comm.all_gatherv(x, np.zeros((2, 3), np.float64), [2])
    big = np.zeros((5, 3), np.float32)
    with pytest.raises(ValueError, match="own rows"):
        comm.reduce_scatterv(big[:4], big[1:], [4])
    assert calls(comm) == before
