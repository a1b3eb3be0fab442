// The C entries of the collectives the host device's C fast path takes
// (devices/host/fast.h): a NULL-stream call outside any group, on a
// communicator that has a fast state, tries it first and enters Go only
// when it answers so; everything else goes to the Go entry of the same name
// in lower case, as before.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../devices/host/fast.h"
#include "group.h"
#include "handles.h"
#include "xccl.h"
#include "_cgo_export.h"

static xccl_fast* fast_tab[XCCL_COMM_SLOTS]; // by handle, as commTable's fast slots
static uint64_t fast_own[XCCL_COMM_SLOTS];  // the owner token each was set with
static int32_t open_groups;             // groups open on any thread (glue.go's openGroups)

// xccl_abi_set_fast makes f (NULL: none) handle h's fast state. A caller
// that reads the state of one communicator and the token of another (the
// handle reused) gets a state whose owner differs: not taken, Go's.
void xccl_abi_set_fast(uintptr_t h, void* f) {
  if (h - XCCL_COMM_BASE - 1 >= XCCL_COMM_SLOTS) return;
  uint64_t own = f != NULL ? __atomic_load_n(&((xccl_fast*)f)->owner, __ATOMIC_RELAXED) : 0;
  __atomic_store_n(&fast_own[h - XCCL_COMM_BASE - 1], own, __ATOMIC_RELAXED);
  __atomic_store_n(&fast_tab[h - XCCL_COMM_BASE - 1], (xccl_fast*)f, __ATOMIC_RELEASE);
}

int32_t* xccl_abi_open_groups(void) { return &open_groups; }

// The calling thread's id, which keys its group (glue.go's groups): asked
// of the kernel once per thread, then kept behind a pthread key (a
// syscall each XcclGroupStart, Send, Recv and End cost as much as a small
// grouped exchange's own work). A forked child's thread asks anew.
static pthread_key_t tid_key;
static pthread_once_t tid_once = PTHREAD_ONCE_INIT;
static int tid_ok;

static void tid_forget(void) { pthread_setspecific(tid_key, NULL); }

static void tid_make_key(void) {
  tid_ok = pthread_key_create(&tid_key, NULL) == 0 && pthread_atfork(NULL, NULL, tid_forget) == 0;
}

int xccl_abi_tid(void) {
  pthread_once(&tid_once, tid_make_key);
  if (tid_ok) {
    void* v = pthread_getspecific(tid_key);
    if (v != NULL) return (int)(intptr_t)v;
  }
  int tid = (int)syscall(SYS_gettid);
  if (tid_ok) pthread_setspecific(tid_key, (void*)(intptr_t)tid);
  return tid;
}

static inline xccl_fast* fast_of(C_CCLComm comm, C_Stream s, uint64_t* own) {
  uintptr_t h = (uintptr_t)comm - XCCL_COMM_BASE - 1;
  if (s != NULL || h >= XCCL_COMM_SLOTS || __atomic_load_n(&open_groups, __ATOMIC_RELAXED) != 0) return NULL;
  xccl_fast* f = __atomic_load_n(&fast_tab[h], __ATOMIC_ACQUIRE);
  *own = __atomic_load_n(&fast_own[h], __ATOMIC_RELAXED);
  return f;
}

#define XCCL_FAST_ENTRY(kind, send, recv, count, dt, op, root)                          \
  do {                                                                               \
    uint64_t own;                                                                    \
    xccl_fast* fs = fast_of(comm, stream, &own);                                     \
    if (fs != NULL) {                                                                \
      if ((size_t)(root) > INT32_MAX) break;                                         \
      switch (xccl_fast_run(fs, own, kind, send, recv, count, dt, op, (int)root)) { \
        case XCCL_FAST_DONE:                                                         \
          return C_SUCCESS;                                                          \
        case XCCL_FAST_RESUME:                                                       \
          return xcclFastResume(fs, kind, (void*)send, recv, count, dt, op, root);   \
      }                                                                              \
    }                                                                                \
  } while (0)

C_Status XcclAllReduce(void* send_buf, void* recv_buf, size_t count, C_DataType data_type, C_CCLReduceOp op,
                       C_CCLComm comm, C_Stream stream) {
  XCCL_FAST_ENTRY(0, send_buf, recv_buf, count, data_type, op, 0);
  return xcclAllReduce(send_buf, recv_buf, count, data_type, op, comm, stream);
}

