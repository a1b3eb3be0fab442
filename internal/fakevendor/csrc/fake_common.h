/* Shared machinery of the fake vendor libraries the tests build: a
 * communicator is a /dev/shm segment named after the unique id, so its
 * ranks may be threads of one process or separate processes. Collectives
 * copy every rank's input into a slot, meet at a barrier, and compute the
 * result from all slots in rank order. Point-to-point messages stream
 * through one byte ring per (source, destination). Every wait has a
 * deadline: a fake fails loudly, it never hangs. */
#ifndef FAKE_COMMON_H_
#define FAKE_COMMON_H_
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAKE_MAXR 16
#define FAKE_HDR 8192
#define FAKE_SLOT (32u << 20)
#define FAKE_BOX (8u << 20)
#define FAKE_STREAM_MAGIC 0x5354524541ULL /* "STREA": streams made by the fake runtime */

/* The header every rank maps. Its ranks meet through atomics they poll (no
 * process-shared mutex or condition variable). Runs under load used to
 * fail now and then, some ranks kept out of a barrier, silently, for the
 * 60 s the rank already there waited: that was Go's stop-the-world waiting
 * for the rank in the barrier (see fake_pause), which the hook ends. */
typedef struct {
  atomic_int state; /* 0 new, 1 initializing, 2 ready */
  int nranks;
  atomic_int refs, joined;
  _Atomic uint64_t bar; /* the barrier: generation << 32 | ranks arrived */
  _Atomic uint64_t head[FAKE_MAXR][FAKE_MAXR], tail[FAKE_MAXR][FAKE_MAXR]; /* bytes in and out of each box */
  atomic_int sending[FAKE_MAXR][FAKE_MAXR], receiving[FAKE_MAXR][FAKE_MAXR]; /* one sender, one receiver a box */
} fake_hdr;
_Static_assert(sizeof(fake_hdr) <= FAKE_HDR, "the fake's header outgrew its place");

typedef struct {
  uint64_t magic;
  fake_hdr* h;
  char* base;
  size_t size;
  int rank, nranks;
  char path[96];
  int nonblocking;     /* NCCL_COMM_BLOCKING=0 at init (fake_nccl.c) */
  atomic_int pending;  /* async-error polls that still say "in progress" */
} fake_comm;

#define FAKE_COMM_MAGIC 0x46414b45434f4d4dULL

static size_t fake_seg_size(void) {
  return FAKE_HDR + (size_t)FAKE_MAXR * FAKE_SLOT + (size_t)FAKE_MAXR * FAKE_MAXR * FAKE_BOX;
}
static char* fake_slot(fake_comm* c, int r) { return c->base + FAKE_HDR + (size_t)r * FAKE_SLOT; }
static char* fake_box(fake_comm* c, int s, int d) {
  return c->base + FAKE_HDR + (size_t)FAKE_MAXR * FAKE_SLOT + ((size_t)s * FAKE_MAXR + (size_t)d) * FAKE_BOX;
}

/* Every wait has a deadline 60 s on (CLOCK_MONOTONIC: a step of a VM's
 * wall clock must not expire it). */
static void fake_deadline(struct timespec* ts) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += 60;
}

static int fake_expired(const struct timespec* deadline) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

/* The Go test process's xcclFakeWaitHook (internal/fakevendor, exported
 * with -rdynamic), NULL in any other process. Go's stop-the-world (1.26,
 * 1.27) can miss a goroutine that enters a cgo call as it starts: it checks
 * for a pending stop before it marks itself in a syscall, and the stop
 * takes syscalling Ps in one pass only, then waits for that goroutine to
 * come back. A fake's wait that is for another goroutine (thread ranks)
 * then waits for ever: the others are stopped. A call into Go gives the P
 * up, so a wait calls the hook now and then and the stop goes on. */
static void (*fake_hook)(void);
/* xcclFakeJoinHook, called as a rank joins: it notes whether Go's
 * collector was held off there (vendor.Joining says why it must be). */
