// The per-thread last-error message (XcclGetLastError) lives in C
// thread-local storage, so each calling thread reads its own.
#include <string.h>
#include "xccl.h"

static __thread char xccl_last_error[1024];

void xccl_set_last_error(const char* msg) {
  strncpy(xccl_last_error, msg, sizeof xccl_last_error - 1);
  xccl_last_error[sizeof xccl_last_error - 1] = 0;
}

const char* XcclGetLastError(void) { return xccl_last_error; }
