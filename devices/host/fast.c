// The C fast path (fast.h): quickExchange and quickRun's steady state.
#include "fast.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels.h"

enum { K_ALLREDUCE = 0, K_BROADCAST = 1, K_REDUCE = 2, K_ALLGATHER = 3, K_REDUCESCATTER = 4 };

// rt.Fingerprint.Set's body: a broadcast carries no op, only a broadcast
// and a reduce a root.
void xccl_fast_body(int kind, int dtype, int op, int root, uint64_t count, uint64_t* w0, uint64_t* w1) {
  if (kind == K_BROADCAST) op = 0;
  if (kind != K_BROADCAST && kind != K_REDUCE) root = 0;
  *w0 = (uint64_t)(uint8_t)kind | (uint64_t)(uint8_t)dtype << 8 | (uint64_t)(uint8_t)op << 16 |
        (uint64_t)(uint32_t)root << 32;
  *w1 = count;
}

// The fingerprint message rt.Fingerprint.Put writes.
static void put_fp(uint8_t* m, uint64_t seq, uint64_t w0, uint64_t w1) {
  uint32_t magic = 0x46505843;
  memset(m, 0, XCCL_FAST_FP);
  memcpy(m, &magic, 4);
  memcpy(m + 4, &seq, 8);
  memcpy(m + 12, &w0, 8);
  memcpy(m + 20, &w1, 8);
}

static inline char* slot(char* base, const xccl_fast* f, uint64_t seq) {
  return base + (seq % XCCL_FAST_DEPTH) * f->slot;
}

