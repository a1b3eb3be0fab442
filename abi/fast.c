// The C entries of the collectives the host device's C fast path takes
// (devices/host/fast.h): a NULL-stream call outside any group, on a
// communicator that has a fast state, tries it first and enters Go only
// when it answers so; everything else goes to the Go entry of the same name
// in lower case, as before.
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../devices/host/fast.h"
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

// The group entries and the point-to-point ones find the calling thread's
// group by its id, which C gives them (a Go call into C for it costs more
// than the lookup). A send or receive outside any group passes 0.
C_Status XcclGroupStart(void) { return xcclGroupStart(xccl_abi_tid()); }

C_Status XcclGroupEnd(void) { return xcclGroupEnd(xccl_abi_tid()); }

static inline int group_tid(void) { return __atomic_load_n(&open_groups, __ATOMIC_RELAXED) != 0 ? xccl_abi_tid() : 0; }

C_Status XcclSend(void* send_buf, size_t count, C_DataType data_type, size_t dest_rank, C_CCLComm comm,
                  C_Stream stream) {
  return xcclSend(send_buf, count, data_type, dest_rank, comm, stream, group_tid());
}

C_Status XcclRecv(void* recv_buf, size_t count, C_DataType data_type, size_t src_rank, C_CCLComm comm,
                  C_Stream stream) {
  return xcclRecv(recv_buf, count, data_type, src_rank, comm, stream, group_tid());
}