C_Status XcclAllGather(void* send_buf, void* recv_buf, size_t count, C_DataType data_type, C_CCLComm comm,
                       C_Stream stream) {
  XCCL_FAST_ENTRY(3, send_buf, recv_buf, count, data_type, 0, 0);
  return xcclAllGather(send_buf, recv_buf, count, data_type, comm, stream);
}

C_Status XcclReduceScatter(void* send_buf, void* recv_buf, size_t count, C_DataType data_type, C_CCLReduceOp op,
                           C_CCLComm comm, C_Stream stream) {
  XCCL_FAST_ENTRY(4, send_buf, recv_buf, count, data_type, op, 0);
  return xcclReduceScatter(send_buf, recv_buf, count, data_type, op, comm, stream);
}

C_Status XcclBroadcast(void* buf, size_t count, C_DataType data_type, size_t root, C_CCLComm comm, C_Stream stream) {
  XCCL_FAST_ENTRY(1, buf, buf, count, data_type, 0, root);
  return xcclBroadcast(buf, count, data_type, root, comm, stream);
}

C_Status XcclReduce(void* send_buf, void* recv_buf, size_t count, C_DataType data_type, C_CCLReduceOp op, size_t root,
                    C_CCLComm comm, C_Stream stream) {
  XCCL_FAST_ENTRY(2, send_buf, recv_buf, count, data_type, op, root);
  return xcclReduce(send_buf, recv_buf, count, data_type, op, root, comm, stream);
}

C_Status XcclAllReduceFused(const void** send_bufs, void** recv_bufs, const size_t* counts, size_t nbufs,
                            C_DataType data_type, C_CCLReduceOp op, C_CCLComm comm, C_Stream stream) {
  uint64_t own;
  xccl_fast* fs = fast_of(comm, stream, &own);
  if (fs != NULL && send_bufs != NULL && recv_bufs != NULL && counts != NULL) {
    switch (xccl_fast_fused(fs, own, nbufs, (const void* const*)send_bufs, recv_bufs, counts, data_type, op)) {
      case XCCL_FAST_DONE:
        return C_SUCCESS;
      case XCCL_FAST_RESUME:
        return xcclFastResumeFused(fs, (void**)send_bufs, recv_bufs, (size_t*)counts, nbufs, data_type, op);
    }
  }
  return xcclAllReduceFused((void**)send_bufs, recv_bufs, (size_t*)counts, nbufs, data_type, op, comm, stream);
}

// Groups. A group opened on a thread with none in Go is first recorded
// here: while it holds only sends and receives that Go would take as they
// are (the NULL stream, a host communicator whose C fast state is on,
// arguments Go accepts; checked below as Go checks them), each call is
// noted in the thread's record and returns, and its end hands the whole
// group to Go in one call (xcclGroupRecorded), which runs it as Go's group
// of the same calls would have run. Any other call comes to Go, which then
// adopts the record as the thread's group (glue.go's adopt) and goes on
// from there: a small exchange enters Go once, not four times (each entry
// costs as much as the exchange itself). open_groups counts a recorded
// group as one, so collectives skip their fast path and ask Go meanwhile.
//
// A thread's record is on the heap behind a pthread key, made at its first
// group: Go's c-shared library takes its TLS from glibc's small static
// surplus (a library dlopened late), which must hold nothing of xccl's.
typedef struct {
  int depth;   // nesting of the recorded group (0: none recorded)
  int go_open; // the thread's group is Go's (xccl_abi_go_group)
  int n;
  xccl_rec ops[XCCL_REC_MAX];
} xccl_record;

static pthread_key_t rec_key;
static pthread_once_t rec_once = PTHREAD_ONCE_INIT;
static int rec_ok;

// rec_free: a thread that ends with a group recorded leaves it.
static void rec_free(void* p) {
  if (((xccl_record*)p)->depth > 0) __atomic_fetch_sub(&open_groups, 1, __ATOMIC_RELAXED);
  free(p);
}

static void rec_make_key(void) { __atomic_store_n(&rec_ok, pthread_key_create(&rec_key, rec_free) == 0, __ATOMIC_RELEASE); }

// thread_record is the calling thread's record (NULL: none could be made,
// and the thread's groups are Go's alone).
static xccl_record* thread_record(void) {
  pthread_once(&rec_once, rec_make_key);
  if (!rec_ok) return NULL;
  xccl_record* r = pthread_getspecific(rec_key);
  if (r == NULL && (r = calloc(1, sizeof *r)) != NULL && pthread_setspecific(rec_key, r) != 0) {
    free(r);
    r = NULL;
  }
  return r;
}

