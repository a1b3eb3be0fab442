/* vendor_plugin: a PaddleCustomDevice plugin as a vendor writes one. It has
 * its own device runtime (here the fake CUDA runtime, opened from
 * VENDOR_RT_LIBRARY, as a real plugin links its vendor's) and fills the
 * runtime entries of C_DeviceInterface itself; for the collectives it makes
 * one call, XcclPaddleFillCollectives. paddle_loader then loads it exactly
 * as Paddle does and drives collectives through the table.
 *
 * Every runtime entry counts its calls; finalize prints the count, so the
 * test sees that the table's runtime entries stayed the plugin's. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xccl_paddle.h"

static atomic_long calls;
static int (*rt_get_count)(int*), (*rt_set)(int), (*rt_get)(int*), (*rt_dev_sync)(void);
static int (*rt_stream_create)(void**), (*rt_stream_destroy)(void*), (*rt_stream_sync)(void*), (*rt_stream_query)(void*);
static int (*rt_event_create)(void**), (*rt_event_record)(void*, void*), (*rt_event_query)(void*);
static int (*rt_event_sync)(void*), (*rt_event_destroy)(void*), (*rt_wait)(void*, void*, unsigned);
static int (*rt_malloc)(void**, size_t), (*rt_free)(void*), (*rt_memcpy)(void*, const void*, size_t, int);
static int (*rt_memcpy_async)(void*, const void*, size_t, int, void*), (*rt_mem_info)(size_t*, size_t*);

#define CHECK(x) (atomic_fetch_add(&calls, 1), (x) == 0 ? C_SUCCESS : C_FAILED)

static C_Status initialize(void) { return CHECK(0); }
static C_Status finalize(void) {
  printf("vendor plugin: %ld runtime calls served by the plugin\n", (long)atomic_load(&calls));
  return C_SUCCESS;
}
static C_Status init_device(const C_Device d) { return CHECK(rt_set(d->id)); }
static C_Status set_device(const C_Device d) { return CHECK(rt_set(d->id)); }
static C_Status get_device(const C_Device d) { return CHECK(rt_get(&d->id)); }
static C_Status deinit_device(const C_Device d) { (void)d; return CHECK(0); }
static C_Status create_stream(const C_Device d, C_Stream* s) { (void)d; return CHECK(rt_stream_create((void**)s)); }
static C_Status destroy_stream(const C_Device d, C_Stream s) { (void)d; return CHECK(rt_stream_destroy(s)); }
static C_Status query_stream(const C_Device d, C_Stream s) { (void)d; return CHECK(rt_stream_query(s)); }
static C_Status create_event(const C_Device d, C_Event* e) { (void)d; return CHECK(rt_event_create((void**)e)); }
static C_Status record_event(const C_Device d, C_Stream s, C_Event e) { (void)d; return CHECK(rt_event_record(e, s)); }
static C_Status destroy_event(const C_Device d, C_Event e) { (void)d; return CHECK(rt_event_destroy(e)); }
static C_Status query_event(const C_Device d, C_Event e) { (void)d; return CHECK(rt_event_query(e)); }
static C_Status sync_device(const C_Device d) { (void)d; return CHECK(rt_dev_sync()); }
static C_Status sync_stream(const C_Device d, C_Stream s) { (void)d; return CHECK(rt_stream_sync(s)); }
static C_Status sync_event(const C_Device d, C_Event e) { (void)d; return CHECK(rt_event_sync(e)); }
static C_Status wait_event(const C_Device d, C_Stream s, C_Event e) { (void)d; return CHECK(rt_wait(s, e, 0)); }
static C_Status mem_alloc(const C_Device d, void** p, size_t n) { (void)d; return CHECK(rt_malloc(p, n)); }
static C_Status mem_free(const C_Device d, void* p, size_t n) { (void)d; (void)n; return CHECK(rt_free(p)); }
static C_Status h2d(const C_Device d, void* dst, const void* src, size_t n) { (void)d; return CHECK(rt_memcpy(dst, src, n, 1)); }
static C_Status d2h(const C_Device d, void* dst, const void* src, size_t n) { (void)d; return CHECK(rt_memcpy(dst, src, n, 2)); }
static C_Status d2d(const C_Device d, void* dst, const void* src, size_t n) { (void)d; return CHECK(rt_memcpy(dst, src, n, 3)); }
static C_Status ah2d(const C_Device d, C_Stream s, void* dst, const void* src, size_t n) {
  (void)d;
  return CHECK(rt_memcpy_async(dst, src, n, 1, s));
}
static C_Status ad2h(const C_Device d, C_Stream s, void* dst, const void* src, size_t n) {
  (void)d;
  return CHECK(rt_memcpy_async(dst, src, n, 2, s));
}
static C_Status count(size_t* n) {
  int k = 0;
  C_Status st = CHECK(rt_get_count(&k));
  *n = (size_t)k;
  return st;
}
static C_Status list(size_t* ids) {
  int k = 0;
  C_Status st = CHECK(rt_get_count(&k));
  for (int i = 0; i < k; i++) ids[i] = (size_t)i;
  return st;
}
static C_Status mem_stats(const C_Device d, size_t* total, size_t* free_) { (void)d; return CHECK(rt_mem_info(free_, total)); }
static C_Status min_chunk(const C_Device d, size_t* n) { (void)d; *n = 512; return CHECK(0); }
static C_Status capability(const C_Device d, size_t* v) { (void)d; *v = 80; return CHECK(0); }
static C_Status half(const C_Device d, bool* v) { (void)d; *v = true; return CHECK(0); }

#define BIND(sym, name)                                       \
  do {                                                        \
    *(void**)&(sym) = dlsym(h, name);                         \
    if (!(sym)) {                                             \
      fprintf(stderr, "vendor plugin: no %s in runtime\n", name); \
      return 0;                                               \
    }                                                         \
  } while (0)

static int open_runtime(void) {
  const char* path = getenv("VENDOR_RT_LIBRARY");
  void* h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!h) {
    fprintf(stderr, "vendor plugin: cannot open VENDOR_RT_LIBRARY=%s\n", path ? path : "(unset)");
    return 0;
  }
  BIND(rt_get_count, "cudaGetDeviceCount");
  BIND(rt_set, "cudaSetDevice");
  BIND(rt_get, "cudaGetDevice");
  BIND(rt_dev_sync, "cudaDeviceSynchronize");
  BIND(rt_stream_create, "cudaStreamCreate");
  BIND(rt_stream_destroy, "cudaStreamDestroy");
  BIND(rt_stream_sync, "cudaStreamSynchronize");
  BIND(rt_stream_query, "cudaStreamQuery");
  BIND(rt_event_create, "cudaEventCreate");
  BIND(rt_event_record, "cudaEventRecord");
  BIND(rt_event_query, "cudaEventQuery");
  BIND(rt_event_sync, "cudaEventSynchronize");
  BIND(rt_event_destroy, "cudaEventDestroy");
  BIND(rt_wait, "cudaStreamWaitEvent");
  BIND(rt_malloc, "cudaMalloc");
  BIND(rt_free, "cudaFree");
  BIND(rt_memcpy, "cudaMemcpy");
  BIND(rt_memcpy_async, "cudaMemcpyAsync");
  BIND(rt_mem_info, "cudaMemGetInfo");
  return 1;
}

void InitPlugin(CustomRuntimeParams* params) {
  if (!params || !params->interface || !open_runtime()) return;
  /* The runtime entries sit at the same offsets in every layout. */
  xccl_paddle_interface_904* t = params->interface;
  t->initialize = initialize;
  t->finalize = finalize;
  t->init_device = init_device;
  t->set_device = set_device;
  t->get_device = get_device;
  t->deinit_device = deinit_device;
  t->create_stream = create_stream;
  t->destroy_stream = destroy_stream;
  t->query_stream = query_stream;
  t->create_event = create_event;
  t->record_event = record_event;
  t->destroy_event = destroy_event;
  t->query_event = query_event;
  t->synchronize_device = sync_device;
  t->synchronize_stream = sync_stream;
  t->synchronize_event = sync_event;
  t->stream_wait_event = wait_event;
  t->device_memory_allocate = mem_alloc;
  t->device_memory_deallocate = mem_free;
  t->memory_copy_h2d = h2d;
  t->memory_copy_d2h = d2h;
  t->memory_copy_d2d = d2d;
  t->async_memory_copy_h2d = ah2d;
  t->async_memory_copy_d2h = ad2h;
  t->get_device_count = count;
  t->get_device_list = list;
  t->device_memory_stats = mem_stats;
  t->device_min_chunk_size = min_chunk;
  if (*(size_t*)params->interface == sizeof(xccl_paddle_interface_1032)) {
    xccl_paddle_interface_1032* t3 = params->interface;
    t3->get_compute_capability = capability;
    t3->is_float16_supported = half;
  }

  /* Bad calls are refused and write nothing. */
  if (XcclPaddleFillCollectives(NULL) != C_ERROR) {
    fprintf(stderr, "vendor plugin: FAIL: XcclPaddleFillCollectives(NULL) was not refused\n");
    return;
  }
  size_t bogus[200] = {1000};
  if (XcclPaddleFillCollectives(bogus) != C_ERROR || !strstr(XcclGetLastError(), "1000 bytes")) {
    fprintf(stderr, "vendor plugin: FAIL: a 1000-byte interface was not refused (%s)\n", XcclGetLastError());
    return;
  }
  for (size_t i = 1; i < 200; i++)
    if (bogus[i]) {
      fprintf(stderr, "vendor plugin: FAIL: a refused fill wrote word %zu\n", i);
      return;
    }

  /* The one line that adopts xccl's collectives. */
  if (XcclPaddleFillCollectives(params->interface) != C_SUCCESS) {
    fprintf(stderr, "vendor plugin: %s\n", XcclGetLastError());
    return;
  }
  if (t->create_stream != create_stream || t->memory_copy_h2d != h2d || t->initialize != initialize) {
    fprintf(stderr, "vendor plugin: FAIL: XcclPaddleFillCollectives replaced a runtime entry\n");
    return;
  }
  params->version.major = 0;
  params->version.minor = 1;
  params->version.patch = 1;
  params->device_type = (char*)"fakegpu";
  params->sub_device_type = (char*)"vendor plugin + xccl";
}
