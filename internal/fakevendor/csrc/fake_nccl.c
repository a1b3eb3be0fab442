/* libfakenccl.so: NCCL's symbols, enums and argument order (nccl.h), over
 * the fake machinery. Serves as RCCL too (same API), and as Iluvatar
 * CoreX's and T-Head PPU's NCCL (same names). Values outside NCCL's enums
 * fail loudly with ncclInvalidArgument. Built with -DPREFIX=oneccl
 * -DIDSIZE=4096 -DSIZET_RANKS it is oneCCL's C API instead (oneccl*
 * names, a 4096-byte id, size_t nranks); with -DPREFIX=mccl it is MCCL
 * (MetaX and Moore Threads: mccl* names, NCCL's values); with
 * -DPREFIX=eccl -DNO_REDUCE64 it is Enflame's ECCL, whose eccl.h says only
 * broadcast and all-gather take the 64-bit types (4, 5, 8): the fake
 * refuses them in reductions. With -DMEMALLOC it has NCCL's ncclMemAlloc and
 * ncclMemFree (NCCL >= 2.19): the fake frees only what it allocated. */
#include "fake_common.h"

#ifndef PREFIX
#define PREFIX nccl
#endif
#ifndef IDSIZE
#define IDSIZE 128
#endif
#ifdef SIZET_RANKS
typedef size_t nranks_t;
#else
typedef int nranks_t;
#endif
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define F(name) CAT(PREFIX, name)

enum { ncclSuccess = 0, ncclSystemError = 2, ncclInternalError = 3, ncclInvalidArgument = 4, ncclInvalidUsage = 5 };
/* ncclDataType_t 0..9 → kinds */
static const int kinds[10] = {K_I8, K_U8, K_I32, K_U32, K_I64, K_U64, K_F16, K_F32, K_F64, K_BF16};

static int bad(const char* what, int v) {
  fprintf(stderr, "fakenccl: invalid %s %d\n", what, v);
  return ncclInvalidArgument;
}
static int rc(int e) { return e == 0 ? ncclSuccess : e == EINVAL ? ncclInvalidArgument : ncclSystemError; }
static int check(void* comm, int dt, int op, void* stream) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  if (dt < 0 || dt > 9) return bad("ncclDataType_t", dt);
  if (op < 0 || op > 4) return bad("ncclRedOp_t", op);
  if (fake_check_stream(stream)) return ncclInvalidArgument;
  return ncclSuccess;
}
/* check for the reducing calls (all-reduce, reduce, reduce-scatter). */
static int check_reduce(void* comm, int dt, int op, void* stream) {
#ifdef NO_REDUCE64
  if (dt == 4 || dt == 5 || dt == 8) return bad("64-bit data type in a reduction", dt);
#endif
  return check(comm, dt, op, stream);
}

typedef struct { char internal[IDSIZE]; } ncclUniqueId;

const char* F(GetErrorString)(int r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (fake)";
    case ncclInvalidArgument: return "invalid argument (fake)";
    default: return "fake error";
  }
}
int F(GetVersion)(int* v) { *v = 22300; return ncclSuccess; }
int F(GetUniqueId)(ncclUniqueId* id) { fake_random_id((unsigned char*)id->internal, IDSIZE, "FAKENCCL"); return ncclSuccess; }
/* Non-blocking communicators, as NCCL makes every one under
 * NCCL_COMM_BLOCKING=0: init, the collectives and GroupEnd return
 * ncclInProgress (the work itself is done, as ever in the fake), and
 * CommGetAsyncError says "in progress" a few polls more before success. */
