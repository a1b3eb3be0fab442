/* libfakecncl.so: CNCL's symbols, enums and argument order (cncl.h 1.25):
 * a 136-byte clique id by pointer, cnclInitComms(&comm, 1, devs, ranks,
 * nranks, id), CNCL's own dtype values (0x10.. ; no float64), no AVG. */
#include "fake_common.h"

enum { CNCL_SUCCESS = 0, CNCL_ERR_INTERNAL = 0x01, CNCL_ERR_ARGUMENTS = 0x07 };

static int kind_of(int dt) {
  switch (dt) {
    case 0x10: return K_F16;
    case 0x11: return K_BF16;
    case 0x12: return K_F32;
    case 0x20: return K_I8;
    case 0x21: return K_I16;
    case 0x22: return K_I32;
    case 0x23: return K_I64;
    case 0x30: return K_U8;
    case 0x31: return K_U16;
    case 0x32: return K_U32;
    case 0x33: return K_U64;
  }
  return -1;
}
static int bad(const char* what, int v) {
  fprintf(stderr, "fakecncl: invalid %s %#x\n", what, v);
  return CNCL_ERR_ARGUMENTS;
}
static int rc(int e) { return e == 0 ? CNCL_SUCCESS : e == EINVAL ? CNCL_ERR_ARGUMENTS : CNCL_ERR_INTERNAL; }
static int check(void* comm, int dt, int op, void* q) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  if (kind_of(dt) < 0) return bad("cnclDataType_t", dt);
  if (op < 0 || op > 3) return bad("cnclReduceOp_t", op);
  if (fake_check_stream(q)) return CNCL_ERR_ARGUMENTS;
  return CNCL_SUCCESS;
}

typedef struct { char data[128]; uint64_t hash; } cnclCliqueId;

const char* cnclGetErrorStr(int r) { return r == 0 ? "success" : "fake cncl error"; }
int cnclGetCliqueId(cnclCliqueId* id) {
  fake_random_id((unsigned char*)id->data, sizeof id->data, "FAKECNCL");
  id->hash = 0x1234;
  return CNCL_SUCCESS;
}
int cnclInitComms(void** comms, int num, const int* devs, const int* ranks, int nranks, const cnclCliqueId* id) {
  if (num != 1) return bad("num_comm", num);
  if (!id || memcmp(id->data, "FAKECNCL", 8) != 0 || id->hash != 0x1234) return bad("clique id", 0);
  if (devs[0] < 0) return bad("device", devs[0]);
  int err = 0;
  comms[0] = fake_join((const unsigned char*)id->data, sizeof id->data, nranks, ranks[0], &err);
  return comms[0] ? CNCL_SUCCESS : CNCL_ERR_ARGUMENTS;
}
int cnclFreeComm(void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  fake_leave(comm);
  return CNCL_SUCCESS;
}
/* CNCL_RET_ASYNC_IN_PROGRESS (0x06), "not an error actually": what the
 * real library answers while work is queued, answered here always. */
int cnclGetCommAsyncError(void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  return 0x06;
}
int cnclAllReduce(const void* s, void* r, size_t n, int dt, int op, void* comm, void* q) {
  int e = check(comm, dt, op, q);
  return e ? e : rc(fake_all_reduce(comm, s, r, n, kind_of(dt), op, 0, 0));
}
int cnclReduce(const void* s, void* r, size_t n, int dt, int op, int root, void* comm, void* q) {
  int e = check(comm, dt, op, q);
  return e ? e : rc(fake_all_reduce(comm, s, r, n, kind_of(dt), op, root, 1));
}
int cnclReduceScatter(const void* s, void* r, size_t n, int dt, int op, void* comm, void* q) {
  int e = check(comm, dt, op, q);
  return e ? e : rc(fake_reduce_scatter(comm, s, r, n, kind_of(dt), op));
}
int cnclBroadcast(const void* s, void* r, size_t n, int dt, int root, void* comm, void* q) {
  int e = check(comm, dt, 0, q);
  return e ? e : rc(fake_broadcast(comm, s, r, n * fake_kind_size(kind_of(dt)), root));
}
int cnclAllGather(const void* s, void* r, size_t n, int dt, void* comm, void* q) {
  int e = check(comm, dt, 0, q);
  return e ? e : rc(fake_all_gather(comm, s, r, n * fake_kind_size(kind_of(dt))));
}
int cnclSend(void* s, size_t n, int dt, int peer, void* comm, void* q) {
  int e = check(comm, dt, 0, q);
  return e ? e : rc(fake_p2p_op(1, comm, s, n * fake_kind_size(kind_of(dt)), peer));
}
int cnclRecv(void* r, size_t n, int dt, int peer, void* comm, void* q) {
  int e = check(comm, dt, 0, q);
  return e ? e : rc(fake_p2p_op(0, comm, r, n * fake_kind_size(kind_of(dt)), peer));
}
int cnclGroupStart(void) { fake_group_depth++; return CNCL_SUCCESS; }
int cnclGroupEnd(void) { return rc(fake_group_end()); }
void* fakeLastStream(void) { return fake_last_stream; }
