/* libfakesynapse.so: what xccl uses of Habana's libSynapse.so. HCCL with
 * NCCL's names and dtypes but a 1032-byte unique id by value
 * ({internal[1024]; size_t length}), hcclRedOp_t Sum=0 Prod=1 Min=2 Max=3
 * Avg=4, and hcclSend/hcclRecv refused outside a group (the real ones
 * block the device there). As HabanaAI/HCL's checks do, every call refuses
 * a NULL stream and any type but FLOAT32, BFLOAT16, FLOAT16, INT32 and
 * UINT32, and reductions refuse PROD and AVG. The Synapse runtime: devices acquired by module
 * id, uint64 device addresses, synMemCopyAsync(stream, src, size, dst, dir). */
#include "fake_common.h"

enum { hcclSuccess = 0, hcclInternalError = 6, hcclInvalidArgument = 7, hcclInvalidUsage = 8 };
static const int kinds[10] = {K_I8, K_U8, K_I32, K_U32, K_I64, K_U64, K_F16, K_F32, K_F64, K_BF16};
/* hcclRedOp_t → fake op */
static const int opmap[5] = {O_SUM, O_PROD, O_MIN, O_MAX, O_AVG};

static int bad(const char* what, int v) {
  fprintf(stderr, "fakesynapse: invalid %s %d\n", what, v);
  return hcclInvalidArgument;
}
static int rc(int e) { return e == 0 ? hcclSuccess : e == EINVAL ? hcclInvalidArgument : hcclInternalError; }
static int check(void* comm, int dt, int op, void* st) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  if (dt != 2 && dt != 3 && dt != 6 && dt != 7 && dt != 9) return bad("hcclDataType_t", dt);
  if (op < 0 || op > 4 || op == 1 || op == 4) return bad("hcclRedOp_t", op);
  if (!st) return bad("stream (NULL)", 0);
  if (fake_check_stream(st)) return hcclInvalidArgument;
  return hcclSuccess;
}

typedef struct { uint8_t internal[1024]; size_t length; } hcclUniqueId;

const char* hcclGetErrorString(int r) { return r == 0 ? "success" : "fake hccl error"; }
int hcclGetUniqueId(hcclUniqueId* id) {
  fake_random_id(id->internal, 1024, "FAKEGAUDI");
  id->length = 1024;
  return hcclSuccess;
}
int hcclCommInitRank(void** comm, int nranks, hcclUniqueId id, int rank) {
  if (memcmp(id.internal, "FAKEGAUDI", 9) != 0 || id.length != 1024) return bad("unique id", (int)id.length);
  int err = 0;
  *comm = fake_join(id.internal, 1024, nranks, rank, &err);
  return *comm ? hcclSuccess : hcclInvalidArgument;
}
int hcclCommDestroy(void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  fake_leave(comm);
  return hcclSuccess;
}
int hcclAllReduce(const void* s, void* r, size_t n, int dt, int op, void* comm, void* st) {
  int e = check(comm, dt, op, st);
  return e ? e : rc(fake_all_reduce(comm, s, r, n, kinds[dt], opmap[op], 0, 0));
}
int hcclReduce(const void* s, void* r, size_t n, int dt, int op, int root, void* comm, void* st) {
  int e = check(comm, dt, op, st);
  return e ? e : rc(fake_all_reduce(comm, s, r, n, kinds[dt], opmap[op], root, 1));
}
int hcclReduceScatter(const void* s, void* r, size_t n, int dt, int op, void* comm, void* st) {
  int e = check(comm, dt, op, st);
  return e ? e : rc(fake_reduce_scatter(comm, s, r, n, kinds[dt], opmap[op]));
}
int hcclBroadcast(const void* s, void* r, size_t n, int dt, int root, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  return e ? e : rc(fake_broadcast(comm, s, r, n * fake_kind_size(kinds[dt]), root));
}
int hcclAllGather(const void* s, void* r, size_t n, int dt, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  return e ? e : rc(fake_all_gather(comm, s, r, n * fake_kind_size(kinds[dt])));
}
int hcclSend(const void* s, size_t n, int dt, int peer, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  if (!e && fake_group_depth == 0) { fprintf(stderr, "fakesynapse: hcclSend outside a group would block\n"); return hcclInvalidUsage; }
  return e ? e : rc(fake_p2p_op(1, comm, (void*)s, n * fake_kind_size(kinds[dt]), peer));
}
int hcclRecv(void* r, size_t n, int dt, int peer, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  if (!e && fake_group_depth == 0) { fprintf(stderr, "fakesynapse: hcclRecv outside a group would block\n"); return hcclInvalidUsage; }
  return e ? e : rc(fake_p2p_op(0, comm, r, n * fake_kind_size(kinds[dt]), peer));
}
int hcclGroupStart(void) { fake_group_depth++; return hcclSuccess; }
int hcclGroupEnd(void) { return rc(fake_group_end()); }
void* fakeLastStream(void) { return fake_last_stream; }

