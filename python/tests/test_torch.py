"""The torch.distributed backend against gloo, in 1, 2 and 4 processes."""

import os
import subprocess
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))


def _spawn(run, size, tmp_path):
    """run(rank, size, store, out_dir) in size processes; each writes ok.<rank> when its checks pass."""
    import torch.multiprocessing as mp
    store = tempfile.mktemp(dir=tmp_path)
    ctx = mp.spawn(run, args=(size, store, str(tmp_path)), nprocs=size, join=False)
    # every rank must finish in time: a hang is a failure, not a stuck CI
    import time
    deadline = time.time() + 240
    while not ctx.join(timeout=1):
        if time.time() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{size} ranks did not finish within 240 s")
    for r in range(size):
        assert os.path.exists(tmp_path / f"ok.{r}"), f"rank {r} did not finish its checks"


@pytest.mark.parametrize("size", [1, 2, 4])
def test_backend_matches_gloo(size, tmp_path):
    import workers
    _spawn(workers.run, size, tmp_path)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_pynccl_contract(size, tmp_path):
    """vLLM's PyNcclCommunicator calls on xccl.pynccl over a gloo group."""
    import pynccl_workers
    _spawn(pynccl_workers.run, size, tmp_path)


def test_registered_once_and_named_apart():
    import torch.distributed as dist
    import xccl.torch
    import importlib
    assert xccl.torch.BACKEND != "xccl"  # torch >= 2.8 owns that name
    importlib.reload(xccl.torch)  # a second import must not register twice
    assert hasattr(dist.Backend, xccl.torch.BACKEND.upper())
    assert list(dist.Backend._plugins).count(xccl.torch.BACKEND.upper()) == 1


def test_example_under_torchrun_style_launch(tmp_path):
    """examples/python/allreduce_torch.py with torchrun's variables."""
    example = os.path.join(HERE, "..", "..", "examples", "python", "allreduce_torch.py")
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), PYTHONPATH=os.path.join(HERE, ".."))
        procs.append(subprocess.Popen([sys.executable, example], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        outs.append(out)
    assert "all_reduce ok: 2 ranks" in outs[0], outs[0]


def test_tp_linear_example_under_xcclrun():
    """examples/python/tp_linear.py: the framework protocol's factory,
    joined from xcclrun's environment, 3 ranks."""
    root = os.path.join(HERE, "..", "..")
    xcclrun = os.path.join(os.environ.get("XCCL_BUILD_DIR", os.path.join(root, "build")), "xcclrun")
    if not os.path.exists(xcclrun):
        pytest.skip("no build/xcclrun (make build)")
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
    p = subprocess.run([xcclrun, "-n", "3", sys.executable, os.path.join(root, "examples", "python", "tp_linear.py")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "tp_linear ok: 3 ranks" in p.stdout, p.stdout


def test_group_timeout_bounds_init(tmp_path):
    """init_process_group's timeout bounds the communicator's init when a
    rank never comes (as gloo's does), not XCCL_TIMEOUT's 300 s."""
    code = (
        "import datetime, sys, torch.distributed as dist, xccl.torch\n"
        "try:\n"
        f"    dist.init_process_group(xccl.torch.BACKEND, init_method='file://{tmp_path}/store', rank=0,\n"
        "                            world_size=2, timeout=datetime.timedelta(seconds=2))\n"
        "except RuntimeError as e:\n"
        "    print('raised:', e); sys.exit(0)\n"
        "sys.exit('init returned without the other rank')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), XCCL_DEVICE="host")
    env.pop("XCCL_TIMEOUT", None)
    import time
    start = time.time()
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "raised:" in r.stdout, r.stdout
    assert time.time() - start < 60, f"the init took {time.time() - start:.0f} s"
