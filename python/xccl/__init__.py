"""xccl from Python: pure ctypes over libxccl.so (no compiled code).

    import xccl
    uid = xccl.get_unique_id()            # on rank 0; hand the bytes to every rank
    comm = xccl.Communicator(rank, size, uid)
    comm.all_reduce(tensor)               # numpy arrays or torch tensors, in place
    comm.all_reduce(tensor, op="max", async_op=True).wait()

The library is found at: an explicit path (library=...), $XCCL_LIBRARY, a
copy inside this package, the repository's build/, then the system loader.
`import xccl.torch` registers a torch.distributed backend named
xccl.torch.BACKEND.
"""

from ._lib import XcclError, LibraryNotFound, load as load_library, candidates as library_candidates
from ._comm import (Communicator, Work, get_unique_id, create_comm_backend, reduce_op,
                    SUM, AVG, MAX, MIN, PRODUCT, SPLIT_NOCOLOR)

__all__ = ["Communicator", "Work", "XcclError", "LibraryNotFound", "get_unique_id", "create_comm_backend",
           "load_library", "library_candidates", "reduce_op", "version", "SUM", "AVG", "MAX", "MIN", "PRODUCT",
           "SPLIT_NOCOLOR"]


def version(library=None):
    """libxccl.so's version as an int (XcclGetVersion)."""
    import ctypes
    from ._lib import check
    lib = load_library(library)
    v = ctypes.c_int()
    check("XcclGetVersion", lib.XcclGetVersion(ctypes.byref(v)))
    return v.value