// recording is the calling thread's record while it records a group.
static inline xccl_record* recording(void) {
  if (__atomic_load_n(&open_groups, __ATOMIC_RELAXED) == 0 || !__atomic_load_n(&rec_ok, __ATOMIC_ACQUIRE)) return NULL;
  xccl_record* r = pthread_getspecific(rec_key);
  return r != NULL && r->depth > 0 ? r : NULL;
}

xccl_rec* xccl_abi_take_recorded(int* depth, int* n) {
  xccl_record* r = recording();
  *depth = r != NULL ? r->depth : 0;
  *n = r != NULL ? r->n : 0;
  if (r == NULL) return NULL;
  r->depth = 0;
  r->go_open = 1;
  __atomic_fetch_sub(&open_groups, 1, __ATOMIC_RELAXED); // Go's group counts from now on
  return r->ops;
}

void xccl_abi_go_group(int open) {
  xccl_record* r = thread_record();
  if (r != NULL) r->go_open = open;
}

// The group entries and the point-to-point ones that reach Go pass it the
// calling thread's id, which keys Go's groups (a Go call into C for it
// costs more than the lookup). A send or receive outside any group passes 0.
C_Status XcclGroupStart(void) {
  xccl_record* r = thread_record();
  if (r == NULL || r->go_open) return xcclGroupStart(xccl_abi_tid());
  if (r->depth++ == 0) {
    r->n = 0;
    __atomic_fetch_add(&open_groups, 1, __ATOMIC_RELAXED);
  }
  return C_SUCCESS;
}

C_Status XcclGroupEnd(void) {
  xccl_record* r = recording();
  if (r == NULL) return xcclGroupEnd(xccl_abi_tid());
  if (--r->depth > 0) return C_SUCCESS;
  __atomic_fetch_sub(&open_groups, 1, __ATOMIC_RELAXED);
  int n = r->n;
  r->n = 0;
  return n == 0 ? C_SUCCESS : xcclGroupRecorded(r->ops, n);
}

// recordable says whether a send or receive inside a recorded group is
// one Go takes as it is (validate's checks), to run at the group's end.
static int recordable(const xccl_record* r, const void* buf, size_t count, C_DataType dt, size_t peer, C_CCLComm comm,
                      C_Stream stream) {
  uintptr_t h = (uintptr_t)comm - XCCL_COMM_BASE - 1;
  if (r->n >= XCCL_REC_MAX || stream != NULL || h >= XCCL_COMM_SLOTS || buf == NULL || count == 0 ||
      count > ((size_t)1 << 40) || (unsigned)dt >= 32)
    return 0;
  xccl_fast* f = __atomic_load_n(&fast_tab[h], __ATOMIC_ACQUIRE);
  uint64_t own = __atomic_load_n(&fast_own[h], __ATOMIC_RELAXED);
  return f != NULL && __atomic_load_n(&f->owner, __ATOMIC_RELAXED) == own &&
         __atomic_load_n(&f->off, __ATOMIC_RELAXED) == 0 && f->size[dt] != 0 && peer < (size_t)f->n;
}

static inline int group_tid(void) { return __atomic_load_n(&open_groups, __ATOMIC_RELAXED) != 0 ? xccl_abi_tid() : 0; }

static C_Status record(xccl_record* r, int recv, void* buf, size_t count, C_DataType dt, size_t peer, C_CCLComm comm) {
  r->ops[r->n++] = (xccl_rec){.buf = buf, .count = count, .peer = peer, .comm = comm, .dt = dt, .recv = recv};
  return C_SUCCESS;
}

C_Status XcclSend(void* send_buf, size_t count, C_DataType data_type, size_t dest_rank, C_CCLComm comm,
                  C_Stream stream) {
  xccl_record* r = recording();
  if (r != NULL && recordable(r, send_buf, count, data_type, dest_rank, comm, stream))
    return record(r, 0, send_buf, count, data_type, dest_rank, comm);
  return xcclSend(send_buf, count, data_type, dest_rank, comm, stream, group_tid());
}

C_Status XcclRecv(void* recv_buf, size_t count, C_DataType data_type, size_t src_rank, C_CCLComm comm,
                  C_Stream stream) {
  xccl_record* r = recording();
  if (r != NULL && recordable(r, recv_buf, count, data_type, src_rank, comm, stream))
    return record(r, 1, recv_buf, count, data_type, src_rank, comm);
  return xcclRecv(recv_buf, count, data_type, src_rank, comm, stream, group_tid());
}