// bell.ring: wake the peer if it sleeps.
static void ring(const xccl_fast_peer* p) {
  if (__atomic_load_n(p->bell_waiters, __ATOMIC_SEQ_CST) != 0) {
    __atomic_add_fetch(p->bell_seq, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, p->bell_seq, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
  }
}

enum { HEAD = 24, WRITE_AHEAD = 4, READ_AHEAD = 2, TELL_BATCH = 8, STAGE_MIN = 4096 };

enum { WAIT_ALL = -1, WAIT_NONE = -2 }; // waitAll, waitNone

// boxesFree's conditions (boxReady has nothing to drain: every peer is done
// with the slot seq goes into, its fingerprints up to seq-fastDepth are
// checked), and what quickExchange would drain: the fingerprints before seq
// of the peers this rank waits for. Read only, but for the cached count
// (seen).
static int boxes_ready(xccl_fast* f, uint64_t seq, int wait) {
  if (seq <= XCCL_FAST_DEPTH) return 0;
  uint64_t need = seq - XCCL_FAST_DEPTH;
  for (int p = 0; p < f->n; p++) {
    if (p == f->rank) continue;
    xccl_fast_peer* b = &f->peer[p];
    if ((wait == WAIT_ALL || wait == p) ? b->got + 1 != seq : b->got < need) return 0;
    if (b->seen < need) b->seen = __atomic_load_n(b->done_out, __ATOMIC_ACQUIRE);
    if (b->seen < need) return 0;
  }
  return 1;
}

// tell: the peer learns that this rank is done with its collectives up to
// upto, as far as their fingerprints are checked.
static void tell(xccl_fast_peer* b, uint64_t upto) {
  uint64_t t = b->got < upto ? b->got : upto;
  if (t > b->told) {
    b->told = t;
    __atomic_store_n(b->done_in, t, __ATOMIC_RELEASE);
    ring(b);
  }
}

// tellDue: tell, in batches.
static void tell_if_due(xccl_fast_peer* b, uint64_t seq) {
  uint64_t t = b->got < seq - 1 ? b->got : seq - 1;
  if (t >= b->told + TELL_BATCH || b->told + XCCL_FAST_DEPTH / 2 < seq) tell(b, seq - 1);
}

static inline uint64_t slot_seq(const xccl_fast* f, const xccl_fast_peer* b, uint64_t k) {
  return __atomic_load_n((const uint64_t*)slot(b->in, f, k), __ATOMIC_ACQUIRE);
}

// doneWith: the peer is done with collective j (j <= upto): it says so, or
// it sent a fingerprint of a later one, upto's or the next.
static int done_with(xccl_fast* f, xccl_fast_peer* b, uint64_t j, uint64_t upto) {
  if (b->seen < j) b->seen = __atomic_load_n(b->done_out, __ATOMIC_ACQUIRE);
  return b->seen >= j || (upto > j && slot_seq(f, b, upto) == upto) || slot_seq(f, b, upto + 1) == upto + 1;
}

// drainBox, for what needs no Go: the peer's collectives up to upto, in
// order, that this rank waited for nobody in and the peer sent nothing in
// (it is done with them), or whose fingerprint came and equals this rank's;
// then tell. It stops at anything else, a mismatch above all (Go's to
// report). A broadcast's root or a reduce's other rank that runs fastDepth
// ahead needs it: without it (and take's polls), such a rank's calls went
// to Go's drainBox one in tellBatch, as a slow peer's tells came.
static void drain_box(xccl_fast* f, xccl_fast_peer* b, uint64_t upto) {
  while (b->got < upto) {
    uint64_t j = b->got + 1;
    if (slot_seq(f, b, j) != j) {
      if (f->lone[j % XCCL_FAST_DEPTH] != j || !done_with(f, b, j, upto)) break;
      if (slot_seq(f, b, j) != j) { // the peer found this rank's fingerprint equal and sent none
        b->got = j;
        continue;
      }
    }
    const char* s = slot(b->in, f, j);
    if (memcmp(s + 8, f->sent[j % XCCL_FAST_DEPTH] + 12, HEAD - 8) != 0) break;
    b->got = j;
  }
  tell(b, upto);
}

// publish makes the message of seq in b's slot visible (its header and
// nb data bytes written) and asks for the slot WRITE_AHEAD calls on.
static void publish(xccl_fast* f, xccl_fast_peer* b, uint64_t seq, size_t nb) {
  char* s = slot(b->out, f, seq);
  __atomic_store_n((uint64_t*)s, seq, __ATOMIC_RELEASE);
  char* ahead = slot(b->out, f, seq + WRITE_AHEAD);
  __builtin_prefetch(ahead, 1);
  if (HEAD + nb > 64) __builtin_prefetch(ahead + 64, 1);
  ring(b);
}

static char* head(xccl_fast* f, xccl_fast_peer* b, uint64_t seq, uint64_t w0, uint64_t w1) {
  char* s = slot(b->out, f, seq);
  memcpy(s + 8, &w0, 8);
  memcpy(s + 16, &w1, 8);
  return s + HEAD;
}

static void send_to(xccl_fast* f, xccl_fast_peer* b, uint64_t seq, uint64_t w0, uint64_t w1, const void* data,
                    size_t nb) {
  char* d = head(f, b, seq, w0, w1);
  if (nb > 0) memcpy(d, data, nb);
  publish(f, b, seq, nb);
}

// quickPoll and the body check: whether the peer's fingerprint of seq came
// and equals this rank's. It polls f->spin times, and as many again for
// each 4 KiB of data the peer copies into the slot before it publishes
// (nb): a peer wrote 20 KiB in 0.7-1.7 us here, past a spin, and a resume
// costs a C->Go call and Go's wait (10 x 512 floats fused through the C
// API, 2 ranks: 1.46-1.61 -> 1.12-1.20 us, the data alone 0.67; in the
// VM's slow state 5.4-7.5 -> 4.6-6.3, the data 1.70; docs/perf/fused-
// 2026-11-27.txt). The rank does not yield meanwhile, as collect would
// not before spin polls: with spin 1 (more ranks than CPUs) it polls 9
// times at most.
static int arrived(xccl_fast* f, xccl_fast_peer* b, uint64_t seq, uint64_t w0, uint64_t w1, size_t nb) {
  char* s = slot(b->in, f, seq);
  int64_t n = (int64_t)f->spin * (int64_t)(1 + (nb >> 12));
  if (__atomic_load_n((uint64_t*)s, __ATOMIC_ACQUIRE) == seq) {
    char* ahead = slot(b->in, f, seq + READ_AHEAD);
    __builtin_prefetch(ahead, 0);
    __builtin_prefetch(ahead + 64, 0);
  } else {
    for (; n > 0; n--) {
      if (__atomic_load_n((uint64_t*)s, __ATOMIC_ACQUIRE) == seq) break;
    }
    if (n == 0) return 0;
  }
  uint64_t v0, v1;
  memcpy(&v0, s + 8, 8);
  memcpy(&v1, s + 16, 8);
  return v0 == w0 && v1 == w1;
}

static inline const char* data_of(xccl_fast* f, int p, uint64_t seq) {
  return slot(f->peer[p].in, f, seq) + HEAD;
}

// reduceRankOrder: recv = from(0) op from(1), then recv op= from(p), the
// peers' data at off in their slots of seq.
static void reduce_rank_order(xccl_fast* f, char* recv, const char* mine, uint64_t seq, size_t off, size_t nb,
                              int dtype, int op) {
  if (f->rank != 0 && recv < mine + nb && mine < recv + nb) {
    memcpy(f->scratch + off, mine, nb); // recv gets rank 0's first
    mine = f->scratch + off;
  }
  const char* a = f->rank == 0 ? mine : data_of(f, 0, seq) + off;
  const char* b = f->rank == 1 ? mine : data_of(f, 1, seq) + off;
  xccl_reduce3(recv, a, b, nb, dtype, op);
  for (int p = 2; p < f->n; p++) {
    xccl_reduce3(recv, recv, p == f->rank ? mine : data_of(f, p, seq) + off, nb, dtype, op);
  }
}

static inline int reducible(const xccl_fast* f, int dtype, int op) {
  return op >= 0 && op < 8 && (f->red[dtype] >> op & 1);
}

static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;
static xccl_fast* free_list;

xccl_fast* xccl_fast_get(void) {
  pthread_mutex_lock(&free_mu);
  xccl_fast* f = free_list;
  if (f != NULL) free_list = f->next;
  pthread_mutex_unlock(&free_mu);
  if (f == NULL) return calloc(1, sizeof *f);
  memset(f, 0, sizeof *f); // owner 0 until Go sets its token: nobody's
  return f;
}

void xccl_fast_put(xccl_fast* f) {
  __atomic_store_n(&f->owner, 0, __ATOMIC_RELAXED);
  pthread_mutex_lock(&free_mu);
  f->next = free_list;
  free_list = f;
  pthread_mutex_unlock(&free_mu);
}

// take takes the lock for a call of owner's whose boxes are ready (wait:
// whose fingerprints it waits for); 0: not, the lock not held.
static int take(xccl_fast* f, uint64_t owner, int wait) {
  uint64_t idle = 0;
  if (__atomic_load_n(&f->off, __ATOMIC_RELAXED) ||
      !__atomic_compare_exchange_n(&f->word, &idle, XCCL_FAST_C, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    return 0; // off, held, or an error to report
  }
  if (owner == 0 || __atomic_load_n(&f->owner, __ATOMIC_RELAXED) != owner) {
    __atomic_store_n(&f->word, 0, __ATOMIC_RELEASE);
    return 0;
  }
  // A rank ahead of its peers polls (f->spin times, as arrived does) for
  // them to be done with the slots it needs, draining as drainBox does.
  uint64_t seq = f->seq + 1;
  for (int n = seq > XCCL_FAST_DEPTH ? f->spin : 0; !boxes_ready(f, seq, wait); n--) {
    if (n <= 0) {
      __atomic_store_n(&f->word, 0, __ATOMIC_RELEASE);
      return 0;
    }
    for (int p = 0; p < f->n; p++) {
      if (p != f->rank && f->peer[p].got + 1 < seq) drain_box(f, &f->peer[p], seq - 1);
    }
  }
  return 1;
}

// add_stat adds n to a statistic; only the lock's holder writes them.
static inline void add_stat(uint64_t* c, uint64_t n) {
  __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

int xccl_fast_run(xccl_fast* f, uint64_t owner, int kind, const void* send, void* recv, size_t count, int dtype, int op,
                  int root) {
  if (count == 0 || dtype < 0 || dtype >= 32 || f->size[dtype] == 0) return XCCL_FAST_NOT;
  size_t nb = count * f->size[dtype];
  if (nb / f->size[dtype] != count || nb > f->cap) return XCCL_FAST_NOT;
  int me = f->rank, n = f->n;
  // quickRun's plan: every peer p gets out + p*step (nothing where out is
  // NULL, or where to is set and is not p); wait names whose fingerprints
  // count.
  const char* out = send;
  size_t step = 0;
  int to = -1, wait = WAIT_ALL;
  if (recv == NULL && !(kind == K_REDUCE && me != root)) return XCCL_FAST_NOT;
  switch (kind) {
    case K_ALLREDUCE:
      if (send == NULL || nb >= f->reduce_max || !reducible(f, dtype, op)) return XCCL_FAST_NOT;
      if (!__atomic_load_n(&f->logged, __ATOMIC_RELAXED)) return XCCL_FAST_NOT;
      break;
    case K_REDUCESCATTER:
      if (!reducible(f, dtype, op)) return XCCL_FAST_NOT;
      step = nb;
      // fall through
    case K_ALLGATHER:
      if (send == NULL || nb * (size_t)n >= f->others_max) return XCCL_FAST_NOT;
      break;
    case K_BROADCAST:
      if (root < 0 || root >= n || nb >= f->others_max) return XCCL_FAST_NOT;
      send = recv; // the root sends its buffer
      out = me == root ? recv : NULL;
      wait = me == root ? WAIT_NONE : root;
      break;
    case K_REDUCE:
      if (root < 0 || root >= n || nb >= f->others_max || !reducible(f, dtype, op)) return XCCL_FAST_NOT;
      if (send == NULL) return XCCL_FAST_NOT;
      out = me == root ? NULL : send;
      to = root;
      wait = me == root ? WAIT_ALL : WAIT_NONE;
      break;
    default:
      return XCCL_FAST_NOT;
  }
  int lone = wait == WAIT_NONE;
  int quiet = !lone && ((kind == K_BROADCAST && me != root) || (kind == K_REDUCE && me == root));
  if (!take(f, owner, wait)) return XCCL_FAST_NOT;
  uint64_t seq = f->seq + 1;
  // From here on the call is this rank's collective seq (keepSent, then
  // quickExchange).
  f->seq = seq;
  uint64_t w0, w1;
  xccl_fast_body(kind, dtype, op, root, count, &w0, &w1);
  put_fp(f->sent[seq % XCCL_FAST_DEPTH], seq, w0, w1);
  if (lone) f->lone[seq % XCCL_FAST_DEPTH] = seq;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    xccl_fast_peer* b = &f->peer[p];
    tell_if_due(b, seq);
    if (quiet && (wait == WAIT_ALL || wait == p)) continue;
    int data = out != NULL && (to < 0 || to == p);
    send_to(f, b, seq, w0, w1, data ? out + p * step : NULL, data ? nb : 0);
  }
  if (!lone) {
    for (int p = 0; p < n; p++) {
      if (p == me || (wait >= 0 && wait != p) || arrived(f, &f->peer[p], seq, w0, w1, nb)) continue;
      if (quiet) { // the peers waited for check this rank's fingerprint after all
        for (int q = 0; q < n; q++) {
          if (q != me && (wait == WAIT_ALL || wait == q)) send_to(f, &f->peer[q], seq, w0, w1, NULL, 0);
        }
      }
      return XCCL_FAST_RESUME; // collect takes it from here, in Go
    }
    for (int p = 0; p < n; p++) {
      if (p != me && (wait < 0 || wait == p)) f->peer[p].got = seq;
    }
  }
  switch (kind) {
    case K_ALLREDUCE:
      reduce_rank_order(f, recv, send, seq, 0, nb, dtype, op);
      break;
    case K_REDUCESCATTER:
      reduce_rank_order(f, recv, (const char*)send + me * nb, seq, 0, nb, dtype, op);
      break;
    case K_REDUCE:
      if (me == root) reduce_rank_order(f, recv, send, seq, 0, nb, dtype, op);
      break;
    case K_BROADCAST:
      if (me != root) memcpy(recv, data_of(f, root, seq), nb);
      break;
    case K_ALLGATHER:
      for (int p = 0; p < n; p++) {
        char* d = (char*)recv + p * nb;
        if (p != me) {
          memcpy(d, data_of(f, p, seq), nb);
        } else if (d != (const char*)send) {
          memmove(d, send, nb);
        }
      }
      break;
  }
  add_stat(kind == K_ALLREDUCE ? &f->calls_ar : &f->calls, 1);
  __atomic_store_n(&f->word, 0, __ATOMIC_RELEASE);
  return XCCL_FAST_DONE;
}

int xccl_fast_fused(xccl_fast* f, uint64_t owner, size_t nbufs, const void* const* sends, void* const* recvs,
                    const size_t* counts, int dtype, int op) {
  if (nbufs < 2 || dtype < 0 || dtype >= 32 || f->size[dtype] == 0 || !reducible(f, dtype, op)) return XCCL_FAST_NOT;
  size_t es = f->size[dtype], total = 0;
  for (size_t i = 0; i < nbufs; i++) {
    if (counts[i] == 0 || sends[i] == NULL || recvs[i] == NULL || counts[i] > f->cap / es) return XCCL_FAST_NOT;
    total += counts[i];
    if (total > f->cap / es) return XCCL_FAST_NOT;
  }
  if (!take(f, owner, WAIT_ALL)) return XCCL_FAST_NOT;
  if (total * es >= f->fused_max) { // one that may copy once: here only while its class is private (fusedMemo)
    uint64_t probe = f->fused_probe[64 - __builtin_clzll((unsigned long long)(total * es))];
    if (probe == 0 || f->seq + 1 >= probe) {
      __atomic_store_n(&f->word, 0, __ATOMIC_RELEASE);
      return XCCL_FAST_NOT; // fusedShared tries, in Go
    }
  }
  // fusedDirect: one fingerprint for the batch (root fusedRoot, the
  // elements of all), every send buffer in turn in each peer's slot.
  uint64_t seq = ++f->seq, w0, w1;
  xccl_fast_body(K_ALLREDUCE, dtype, op, 0, total, &w0, &w1);
  w0 |= (uint64_t)XCCL_FUSED_ROOT << 32;
  put_fp(f->sent[seq % XCCL_FAST_DEPTH], seq, w0, w1);
  int me = f->rank, n = f->n;
  // The batch goes into each peer's slot in one copy, from the send
  // buffers gathered in scratch first: a copy of several KiB into lines a
  // peer holds runs as one string (the CPU writes whole lines without
  // reading them), its pieces as vector stores that fetch every line
  // first, which costs where the two CPUs are far apart (the VM's slow
  // state: a 2-rank batch of 10 x 512 floats 4.3-4.6 -> 2.5-2.8 us; 20 KiB
  // in ten pieces between 2 processes 3.85 us, staged 1.80, one buffer
  // 1.65). Where they are near it costs the local copy (0.96-1.09 -> 1.11-
  // 1.21 us; the pieces and the staged copy both 0.92). The reduction
  // below then reads this rank's data from scratch, where an in-place
  // buffer's own data already is (reduce_rank_order copies it there).
  const char* whole = NULL;
  if (total * es >= STAGE_MIN) { // nbufs >= 2
    char* s = f->scratch;
    for (size_t i = 0; i < nbufs; i++) {
      memcpy(s, sends[i], counts[i] * es);
      s += counts[i] * es;
    }
    whole = f->scratch;
  }
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    xccl_fast_peer* b = &f->peer[p];
    tell_if_due(b, seq);
    char* d = head(f, b, seq, w0, w1);
    if (whole != NULL) {
      memcpy(d, whole, total * es);
    } else {
      for (size_t i = 0; i < nbufs; i++) {
        memcpy(d, sends[i], counts[i] * es);
        d += counts[i] * es;
      }
    }
    publish(f, b, seq, total * es);
  }
  for (int p = 0; p < n; p++) {
    if (p != me && !arrived(f, &f->peer[p], seq, w0, w1, total * es)) return XCCL_FAST_RESUME;
  }
  for (int p = 0; p < n; p++) {
    if (p != me) f->peer[p].got = seq;
  }
  size_t off = 0;
  for (size_t i = 0; i < nbufs; i++) {
    size_t nb = counts[i] * es;
    reduce_rank_order(f, recvs[i], whole != NULL ? whole + off : sends[i], seq, off, nb, dtype, op);
    off += nb;
  }
  add_stat(&f->calls_ar, 1);
  add_stat(&f->calls_fused, 1);
  add_stat(&f->bufs_fused, nbufs);
  __atomic_store_n(&f->word, 0, __ATOMIC_RELEASE);
  return XCCL_FAST_DONE;
}
