// UCP through dlopen/dlsym (see ucx_shim.h). Compiled against UCX's
// headers when they are installed (libucx-dev); without them every call
// reports that this build has no UCX support, and the engine uses TCP.
#define _GNU_SOURCE
#include "ucx_shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<ucp/api/ucp.h>)
#define XU_HAVE_UCX 1
#endif
#endif

#ifndef XU_HAVE_UCX

int xu_load(const char *path, char *err, size_t errlen) {
  (void)path;
  snprintf(err, errlen, "this libxccl was built without UCX headers (install libucx-dev and rebuild)");
  return -1;
}
int xu_worker_create(xu_worker *w, char *err, size_t errlen) {
  (void)w;
  snprintf(err, errlen, "no UCX support in this build");
  return -1;
}
void xu_worker_destroy(xu_worker *w) { (void)w; }
int xu_worker_address(xu_worker *w, void *out, size_t cap, size_t *len) {
  (void)w, (void)out, (void)cap, (void)len;
  return -1;
}
int xu_ep_create(xu_worker *w, const void *addr, xu_ep *e) {
  (void)w, (void)addr, (void)e;
  return -1;
}
void *xu_ep_close(xu_worker *w, xu_ep *e, int force) {
  (void)w, (void)e, (void)force;
  return NULL;
}
void *xu_send(xu_ep *e, void *buf, size_t n, int *status) {
  (void)e, (void)buf, (void)n;
  *status = -1;
  return NULL;
}
void *xu_recv(xu_ep *e, void *buf, size_t n, int waitall, size_t *len, int *status) {
  (void)e, (void)buf, (void)n, (void)waitall, (void)len;
  *status = -1;
  return NULL;
}
int xu_test_send(void *req) {
  (void)req;
  return -1;
}
int xu_test_recv(void *req, size_t *len) {
  (void)req, (void)len;
  return -1;
}
int xu_test_close(void *req) {
  (void)req;
  return -1;
}
void xu_cancel(xu_worker *w, void *req) { (void)w, (void)req; }
void xu_free(void *req) { (void)req; }
unsigned xu_progress(xu_worker *w) {
  (void)w;
  return 0;
}
int xu_arm(xu_worker *w) {
  (void)w;
  return -1;
}
const char *xu_status_string(int status) {
  (void)status;
  return "no UCX support in this build";
}
char *xu_ep_info(xu_ep *e) {
  (void)e;
  return NULL;
}

#else

#include <ucp/api/ucp.h>

static struct {
  ucs_status_t (*config_read)(const char *, const char *, ucp_config_t **);
  void (*config_release)(ucp_config_t *);
  ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t *, const ucp_config_t *, ucp_context_h *);
  void (*cleanup)(ucp_context_h);
  ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t *, ucp_worker_h *);
  void (*worker_destroy)(ucp_worker_h);
  ucs_status_t (*worker_get_address)(ucp_worker_h, ucp_address_t **, size_t *);
  void (*worker_release_address)(ucp_worker_h, ucp_address_t *);
  ucs_status_t (*worker_get_efd)(ucp_worker_h, int *);
  ucs_status_t (*worker_arm)(ucp_worker_h);
  unsigned (*worker_progress)(ucp_worker_h);
  ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t *, ucp_ep_h *);
  ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h, const ucp_request_param_t *);
  void (*ep_print_info)(ucp_ep_h, FILE *);
  ucs_status_ptr_t (*stream_send_nbx)(ucp_ep_h, const void *, size_t, const ucp_request_param_t *);
  ucs_status_ptr_t (*stream_recv_nbx)(ucp_ep_h, void *, size_t, size_t *, const ucp_request_param_t *);
  ucs_status_t (*stream_recv_request_test)(void *, size_t *);
  ucs_status_t (*request_check_status)(void *);
  void (*request_cancel)(ucp_worker_h, void *);
  void (*request_free)(void *);
  const char *(*status_string)(ucs_status_t);
} U;

static void *handle;

