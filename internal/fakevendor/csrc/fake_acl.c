/* libfakeascendcl.so: the ACL runtime calls xccl forwards (acl_rt.h), over
 * host memory: aclrtMemcpy's destMax second, memcpy kinds H2H=0 H2D=1
 * D2H=2 D2D=3, streams and events that the fake HCCL recognises. */
#include "fake_common.h"

typedef struct { uint64_t magic; } fake_obj;
static __thread int current;
static int inited;
static int ndev(void) { const char* e = getenv("FAKE_DEVICE_COUNT"); return e ? atoi(e) : 8; }
static int ok(void* p) { return p == NULL || ((fake_obj*)p)->magic == FAKE_STREAM_MAGIC; }

int aclInit(const char* cfg) { (void)cfg; if (inited) return 100002; inited = 1; return 0; }
int aclrtGetDeviceCount(uint32_t* n) { *n = (uint32_t)ndev(); return 0; }
int aclrtSetDevice(int32_t d) { if (d < 0 || d >= ndev()) return 107001; current = d; return 0; }
int aclrtGetDevice(int32_t* d) { *d = current; return 0; }
int aclrtSynchronizeDevice(void) { return 0; }
int aclrtCreateStream(void** s) { fake_obj* o = calloc(1, sizeof *o); o->magic = FAKE_STREAM_MAGIC; *s = o; return 0; }
int aclrtDestroyStream(void* s) { if (!s || !ok(s)) return 107002; ((fake_obj*)s)->magic = 0; free(s); return 0; }
int aclrtSynchronizeStream(void* s) { return ok(s) ? 0 : 107002; }
int aclrtCreateEvent(void** e) { return aclrtCreateStream(e); }
int aclrtRecordEvent(void* e, void* s) { return ok(e) && ok(s) ? 0 : 107002; }
int aclrtSynchronizeEvent(void* e) { return ok(e) ? 0 : 107002; }
int aclrtDestroyEvent(void* e) { return aclrtDestroyStream(e); }
int aclrtStreamWaitEvent(void* s, void* e) { return ok(s) && ok(e) ? 0 : 107002; }
int aclrtMalloc(void** p, size_t n, int policy) {
  if (policy < 0 || policy > 5) { fprintf(stderr, "fakeacl: invalid malloc policy %d\n", policy); return 100000; }
  *p = malloc(n ? n : 1);
  return *p ? 0 : 207001;
}
int aclrtFree(void* p) { free(p); return 0; }
int aclrtMallocHost(void** p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 207001; }
int aclrtFreeHost(void* p) { free(p); return 0; }
int aclrtMemcpy(void* d, size_t destMax, const void* s, size_t n, int kind) {
  if (n > destMax || kind < 0 || kind > 3) { fprintf(stderr, "fakeacl: bad memcpy (%zu > %zu or kind %d)\n", n, destMax, kind); return 100000; }
  memmove(d, s, n);
  return 0;
}
int aclrtMemcpyAsync(void* d, size_t destMax, const void* s, size_t n, int kind, void* st) {
  return ok(st) ? aclrtMemcpy(d, destMax, s, n, kind) : 107002;
}
int aclrtMemsetAsync(void* p, size_t maxCount, int32_t v, size_t n, void* st) {
  if (!ok(st) || n > maxCount) return 100000;
  memset(p, v, n);
  return 0;
}
int aclrtGetMemInfo(int attr, size_t* fr, size_t* tot) {
  if (attr != 0 && attr != 1) return 100000;
  *tot = 32ull << 30;
  *fr = 30ull << 30;
  return 0;
}