static void (*fake_join_hook)(void);
static pthread_once_t fake_hook_once = PTHREAD_ONCE_INIT;
static void fake_find_hook(void) {
  fake_hook = (void (*)(void))dlsym(RTLD_DEFAULT, "xcclFakeWaitHook");
  fake_join_hook = (void (*)(void))dlsym(RTLD_DEFAULT, "xcclFakeJoinHook");
}

/* One more poll's wait: yields at first, then naps 20 us at a time, and
 * every 50 naps (a millisecond or more) calls the Go hook. */
static void fake_pause(int* polls) {
  if (++*polls < 100) {
    sched_yield();
    return;
  }
  struct timespec nap = {0, 20000};
  nanosleep(&nap, NULL);
  if (*polls % 50 == 0) {
    pthread_once(&fake_hook_once, fake_find_hook);
    if (fake_hook) fake_hook();
  }
}

/* A spin lock in the header, for the one sender (receiver) of a box. */
static int fake_lock(atomic_int* l, const struct timespec* deadline) {
  int polls = 0, idle = 0;
  while (!atomic_compare_exchange_weak(l, &idle, 1)) {
    idle = 0;
    if (fake_expired(deadline)) return ETIMEDOUT;
    fake_pause(&polls);
  }
  return 0;
}
static void fake_unlock(atomic_int* l) { atomic_store(l, 0); }

/* Opens (or creates) the segment of the id and joins as rank. */
static fake_comm* fake_join(const unsigned char* id, size_t idlen, int nranks, int rank, int* err) {
  if (nranks < 1 || nranks > FAKE_MAXR || rank < 0 || rank >= nranks) { *err = 1; return NULL; }
  pthread_once(&fake_hook_once, fake_find_hook);
  if (fake_join_hook) fake_join_hook();
  fake_comm* c = calloc(1, sizeof *c);
  char hex[33] = {0};
  for (int i = 0; i < 16 && (size_t)i < idlen; i++) sprintf(hex + 2 * i, "%02x", id[(idlen > 32 ? 16 : 0) + i]);
  snprintf(c->path, sizeof c->path, "/dev/shm/fakeccl-%s", hex);
  int fd = open(c->path, O_RDWR | O_CREAT, 0600);
  if (fd < 0) { free(c); *err = 2; return NULL; }
  c->size = fake_seg_size();
  if (ftruncate(fd, (off_t)c->size) != 0) { close(fd); free(c); *err = 2; return NULL; }
  c->base = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (c->base == MAP_FAILED) { free(c); *err = 2; return NULL; }
  c->h = (fake_hdr*)c->base;
  int zero = 0;
  if (atomic_compare_exchange_strong(&c->h->state, &zero, 1)) {
    c->h->nranks = nranks; /* the rest of a new segment is zero, as it should start */
    atomic_store(&c->h->state, 2);
  }
  while (atomic_load(&c->h->state) != 2) usleep(100);
  if (c->h->nranks != nranks) { munmap(c->base, c->size); free(c); *err = 1; return NULL; }
  atomic_fetch_add(&c->h->refs, 1);
  /* Every rank has mapped it: the name can go (as xccl's and NCCL's own
   * segments do), so a job that never destroys leaves nothing behind. */
  if (atomic_fetch_add(&c->h->joined, 1) + 1 == nranks) unlink(c->path);
  c->magic = FAKE_COMM_MAGIC;
  c->rank = rank;
  c->nranks = nranks;
  return c;
}

static void fake_leave(fake_comm* c) {
  if (atomic_fetch_sub(&c->h->refs, 1) == 1) unlink(c->path);
  munmap(c->base, c->size);
  c->magic = 0;
  free(c);
}