int xu_load(const char *path, char *err, size_t errlen) {
  // UCX catches SIGSEGV and friends to print backtraces; in a Go process
  // that would take nil-pointer panics away from the Go runtime. A user's
  // own setting wins.
  setenv("UCX_ERROR_SIGNALS", "", 0);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *e = dlerror();
    snprintf(err, errlen, "%s", e ? e : "dlopen failed");
    return -1;
  }
  if (handle != NULL) {  // loaded before: this path opens too, keep the first
    dlclose(h);
    return 0;
  }
#define SYM(field, name)                                                 \
  do {                                                                   \
    *(void **)(&U.field) = dlsym(h, name);                               \
    if (U.field == NULL) {                                               \
      snprintf(err, errlen, "%s: no symbol %s (UCX too old?)", path, name); \
      dlclose(h);                                                        \
      memset(&U, 0, sizeof U);                                           \
      return -1;                                                         \
    }                                                                    \
  } while (0)
  SYM(config_read, "ucp_config_read");
  SYM(config_release, "ucp_config_release");
  SYM(init_version, "ucp_init_version");
  SYM(cleanup, "ucp_cleanup");
  SYM(worker_create, "ucp_worker_create");
  SYM(worker_destroy, "ucp_worker_destroy");
  SYM(worker_get_address, "ucp_worker_get_address");
  SYM(worker_release_address, "ucp_worker_release_address");
  SYM(worker_get_efd, "ucp_worker_get_efd");
  SYM(worker_arm, "ucp_worker_arm");
  SYM(worker_progress, "ucp_worker_progress");
  SYM(ep_create, "ucp_ep_create");
  SYM(ep_close_nbx, "ucp_ep_close_nbx");
  SYM(ep_print_info, "ucp_ep_print_info");
  SYM(stream_send_nbx, "ucp_stream_send_nbx");
  SYM(stream_recv_nbx, "ucp_stream_recv_nbx");
  SYM(stream_recv_request_test, "ucp_stream_recv_request_test");
  SYM(request_check_status, "ucp_request_check_status");
  SYM(request_cancel, "ucp_request_cancel");
  SYM(request_free, "ucp_request_free");
  SYM(status_string, "ucs_status_string");
#undef SYM
  handle = h;
  return 0;
}

int xu_worker_create(xu_worker *w, char *err, size_t errlen) {
  ucp_config_t *cfg = NULL;
  ucs_status_t st = U.config_read(NULL, NULL, &cfg);  // UCX_* from the environment
  if (st != UCS_OK) {
    snprintf(err, errlen, "ucp_config_read: %s", U.status_string(st));
    return -1;
  }
  ucp_params_t p;
  memset(&p, 0, sizeof p);
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
  st = U.init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, cfg, (ucp_context_h *)&w->ctx);
  U.config_release(cfg);
  if (st != UCS_OK) {
    snprintf(err, errlen, "ucp_init: %s", U.status_string(st));
    return -1;
  }
  ucp_worker_params_t wp;
  memset(&wp, 0, sizeof wp);
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // ucx.go holds a mutex around every call
  st = U.worker_create((ucp_context_h)w->ctx, &wp, (ucp_worker_h *)&w->worker);
  if (st != UCS_OK) {
    snprintf(err, errlen, "ucp_worker_create: %s", U.status_string(st));
    U.cleanup((ucp_context_h)w->ctx);
    return -1;
  }
  st = U.worker_get_efd((ucp_worker_h)w->worker, &w->efd);
  if (st != UCS_OK) {
    snprintf(err, errlen, "ucp_worker_get_efd: %s", U.status_string(st));
    U.worker_destroy((ucp_worker_h)w->worker);
    U.cleanup((ucp_context_h)w->ctx);
    return -1;
  }
  return 0;
}

void xu_worker_destroy(xu_worker *w) {
  if (w->worker) U.worker_destroy((ucp_worker_h)w->worker);
  if (w->ctx) U.cleanup((ucp_context_h)w->ctx);
  w->worker = w->ctx = NULL;
}