enum { ncclInProgress = 7, fakePolls = 3 };
static int fake_nonblocking(void) {
  const char* v = getenv("NCCL_COMM_BLOCKING");
  return v && strcmp(v, "0") == 0;
}
static int progress(void* comm, int e) {
  if (e || !comm || !((fake_comm*)comm)->nonblocking) return e;
  atomic_store(&((fake_comm*)comm)->pending, fakePolls);
  return ncclInProgress;
}
int F(CommInitRank)(void** comm, nranks_t nranks, ncclUniqueId id, int rank) {
  if (memcmp(id.internal, "FAKENCCL", 8) != 0) return bad("unique id", 0);
  int err = 0;
  *comm = fake_join((unsigned char*)id.internal, IDSIZE, (int)nranks, rank, &err);
  if (!*comm) return ncclInvalidArgument;
  ((fake_comm*)*comm)->nonblocking = fake_nonblocking();
  return progress(*comm, ncclSuccess);
}
static void fake_reg_release(void* comm);
static void fake_premul_release(void* comm);
int F(CommDestroy)(void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  fake_reg_release(comm);
  fake_premul_release(comm);
  fake_leave(comm);
  return ncclSuccess;
}
int F(CommAbort)(void* comm) { return F(CommDestroy)(comm); }
/* Buffer registration (ncclCommRegister, NCCL >= 2.19): a handle per
 * registration, checked on deregistration, and released by the
 * communicator's destroy or abort as NCCL's are; fakeRegisteredLive counts
 * them. */
typedef struct fake_reg { unsigned magic; void* comm; struct fake_reg* next; } fake_reg;
enum { FAKE_REG_MAGIC = 0x52454721 };
static atomic_long fake_reg_live;
static pthread_mutex_t fake_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_reg* fake_regs;
static void fake_reg_release(void* comm) {
  pthread_mutex_lock(&fake_reg_mu);
  for (fake_reg** p = &fake_regs; *p;) {
    fake_reg* r = *p;
    if (r->comm != comm) {
      p = &r->next;
      continue;
    }
    *p = r->next;
    r->magic = 0;
    free(r);
    atomic_fetch_sub(&fake_reg_live, 1);
  }
  pthread_mutex_unlock(&fake_reg_mu);
}
long fakeRegisteredLive(void) { return atomic_load(&fake_reg_live); }
#ifdef FINREG_NOT_IMPLEMENTED
enum { fakeNotImplemented = 12 }; /* oneCCL: a backend without finalize or registration */
#endif
int F(CommRegister)(void* comm, void* buf, size_t size, void** handle) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
#ifdef FINREG_NOT_IMPLEMENTED
  (void)buf, (void)size, (void)handle;
  return fakeNotImplemented;
#endif
  if (!buf || !handle) return bad("buffer or handle (NULL)", 0);
  (void)size;
  fake_reg* r = malloc(sizeof *r);
  if (!r) return ncclSystemError;
  pthread_mutex_lock(&fake_reg_mu);
  *r = (fake_reg){FAKE_REG_MAGIC, comm, fake_regs};
  fake_regs = r;
  pthread_mutex_unlock(&fake_reg_mu);
  *handle = r;
  atomic_fetch_add(&fake_reg_live, 1);
  return ncclSuccess;
}
int F(CommDeregister)(void* comm, void* handle) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  pthread_mutex_lock(&fake_reg_mu);
  fake_reg** p = &fake_regs;
  while (*p && (*p != handle || (*p)->comm != comm)) p = &(*p)->next;
  fake_reg* r = *p;
  if (r) *p = r->next;
  pthread_mutex_unlock(&fake_reg_mu);
  if (!r) return bad("registration handle", 0);
  r->magic = 0;
  free(r);
  atomic_fetch_sub(&fake_reg_live, 1);
  return ncclSuccess;
}
/* Pre-multiplied sums (ncclRedOpCreatePreMulSum, NCCL >= 2.11): ops from
 * ncclNumOps (5) on, each of one communicator and data type; a reducing
 * call with one multiplies its input by the scalar (ncclScalarDevice: read
 * at the call; ncclScalarHostImmediate: read at creation) and sums. An op
 * of another communicator or type, or destroyed, is ncclInvalidArgument;
 * the communicator's destroy releases what is left (fakePreMulLive counts
 * the ops alive). */