/* A generation barrier across the communicator; 0 or ETIMEDOUT. */
static int fake_barrier(fake_comm* c) {
  fake_hdr* h = c->h;
  struct timespec ts;
  fake_deadline(&ts);
  uint64_t w = atomic_fetch_add(&h->bar, 1) + 1;
  uint32_t gen = (uint32_t)(w >> 32);
  if ((uint32_t)w == (uint32_t)c->nranks) {
    atomic_store(&h->bar, (uint64_t)(gen + 1) << 32);
    return 0;
  }
  for (int polls = 0;; fake_pause(&polls)) {
    w = atomic_load(&h->bar);
    if ((uint32_t)(w >> 32) != gen) return 0;
    if (!fake_expired(&ts)) continue;
    /* This rank leaves: a late one does not complete a barrier it gave up
     * (unless every rank is there: then it is over). */
    while ((uint32_t)(w >> 32) == gen && (uint32_t)w < (uint32_t)c->nranks) {
      if (atomic_compare_exchange_weak(&h->bar, &w, w - 1)) {
        /* Say where everyone was, so that a hang explains itself. */
        fprintf(stderr, "fake ccl: rank %d of %d timed out after 60 s at barrier %u (%u arrived)\n", c->rank, c->nranks,
                gen, (uint32_t)w);
        return ETIMEDOUT;
      }
    }
    return 0;
  }
}

/* Streams bytes into the (rank → dst) box, a ring; waits only while it is
 * full. */
static int fake_send(fake_comm* c, const void* buf, size_t n, int dst) {
  fake_hdr* h = c->h;
  char* box = fake_box(c, c->rank, dst);
  const char* p = buf;
  struct timespec ts;
  fake_deadline(&ts);
  atomic_int* lock = &h->sending[c->rank][dst];
  if (fake_lock(lock, &ts)) return ETIMEDOUT;
  _Atomic uint64_t *head = &h->head[c->rank][dst], *tail = &h->tail[c->rank][dst];
  for (int polls = 0; n > 0;) {
    uint64_t hd = atomic_load(head), room = FAKE_BOX - (hd - atomic_load(tail));
    if (room == 0) {
      if (fake_expired(&ts)) { fake_unlock(lock); return ETIMEDOUT; }
      fake_pause(&polls);
      continue;
    }
    size_t k = n < room ? n : room, at = hd % FAKE_BOX, first = k < FAKE_BOX - at ? k : FAKE_BOX - at;
    memcpy(box + at, p, first);
    memcpy(box, p + first, k - first);
    atomic_store(head, hd + k);
    p += k;
    n -= k;
    polls = 0;
  }
  fake_unlock(lock);
  return 0;
}

static int fake_recv(fake_comm* c, void* buf, size_t n, int src) {
  fake_hdr* h = c->h;
  char* box = fake_box(c, src, c->rank);
  char* p = buf;
  struct timespec ts;
  fake_deadline(&ts);
  atomic_int* lock = &h->receiving[src][c->rank];
  if (fake_lock(lock, &ts)) return ETIMEDOUT;
  _Atomic uint64_t *head = &h->head[src][c->rank], *tail = &h->tail[src][c->rank];
  for (int polls = 0; n > 0;) {
    uint64_t tl = atomic_load(tail), avail = atomic_load(head) - tl;
    if (avail == 0) {
      if (fake_expired(&ts)) { fake_unlock(lock); return ETIMEDOUT; }
      fake_pause(&polls);
      continue;
    }
    size_t k = n < avail ? n : avail, at = tl % FAKE_BOX, first = k < FAKE_BOX - at ? k : FAKE_BOX - at;
    memcpy(p, box + at, first);
    memcpy(p + first, box, k - first);
    atomic_store(tail, tl + k);
    p += k;
    n -= k;
    polls = 0;
  }
  fake_unlock(lock);
  return 0;
}

/* ---- element kinds the fakes reduce, and the reduction itself ---- */
enum fake_kind { K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64, K_F16, K_BF16, K_F32, K_F64 };
enum fake_op { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG };

static size_t fake_kind_size(int k) {
  static const size_t s[] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
  return s[k];
}

