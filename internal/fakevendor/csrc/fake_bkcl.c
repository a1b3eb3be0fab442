/* libfakebkcl.so: BKCL's call shapes (the context first, rank before
 * nranks at init, all_gather's count before the receive buffer, send/recv's
 * peer before the dtype) and the XCCL binding's values (FLOAT=0 FLOAT16=1
 * BFLOAT16=2 FLOAT64=3 INT32=4 INT64=5 UINT8=6; ADD=0 PRODUCT=1 MIN=2
 * MAX=3). Built with -DMANGLED it exports only the C++-mangled xccl_* names
 * of P800 releases (and no reduce), as the real library does. */
#include "fake_common.h"

#ifdef MANGLED
#define NAME(c, mangled) __asm__(mangled)
#else
#define NAME(c, mangled) __asm__(c)
#endif

enum { BKCL_SUCCESS = 0, BKCL_INTERNAL_ERROR = 3, BKCL_INVALID_ARGUMENT = 4 };
static const int kinds[7] = {K_F32, K_F16, K_BF16, K_F64, K_I32, K_I64, K_U8};
/* BKCL op → fake op: ADD=0 PRODUCT=1 MIN=2 MAX=3 */
static const int opmap[4] = {O_SUM, O_PROD, O_MIN, O_MAX};

static int bad(const char* what, int v) {
  fprintf(stderr, "fakebkcl: invalid %s %d\n", what, v);
  return BKCL_INVALID_ARGUMENT;
}
static int rc(int e) { return e == 0 ? BKCL_SUCCESS : e == EINVAL ? BKCL_INVALID_ARGUMENT : BKCL_INTERNAL_ERROR; }
static int check(void* ctx, int dt, int op, void* st) {
  if (!ctx || ((fake_comm*)ctx)->magic != FAKE_COMM_MAGIC) return bad("context", 0);
  if (dt < 0 || dt > 6) return bad("BKCLDataType", dt);
  if (op < 0 || op > 3) return bad("BKCLOp", op);
  if (fake_check_stream(st)) return BKCL_INVALID_ARGUMENT;
  return BKCL_SUCCESS;
}

typedef struct { char internal[128]; } BKCLUniqueId;

int get_unique_id(BKCLUniqueId* id) NAME("bkcl_get_unique_id", "_Z18xccl_get_unique_idP12XCCLUniqueId");
int get_unique_id(BKCLUniqueId* id) { fake_random_id((unsigned char*)id->internal, 128, "FAKEBKCL"); return BKCL_SUCCESS; }

int init_rank(void** ctx, int rank, int nranks, const BKCLUniqueId* id) NAME("bkcl_init_rank", "_Z14xccl_init_rankPPviiPK12XCCLUniqueId");
int init_rank(void** ctx, int rank, int nranks, const BKCLUniqueId* id) {
  if (!id || memcmp(id->internal, "FAKEBKCL", 8) != 0) return bad("unique id", 0);
  int err = 0;
  *ctx = fake_join((const unsigned char*)id->internal, 128, nranks, rank, &err);
  return *ctx ? BKCL_SUCCESS : BKCL_INVALID_ARGUMENT;
}

int destroy_context(void* ctx) NAME("bkcl_destroy_context", "_Z20xccl_destroy_contextPv");
int destroy_context(void* ctx) {
  if (!ctx || ((fake_comm*)ctx)->magic != FAKE_COMM_MAGIC) return bad("context", 0);
  fake_leave(ctx);
  return BKCL_SUCCESS;
}

int all_reduce(void* ctx, const void* s, void* r, size_t n, int dt, int op, void* st)
    NAME("bkcl_all_reduce", "_Z15xccl_all_reducePvPKvS_m12XCCLDataType6XCCLOpS_");
int all_reduce(void* ctx, const void* s, void* r, size_t n, int dt, int op, void* st) {
  int e = check(ctx, dt, op, st);
  return e ? e : rc(fake_all_reduce(ctx, s, r, n, kinds[dt], opmap[op], 0, 0));
}

#ifndef MANGLED
int bkcl_reduce(void* ctx, const void* s, void* r, size_t n, int dt, int op, int root, void* st) {
  int e = check(ctx, dt, op, st);
  return e ? e : rc(fake_all_reduce(ctx, s, r, n, kinds[dt], opmap[op], root, 1));
}
#endif

int reduce_scatter(void* ctx, const void* s, void* r, size_t n, int dt, int op, void* st)
    NAME("bkcl_reduce_scatter", "_Z19xccl_reduce_scatterPvPKvS_m12XCCLDataType6XCCLOpS_");
int reduce_scatter(void* ctx, const void* s, void* r, size_t n, int dt, int op, void* st) {
  int e = check(ctx, dt, op, st);
  return e ? e : rc(fake_reduce_scatter(ctx, s, r, n, kinds[dt], opmap[op]));
}

int broadcast(void* ctx, const void* s, void* r, size_t n, int dt, int root, void* st)
    NAME("bkcl_broadcast", "_Z14xccl_broadcastPvPKvS_m12XCCLDataTypeiS_");
int broadcast(void* ctx, const void* s, void* r, size_t n, int dt, int root, void* st) {
  int e = check(ctx, dt, 0, st);
  return e ? e : rc(fake_broadcast(ctx, s, r, n * fake_kind_size(kinds[dt]), root));
}

int all_gather(void* ctx, const void* s, size_t n, void* r, int dt, void* st)
    NAME("bkcl_all_gather", "_Z15xccl_all_gatherPvPKvmS_12XCCLDataTypeS_");
int all_gather(void* ctx, const void* s, size_t n, void* r, int dt, void* st) {
  int e = check(ctx, dt, 0, st);
  return e ? e : rc(fake_all_gather(ctx, s, r, n * fake_kind_size(kinds[dt])));
}

int send_(void* ctx, const void* b, size_t n, int peer, int dt, void* st) NAME("bkcl_send", "_Z9xccl_sendPvPKvmi12XCCLDataTypeS_");
int send_(void* ctx, const void* b, size_t n, int peer, int dt, void* st) {
  int e = check(ctx, dt, 0, st);
  return e ? e : rc(fake_p2p_op(1, ctx, (void*)b, n * fake_kind_size(kinds[dt]), peer));
}
int recv_(void* ctx, void* b, size_t n, int peer, int dt, void* st) NAME("bkcl_recv", "_Z9xccl_recvPvS_mi12XCCLDataTypeS_");
int recv_(void* ctx, void* b, size_t n, int peer, int dt, void* st) {
  int e = check(ctx, dt, 0, st);
  return e ? e : rc(fake_p2p_op(0, ctx, b, n * fake_kind_size(kinds[dt]), peer));
}
int group_start(void) NAME("bkcl_group_start", "_Z16xccl_group_startv");
int group_start(void) { fake_group_depth++; return BKCL_SUCCESS; }
int group_end(void) NAME("bkcl_group_end", "_Z14xccl_group_endv");
int group_end(void) { return rc(fake_group_end()); }
void* fakeLastStream(void) { return fake_last_stream; }