enum { FAKE_NUM_OPS = 5, FAKE_PREMULS = 256 };
typedef struct { void* comm; int dt, device; const void* ptr; unsigned char val[8]; } fake_premul;
static fake_premul fake_premuls[FAKE_PREMULS];
static pthread_mutex_t fake_premul_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long fake_premul_live;
long fakePreMulLive(void) { return atomic_load(&fake_premul_live); }
static void fake_premul_release(void* comm) {
  pthread_mutex_lock(&fake_premul_mu);
  for (int i = 0; i < FAKE_PREMULS; i++) {
    if (fake_premuls[i].comm == comm) {
      fake_premuls[i].comm = NULL;
      atomic_fetch_sub(&fake_premul_live, 1);
    }
  }
  pthread_mutex_unlock(&fake_premul_mu);
}
int F(RedOpCreatePreMulSum)(int* op, void* scalar, int dt, int residence, void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  if (!op || !scalar) return bad("ncclRedOpCreatePreMulSum argument (NULL)", 0);
  if (dt < 0 || dt > 9) return bad("ncclDataType_t", dt);
  if (residence != 0 && residence != 1) return bad("ncclScalarResidence_t", residence);
  pthread_mutex_lock(&fake_premul_mu);
  int i = 0;
  while (i < FAKE_PREMULS && fake_premuls[i].comm) i++;
  if (i == FAKE_PREMULS) {
    pthread_mutex_unlock(&fake_premul_mu);
    return ncclSystemError;
  }
  fake_premul* p = &fake_premuls[i];
  *p = (fake_premul){comm, dt, residence == 0, scalar, {0}};
  memcpy(p->val, scalar, fake_kind_size(kinds[dt]));
  pthread_mutex_unlock(&fake_premul_mu);
  atomic_fetch_add(&fake_premul_live, 1);
  *op = FAKE_NUM_OPS + i;
  return ncclSuccess;
}
int F(RedOpDestroy)(int op, void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  int i = op - FAKE_NUM_OPS;
  pthread_mutex_lock(&fake_premul_mu);
  int ok = i >= 0 && i < FAKE_PREMULS && fake_premuls[i].comm == comm;
  if (ok) fake_premuls[i].comm = NULL;
  pthread_mutex_unlock(&fake_premul_mu);
  if (!ok) return bad("ncclRedOp_t to destroy", op);
  atomic_fetch_sub(&fake_premul_live, 1);
  return ncclSuccess;
}
#define FAKE_SCALE_INT(T)                                                   \
  {                                                                         \
    T k;                                                                    \
    memcpy(&k, sc, sizeof k);                                               \
    for (size_t i = 0; i < n; i++) ((T*)out)[i] = (T)(((const T*)in)[i] * k); \
  }
#define FAKE_SCALE_FLOAT(T, LOAD, STORE)                                    \
  {                                                                         \
    T k = LOAD(sc, 0);                                                      \
    for (size_t i = 0; i < n; i++) STORE(out, i, LOAD(in, i) * k);          \
  }
/* premul: where *op is a pre-multiplied sum, *s becomes a scaled copy of
 * its n elements (*tmp, for the caller to free) and *op SUM. */
