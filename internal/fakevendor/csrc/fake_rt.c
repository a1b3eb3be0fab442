/* libfakecudart.so / libfakehip.so / libfakemcruntime.so /
 * libfakemusart.so / libfaketopsrt.so: the CUDA-shaped runtime calls xccl
 * forwards, over host memory. RT is the prefix (cuda, hip, mc, musa,
 * tops). Streams and events are heap objects that begin with a magic the
 * fake CCLs check. Pinned host memory is RT##MallocHost(ptr, size) and
 * RT##FreeHost, or, built with -DHOSTMALLOC (TOPS), only
 * RT##HostMalloc(ptr, size, flags) and RT##HostFree; that fake refuses
 * flags other than 0 (topsHostMallocDefault), so a caller that forgot the
 * third argument shows. */
#include "fake_common.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define F(name) CAT(RT, name)

typedef struct { uint64_t magic; int done; } fake_obj;
static __thread int current;
static int ndev(void) { const char* e = getenv("FAKE_DEVICE_COUNT"); return e ? atoi(e) : 8; }
static int ok_obj(void* p) { return p == NULL || ((fake_obj*)p)->magic == FAKE_STREAM_MAGIC; }

int F(GetDeviceCount)(int* n) { *n = ndev(); return 0; }
int F(SetDevice)(int d) { if (d < 0 || d >= ndev()) return 101; current = d; return 0; }
int F(GetDevice)(int* d) { *d = current; return 0; }
int F(DeviceSynchronize)(void) { return 0; }
int F(StreamCreate)(void** s) { fake_obj* o = calloc(1, sizeof *o); o->magic = FAKE_STREAM_MAGIC; *s = o; return 0; }
int F(StreamDestroy)(void* s) { if (!s || !ok_obj(s)) return 400; ((fake_obj*)s)->magic = 0; free(s); return 0; }
int F(StreamSynchronize)(void* s) { return ok_obj(s) ? 0 : 400; }
int F(StreamQuery)(void* s) { return ok_obj(s) ? 0 : 400; }
int F(EventCreate)(void** e) { return F(StreamCreate)(e); }
int F(EventRecord)(void* e, void* s) { return ok_obj(e) && ok_obj(s) ? 0 : 400; }
int F(EventQuery)(void* e) { return ok_obj(e) ? 0 : 400; }
int F(EventSynchronize)(void* e) { return ok_obj(e) ? 0 : 400; }
int F(EventDestroy)(void* e) { return F(StreamDestroy)(e); }
int F(StreamWaitEvent)(void* s, void* e, unsigned flags) { (void)flags; return ok_obj(s) && ok_obj(e) ? 0 : 400; }
int F(Malloc)(void** p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
int F(Free)(void* p) { free(p); return 0; }
#ifdef HOSTMALLOC
int F(HostMalloc)(void** p, size_t n, unsigned flags) {
  if (flags != 0) { fprintf(stderr, "fake runtime: unexpected host-malloc flags %#x\n", flags); return 1; }
  return F(Malloc)(p, n);
}
int F(HostFree)(void* p) { free(p); return 0; }
#elif defined(MALLOCHOST_FLAGS) /* MACA: mcMallocHost(ptr, size, flags) */
int F(MallocHost)(void** p, size_t n, unsigned flags) {
  if (flags != 0) { fprintf(stderr, "fake runtime: unexpected host-malloc flags %#x\n", flags); return 1; }
  return F(Malloc)(p, n);
}
int F(FreeHost)(void* p) { free(p); return 0; }
#else
int F(MallocHost)(void** p, size_t n) { return F(Malloc)(p, n); }
int F(FreeHost)(void* p) { free(p); return 0; }
#endif
/* Registered host ranges, as cudaHostRegister keeps them: page-aligned
 * pointer and size (cudaErrorInvalidValue = 1 otherwise), no range twice
 * (cudaErrorHostMemoryAlreadyRegistered = 712), unregistering an unknown
 * pointer fails (cudaErrorHostMemoryNotRegistered = 713). */
static struct { uintptr_t p; size_t n; } regs[64];
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
int F(HostRegister)(void* p, size_t n, unsigned flags) {
  uintptr_t a = (uintptr_t)p;
  if (!p || n == 0 || a % 4096 || n % 4096 || flags != 0) return 1;
  int rc = 2, free_slot = -1;
  pthread_mutex_lock(&reg_mu);
  for (int i = 0; i < 64; i++) {
    if (regs[i].p && a < regs[i].p + regs[i].n && regs[i].p < a + n) { rc = 712; goto out; }
    if (!regs[i].p && free_slot < 0) free_slot = i;
  }
  if (free_slot >= 0) { regs[free_slot].p = a; regs[free_slot].n = n; rc = 0; }
out:
  pthread_mutex_unlock(&reg_mu);
  return rc;
}
int F(HostUnregister)(void* p) {
  int rc = 713;
  pthread_mutex_lock(&reg_mu);
  for (int i = 0; i < 64; i++) {
    if (regs[i].p == (uintptr_t)p && p) { regs[i].p = 0; regs[i].n = 0; rc = 0; break; }
  }
  pthread_mutex_unlock(&reg_mu);
  return rc;
}
int F(Memcpy)(void* d, const void* s, size_t n, int kind) {
  if (kind < 0 || kind > 4) { fprintf(stderr, "fake runtime: invalid memcpy kind %d\n", kind); return 21; }
  memmove(d, s, n);
  return 0;
}
int F(MemcpyAsync)(void* d, const void* s, size_t n, int kind, void* st) { return ok_obj(st) ? F(Memcpy)(d, s, n, kind) : 400; }
int F(MemsetAsync)(void* p, int v, size_t n, void* st) { if (!ok_obj(st)) return 400; memset(p, v, n); return 0; }
int F(MemGetInfo)(size_t* fr, size_t* tot) { *tot = 16ull << 30; *fr = 12ull << 30; return 0; }
int F(LaunchHostFunc)(void* st, void (*fn)(void*), void* ud) { if (!ok_obj(st)) return 400; fn(ud); return 0; }