static float fake_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0 && man == 0) bits = sign;
  else if (exp == 0) {
    exp = 127 - 15 + 1;
    while (!(man & 0x400)) { man <<= 1; exp--; }
    bits = sign | exp << 23 | (man & 0x3ff) << 13;
  } else if (exp == 0x1f) bits = sign | 0xffu << 23 | man << 13;
  else bits = sign | (exp + 127 - 15) << 23 | man << 13;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static uint16_t fake_f2h(float f) { /* via the compiler's _Float16: round to nearest even */
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
static float fake_bf2f(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t fake_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)(u >> 16) | 0x40;
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

#define FAKE_RED_INT(T)                                                           \
  {                                                                               \
    T* o = out;                                                                   \
    for (size_t i = 0; i < n; i++) {                                              \
      T a = ((const T*)in[0])[i];                                                 \
      for (int r = 1; r < nr; r++) {                                              \
        T b = ((const T*)in[r])[i];                                               \
        switch (op) {                                                             \
          case O_SUM: case O_AVG: a = (T)(a + b); break;                          \
          case O_PROD: a = (T)(a * b); break;                                     \
          case O_MAX: a = b > a ? b : a; break;                                   \
          default: a = b < a ? b : a; break;                                      \
        }                                                                         \
      }                                                                           \
      o[i] = op == O_AVG ? (T)(a / (T)nr) : a;                                    \
    }                                                                             \
  }
#define FAKE_RED_FLOAT(T, LOAD, STORE)                                            \
  {                                                                               \
    for (size_t i = 0; i < n; i++) {                                              \
      T a = LOAD(in[0], i);                                                       \
      for (int r = 1; r < nr; r++) {                                              \
        T b = LOAD(in[r], i);                                                     \
        switch (op) {                                                             \
          case O_SUM: case O_AVG: a += b; break;                                  \
          case O_PROD: a *= b; break;                                             \
          case O_MAX: a = b > a ? b : a; break;                                   \
          default: a = b < a ? b : a; break;                                      \
        }                                                                         \
      }                                                                           \
      if (op == O_AVG) a /= (T)nr;                                                \
      STORE(out, i, a);                                                           \
    }                                                                             \
  }
#define LD_F32(p, i) (((const float*)(p))[i])
#define ST_F32(p, i, v) (((float*)(p))[i] = (v))
#define LD_F64(p, i) (((const double*)(p))[i])
#define ST_F64(p, i, v) (((double*)(p))[i] = (v))
#define LD_F16(p, i) fake_h2f(((const uint16_t*)(p))[i])
#define ST_F16(p, i, v) (((uint16_t*)(p))[i] = fake_f2h(v))
#define LD_BF16(p, i) fake_bf2f(((const uint16_t*)(p))[i])
#define ST_BF16(p, i, v) (((uint16_t*)(p))[i] = fake_f2bf(v))

/* FAKE_BY_KIND runs INT(T) for an integer kind, FLOAT(T, LOAD, STORE) for
 * a floating one (halves as float, loaded and stored through their
 * conversions). */
#define FAKE_BY_KIND(kind, INT, FLOAT)                   \
  switch (kind) {                                        \
    case K_I8: INT(int8_t) break;                        \
    case K_U8: INT(uint8_t) break;                       \
    case K_I16: INT(int16_t) break;                      \
    case K_U16: INT(uint16_t) break;                     \
    case K_I32: INT(int32_t) break;                      \
    case K_U32: INT(uint32_t) break;                     \
    case K_I64: INT(int64_t) break;                      \
    case K_U64: INT(uint64_t) break;                     \
    case K_F16: FLOAT(float, LD_F16, ST_F16) break;      \
    case K_BF16: FLOAT(float, LD_BF16, ST_BF16) break;   \
    case K_F32: FLOAT(float, LD_F32, ST_F32) break;      \
    default: FLOAT(double, LD_F64, ST_F64) break;        \
  }

/* out[i] = op over in[0..nr-1][i], in rank order; halves in float, rounded once. */
static void fake_reduce(void* out, const void* const* in, int nr, size_t n, int kind, int op) {
  FAKE_BY_KIND(kind, FAKE_RED_INT, FAKE_RED_FLOAT)
}

/* The collectives, in vendor-neutral form. Each returns 0 or an errno. */
static int fake_all_reduce(fake_comm* c, const void* s, void* r, size_t n, int kind, int op, int root, int only_root) {
  size_t bytes = n * fake_kind_size(kind);
  if (bytes > FAKE_SLOT) return EMSGSIZE;
  memcpy(fake_slot(c, c->rank), s, bytes);
  if (fake_barrier(c)) return ETIMEDOUT;
  if (!only_root || c->rank == root) {
    const void* in[FAKE_MAXR];
    for (int q = 0; q < c->nranks; q++) in[q] = fake_slot(c, q);
    fake_reduce(r, in, c->nranks, n, kind, op);
  }
  return fake_barrier(c);
}

static int fake_reduce_scatter(fake_comm* c, const void* s, void* r, size_t n, int kind, int op) {
  size_t es = fake_kind_size(kind), bytes = n * es * (size_t)c->nranks;
  if (bytes > FAKE_SLOT) return EMSGSIZE;
  memcpy(fake_slot(c, c->rank), s, bytes);
  if (fake_barrier(c)) return ETIMEDOUT;
  const void* in[FAKE_MAXR];
  for (int q = 0; q < c->nranks; q++) in[q] = fake_slot(c, q) + (size_t)c->rank * n * es;
  fake_reduce(r, in, c->nranks, n, kind, op);
  return fake_barrier(c);
}

static int fake_broadcast(fake_comm* c, const void* s, void* r, size_t bytes, int root) {
  if (bytes > FAKE_SLOT) return EMSGSIZE;
  if (c->rank == root) memcpy(fake_slot(c, root), s, bytes);
  if (fake_barrier(c)) return ETIMEDOUT;
  if (c->rank != root || r != s) memmove(r, fake_slot(c, root), bytes);
  return fake_barrier(c);
}

static int fake_all_gather(fake_comm* c, const void* s, void* r, size_t bytes) {
  if (bytes > FAKE_SLOT) return EMSGSIZE;
  memcpy(fake_slot(c, c->rank), s, bytes);
  if (fake_barrier(c)) return ETIMEDOUT;
  for (int q = 0; q < c->nranks; q++) memmove((char*)r + (size_t)q * bytes, fake_slot(c, q), bytes);
  return fake_barrier(c);
}

/* Groups: ops between start and end are queued per thread and run at the
 * end, sends first, so no order of sends and receives deadlocks. */
typedef struct {
  int send; /* 1 send, 0 recv */
  fake_comm* c;
  void* buf;
  size_t bytes;
  int peer;
} fake_p2p;
static __thread int fake_group_depth;
static __thread fake_p2p fake_queue[4096];
static __thread int fake_queued;

static int fake_p2p_op(int send, fake_comm* c, void* buf, size_t bytes, int peer) {
  if (peer < 0 || peer >= c->nranks) return EINVAL;
  if (fake_group_depth > 0) {
    if (fake_queued == 4096) return ENOSPC;
    fake_queue[fake_queued++] = (fake_p2p){send, c, buf, bytes, peer};
    return 0;
  }
  return send ? fake_send(c, buf, bytes, peer) : fake_recv(c, buf, bytes, peer);
}

static int fake_group_end(void) {
  if (fake_group_depth == 0) return EINVAL;
  if (--fake_group_depth > 0) return 0;
  int rc = 0;
  for (int pass = 1; pass >= 0 && rc == 0; pass--)
    for (int i = 0; i < fake_queued && rc == 0; i++)
      if (fake_queue[i].send == pass)
        rc = pass ? fake_send(fake_queue[i].c, fake_queue[i].buf, fake_queue[i].bytes, fake_queue[i].peer)
                  : fake_recv(fake_queue[i].c, fake_queue[i].buf, fake_queue[i].bytes, fake_queue[i].peer);
  fake_queued = 0;
  return rc;
}

/* Streams come from the fake runtime (magic first) or are NULL. */
static void* fake_last_stream;
static int fake_check_stream(void* s) {
  fake_last_stream = s;
  if (s && *(uint64_t*)s != FAKE_STREAM_MAGIC) {
    fprintf(stderr, "fake ccl: stream %p was not made by the fake runtime\n", s);
    return EINVAL;
  }
  return 0;
}

static void fake_random_id(unsigned char* id, size_t n, const char* magic) {
  FILE* f = fopen("/dev/urandom", "rb");
  if (!f || fread(id, 1, n, f) != n) {
    for (size_t i = 0; i < n; i++) id[i] = (unsigned char)rand();
  }
  if (f) fclose(f);
  memcpy(id, magic, strlen(magic));
}
#endif
