/* plugin_entries: every runtime entry of the Paddle plugin table on the host
 * device, through InitPlugin: devices per thread, memory and its stats,
 * sync and async copies in stream order, stream/event ordering (record →
 * wait → query), callbacks, axpby, comm name, and the CommContextManager
 * C entries. Prints "N passed, M failed". */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "xccl_paddle.h"

static int passed, failed;
#define EXPECT(cond, ...)                   \
  do {                                      \
    if (cond) {                             \
      passed++;                             \
    } else {                                \
      failed++;                             \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                  \
      printf("\n");                         \
    }                                       \
  } while (0)

static xccl_paddle_interface_1032* t;

/* A callback that holds its stream until released: makes "not ready"
 * deterministic. */
static atomic_int gate, calls;
static void hold(C_Device d, C_Stream s, void* ud, C_Status* st) {
  (void)d; (void)s; (void)st;
  while (!atomic_load(&gate)) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  atomic_fetch_add(&calls, 1);
  *(int*)ud += 1;
}

static void* other_thread(void* arg) {
  (void)arg;
  struct C_Device_st d = {-1};
  t->get_device(&d);
  return (void*)(intptr_t)d.id; /* a new thread starts on device 0 */
}

int main(int argc, char** argv) {
  void* h = dlopen(argc > 1 ? argv[1] : "libxccl.so", RTLD_LAZY);
  if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
  void (*init)(CustomRuntimeParams*) = (void (*)(CustomRuntimeParams*))dlsym(h, "InitPlugin");
  CustomRuntimeParams p;
  memset(&p, 0, sizeof p);
  p.size = sizeof p;
  t = calloc(1, sizeof *t);
  t->size = sizeof *t;
  p.interface = t;
  init(&p);
  EXPECT(p.device_type && strcmp(p.device_type, "xccl_host") == 0, "device type %s", p.device_type);
  EXPECT(t->initialize() == C_SUCCESS, "initialize");

  /* devices: count, list, per-thread current device, range checks */
  size_t n = 0;
  EXPECT(t->get_device_count(&n) == C_SUCCESS && n >= 2, "count %zu", n);
  struct C_Device_st d1 = {1}, cur = {-1}, bad = {(int)n};
  EXPECT(t->set_device(&d1) == C_SUCCESS, "set_device 1");
  EXPECT(t->get_device(&cur) == C_SUCCESS && cur.id == 1, "get_device = %d", cur.id);
  pthread_t th;
  void* other = NULL;
  pthread_create(&th, NULL, other_thread, NULL);
  pthread_join(th, &other);
  EXPECT((intptr_t)other == 0, "other thread's device = %ld", (long)(intptr_t)other);
  EXPECT(t->set_device(&bad) == C_ERROR, "set_device out of range");
  EXPECT(t->init_device(&d1) == C_SUCCESS, "init_device");

  /* memory: allocate, stats move, set, copies */
  size_t total = 0, free0 = 0, chunk = 0;
  EXPECT(t->device_memory_stats(&d1, &total, &free0) == C_SUCCESS && total > 0 && free0 <= total, "stats");
  EXPECT(t->device_min_chunk_size(&d1, &chunk) == C_SUCCESS && chunk >= 64, "min chunk %zu", chunk);
  const size_t sz = 1 << 20;
  unsigned char *a = NULL, *b = NULL, *hbuf = NULL;
  EXPECT(t->device_memory_allocate(&d1, (void**)&a, sz) == C_SUCCESS && a, "alloc a");
  EXPECT(t->device_memory_allocate(&d1, (void**)&b, sz) == C_SUCCESS && b, "alloc b");
  EXPECT(((uintptr_t)a % chunk) == 0, "alignment");
  EXPECT(t->host_memory_allocate(&d1, (void**)&hbuf, sz) == C_SUCCESS && hbuf, "host alloc");
  EXPECT(t->device_memory_set(&d1, a, 7, sz) == C_SUCCESS && a[0] == 7 && a[sz - 1] == 7, "memset");
  EXPECT(t->memory_copy_d2d(&d1, b, a, sz) == C_SUCCESS && b[sz / 2] == 7, "d2d");
  memset(hbuf, 9, sz);
  EXPECT(t->memory_copy_h2d(&d1, a, hbuf, sz) == C_SUCCESS && a[5] == 9, "h2d");
  EXPECT(t->memory_copy_d2h(&d1, hbuf, b, 16) == C_SUCCESS && hbuf[3] == 7, "d2h");
  EXPECT(t->memory_copy_p2p(&d1, &d1, b, a, sz) == C_SUCCESS && b[9] == 9, "p2p");

  /* streams: a held stream is not ready; async copies run in order behind it */
  C_Stream s = NULL, s2 = NULL;
  C_Event e = NULL, never = NULL;
  EXPECT(t->create_stream(&d1, &s) == C_SUCCESS && s, "create_stream");
  EXPECT(t->create_stream(&d1, &s2) == C_SUCCESS && s2, "create_stream 2");
  EXPECT(t->create_event(&d1, &e) == C_SUCCESS && e, "create_event");
  EXPECT(t->create_event(&d1, &never) == C_SUCCESS, "create_event never");
  EXPECT(t->query_event(&d1, never) == C_SUCCESS, "an event never recorded is complete");
  int hits = 0;
  EXPECT(t->stream_add_callback(&d1, s, hold, &hits) == C_SUCCESS, "add_callback");
  unsigned char* ones = malloc(sz); /* read when the copy runs, so left alone */
  memset(ones, 1, sz);
  EXPECT(t->async_memory_copy_h2d(&d1, s, a, ones, sz) == C_SUCCESS, "async h2d");
  EXPECT(t->async_memory_copy_d2d(&d1, s, b, a, sz) == C_SUCCESS, "async d2d (after h2d)");
  EXPECT(t->record_event(&d1, s, e) == C_SUCCESS, "record");
  EXPECT(t->query_stream(&d1, s) != C_SUCCESS, "held stream reports not ready");
  EXPECT(t->query_event(&d1, e) != C_SUCCESS, "event behind the held work is not ready");
  EXPECT(b[0] == 9, "async copies have not run yet (b[0] = %d)", b[0]);
  /* s2 waits on the event, then copies b → hbuf: must see the new b */
  EXPECT(t->stream_wait_event(&d1, s2, e) == C_SUCCESS, "stream_wait_event");
  memset(hbuf, 0, sz);
  EXPECT(t->async_memory_copy_d2h(&d1, s2, hbuf, b, sz) == C_SUCCESS, "async d2h on s2");
  atomic_store(&gate, 1);
  EXPECT(t->synchronize_event(&d1, e) == C_SUCCESS, "synchronize_event");
  EXPECT(t->query_event(&d1, e) == C_SUCCESS, "event done");
  EXPECT(t->synchronize_stream(&d1, s2) == C_SUCCESS, "synchronize s2");
  EXPECT(hbuf[0] == 1 && hbuf[sz - 1] == 1, "stream order: s2 saw the copies s ran first (%d)", hbuf[0]);
  EXPECT(t->synchronize_device(&d1) == C_SUCCESS, "synchronize_device");
  EXPECT(hits == 1 && atomic_load(&calls) == 1, "callback ran exactly once (%d)", hits);
  EXPECT(t->query_stream(&d1, s) == C_SUCCESS, "idle stream is ready");

  /* axpby: y = 2x + 3y */
  float x[5] = {1, 2, 3, 4, 5}, y[5] = {1, 1, 1, 1, 1};
  EXPECT(t->blas_axpby(&d1, s, FLOAT32, 5, 2.0f, x, 3.0f, y) == C_SUCCESS, "axpby");
  EXPECT(t->synchronize_stream(&d1, s) == C_SUCCESS && y[4] == 13.0f && y[0] == 5.0f, "axpby result %g", y[4]);

  /* info entries of the 1032 layout */
  size_t v = 0;
  EXPECT(t->get_runtime_version(&d1, &v) == C_SUCCESS && v > 0, "runtime version");
  EXPECT(t->get_multi_process(&d1, &v) == C_SUCCESS && v > 0, "multi process");

  /* CommContextManager: a 1-rank context, the same again, a conflicting one */
  size_t idsz = 0;
  EXPECT(t->xccl_get_unique_id_size(&idsz) == C_SUCCESS, "id size");
  C_CCLRootId id = {.sz = idsz, .data = calloc(1, idsz)};
  EXPECT(t->xccl_get_unique_id(&id) == C_SUCCESS, "unique id");
  C_CCLComm c1 = NULL, c2 = NULL, c3 = NULL;
  EXPECT(XcclCommContextCreate(5, &id, 0, 1, 1, &c1) == C_SUCCESS && c1, "context create: %s", XcclGetLastError());
  EXPECT(XcclCommContextCreate(5, &id, 0, 1, 1, &c2) == C_SUCCESS && c2 == c1, "create again is idempotent");
  EXPECT(XcclCommContextCreate(5, &id, 0, 1, 0, &c3) == C_ERROR, "same ring, other device");
  int has = 0, r = -1, nr = -1, dev = -1;
  EXPECT(XcclCommContextHas(5, &has) == C_SUCCESS && has == 1, "has");
  EXPECT(XcclCommContextInfo(5, &r, &nr, &dev) == C_SUCCESS && r == 0 && nr == 1 && dev == 1, "info");
  EXPECT(XcclCommContextGet(5, &c3) == C_SUCCESS && c3 == c1, "get");
  char name[128] = {0};
  EXPECT(t->xccl_get_comm_name(c1, name) == C_SUCCESS && strlen(name) > 0 && strlen(name) < 128, "comm name");
  float one = 1;
  EXPECT(t->xccl_all_reduce(&one, &one, 1, FLOAT32, SUM, c1, NULL) == C_SUCCESS && one == 1, "all_reduce on a context");
  EXPECT(XcclCommContextDestroy(5) == C_SUCCESS, "destroy");
  EXPECT(XcclCommContextHas(5, &has) == C_SUCCESS && has == 0, "gone");
  EXPECT(XcclCommContextGet(5, &c3) == C_ERROR, "get after destroy");
  EXPECT(t->xccl_all_reduce(&one, &one, 1, FLOAT32, SUM, c1, NULL) == C_ERROR, "its handle is dead");
  EXPECT(XcclCommContextDestroyAll() == C_SUCCESS, "destroy all");

  EXPECT(t->destroy_event(&d1, e) == C_SUCCESS && t->destroy_event(&d1, never) == C_SUCCESS, "destroy events");
  EXPECT(t->destroy_stream(&d1, s) == C_SUCCESS && t->destroy_stream(&d1, s2) == C_SUCCESS, "destroy streams");
  EXPECT(t->device_memory_deallocate(&d1, a, sz) == C_SUCCESS, "free a");
  EXPECT(t->device_memory_deallocate(&d1, b, sz) == C_SUCCESS, "free b");
  EXPECT(t->host_memory_deallocate(&d1, hbuf, sz) == C_SUCCESS, "free host");
  EXPECT(t->deinit_device(&d1) == C_SUCCESS, "deinit");
  EXPECT(t->finalize() == C_SUCCESS, "finalize");
  free(ones);
  free(id.data);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