static int premul(void* comm, int dt, int* op, const void** s, size_t n, void** tmp) {
  *tmp = NULL;
  if (*op < FAKE_NUM_OPS) return ncclSuccess;
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  if (dt < 0 || dt > 9) return bad("ncclDataType_t", dt);
  int i = *op - FAKE_NUM_OPS;
  unsigned char sc[8];
  pthread_mutex_lock(&fake_premul_mu);
  int ok = i < FAKE_PREMULS && fake_premuls[i].comm == comm && fake_premuls[i].dt == dt;
  if (ok) memcpy(sc, fake_premuls[i].device ? fake_premuls[i].ptr : fake_premuls[i].val, fake_kind_size(kinds[dt]));
  pthread_mutex_unlock(&fake_premul_mu);
  if (!ok) return bad("ncclRedOp_t (not a pre-multiplied sum of this communicator and type)", *op);
  void* out = malloc(n * fake_kind_size(kinds[dt]) + 1);
  if (!out) return ncclSystemError;
  const void* in = *s;
  FAKE_BY_KIND(kinds[dt], FAKE_SCALE_INT, FAKE_SCALE_FLOAT)
  *s = out, *tmp = out, *op = 0;
  return ncclSuccess;
}

/* Its work is done when a call returns: finalize only counts (for tests). */
static atomic_ulong fake_finalize_calls;
unsigned long fakeFinalizeCalls(void) { return atomic_load(&fake_finalize_calls); }
int F(CommFinalize)(void* comm) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  atomic_fetch_add(&fake_finalize_calls, 1);
#ifdef FINREG_NOT_IMPLEMENTED
  return fakeNotImplemented;
#endif
  return progress(comm, ncclSuccess);
}
int F(CommGetAsyncError)(void* comm, int* r) {
  if (!comm || ((fake_comm*)comm)->magic != FAKE_COMM_MAGIC) return bad("communicator", 0);
  atomic_int* p = &((fake_comm*)comm)->pending;
  int left = atomic_load(p);
  while (left > 0 && !atomic_compare_exchange_weak(p, &left, left - 1)) {
  }
  *r = left > 0 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}

/* For tests: all-reduces called (any thread), the last one's count and op. */
static atomic_ulong fake_allreduce_calls, fake_allreduce_count, fake_allreduce_op;
unsigned long fakeAllReduceCalls(void) { return atomic_load(&fake_allreduce_calls); }
unsigned long fakeAllReduceLastCount(void) { return atomic_load(&fake_allreduce_count); }
unsigned long fakeAllReduceLastOp(void) { return atomic_load(&fake_allreduce_op); }

int F(AllReduce)(const void* s, void* r, size_t n, int dt, int op, void* comm, void* st) {
  atomic_fetch_add(&fake_allreduce_calls, 1);
  atomic_store(&fake_allreduce_count, n);
  atomic_store(&fake_allreduce_op, (unsigned long)op);
  void* tmp;
  int e = premul(comm, dt, &op, &s, n, &tmp);
  if (!e) e = check_reduce(comm, dt, op, st);
  if (!e) e = rc(fake_all_reduce(comm, s, r, n, kinds[dt], op, 0, 0));
  free(tmp);
  return progress(comm, e);
}
int F(Reduce)(const void* s, void* r, size_t n, int dt, int op, int root, void* comm, void* st) {
  void* tmp;
  int e = premul(comm, dt, &op, &s, n, &tmp);
  if (!e) e = check_reduce(comm, dt, op, st);
  if (!e && (root < 0 || root >= ((fake_comm*)comm)->nranks)) e = bad("root", root);
  if (!e) e = rc(fake_all_reduce(comm, s, r, n, kinds[dt], op, root, 1));
  free(tmp);
  return progress(comm, e);
}
int F(ReduceScatter)(const void* s, void* r, size_t n, int dt, int op, void* comm, void* st) {
  void* tmp;
  int e = comm && ((fake_comm*)comm)->magic == FAKE_COMM_MAGIC
              ? premul(comm, dt, &op, &s, n * (size_t)((fake_comm*)comm)->nranks, &tmp)
              : bad("communicator", 0);
  if (e) return e;
  e = check_reduce(comm, dt, op, st);
  if (!e) e = rc(fake_reduce_scatter(comm, s, r, n, kinds[dt], op));
  free(tmp);
  return progress(comm, e);
}
int F(Broadcast)(const void* s, void* r, size_t n, int dt, int root, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  if (!e && (root < 0 || root >= ((fake_comm*)comm)->nranks)) return bad("root", root);
  return e ? e : progress(comm, rc(fake_broadcast(comm, s, r, n * fake_kind_size(kinds[dt]), root)));
}
int F(AllGather)(const void* s, void* r, size_t n, int dt, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  return e ? e : progress(comm, rc(fake_all_gather(comm, s, r, n * fake_kind_size(kinds[dt]))));
}
/* Outside a group a send or receive is a group of its own: in progress on
 * a non-blocking communicator, as its GroupEnd. */
