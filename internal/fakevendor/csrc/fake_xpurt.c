/* libfakexpurt.so: the XPU runtime calls xccl forwards (xpu/runtime.h):
 * xpu_malloc with a mandatory memory kind, XPUMemcpyKind D2H=0 H2D=1
 * D2D=2, xpu_wait as stream synchronize. No event calls (older XRE), so
 * xccl's event emulation is exercised. */
#include "fake_common.h"

typedef struct { uint64_t magic; } fake_obj;
static __thread int current;
static int ndev(void) { const char* e = getenv("FAKE_DEVICE_COUNT"); return e ? atoi(e) : 8; }
static int ok(void* p) { return p == NULL || ((fake_obj*)p)->magic == FAKE_STREAM_MAGIC; }

int xpu_device_count(int* n) { *n = ndev(); return 0; }
int xpu_set_device(int d) { if (d < 0 || d >= ndev()) return -701; current = d; return 0; }
int xpu_current_device(int* d) { *d = current; return 0; }
int xpu_stream_create(void** s) { fake_obj* o = calloc(1, sizeof *o); o->magic = FAKE_STREAM_MAGIC; *s = o; return 0; }
int xpu_stream_destroy(void* s) { if (!s || !ok(s)) return -702; ((fake_obj*)s)->magic = 0; free(s); return 0; }
/* fakeStreamWaits counts waits on created streams (not the default one). */
static atomic_ulong fake_stream_waits;
unsigned long fakeStreamWaits(void) { return atomic_load(&fake_stream_waits); }
int xpu_wait(void* s) {
  if (!ok(s)) return -702;
  if (s) atomic_fetch_add(&fake_stream_waits, 1);
  return 0;
}
int xpu_malloc(void** p, uint64_t n, int kind) {
  if (kind != 0 && kind != 1) { fprintf(stderr, "fakexpurt: invalid memory kind %d\n", kind); return -702; }
  *p = malloc(n ? n : 1);
  return *p ? 0 : -705;
}
int xpu_free(void* p) { free(p); return 0; }
int xpu_memcpy(void* d, const void* s, uint64_t n, int kind) {
  if (kind < 0 || kind > 2) { fprintf(stderr, "fakexpurt: invalid memcpy kind %d\n", kind); return -702; }
  memmove(d, s, n);
  return 0;
}
