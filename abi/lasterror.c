// The per-thread last-error message (XcclGetLastError) lives in C
// thread-local storage, so each calling thread reads its own; a status's
// fixed text (XcclGetErrorString) is a C string constant.
#include <string.h>
#include "xccl.h"

static __thread char xccl_last_error[1024];

void xccl_set_last_error(const char* msg) {
  strncpy(xccl_last_error, msg, sizeof xccl_last_error - 1);
  xccl_last_error[sizeof xccl_last_error - 1] = 0;
}

const char* XcclGetLastError(void) { return xccl_last_error; }

const char* XcclGetErrorString(C_Status status) {
  switch (status) {
    case C_SUCCESS: return "success";
    case C_WARNING: return "warning";
    case C_FAILED: return "failed: a peer, a timeout, the transport or the device (XcclGetLastError says which)";
    case C_ERROR: return "invalid argument or usage (XcclGetLastError says which)";
    case C_INTERNAL_ERROR: return "internal error in xccl (XcclGetLastError has its message)";
  }
  return "unknown status";
}