int F(Send)(const void* s, size_t n, int dt, int peer, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  int grouped = fake_group_depth > 0;
  if (!e) e = rc(fake_p2p_op(1, comm, (void*)s, n * fake_kind_size(kinds[dt]), peer));
  return grouped ? e : progress(comm, e);
}
int F(Recv)(void* r, size_t n, int dt, int peer, void* comm, void* st) {
  int e = check(comm, dt, 0, st);
  int grouped = fake_group_depth > 0;
  if (!e) e = rc(fake_p2p_op(0, comm, r, n * fake_kind_size(kinds[dt]), peer));
  return grouped ? e : progress(comm, e);
}
int F(GroupStart)(void) { fake_group_depth++; return ncclSuccess; }
int F(GroupEnd)(void) {
  int e = rc(fake_group_end());
  return e == ncclSuccess && fake_group_depth == 0 && fake_nonblocking() ? ncclInProgress : e;
}

/* For tests: the last stream a collective was handed. */
void* fakeLastStream(void) { return fake_last_stream; }

#ifdef MEMALLOC
/* ncclMemAlloc(ptr, size) / ncclMemFree(ptr): page-aligned host memory,
 * kept in a list so that a pointer it did not allocate (or freed already)
 * is ncclInvalidArgument, and fakeMemAllocLive counts what is allocated. */
typedef struct fake_mem { void* p; struct fake_mem* next; } fake_mem;
static fake_mem* fake_mems;
static pthread_mutex_t fake_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long fake_mem_live;
long fakeMemAllocLive(void) { return atomic_load(&fake_mem_live); }
int F(MemAlloc)(void** ptr, size_t size) {
#ifdef FINREG_NOT_IMPLEMENTED
  (void)ptr, (void)size;
  return fakeNotImplemented;
#endif
  if (!ptr || size == 0) return bad("ncclMemAlloc argument", 0);
  fake_mem* m = malloc(sizeof *m);
  if (!m) return ncclSystemError;
  if (posix_memalign(&m->p, 4096, (size + 4095) / 4096 * 4096)) { free(m); return ncclSystemError; }
  pthread_mutex_lock(&fake_mem_mu);
  m->next = fake_mems;
  fake_mems = m;
  pthread_mutex_unlock(&fake_mem_mu);
  atomic_fetch_add(&fake_mem_live, 1);
  *ptr = m->p;
  return ncclSuccess;
}
int F(MemFree)(void* ptr) {
  if (!ptr) return ncclSuccess;
  pthread_mutex_lock(&fake_mem_mu);
  fake_mem** at = &fake_mems;
  while (*at && (*at)->p != ptr) at = &(*at)->next;
  fake_mem* m = *at;
  if (m) *at = m->next;
  pthread_mutex_unlock(&fake_mem_mu);
  if (!m) return bad("ncclMemFree pointer (not from ncclMemAlloc)", 0);
  free(m->p);
  free(m);
  atomic_fetch_sub(&fake_mem_live, 1);
  return ncclSuccess;
}
#endif

#ifdef SIZET_RANKS
/* oneCCL: selects the calling thread's Level Zero device before init. */
static __thread int fake_device;
int F(SetDevice)(uint32_t index) { fake_device = (int)index; return index < 64 ? ncclSuccess : ncclInvalidArgument; }
#endif
