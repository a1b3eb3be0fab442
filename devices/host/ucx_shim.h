// The few UCP calls the host engine's UCX links make, through function
// pointers found with dlsym: libxccl.so never links against libucp, so one
// build runs with or without UCX installed (ucx.go loads it on first use).
#ifndef XCCL_UCX_SHIM_H
#define XCCL_UCX_SHIM_H

#include <stddef.h>
#include <stdint.h>

// xu_ep is one endpoint; UCX's error callback writes status (0: fine).
typedef struct {
  void *ep;
  volatile int status;
} xu_ep;

typedef struct {
  void *ctx, *worker;
  int efd;  // the worker's wake-up fd
} xu_worker;

// Status values the Go side tests (the same as UCX's).
enum { XU_OK = 0, XU_INPROGRESS = 1, XU_NO_RESOURCE = -2 };

int xu_load(const char *path, char *err, size_t errlen);
int xu_worker_create(xu_worker *w, char *err, size_t errlen);
void xu_worker_destroy(xu_worker *w);
int xu_worker_address(xu_worker *w, void *out, size_t cap, size_t *len);
int xu_ep_create(xu_worker *w, const void *addr, xu_ep *e);
void *xu_ep_close(xu_worker *w, xu_ep *e, int force);
void *xu_send(xu_ep *e, void *buf, size_t n, int *status);
void *xu_recv(xu_ep *e, void *buf, size_t n, int waitall, size_t *len, int *status);
int xu_test_send(void *req);
int xu_test_recv(void *req, size_t *len);
int xu_test_close(void *req);
void xu_cancel(xu_worker *w, void *req);
void xu_free(void *req);
unsigned xu_progress(xu_worker *w);
int xu_arm(xu_worker *w);
const char *xu_status_string(int status);
char *xu_ep_info(xu_ep *e);  // malloc'd text of ucp_ep_print_info, or NULL

// A worker released to its background teardown (xu_release_begin) holds
// the process's exit until it is destroyed (xu_release_end), 5 s at most.
void xu_release_begin(void);
void xu_release_end(void);

#endif
