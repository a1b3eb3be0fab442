/* libfakecnrt.so: the CNRT calls xccl forwards (cnrt.h), over host memory:
 * queues and notifiers the fake CNCL recognises, cnrtMemTransDir_t
 * HostToDev=0 DevToDev=1 DevToHost=2, the queue before the direction in
 * cnrtMemcpyAsync. */
#include "fake_common.h"

typedef struct { uint64_t magic; } fake_obj;
static __thread int current;
static int ndev(void) { const char* e = getenv("FAKE_DEVICE_COUNT"); return e ? atoi(e) : 8; }
static int ok(void* p) { return p == NULL || ((fake_obj*)p)->magic == FAKE_STREAM_MAGIC; }
static int mk(void** p) { fake_obj* o = calloc(1, sizeof *o); o->magic = FAKE_STREAM_MAGIC; *p = o; return 0; }
static int rm(void* p) { if (!p || !ok(p)) return 632015; ((fake_obj*)p)->magic = 0; free(p); return 0; }

int cnrtGetDeviceCount(unsigned* n) { *n = (unsigned)ndev(); return 0; }
int cnrtSetDevice(int d) { if (d < 0 || d >= ndev()) return 632001; current = d; return 0; }
int cnrtGetDevice(int* d) { *d = current; return 0; }
int cnrtSyncDevice(void) { return 0; }
int cnrtQueueCreate(void** q) { return mk(q); }
int cnrtQueueDestroy(void* q) { return rm(q); }
int cnrtQueueSync(void* q) { return ok(q) ? 0 : 632015; }
int cnrtQueueQuery(void* q) { return ok(q) ? 0 : 632015; }
int cnrtNotifierCreate(void** n) { return mk(n); }
int cnrtNotifierDestroy(void* n) { return rm(n); }
int cnrtPlaceNotifier(void* n, void* q) { return ok(n) && ok(q) ? 0 : 632015; }
int cnrtQueueWaitNotifier(void* n, void* q, unsigned flags) { (void)flags; return ok(n) && ok(q) ? 0 : 632015; }
int cnrtWaitNotifier(void* n) { return ok(n) ? 0 : 632015; }
int cnrtQueryNotifier(void* n) { return ok(n) ? 0 : 632015; }
int cnrtMalloc(void** p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 632006; }
int cnrtFree(void* p) { free(p); return 0; }
int cnrtHostMalloc(void** p, size_t n) { return cnrtMalloc(p, n); }
int cnrtFreeHost(void* p) { free(p); return 0; }
int cnrtMemcpy(void* d, void* s, size_t n, int dir) {
  if (dir < 0 || dir > 4) { fprintf(stderr, "fakecnrt: invalid direction %d\n", dir); return 632012; }
  memmove(d, s, n);
  return 0;
}
int cnrtMemcpyAsync_V2(void* d, void* s, size_t n, void* q, int dir) { return ok(q) ? cnrtMemcpy(d, s, n, dir) : 632015; }
int cnrtMemsetAsync(void* p, int v, size_t n, void* q) { if (!ok(q)) return 632015; memset(p, v, n); return 0; }
int cnrtMemGetInfo(size_t* fr, size_t* tot) { *tot = 24ull << 30; *fr = 20ull << 30; return 0; }
