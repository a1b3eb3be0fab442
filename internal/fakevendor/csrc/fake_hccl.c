/* libfakehccl.so: HCCL's symbols, enums and argument order (hccl.h,
 * hccl_types.h): a 4108-byte root info by pointer, init as (nRanks, root,
 * rank, comm*), uint64 counts, in-place broadcast, no AVG, and no group
 * calls (like CANN before hcomm): groups arrive as HcclBatchSendRecv. */
#include "fake_common.h"

enum { HCCL_SUCCESS = 0, HCCL_E_PARA = 1, HCCL_E_INTERNAL = 4, HCCL_E_TIMEOUT = 9 };
/* HcclDataType 0..11 → kinds */
static const int kinds[12] __attribute__((unused)) = {K_I8, K_I16, K_I32, K_F16, K_F32, K_I64, K_U64, K_U8, K_U16, K_U32, K_F64, K_BF16};

static int bad(const char* what, int v) {
  fprintf(stderr, "fakehccl: invalid %s %d\n", what, v);
  return HCCL_E_PARA;
}
static int rc(int e) { return e == 0 ? HCCL_SUCCESS : e == EINVAL ? HCCL_E_PARA : e == ETIMEDOUT ? HCCL_E_TIMEOUT : HCCL_E_INTERNAL; }
static int check(void* comm, int dt, int op, void* stream) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  if (dt < 0 || dt > 11) return bad("HcclDataType", dt);
  if (op < 0 || op > 3) return bad("HcclReduceOp", op); /* no AVG in HCCL */
  if (fake_check_stream(stream)) return HCCL_E_PARA;
  return HCCL_SUCCESS;
}

/* The reductions take what CANN 8.5 documents for Atlas A2/A3 (int8,
 * int16, int32, int64, float16, float32, bfp16), and PROD neither int16 nor
 * bfp16, as the real library refuses the rest. */
static int red_check(void* comm, int dt, int op, void* stream) {
  int e = check(comm, dt, op, stream);
  if (e) return e;
  if (dt > 5 && dt != 11) return bad("reduction HcclDataType", dt);
  if (op == 1 && (dt == 1 || dt == 11)) return bad("PROD HcclDataType", dt);
  return HCCL_SUCCESS;
}

typedef struct { char internal[4108]; } HcclRootInfo;
typedef struct { int type; void* buf; uint64_t count; int dataType; uint32_t remoteRank; } HcclSendRecvItem;

/* -DHCOMM: libfakehcomm.so, the communicator calls alone, as CANN 8 moved
 * them to libhcomm.so; -DNO_COMM: the libhccl.so beside it, without them. */
#ifndef HCOMM
const char* HcclGetErrorString(int r) { return r == 0 ? "success" : r == HCCL_E_PARA ? "parameter error (fake)" : "fake error"; }
#endif
#ifndef NO_COMM
int HcclGetRootInfo(HcclRootInfo* root) {
  if (!root) return bad("root info", 0);
  fake_random_id((unsigned char*)root->internal, sizeof root->internal, "FAKEHCCL");
  return HCCL_SUCCESS;
}
int HcclCommInitRootInfo(uint32_t n, const HcclRootInfo* root, uint32_t rank, void** comm) {
  if (!root || memcmp(root->internal, "FAKEHCCL", 8) != 0) return bad("root info", 0);
  int err = 0;
  *comm = fake_join((const unsigned char*)root->internal, sizeof root->internal, (int)n, (int)rank, &err);
  return *comm ? HCCL_SUCCESS : HCCL_E_PARA;
}
int HcclCommDestroy(void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  fake_leave(comm);
  return HCCL_SUCCESS;
}
#endif
#ifndef HCOMM
int HcclAllReduce(void* s, void* r, uint64_t n, int dt, int op, void* comm, void* st) {
  int e = red_check(comm, dt, op, st);
  return e ? e : rc(fake_all_reduce(comm, s, r, n, kinds[dt], op, 0, 0));
}
int HcclReduce(void* s, void* r, uint64_t n, int dt, int op, uint32_t root, void* comm, void* st) {
  int e = red_check(comm, dt, op, st);
  return e ? e : rc(fake_all_reduce(comm, s, r, n, kinds[dt], op, (int)root, 1));
}
int HcclReduceScatter(void* s, void* r, uint64_t n, int dt, int op, void* comm, void* st) {
  int e = red_check(comm, dt, op, st);
  return e ? e : rc(fake_reduce_scatter(comm, s, r, n, kinds[dt], op));
}
int HcclBroadcast(void* buf, uint64_t n, int dt, uint32_t root, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  return e ? e : rc(fake_broadcast(comm, buf, buf, n * fake_kind_size(kinds[dt]), (int)root));
}
int HcclAllGather(void* s, void* r, uint64_t n, int dt, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  return e ? e : rc(fake_all_gather(comm, s, r, n * fake_kind_size(kinds[dt])));
}
int HcclSend(void* s, uint64_t n, int dt, uint32_t peer, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  return e ? e : rc(fake_p2p_op(1, comm, s, n * fake_kind_size(kinds[dt]), (int)peer));
}
int HcclRecv(void* r, uint64_t n, int dt, uint32_t peer, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  return e ? e : rc(fake_p2p_op(0, comm, r, n * fake_kind_size(kinds[dt]), (int)peer));
}
int HcclBatchSendRecv(HcclSendRecvItem* items, uint32_t n, void* comm, void* st) {
  if (check(comm, 0, 0, st)) return HCCL_E_PARA;
  fake_group_depth++;
  for (uint32_t i = 0; i < n; i++) {
    if (items[i].type != 0 && items[i].type != 1) return bad("HcclSendRecvType", items[i].type);
    if (items[i].dataType < 0 || items[i].dataType > 11) return bad("HcclDataType", items[i].dataType);
    int e = fake_p2p_op(items[i].type == 0, comm, items[i].buf, items[i].count * fake_kind_size(kinds[items[i].dataType]),
                        (int)items[i].remoteRank);
    if (e) return rc(e);
  }
  return rc(fake_group_end());
}
void* fakeLastStream(void) { return fake_last_stream; }
#endif
