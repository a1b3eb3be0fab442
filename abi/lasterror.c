// The per-thread last-error message (XcclGetLastError): each calling thread
// reads its own, in a buffer of its own made at its first error and freed
// when the thread exits (a pthread key, not a __thread array: Go's c-shared
// library is marked for static TLS, so every byte of its TLS segment comes
// from glibc's small surplus when Paddle or Python dlopens it, and a
// 1 KiB array there could make a late dlopen fail). A status's fixed text
// (XcclGetErrorString) is a C string constant.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "xccl.h"

enum { XCCL_LAST_ERROR_MAX = 1024 };

static pthread_key_t xccl_last_error_key;
static pthread_once_t xccl_last_error_once = PTHREAD_ONCE_INIT;
static int xccl_last_error_ok;

static void xccl_last_error_make_key(void) { xccl_last_error_ok = pthread_key_create(&xccl_last_error_key, free) == 0; }

// The calling thread's buffer, made if make; NULL if there is none.
static char* xccl_last_error_buf(int make) {
  pthread_once(&xccl_last_error_once, xccl_last_error_make_key);
  if (!xccl_last_error_ok) return NULL;
  char* b = pthread_getspecific(xccl_last_error_key);
  if (!b && make) {
    b = calloc(1, XCCL_LAST_ERROR_MAX);
    if (b && pthread_setspecific(xccl_last_error_key, b) != 0) {
      free(b);
      b = NULL;
    }
  }
  return b;
}

void xccl_set_last_error(const char* msg) {
  char* b = xccl_last_error_buf(msg[0] != 0);
  if (!b) return;
  strncpy(b, msg, XCCL_LAST_ERROR_MAX - 1);
  b[XCCL_LAST_ERROR_MAX - 1] = 0;
}

const char* XcclGetLastError(void) {
  const char* b = xccl_last_error_buf(0);
  return b ? b : "";
}

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
