/* libfakeze.so: the Level Zero loader calls xccl uses to count Intel GPUs:
 * zeInit, zeDriverGet and zeDeviceGet with their count-then-fill protocol. */
#include "fake_common.h"

static int ndev(void) { const char* e = getenv("FAKE_DEVICE_COUNT"); return e ? atoi(e) : 8; }
static int inited;
/* xccl counts GPUs only: ZE_INIT_FLAG_GPU_ONLY (1); 0 would count NPUs too. */
int zeInit(int flags) {
  if (flags != 1) { fprintf(stderr, "fakeze: zeInit flags %#x, want ZE_INIT_FLAG_GPU_ONLY\n", flags); return 0x78000004; }
  inited = 1;
  return 0;
}
int zeDriverGet(uint32_t* count, void** drivers) {
  if (!inited) return 0x78000001; /* ZE_RESULT_ERROR_UNINITIALIZED */
  if (drivers && *count >= 1) drivers[0] = (void*)0xd11e;
  *count = 1;
  return 0;
}
int zeDeviceGet(void* driver, uint32_t* count, void** devices) {
  if (driver != (void*)0xd11e) return 0x78000004;
  uint32_t n = (uint32_t)ndev();
  if (devices)
    for (uint32_t i = 0; i < n && i < *count; i++) devices[i] = (void*)(uintptr_t)(0x1000 + i);
  *count = n;
  return 0;
}