/* ---- Synapse runtime ---- */
typedef struct { uint64_t magic; } fake_obj;
static int ndev(void) { const char* e = getenv("FAKE_DEVICE_COUNT"); return e ? atoi(e) : 8; }
static int ok(void* p) { return p != NULL && ((fake_obj*)p)->magic == FAKE_STREAM_MAGIC; }
int synInitialize(void) { return 0; }
int synDeviceGetCount(uint32_t* n) { *n = (uint32_t)ndev(); return 0; }
int synDeviceAcquireByModuleId(uint32_t* dev, uint32_t module) {
  if ((int)module >= ndev()) return 2;
  *dev = 100 + module; /* device ids differ from module ids */
  return 0;
}
int synStreamCreateGeneric(void** s, uint32_t dev, uint32_t flags) {
  if (dev < 100 || flags != 0) return 2;
  fake_obj* o = calloc(1, sizeof *o);
  o->magic = FAKE_STREAM_MAGIC;
  *s = o;
  return 0;
}
int synStreamSynchronize(void* s) { return ok(s) ? 0 : 2; }
/* The device's every stream (the fake's work is done when a call returns);
 * fakeDeviceSyncs counts the calls for tests. */
static atomic_ulong fake_device_syncs;
unsigned long fakeDeviceSyncs(void) { return atomic_load(&fake_device_syncs); }
int synDeviceSynchronize(uint32_t dev) {
  if (dev < 100) return 2;
  atomic_fetch_add(&fake_device_syncs, 1);
  return 0;
}
int synStreamDestroy(void* s) { if (!ok(s)) return 2; ((fake_obj*)s)->magic = 0; free(s); return 0; }
int synDeviceMalloc(uint32_t dev, uint64_t n, uint64_t req, uint32_t flags, uint64_t* addr) {
  if (dev < 100 || req != 0 || flags != 0) return 2;
  void* p = malloc(n ? n : 1);
  *addr = (uint64_t)(uintptr_t)p;
  return p ? 0 : 3;
}
int synDeviceFree(uint32_t dev, uint64_t addr, uint32_t flags) { (void)flags; if (dev < 100) return 2; free((void*)(uintptr_t)addr); return 0; }
int synHostMalloc(uint32_t dev, uint64_t n, uint32_t flags, void** p) { (void)flags; if (dev < 100) return 2; *p = malloc(n ? n : 1); return 0; }
int synHostFree(uint32_t dev, void* p, uint32_t flags) { (void)flags; if (dev < 100) return 2; free(p); return 0; }
int synMemCopyAsync(void* s, uint64_t src, uint64_t n, uint64_t dst, int dir) {
  if (!ok(s) || dir < 0 || dir > 2) { fprintf(stderr, "fakesynapse: bad copy (dir %d)\n", dir); return 2; }
  memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
  return 0;
}
int synDeviceGetMemoryInfo(uint32_t dev, uint64_t* fr, uint64_t* tot) { if (dev < 100) return 2; *tot = 96ull << 30; *fr = 90ull << 30; return 0; }
