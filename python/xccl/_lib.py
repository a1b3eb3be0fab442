"""Finding and binding libxccl.so (ctypes, no compiled code)."""

import ctypes
import os
import threading

C_SUCCESS, C_WARNING, C_FAILED, C_ERROR, C_INTERNAL_ERROR = 0, 1, 2, 3, 4
STATUS_NAMES = {0: "C_SUCCESS", 1: "C_WARNING", 2: "C_FAILED", 3: "C_ERROR", 4: "C_INTERNAL_ERROR"}

_lock = threading.Lock()
_lib = None
_lib_path = None


class XcclError(RuntimeError):
    """A call into libxccl.so failed: status is the C_Status, the message
    XcclGetLastError()'s text."""

    def __init__(self, call, status, message):
        self.call, self.status, self.message = call, status, message
        super().__init__(f"{call}: {STATUS_NAMES.get(status, status)}: {message}")


class LibraryNotFound(OSError):
    """libxccl.so could not be loaded; tried lists every (path, reason)."""

    def __init__(self, tried):
        self.tried = tried
        lines = "\n".join(f"  {p}: {why}" for p, why in tried)
        super().__init__("libxccl.so not found; tried:\n" + lines +
                         "\nset XCCL_LIBRARY to the library's path, or build it (make build)")


def candidates(path=None):
    """The lookup order: an explicit path, $XCCL_LIBRARY, a copy inside the
    package, the repository's build/ directory, then the system loader."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    if path:
        out.append(path)
    if os.environ.get("XCCL_LIBRARY"):
        out.append(os.environ["XCCL_LIBRARY"])
    out.append(os.path.join(here, "libxccl.so"))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "build", "libxccl.so")))
    out.append("libxccl.so.1")
    out.append("libxccl.so")
    return out


def load(path=None):
    """Loads (once per process) and returns the bound library."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            if path and os.path.realpath(path) != os.path.realpath(_lib_path):
                raise XcclError("load", C_ERROR, f"libxccl.so is already loaded from {_lib_path}, not {path}")
            return _lib
        tried = []
        # A library named (the argument, $XCCL_LIBRARY) is the one wanted:
        # failing to load it is an error, not a reason to take another.
        named = [p for p in (path, os.environ.get("XCCL_LIBRARY")) if p]
        for p in candidates(path):
            lib, why = _open(p)
            if lib is None:
                tried.append((p, why))
                if p in named:
                    raise LibraryNotFound(tried)
                continue
            _bind(lib)
            _lib, _lib_path = lib, p
            return lib
        raise LibraryNotFound(tried)


def _open(p):
    """(the library at p, None), or (None, why not)."""
    if os.sep in p and not os.path.exists(p):
        return None, "no such file"
    try:
        return ctypes.CDLL(p), None
    except OSError as e:
        return None, str(e)


def loaded_path():
    return _lib_path


class RootId(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("data", ctypes.c_void_p)]


class Config(ctypes.Structure):
    """XcclConfig: set size to ctypes.sizeof(Config)."""
    _fields_ = [("size", ctypes.c_size_t), ("timeout_seconds", ctypes.c_double)]