int xu_worker_address(xu_worker *w, void *out, size_t cap, size_t *len) {
  ucp_address_t *a;
  ucs_status_t st = U.worker_get_address((ucp_worker_h)w->worker, &a, len);
  if (st != UCS_OK) return st;
  int rc = 0;
  if (*len <= cap) {
    memcpy(out, a, *len);
  } else {
    rc = UCS_ERR_BUFFER_TOO_SMALL;
  }
  U.worker_release_address((ucp_worker_h)w->worker, a);
  return rc;
}

static void xu_ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  ((xu_ep *)arg)->status = status;
}

int xu_ep_create(xu_worker *w, const void *addr, xu_ep *e) {
  ucp_ep_params_t p;
  memset(&p, 0, sizeof p);
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.address = (const ucp_address_t *)addr;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = xu_ep_failed;
  p.err_handler.arg = e;
  e->status = 0;
  return U.ep_create((ucp_worker_h)w->worker, &p, (ucp_ep_h *)&e->ep);
}

void *xu_ep_close(xu_worker *w, xu_ep *e, int force) {
  (void)w;
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = U.ep_close_nbx((ucp_ep_h)e->ep, &p);
  e->ep = NULL;
  return UCS_PTR_IS_ERR(r) ? NULL : r;
}

void *xu_send(xu_ep *e, void *buf, size_t n, int *status) {
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  ucs_status_ptr_t r = U.stream_send_nbx((ucp_ep_h)e->ep, buf, n, &p);
  if (UCS_PTR_IS_ERR(r)) {
    *status = UCS_PTR_STATUS(r);
    return NULL;
  }
  *status = r == NULL ? UCS_OK : UCS_INPROGRESS;
  return r;
}

void *xu_recv(xu_ep *e, void *buf, size_t n, int waitall, size_t *len, int *status) {
  ucp_request_param_t p;
  memset(&p, 0, sizeof p);
  if (waitall) {
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
  }
  *len = 0;
  ucs_status_ptr_t r = U.stream_recv_nbx((ucp_ep_h)e->ep, buf, n, len, &p);
  if (UCS_PTR_IS_ERR(r)) {
    *status = UCS_PTR_STATUS(r);
    return NULL;
  }
  *status = r == NULL ? UCS_OK : UCS_INPROGRESS;
  return r;
}

int xu_test_send(void *req) { return U.request_check_status(req); }
int xu_test_recv(void *req, size_t *len) { return U.stream_recv_request_test(req, len); }
int xu_test_close(void *req) { return U.request_check_status(req); }
void xu_cancel(xu_worker *w, void *req) { U.request_cancel((ucp_worker_h)w->worker, req); }
void xu_free(void *req) { U.request_free(req); }
unsigned xu_progress(xu_worker *w) { return U.worker_progress((ucp_worker_h)w->worker); }
int xu_arm(xu_worker *w) { return U.worker_arm((ucp_worker_h)w->worker); }
const char *xu_status_string(int status) {
  return U.status_string != NULL ? U.status_string((ucs_status_t)status) : "UCX not loaded";
}

char *xu_ep_info(xu_ep *e) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (f == NULL) return NULL;
  U.ep_print_info((ucp_ep_h)e->ep, f);
  fclose(f);
  return buf;
}

#endif

// Exit while a communicator's worker is still torn down in the background
// (Destroy lets it linger until the peers have read what it sent): libucs's
// destructors would race with ucp_worker_destroy and abort on an
// assertion. The exit handler (run before the libraries' destructors)
// waits for the teardown, 5 s at most; the lingering goes on meanwhile, so
// a slower peer still gets every byte.
static int xu_releasing, xu_registered;

static void xu_at_exit(void) {
  for (int i = 0; i < 5000 && __atomic_load_n(&xu_releasing, __ATOMIC_SEQ_CST) > 0; i++) usleep(1000);
}

void xu_release_begin(void) {
  if (__atomic_exchange_n(&xu_registered, 1, __ATOMIC_SEQ_CST) == 0) atexit(xu_at_exit);
  __atomic_add_fetch(&xu_releasing, 1, __ATOMIC_SEQ_CST);
}

void xu_release_end(void) { __atomic_sub_fetch(&xu_releasing, 1, __ATOMIC_SEQ_CST); }