_vp, _sz, _int, _st = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int
_PROTOS = {
    "XcclGetLastError": (ctypes.c_char_p, []),
    "XcclGetVersion": (_st, [ctypes.POINTER(_int)]),
    "XcclGetUniqueIdSize": (_st, [ctypes.POINTER(_sz)]),
    "XcclGetUniqueId": (_st, [ctypes.POINTER(RootId)]),
    "XcclCommInitRank": (_st, [_sz, ctypes.POINTER(RootId), _sz, ctypes.POINTER(_vp)]),
    "XcclCommInitRankConfig": (_st, [_sz, ctypes.POINTER(RootId), _sz, ctypes.POINTER(Config), ctypes.POINTER(_vp)]),
    "XcclCommSplit": (_st, [_vp, _int, _int, ctypes.POINTER(_vp), ctypes.POINTER(Config)]),
    "XcclCommInitFromEnv": (_st, [ctypes.POINTER(_vp), ctypes.POINTER(_int), ctypes.POINTER(_int), ctypes.POINTER(_int)]),
    "XcclDestroyComm": (_st, [_vp]),
    "XcclCommCount": (_st, [_vp, ctypes.POINTER(_int)]),
    "XcclCommUserRank": (_st, [_vp, ctypes.POINTER(_int)]),
    "XcclCommDevice": (_st, [_vp, ctypes.POINTER(_int)]),
    "XcclCommFinalize": (_st, [_vp]),
    "XcclCommRegister": (_st, [_vp, _vp, _sz, ctypes.POINTER(_vp)]),
    "XcclCommDeregister": (_st, [_vp, _vp]),
    "XcclRedOpCreatePreMulSum": (_st, [ctypes.POINTER(_int), _vp, _int, _int, _vp]),
    "XcclRedOpDestroy": (_st, [_int, _vp]),
    "XcclAllReduce": (_st, [_vp, _vp, _sz, _int, _int, _vp, _vp]),
    "XcclBroadcast": (_st, [_vp, _sz, _int, _sz, _vp, _vp]),
    "XcclReduce": (_st, [_vp, _vp, _sz, _int, _int, _sz, _vp, _vp]),
    "XcclAllGather": (_st, [_vp, _vp, _sz, _int, _vp, _vp]),
    "XcclReduceScatter": (_st, [_vp, _vp, _sz, _int, _int, _vp, _vp]),
    "XcclGather": (_st, [_vp, _vp, _sz, _int, _sz, _vp, _vp]),
    "XcclScatter": (_st, [_vp, _vp, _sz, _int, _sz, _vp, _vp]),
    "XcclGroupStart": (_st, []),
    "XcclGroupEnd": (_st, []),
    "XcclSend": (_st, [_vp, _sz, _int, _sz, _vp, _vp]),
    "XcclRecv": (_st, [_vp, _sz, _int, _sz, _vp, _vp]),
    "XcclAllToAll": (_st, [ctypes.POINTER(_vp), ctypes.POINTER(_sz), ctypes.POINTER(_int),
                           ctypes.POINTER(_vp), ctypes.POINTER(_sz), ctypes.POINTER(_int), _sz, _sz, _vp, _vp]),
    "XcclAllReduceFused": (_st, [ctypes.POINTER(_vp), ctypes.POINTER(_vp), ctypes.POINTER(_sz), _sz, _int, _int,
                                 _vp, _vp]),
    "XcclCommGetStats": (_st, [_vp, ctypes.c_char_p, _sz]),
    "XcclCommEnableStats": (_st, [_vp, _int]),
    "XcclCommGetCapabilities": (_st, [_vp, ctypes.c_char_p, _sz]),
    "XcclCommAbort": (_st, [_vp]),
    "XcclCommSetTimeout": (_st, [_vp, ctypes.c_double]),
    "XcclCommGetAsyncError": (_st, [_vp, ctypes.POINTER(_int)]),
    "XcclMemAlloc": (_st, [ctypes.POINTER(_vp), _sz]),
    "XcclMemFree": (_st, [_vp]),
    "XcclStreamCreate": (_st, [ctypes.POINTER(_vp)]),
    "XcclStreamDestroy": (_st, [_vp]),
    "XcclStreamSynchronize": (_st, [_vp]),
    "XcclStreamQuery": (_st, [_vp]),
    "XcclEventCreate": (_st, [ctypes.POINTER(_vp)]),
    "XcclEventRecord": (_st, [_vp, _vp]),
    "XcclEventQuery": (_st, [_vp]),
    "XcclEventSynchronize": (_st, [_vp]),
    "XcclEventDestroy": (_st, [_vp]),
}


def _bind(lib):
    for name, (res, args) in _PROTOS.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def check(call, status):
    """Raises XcclError with XcclGetLastError()'s text unless C_SUCCESS."""
    if status != C_SUCCESS:
        msg = _lib.XcclGetLastError()
        raise XcclError(call, status, msg.decode("utf-8", "replace") if msg else "")
