/* paddle_replay: replays, against libxccl.so loaded with dlopen + InitPlugin,
 * what PaddlePaddle's DeviceManager, CommContextManager, XCCLCommContext and
 * ProcessGroupCustom do with a CustomDevice plugin, through the
 * C_DeviceInterface table entries only. One rank per process, under xcclrun:
 *
 *   xcclrun -n 4 ./paddle_replay ./libxccl.so 912 /tmp/storedir
 *
 * STOREDIR stands in for Paddle's TCPStore: rank 0 of a group writes the
 * unique id there under Paddle's key, the others wait for it. Every result
 * element is checked against a reference computed here. Exit 0 with one
 * "paddle replay OK (N ranks)" line per rank; any mismatch or failing call
 * prints "rank R: FAIL: ..." and exits 1. Every wait has a deadline
 * (XCCL_TIMEOUT + 15 s), so a lost message fails instead of hanging. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "xccl_paddle.h"

static int rank, nranks;
static char phase[256] = "load"; /* what is being replayed, for FAIL messages */

static void set_phase(const char* p) { snprintf(phase, sizeof phase, "%s", p); }

#define FAIL(...)                                                 \
  do {                                                            \
    fprintf(stderr, "rank %d: FAIL: [%s] ", rank, phase);         \
    fprintf(stderr, __VA_ARGS__);                                 \
    fprintf(stderr, "\n");                                        \
    fflush(stderr);                                               \
    exit(1);                                                      \
  } while (0)
/* XcclGetLastError, found with dlsym: only to explain a failed call in the
 * FAIL message (Paddle never calls it; nothing is driven through it). */
static const char* (*last_error)(void);
#define OK(call)                                                                          \
  do {                                                                                    \
    C_Status st_ = (call);                                                                \
    if (st_ != C_SUCCESS)                                                                 \
      FAIL("%s returned %d (%s)", #call, (int)st_, last_error ? last_error() : "no message"); \
  } while (0)

/* ------------------------------------------------------------------ */
/* The table, as Paddle holds it                                       */

static xccl_paddle_interface_904* T; /* device, memory and size blocks: the same in every layout */
struct ccl {
  C_Status (*get_comm_name)(C_CCLComm, char*);
  C_Status (*get_unique_id_size)(size_t*);
  C_Status (*get_unique_id)(C_CCLRootId*);
  C_Status (*comm_init_rank)(size_t, C_CCLRootId*, size_t, C_CCLComm*);
  C_Status (*destroy_comm)(C_CCLComm);
  C_Status (*all_reduce)(void*, void*, size_t, C_DataType, C_CCLReduceOp, C_CCLComm, C_Stream);
  C_Status (*broadcast)(void*, size_t, C_DataType, size_t, C_CCLComm, C_Stream);
  C_Status (*reduce)(void*, void*, size_t, C_DataType, C_CCLReduceOp, size_t, C_CCLComm, C_Stream);
  C_Status (*all_gather)(void*, void*, size_t, C_DataType, C_CCLComm, C_Stream);
  C_Status (*reduce_scatter)(void*, void*, size_t, C_DataType, C_CCLReduceOp, C_CCLComm, C_Stream);
  C_Status (*group_start)(void);
  C_Status (*group_end)(void);
  C_Status (*send)(void*, size_t, C_DataType, size_t, C_CCLComm, C_Stream);
  C_Status (*recv)(void*, size_t, C_DataType, size_t, C_CCLComm, C_Stream);
  C_Status (*all_to_all)(const void**, const size_t*, const C_DataType*, void**, const size_t*,
                         const C_DataType*, size_t, size_t, C_CCLComm, C_Stream);
};
static struct ccl X;

#define TAKE_CCL(t)                                  \
  do {                                               \
    X.get_unique_id_size = (t)->xccl_get_unique_id_size; \
    X.get_unique_id = (t)->xccl_get_unique_id;       \
    X.comm_init_rank = (t)->xccl_comm_init_rank;     \
    X.destroy_comm = (t)->xccl_destroy_comm;         \
    X.all_reduce = (t)->xccl_all_reduce;             \
    X.broadcast = (t)->xccl_broadcast;               \
    X.reduce = (t)->xccl_reduce;                     \
    X.all_gather = (t)->xccl_all_gather;             \
    X.reduce_scatter = (t)->xccl_reduce_scatter;     \
    X.group_start = (t)->xccl_group_start;           \
    X.group_end = (t)->xccl_group_end;               \
    X.send = (t)->xccl_send;                         \
    X.recv = (t)->xccl_recv;                         \
  } while (0)

static struct C_Device_st dev; /* CustomPlace(type, FLAGS_selected_<type>s[0]) */
static C_Stream calc;          /* the place's CustomContext stream (the calc stream) */
static double wait_limit;      /* seconds any wait may take */
static const char* storedir;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static void nap(void) {
  struct timespec ts = {0, 200 * 1000};
  nanosleep(&ts, NULL);
}

/* phi::DeviceGuard: get_device, and set_device only when it differs. */
static void device_guard(void) {
  struct C_Device_st cur = {-1};
  OK(T->get_device(&cur));
  if (cur.id != dev.id) OK(T->set_device(&dev));
}
/* phi::stream::Stream::Init / phi::event::Event::Init */
static C_Stream stream_init(void) {
  device_guard();
  C_Stream s = NULL;
  OK(T->create_stream(&dev, &s));
  if (!s) FAIL("create_stream gave a NULL stream");
  return s;
}
static C_Event event_init(void) {
  device_guard();
  C_Event e = NULL;
  OK(T->create_event(&dev, &e));
  if (!e) FAIL("create_event gave a NULL event");
  return e;
}

/* ------------------------------------------------------------------ */
/* The store (Paddle's TCPStore): one file per key                      */

static void store_path(char* out, size_t cap, const char* key) {
  char k[256];
  snprintf(k, sizeof k, "%s", key);
  for (char* p = k; *p; p++)
    if (*p == '/') *p = '_';
  snprintf(out, cap, "%s/%s", storedir, k);
}

static void store_set(const char* key, const void* data, size_t n) {
  char path[4096], tmp[4200];
  store_path(path, sizeof path, key);
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, rank);
  FILE* f = fopen(tmp, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) FAIL("store: write %s", tmp);
  if (rename(tmp, path) != 0) FAIL("store: rename %s", tmp);
}

/* Blocks like TCPStore::get; returns malloc'd bytes and their count. */
static unsigned char* store_get(const char* key, size_t* n) {
  char path[4096];
  store_path(path, sizeof path, key);
  double end = now() + wait_limit;
  for (;;) {
    FILE* f = fopen(path, "rb");
    if (f) {
      unsigned char* buf = malloc(1 << 20);
      size_t k = fread(buf, 1, 1 << 20, f);
      fclose(f);
      if (k == 0) FAIL("store: %s is empty", key);
      *n = k;
      return buf;
    }
    if (now() > end) FAIL("store: nothing under %s after %.0f s", key, wait_limit);
    nap();
  }
}

/* ------------------------------------------------------------------ */
/* Values, references and checks                                        */

static size_t dsize(C_DataType t) {
  switch (t) {
    case INT32: case FLOAT32: return 4;
    case INT64: case FLOAT64: return 8;
    default: FAIL("dtype %d not used here", (int)t);
  }
  return 0;
}
static const char* dname(C_DataType t) {
  switch (t) {
    case INT32: return "INT32";
    case INT64: return "INT64";
    case FLOAT32: return "FLOAT32";
    case FLOAT64: return "FLOAT64";
    default: return "?";
  }
}
static const char* opname(C_CCLReduceOp op) {
  static const char* n[] = {"SUM", "AVG", "MAX", "MIN", "PRODUCT"};
  return (unsigned)op < 5 ? n[op] : "?";
}
static void put(C_DataType t, void* b, size_t i, double v) {
  switch (t) {
    case INT32: ((int32_t*)b)[i] = (int32_t)v; break;
    case INT64: ((int64_t*)b)[i] = (int64_t)v; break;
    case FLOAT32: ((float*)b)[i] = (float)v; break;
    case FLOAT64: ((double*)b)[i] = v; break;
    default: FAIL("dtype %d", (int)t);
  }
}
static double get(C_DataType t, const void* b, size_t i) {
  switch (t) {
    case INT32: return ((const int32_t*)b)[i];
    case INT64: return (double)((const int64_t*)b)[i];
    case FLOAT32: return ((const float*)b)[i];
    case FLOAT64: return ((const double*)b)[i];
    default: FAIL("dtype %d", (int)t);
  }
  return 0;
}

/* Element i of rank r's input: a small integer (1..13, or -6..6 when neg),
 * so SUM and PRODUCT over 4 ranks are exact in every dtype. */
static double val(int r, size_t i, int seed, int neg) {
  double v = (double)(((unsigned)(r + 1) * 5u + (unsigned)(i % 100003) * 7u + (unsigned)seed * 3u) % 13u + 1u);
  return neg ? v - 7 : v;
}

static double combine(C_CCLReduceOp op, double a, double b) {
  switch (op) {
    case SUM: case AVG: return a + b;
    case PRODUCT: return a * b;
    case MAX: return b > a ? b : a;
    case MIN: return b < a ? b : a;
  }
  return NAN;
}
/* op over ranks 0..size-1 of val(q, i); i is the index into each input. */
static double reduced(C_CCLReduceOp op, int size, size_t i, int seed, int neg) {
  double a = val(0, i, seed, neg);
  for (int q = 1; q < size; q++) a = combine(op, a, val(q, i, seed, neg));
  return op == AVG ? a / size : a;
}

static void expect(const char* what, C_DataType t, const void* got, size_t i, double want, int approx) {
  double g = get(t, got, i);
  int good = approx ? fabs(g - want) <= 1e-5 * (fabs(want) > 1 ? fabs(want) : 1) : g == want;
  if (!good) FAIL("%s: element %zu is %.17g, want %.17g", what, i, g, want);
}

/* ------------------------------------------------------------------ */
/* Device buffers and copies, as Paddle's allocator and TensorCopy      */

static void* dalloc(size_t bytes) {
  void* p = NULL;
  if (bytes == 0) bytes = 1;
  OK(T->device_memory_allocate(&dev, &p, bytes));
  if (!p) FAIL("device_memory_allocate(%zu) gave NULL", bytes);
  return p;
}
static void dfree(void* p, size_t bytes) { OK(T->device_memory_deallocate(&dev, p, bytes ? bytes : 1)); }

/* Async H2D on the calc stream (Paddle's MemoryCopyH2D with a stream); the
 * host buffer must live until the calc stream has passed the copy. */
static void h2d(void* d, const void* h, size_t bytes) {
  if (bytes == 0) return;
  if (T->async_memory_copy_h2d)
    OK(T->async_memory_copy_h2d(&dev, calc, d, h, bytes));
  else
    OK(T->memory_copy_h2d(&dev, d, h, bytes));
}
/* Read back after the op: either async D2H on the calc stream followed by
 * synchronize_stream(calc), or Paddle's sync copy (which first waits for
 * the place's context, i.e. synchronizes the calc stream). */
static void d2h(void* h, const void* d, size_t bytes, int async) {
  if (async && T->async_memory_copy_d2h) {
    if (bytes) OK(T->async_memory_copy_d2h(&dev, calc, h, d, bytes));
    OK(T->synchronize_stream(&dev, calc));
  } else {
    OK(T->synchronize_stream(&dev, calc));
    if (bytes) OK(T->memory_copy_d2h(&dev, h, d, bytes));
  }
}

/* ------------------------------------------------------------------ */
/* Process groups and tasks                                            */

typedef struct {
  const char* name;
  int gid, rank, size;
  C_CCLComm comm;
  C_Stream comm_stream; /* the comm CustomContext's stream: where the group's ops run */
  C_Stream ctx_stream;  /* XCCLCommContext's own stream: created, never used (as in Paddle) */
  C_Event calc_ev;      /* place_to_calc_event_: calc → comm syncing */
} pg_t;

/* g_unfinished_xccl_task_events */
static C_Event parked[4096];
static int nparked, ever_parked;

static void query_or_fail(C_Event e, int* done) {
  C_Status st = T->query_event(&dev, e);
  if (st == C_SUCCESS) {
    *done = 1;
  } else if (st == C_FAILED) {
    *done = 0; /* not ready */
  } else {
    /* Paddle reads any other status as "not ready" too, and would poll
     * forever: an error on a live event fails the replay. */
    FAIL("query_event returned %d (neither complete nor not-ready)", (int)st);
  }
}

/* XCCLTask::UpdateWaitChain: prune finished parked events, then record the
 * task's event on the comm stream. */
static void update_wait_chain(C_Event task, C_Stream comm) {
  for (int i = 0; i < nparked;) {
    int done;
    query_or_fail(parked[i], &done);
    if (done) {
      OK(T->destroy_event(&dev, parked[i]));
      parked[i] = parked[--nparked];
    } else {
      i++;
    }
  }
  OK(T->record_event(&dev, comm, task));
}

/* ~XCCLTask: a finished event is destroyed, an unfinished one parked. */
static void task_drop(C_Event task) {
  int done;
  query_or_fail(task, &done);
  if (done) {
    OK(T->destroy_event(&dev, task));
  } else {
    if (nparked == 4096) FAIL("too many parked events");
    parked[nparked++] = task;
    ever_parked++;
  }
}

/* task.is_completed() polled until it says so. */
static void poll_task(C_Event task) {
  double end = now() + wait_limit;
  for (;;) {
    int done;
    query_or_fail(task, &done);
    if (done) return;
    if (now() > end) FAIL("task event not complete after %.0f s", wait_limit);
    nap();
  }
}

/* How an op is issued and waited for. */
enum mode {
  M_POLL,   /* comm stream; record(calc) → wait(comm) → op → record(comm, task) → poll → wait(calc, task) */
  M_WAIT,   /* the same, but Task::Wait only (no polling): the calc stream must order the read-back */
  M_CALC,   /* use_calc_stream / phi kernels: the op straight on the calc stream, no events */
  M_LEGACY, /* legacy Collective(): as M_POLL with the op inside group_start/group_end */
};
static const char* mname(enum mode m) {
  static const char* n[] = {"comm stream, polled", "comm stream, Wait", "calc stream", "legacy grouped"};
  return n[m];
}

typedef struct {
  pg_t* pg;
  enum mode mode;
  C_Event task;
} run_t;

/* RunFnInXCCLEnv up to the op: DeviceGuard, SyncCalcStream, CreateTask. */
static C_Stream run_begin(run_t* r, pg_t* pg, enum mode m) {
  r->pg = pg;
  r->mode = m;
  r->task = NULL;
  device_guard();
  if (m == M_CALC) return calc;
  OK(T->record_event(&dev, calc, pg->calc_ev));
  OK(T->stream_wait_event(&dev, pg->comm_stream, pg->calc_ev));
  r->task = event_init();
  if (m == M_LEGACY) OK(X.group_start());
  return pg->comm_stream;
}
/* After the op: UpdateWaitChain (the task is returned, not waited for). */
static void run_issued(run_t* r) {
  if (r->mode == M_CALC) return;
  if (r->mode == M_LEGACY) OK(X.group_end());
  update_wait_chain(r->task, r->pg->comm_stream);
}
/* task.wait() (sync_op=True) and the task's end. */
static void run_wait(run_t* r) {
  switch (r->mode) {
    case M_CALC:
      return;
    case M_POLL:
    case M_LEGACY:
      poll_task(r->task);
      OK(T->stream_wait_event(&dev, calc, r->task));
      task_drop(r->task);
      return;
    case M_WAIT:
      OK(T->stream_wait_event(&dev, calc, r->task));
      task_drop(r->task); /* may well be parked: nothing waited on the host */
      return;
  }
}

/* ------------------------------------------------------------------ */
/* Communicator creation                                               */

/* The id a group's rank 0 makes (DeviceManager::CCLGetUniqueId): size,
 * then the id; the plugin may lower sz and Paddle keeps only sz bytes. */
static unsigned char* make_id(size_t* len) {
  size_t sz = 0;
  OK(X.get_unique_id_size(&sz));
  if (sz == 0 || sz > (1 << 20)) FAIL("xccl_get_unique_id_size = %zu", sz);
  C_CCLRootId id = {sz, malloc(sz)};
  memset(id.data, 0xEE, sz);
  OK(X.get_unique_id(&id));
  if (id.sz == 0 || id.sz > sz) FAIL("xccl_get_unique_id left sz = %zu (asked with %zu)", id.sz, sz);
  *len = id.sz;
  return id.data;
}

static void comm_name_check(pg_t* pg) {
  if (!X.get_comm_name) return;
  char name[128];
  memset(name, 'x', sizeof name);
  OK(X.get_comm_name(pg->comm, name));
  if (!memchr(name, 0, sizeof name) || name[0] == 0) FAIL("xccl_get_comm_name: empty or unterminated name");
}

/* CommContextManager::CreateXCCLCommContext + ProcessGroupCustom::CreateXCCLEnvCache. */
static void pg_create(pg_t* pg, const char* name, int gid, int grank, int gsize) {
  memset(pg, 0, sizeof *pg);
  pg->name = name;
  pg->gid = gid;
  pg->rank = grank;
  pg->size = gsize;
  device_guard();
  char key[128];
  snprintf(key, sizeof key, "XCCLCommContext/%d", gid);
  size_t len = 0;
  unsigned char* id;
  if (grank == 0) {
    id = make_id(&len);
    store_set(key, id, len);
  } else {
    id = store_get(key, &len);
  }
  C_CCLRootId rid = {len, id};
  OK(X.comm_init_rank((size_t)gsize, &rid, (size_t)grank, &pg->comm));
  if (!pg->comm) FAIL("xccl_comm_init_rank gave a NULL comm");
  memset(id, 0xA5, len); /* the std::vector dies with the call */
  free(id);
  pg->ctx_stream = stream_init();  /* XCCLCommContext: stream_->Init(place_) */
  pg->comm_stream = stream_init(); /* comm CustomContext */
  pg->calc_ev = event_init();      /* place_to_calc_event_ */
  comm_name_check(pg);
}

/* ProcessGroupCustom::CreateXCCLManagerCache (legacy): id under
 * ProcessGroupCustom/xccl_ids/<gid>/0, and the context stream and
 * xccl_comm_init_rank inside group_start/group_end. */
static void pg_create_legacy(pg_t* pg, const char* name, int gid, int grank, int gsize) {
  memset(pg, 0, sizeof *pg);
  pg->name = name;
  pg->gid = gid;
  pg->rank = grank;
  pg->size = gsize;
  char key[128];
  snprintf(key, sizeof key, "ProcessGroupCustom/xccl_ids/%d/0", gid);
  size_t len = 0;
  unsigned char* id;
  if (grank == 0) {
    id = make_id(&len);
    store_set(key, id, len);
  } else {
    id = store_get(key, &len);
  }
  OK(X.group_start());
  device_guard();
  pg->comm_stream = stream_init(); /* dev_ctx[i] = make_unique<CustomContext>(place) */
  C_CCLRootId rid = {len, id};
  OK(X.comm_init_rank((size_t)gsize, &rid, (size_t)grank, &pg->comm));
  OK(X.group_end());
  if (!pg->comm) FAIL("xccl_comm_init_rank (in a group) gave a NULL comm");
  memset(id, 0xA5, len);
  free(id);
  pg->calc_ev = event_init();
  comm_name_check(pg);
}

/* ------------------------------------------------------------------ */
/* Collectives                                                          */

enum kind { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER };
static const char* kname(enum kind k) {
  static const char* n[] = {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter"};
  return n[k];
}

typedef struct {
  enum kind k;
  C_DataType t;
  C_CCLReduceOp op;
  size_t count;
  int root, seed, neg, inplace;
  size_t in_n, out_n; /* elements */
  void *hin, *hout;   /* host staging and result */
  void *din, *dout;   /* device buffers (dout == din in place) */
  run_t run;
  char what[160];
} coll_t;

/* Allocates, uploads (async H2D on calc) and issues the op. */
static void coll_issue(coll_t* c, pg_t* pg, enum mode m, enum kind k, C_DataType t, C_CCLReduceOp op, size_t count,
                       int root, int seed) {
  memset(c, 0, sizeof *c);
  c->k = k;
  c->t = t;
  c->op = op;
  c->count = count;
  c->root = root;
  c->seed = seed;
  c->neg = op == MAX || op == MIN;
  /* ProcessGroupCustom binds one tensor as in and out for all_reduce,
   * broadcast and reduce; the phi kernels (calc stream) write a new out. */
  c->inplace = (k == ALLREDUCE || k == BROADCAST || k == REDUCE) && m != M_CALC;
  size_t es = dsize(t);
  c->in_n = k == REDUCESCATTER ? count * (size_t)pg->size : count;
  c->out_n = k == ALLGATHER ? count * (size_t)pg->size : count;
  snprintf(c->what, sizeof c->what, "%s %s %s count %zu root %d on %s (%s)", kname(k), dname(t),
           k == ALLREDUCE || k == REDUCE || k == REDUCESCATTER ? opname(op) : "-", count, root, pg->name, mname(m));
  set_phase(c->what);

  c->hin = malloc(c->in_n * es + 1);
  c->hout = malloc(c->out_n * es + 1);
  for (size_t i = 0; i < c->in_n; i++) put(t, c->hin, i, val(pg->rank, i, seed, c->neg));
  if (count > 0) {
    c->din = dalloc(c->in_n * es);
    h2d(c->din, c->hin, c->in_n * es);
    if (c->inplace) {
      c->dout = c->din;
    } else {
      c->dout = dalloc(c->out_n * es);
      OK(T->device_memory_set(&dev, c->dout, 0xAB, c->out_n * es)); /* garbage a missed write would leave */
    }
  }
  C_Stream s = run_begin(&c->run, pg, m);
  switch (k) {
    case ALLREDUCE:
      OK(X.all_reduce(c->din, c->dout, count, t, op, pg->comm, s));
      break;
    case BROADCAST:
      OK(X.broadcast(c->din, count, t, (size_t)root, pg->comm, s));
      break;
    case REDUCE:
      OK(X.reduce(c->din, c->dout, count, t, op, (size_t)root, pg->comm, s));
      break;
    case ALLGATHER:
      OK(X.all_gather(c->din, c->dout, count, t, pg->comm, s));
      break;
    case REDUCESCATTER:
      OK(X.reduce_scatter(c->din, c->dout, count, t, op, pg->comm, s));
      break;
  }
  run_issued(&c->run);
}

/* Waits, reads back, checks every element, frees. */
static void coll_finish(coll_t* c) {
  pg_t* pg = c->run.pg;
  set_phase(c->what);
  run_wait(&c->run);
  size_t es = dsize(c->t);
  if (c->count > 0) d2h(c->hout, c->dout, c->out_n * es, c->run.mode != M_POLL);
  else OK(T->synchronize_stream(&dev, calc));
  if (c->run.mode == M_WAIT) {
    /* The calc stream waited for the task's event and has drained: a
     * parked task event must say complete now. */
    for (int i = 0; i < nparked; i++) {
      if (parked[i] != c->run.task) continue;
      int done;
      query_or_fail(parked[i], &done);
      if (!done) FAIL("task event not complete after the calc stream waited for it and drained");
    }
  }
  int approx = c->op == AVG && (c->t == FLOAT32 || c->t == FLOAT64);
  /* Out of place (phi's reduce kernel), a non-root's out has no defined content. */
  size_t checked = c->k == REDUCE && !c->inplace && pg->rank != c->root ? 0 : c->out_n;
  for (size_t i = 0; i < checked; i++) {
    double want = 0;
    switch (c->k) {
      case ALLREDUCE:
        want = reduced(c->op, pg->size, i, c->seed, c->neg);
        break;
      case BROADCAST:
        want = val(c->root, i, c->seed, c->neg);
        break;
      case REDUCE:
        /* Non-roots: the in-place buffer is their send buffer, left as it was. */
        want = pg->rank == c->root ? reduced(c->op, pg->size, i, c->seed, c->neg) : val(pg->rank, i, c->seed, c->neg);
        break;
      case ALLGATHER:
        want = val((int)(i / c->count), i % c->count, c->seed, c->neg);
        break;
      case REDUCESCATTER:
        want = reduced(c->op, pg->size, (size_t)pg->rank * c->count + i, c->seed, c->neg);
        break;
    }
    expect("result", c->t, c->hout, i, want, approx);
  }
  if (c->count > 0) {
    dfree(c->din, c->in_n * es);
    if (!c->inplace) dfree(c->dout, c->out_n * es);
  }
  free(c->hin);
  free(c->hout);
}

static void coll(pg_t* pg, enum mode m, enum kind k, C_DataType t, C_CCLReduceOp op, size_t count, int root, int seed) {
  coll_t c;
  coll_issue(&c, pg, m, k, t, op, count, root, seed);
  coll_finish(&c);
}

/* ProcessGroupCustom::Barrier: an in-place FLOAT32 SUM all_reduce of one
 * uninitialised element, Wait, then synchronize_device. */
static void barrier(pg_t* pg) {
  set_phase("barrier");
  void* d = dalloc(sizeof(float));
  run_t r;
  C_Stream s = run_begin(&r, pg, M_WAIT);
  OK(X.all_reduce(d, d, 1, FLOAT32, SUM, pg->comm, s));
  run_issued(&r);
  OK(T->stream_wait_event(&dev, calc, r.task));
  OK(T->synchronize_device(&dev)); /* SetBlockCPUInWait */
  int done;
  query_or_fail(r.task, &done);
  if (!done) FAIL("barrier's task event not complete after synchronize_device");
  task_drop(r.task);
  dfree(d, sizeof(float));
}

/* ------------------------------------------------------------------ */
/* All-to-all: xccl_all_to_all and Paddle's send/recv fallback          */

/* Elements rank s sends to rank d: uneven, zero for some pairs (self
 * included: rank 1 sends itself nothing, rank 3 sends rank 0 nothing). */
static size_t a2a_count(int s, int d) { return (size_t)((s + 2 * d + 1) % 4) * 3; }
static double a2a_val(int s, int d, size_t i) { return (double)s * 1000000 + (double)d * 1000 + (double)i; }

static void all_to_all(pg_t* pg, int fallback, int wait_only) {
  set_phase(fallback ? "all_to_all (Paddle's send/recv fallback)" : "xccl_all_to_all");
  const C_DataType t = INT64;
  const size_t es = 8;
  int n = pg->size, me = pg->rank;
  size_t in_total = 0, out_total = 0;
  for (int p = 0; p < n; p++) in_total += a2a_count(me, p), out_total += a2a_count(p, me);
  int64_t* hin = malloc(in_total * es + 1);
  int64_t* hout = malloc(out_total * es + 1);
  void* din = dalloc(in_total * es);
  void* dout = dalloc(out_total * es);
  OK(T->device_memory_set(&dev, dout, 0xAB, (out_total > 0 ? out_total * es : 1)));
  const void** sb = calloc((size_t)n, sizeof(void*));
  void** rb = calloc((size_t)n, sizeof(void*));
  size_t* sc = calloc((size_t)n, sizeof(size_t));
  size_t* rc = calloc((size_t)n, sizeof(size_t));
  C_DataType* sd = calloc((size_t)n, sizeof(C_DataType));
  C_DataType* rd = calloc((size_t)n, sizeof(C_DataType));
  size_t off = 0, roff = 0;
  for (int p = 0; p < n; p++) {
    sc[p] = a2a_count(me, p);
    rc[p] = a2a_count(p, me);
    for (size_t i = 0; i < sc[p]; i++) hin[off + i] = (int64_t)a2a_val(me, p, i);
    sb[p] = (char*)din + off * es; /* GetPartialTensor(in, offset, numel).data() */
    rb[p] = (char*)dout + roff * es;
    sd[p] = rd[p] = t;
    off += sc[p];
    roff += rc[p];
  }
  h2d(din, hin, in_total * es);
  run_t r;
  C_Stream s = run_begin(&r, pg, wait_only ? M_WAIT : M_POLL);
  if (!fallback) {
    OK(X.all_to_all(sb, sc, sd, rb, rc, rd, (size_t)me, (size_t)n, pg->comm, s));
  } else {
    /* CustomDevice::CCLAllToAll without xccl_all_to_all: ungrouped, receive
     * from the ranks below, send to all others, copy our own chunk D2D on
     * the stream, receive from the ranks above. */
    for (int i = 0; i < me; i++) OK(X.recv(rb[i], rc[i], rd[i], (size_t)i, pg->comm, s));
    for (int i = 0; i < n; i++)
      if (i != me) OK(X.send((void*)sb[i], sc[i], sd[i], (size_t)i, pg->comm, s));
    if (T->async_memory_copy_d2d)
      OK(T->async_memory_copy_d2d(&dev, s, rb[me], sb[me], sc[me] * es));
    else
      OK(T->memory_copy_d2d(&dev, rb[me], sb[me], sc[me] * es));
    for (int i = me + 1; i < n; i++) OK(X.recv(rb[i], rc[i], rd[i], (size_t)i, pg->comm, s));
  }
  run_issued(&r);
  run_wait(&r);
  d2h(hout, dout, out_total * es, wait_only);
  roff = 0;
  for (int p = 0; p < n; p++) {
    for (size_t i = 0; i < rc[p]; i++) {
      char what[160];
      snprintf(what, sizeof what, "%s: chunk from rank %d", fallback ? "all_to_all fallback" : "xccl_all_to_all", p);
      expect(what, t, hout, roff + i, a2a_val(p, me, i), 0);
    }
    roff += rc[p];
  }
  dfree(din, in_total * es);
  dfree(dout, out_total * es);
  free(hin), free(hout), free(sb), free(rb), free(sc), free(rc), free(sd), free(rd);
}

/* ------------------------------------------------------------------ */
/* Scatter, gather and point-to-point                                   */

static double slice_val(int slice, size_t k, int seed) { return (double)(slice * 100 + (int)(k % 97) + seed); }

/* Legacy ProcessGroupCustom::Scatter inside Collective(): an outer group;
 * the root, in a nested group, sends slice i to every rank i INCLUDING
 * ITSELF and receives its own slice from itself; the others receive. */
static void scatter_legacy(pg_t* pg, int root, size_t cnt, int seed) {
  char what[128];
  snprintf(what, sizeof what, "legacy scatter (root %d sends to itself in a group) on %s", root, pg->name);
  set_phase(what);
  int n = pg->size, me = pg->rank;
  float* hin = malloc((size_t)n * cnt * sizeof(float));
  float* hout = malloc(cnt * sizeof(float));
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < cnt; k++) hin[(size_t)i * cnt + k] = (float)slice_val(i, k, seed);
  void* din = dalloc((size_t)n * cnt * sizeof(float));
  void* dout = dalloc(cnt * sizeof(float));
  OK(T->device_memory_set(&dev, dout, 0xAB, cnt * sizeof(float)));
  if (me == root) h2d(din, hin, (size_t)n * cnt * sizeof(float));
  run_t r;
  C_Stream s = run_begin(&r, pg, M_LEGACY); /* the outer group_start */
  if (me == root) {
    OK(X.group_start());
    for (int i = 0; i < n; i++)
      OK(X.send((char*)din + (size_t)i * cnt * sizeof(float), cnt, FLOAT32, (size_t)i, pg->comm, s));
    OK(X.recv(dout, cnt, FLOAT32, (size_t)root, pg->comm, s));
    OK(X.group_end());
  } else {
    OK(X.recv(dout, cnt, FLOAT32, (size_t)root, pg->comm, s));
  }
  run_issued(&r); /* the outer group_end */
  run_wait(&r);
  d2h(hout, dout, cnt * sizeof(float), 1);
  for (size_t k = 0; k < cnt; k++) expect("received slice", FLOAT32, hout, k, slice_val(me, k, seed), 0);
  dfree(din, (size_t)n * cnt * sizeof(float));
  dfree(dout, cnt * sizeof(float));
  free(hin), free(hout);
}

/* ProcessGroupCustom::Scatter (new API): ungrouped sends to the others and
 * a D2D copy of the root's own slice on the comm stream. */
static void scatter_new(pg_t* pg, int root, size_t cnt, int seed) {
  char what[128];
  snprintf(what, sizeof what, "scatter (root %d) on %s", root, pg->name);
  set_phase(what);
  int n = pg->size, me = pg->rank;
  float* hin = malloc((size_t)n * cnt * sizeof(float));
  float* hout = malloc(cnt * sizeof(float));
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < cnt; k++) hin[(size_t)i * cnt + k] = (float)slice_val(i, k, seed);
  void* din = dalloc((size_t)n * cnt * sizeof(float));
  void* dout = dalloc(cnt * sizeof(float));
  if (me == root) h2d(din, hin, (size_t)n * cnt * sizeof(float));
  run_t r;
  C_Stream s = run_begin(&r, pg, M_WAIT);
  if (me == root) {
    for (int i = 0; i < n; i++) {
      char* part = (char*)din + (size_t)i * cnt * sizeof(float);
      if (i != me)
        OK(X.send(part, cnt, FLOAT32, (size_t)i, pg->comm, s));
      else
        OK(T->async_memory_copy_d2d(&dev, s, dout, part, cnt * sizeof(float)));
    }
  } else {
    OK(X.recv(dout, cnt, FLOAT32, (size_t)root, pg->comm, s));
  }
  run_issued(&r);
  run_wait(&r);
  d2h(hout, dout, cnt * sizeof(float), 1);
  for (size_t k = 0; k < cnt; k++) expect("received slice", FLOAT32, hout, k, slice_val(me, k, seed), 0);
  dfree(din, (size_t)n * cnt * sizeof(float));
  dfree(dout, cnt * sizeof(float));
  free(hin), free(hout);
}

/* ProcessGroupCustom::Gather: the root receives from each other rank in
 * rank order (ungrouped) and copies its own part D2D; the others send. */
static void gather_new(pg_t* pg, int root, size_t cnt, int seed) {
  char what[128];
  snprintf(what, sizeof what, "gather (root %d) on %s", root, pg->name);
  set_phase(what);
  int n = pg->size, me = pg->rank;
  float* hin = malloc(cnt * sizeof(float));
  float* hout = malloc((size_t)n * cnt * sizeof(float));
  for (size_t k = 0; k < cnt; k++) hin[k] = (float)slice_val(me, k, seed);
  void* din = dalloc(cnt * sizeof(float));
  void* dout = dalloc((size_t)n * cnt * sizeof(float));
  h2d(din, hin, cnt * sizeof(float));
  run_t r;
  C_Stream s = run_begin(&r, pg, M_POLL);
  if (me == root) {
    for (int i = 0; i < n; i++) {
      char* part = (char*)dout + (size_t)i * cnt * sizeof(float);
      if (i != me)
        OK(X.recv(part, cnt, FLOAT32, (size_t)i, pg->comm, s));
      else
        OK(T->async_memory_copy_d2d(&dev, s, part, din, cnt * sizeof(float)));
    }
  } else {
    OK(X.send(din, cnt, FLOAT32, (size_t)root, pg->comm, s));
  }
  run_issued(&r);
  run_wait(&r);
  if (me == root) {
    d2h(hout, dout, (size_t)n * cnt * sizeof(float), 0);
    for (int i = 0; i < n; i++)
      for (size_t k = 0; k < cnt; k++) expect("gathered", FLOAT32, hout, (size_t)i * cnt + k, slice_val(i, k, seed), 0);
  } else {
    OK(T->synchronize_stream(&dev, calc));
  }
  dfree(din, cnt * sizeof(float));
  dfree(dout, (size_t)n * cnt * sizeof(float));
  free(hin), free(hout);
}

/* batch_isend_irecv on XCCL: ungrouped, every rank sends to the next one
 * before it receives from the previous one (each its own task), plus the
 * same with count 0. */
static void p2p_ring(pg_t* pg, size_t cnt, int seed) {
  set_phase("ungrouped send/recv ring");
  int n = pg->size, me = pg->rank, next = (me + 1) % n, prev = (me + n - 1) % n;
  int32_t* hin = malloc(cnt * 4);
  int32_t* hout = malloc(cnt * 4);
  for (size_t k = 0; k < cnt; k++) hin[k] = (int32_t)slice_val(me, k, seed);
  void* din = dalloc(cnt * 4);
  void* dout = dalloc(cnt * 4);
  h2d(din, hin, cnt * 4);
  run_t rs, rr;
  C_Stream s = run_begin(&rs, pg, M_WAIT);
  OK(X.send(din, cnt, INT32, (size_t)next, pg->comm, s));
  OK(X.send(NULL, 0, INT32, (size_t)next, pg->comm, s));
  run_issued(&rs);
  s = run_begin(&rr, pg, M_WAIT);
  OK(X.recv(dout, cnt, INT32, (size_t)prev, pg->comm, s));
  OK(X.recv(NULL, 0, INT32, (size_t)prev, pg->comm, s));
  run_issued(&rr);
  run_wait(&rs);
  run_wait(&rr);
  d2h(hout, dout, cnt * 4, 1);
  for (size_t k = 0; k < cnt; k++) expect("received", INT32, hout, k, slice_val(prev, k, seed), 0);
  dfree(din, cnt * 4);
  dfree(dout, cnt * 4);
  free(hin), free(hout);
}

/* ------------------------------------------------------------------ */

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: paddle_replay LIB LAYOUT STOREDIR\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* lib = argv[1];
  size_t layout = strtoull(argv[2], NULL, 10);
  storedir = argv[3];
  rank = getenv("XCCL_RANK") ? atoi(getenv("XCCL_RANK")) : 0;
  nranks = getenv("XCCL_NRANKS") ? atoi(getenv("XCCL_NRANKS")) : 1;
  wait_limit = (getenv("XCCL_TIMEOUT") ? atof(getenv("XCCL_TIMEOUT")) : 60) + 15;

  /* ---- DeviceManager: LoadCustomLib, InitPlugin, validation ---- */
  void* h = dlopen(lib, RTLD_LAZY);
  if (!h) FAIL("dlopen %s: %s", lib, dlerror());
  void (*init_plugin)(CustomRuntimeParams*) = (void (*)(CustomRuntimeParams*))dlsym(h, "InitPlugin");
  if (!init_plugin) FAIL("no InitPlugin in %s", lib);
  last_error = (const char* (*)(void))dlsym(h, "XcclGetLastError");
  CustomRuntimeParams params;
  memset(&params, 0, sizeof params);
  params.size = layout == 904 ? 88 : sizeof(CustomRuntimeParams);
  void* iface = calloc(1, layout);
  *(size_t*)iface = layout;
  params.interface = iface;
  init_plugin(&params);
  if (!params.device_type) FAIL("InitPlugin left device_type NULL for layout %zu", layout);
  if (params.version.major * 10000 + params.version.minor * 100 + params.version.patch < 101)
    FAIL("runtime version below 0.1.1");
  T = iface;
  memset(&X, 0, sizeof X);
  if (layout == 904) {
    TAKE_CCL((xccl_paddle_interface_904*)iface);
  } else if (layout == 912) {
    TAKE_CCL((xccl_paddle_interface_912*)iface);
    X.all_to_all = ((xccl_paddle_interface_912*)iface)->xccl_all_to_all;
  } else if (layout == 1032) {
    TAKE_CCL((xccl_paddle_interface_1032*)iface);
    X.all_to_all = ((xccl_paddle_interface_1032*)iface)->xccl_all_to_all;
    X.get_comm_name = ((xccl_paddle_interface_1032*)iface)->xccl_get_comm_name;
  } else {
    FAIL("layout %zu is not one this replay knows", layout);
  }
  const void* needed[] = {T->initialize, T->finalize, T->init_device, T->set_device, T->get_device,
                          T->deinit_device, T->create_stream, T->destroy_stream, T->create_event,
                          T->record_event, T->destroy_event, T->query_event, T->synchronize_device,
                          T->synchronize_stream, T->stream_wait_event, T->device_memory_allocate,
                          T->device_memory_deallocate, T->device_memory_set, T->memory_copy_h2d,
                          T->memory_copy_d2h, T->memory_copy_d2d, T->async_memory_copy_d2d,
                          T->get_device_count, T->get_device_list, X.get_unique_id_size, X.get_unique_id,
                          X.comm_init_rank, X.destroy_comm, X.all_reduce, X.broadcast, X.reduce, X.all_gather,
                          X.reduce_scatter, X.group_start, X.group_end, X.send, X.recv};
  for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
    if (!needed[i]) FAIL("table entry %zu used by this replay is NULL", i);
  if (layout != 904 && !X.all_to_all) FAIL("xccl_all_to_all is NULL in layout %zu", layout);

  /* ---- CustomDevice ctor: initialize, count, list ---- */
  set_phase("device setup");
  OK(T->initialize());
  size_t count = 0;
  OK(T->get_device_count(&count));
  if (count == 0) FAIL("no devices");
  size_t* list = calloc(count, sizeof(size_t));
  OK(T->get_device_list(list));
  for (size_t i = 0; i < count; i++)
    if (list[i] != i) FAIL("device list[%zu] = %zu", i, list[i]);
  free(list);
  /* paddle.set_device("<type>:<local rank>"), then the first use of the
   * place: set_device, init_device (once), create_stream (the calc stream). */
  dev.id = rank % (int)count;
  OK(T->set_device(&dev));
  OK(T->init_device(&dev));
  calc = stream_init();

  /* ---- world group (gid 0): made at the first collective, the init barrier ---- */
  set_phase("world communicator");
  pg_t world;
  pg_create(&world, "world", 0, rank, nranks);
  barrier(&world);

  /* ---- sub-group (gid 1: the even ranks), legacy manager cache: id under
   * ProcessGroupCustom/xccl_ids/1/0, init inside group_start/end ---- */
  set_phase("sub-group communicator");
  int member = rank % 2 == 0;
  pg_t sub;
  memset(&sub, 0, sizeof sub);
  if (member) pg_create_legacy(&sub, "even ranks", 1, rank / 2, (nranks + 1) / 2);

  /* ---- the world's collectives, alternating polled and Wait-only tasks ---- */
  int r = nranks;
  coll(&world, M_POLL, ALLREDUCE, FLOAT32, SUM, 4099, 0, 1);
  coll(&world, M_WAIT, ALLREDUCE, INT32, MAX, 1001, 0, 2);
  coll(&world, M_POLL, ALLREDUCE, INT64, MIN, 257, 0, 3);
  coll(&world, M_WAIT, ALLREDUCE, FLOAT64, PRODUCT, 333, 0, 4);
  coll(&world, M_WAIT, ALLREDUCE, INT32, PRODUCT, 77, 0, 5);
  coll(&world, M_WAIT, ALLREDUCE, FLOAT32, SUM, 1 << 18, 0, 6); /* 1 MiB */
  coll(&world, M_POLL, ALLREDUCE, FLOAT32, SUM, 0, 0, 7);       /* numel 0: NULL buffers */
  for (int root = 0; root < r; root++)
    coll(&world, root % 2 ? M_WAIT : M_POLL, BROADCAST, root % 2 ? INT64 : FLOAT32, SUM, 777, root, 8 + root);
  coll(&world, M_POLL, REDUCE, INT32, SUM, 501, r - 1, 13);
  coll(&world, M_WAIT, REDUCE, FLOAT32, MAX, 129, 0, 14);
  coll(&world, M_POLL, ALLGATHER, FLOAT32, SUM, 129, 0, 15);
  coll(&world, M_WAIT, ALLGATHER, INT64, SUM, 1, 0, 16);
  coll(&world, M_POLL, REDUCESCATTER, FLOAT32, SUM, 100, 0, 17);
  coll(&world, M_WAIT, REDUCESCATTER, INT32, MIN, 33, 0, 18);
  coll(&world, M_LEGACY, ALLREDUCE, FLOAT32, SUM, 555, 0, 19);
  coll(&world, M_LEGACY, BROADCAST, INT32, SUM, 66, r / 2, 20);

  /* ---- all-to-all: the table entry where the layout has it, and Paddle's
   * fallback (what it does when the entry is NULL) everywhere ---- */
  if (X.all_to_all) {
    all_to_all(&world, 0, 0);
    all_to_all(&world, 0, 1);
  }
  all_to_all(&world, 1, 0);
  all_to_all(&world, 1, 1);

  /* ---- both communicators at once: the sub-group's op (legacy grouped, on
   * its own comm stream) and the world's, issued before either is waited ---- */
  for (int it = 0; it < 3; it++) {
    coll_t a, b;
    if (member) coll_issue(&a, &sub, M_LEGACY, ALLREDUCE, it == 1 ? INT32 : FLOAT32, it == 2 ? MAX : SUM, 300 + it, 0, 30 + it);
    coll_issue(&b, &world, it == 0 ? M_POLL : M_WAIT, ALLREDUCE, FLOAT32, it == 2 ? MIN : SUM, 200 + it, 0, 40 + it);
    if (member && it == 1) {
      coll_t c2;
      coll_issue(&c2, &sub, M_POLL, BROADCAST, FLOAT64, SUM, 50, sub.size - 1, 45);
      coll_finish(&c2);
    }
    coll_finish(&b);
    if (member) coll_finish(&a);
  }
  if (member) {
    coll(&sub, M_WAIT, REDUCESCATTER, FLOAT32, SUM, 17, 0, 46);
    coll(&sub, M_POLL, ALLGATHER, INT32, SUM, 23, 0, 47);
  }

  /* ---- phi kernels (and use_calc_stream=True): straight on the calc
   * stream, out of place, AVG through ToXCCLReduceOp ---- */
  coll(&world, M_CALC, ALLREDUCE, FLOAT32, AVG, 1003, 0, 50);
  coll(&world, M_CALC, ALLREDUCE, FLOAT64, AVG, 64, 0, 51);
  coll(&world, M_CALC, REDUCE, FLOAT32, AVG, 99, r - 1, 52);
  coll(&world, M_CALC, ALLREDUCE, INT64, SUM, 10, 0, 53);
  coll(&world, M_CALC, ALLGATHER, FLOAT32, SUM, 7, 0, 54);
  coll(&world, M_CALC, REDUCESCATTER, FLOAT32, AVG, 9, 0, 55);
  if (member) coll(&sub, M_CALC, ALLREDUCE, FLOAT32, AVG, 31, 0, 56);

  /* ---- scatter, gather, point-to-point ---- */
  scatter_new(&world, r - 1, 41, 60);
  gather_new(&world, 0, 19, 61);
  if (r > 1) p2p_ring(&world, 1000, 62);
  scatter_legacy(&world, 0, 37, 63);
  scatter_legacy(&world, r - 1, 5, 64);

  /* ---- a last all_reduce left in flight (sync_op=False, task dropped),
   * then teardown in DeviceManager::Release's order with no
   * synchronization: events, streams, THEN the communicators (a comm
   * outlives the stream its work ran on), deinit_device, finalize ---- */
  set_phase("in-flight all_reduce at teardown");
  const size_t last_n = 4096;
  float* hlast = malloc(last_n * sizeof(float));
  for (size_t i = 0; i < last_n; i++) hlast[i] = (float)val(rank, i, 70, 0);
  void* dlast = dalloc(last_n * sizeof(float));
  h2d(dlast, hlast, last_n * sizeof(float));
  run_t last;
  C_Stream s = run_begin(&last, &world, M_WAIT);
  OK(X.all_reduce(dlast, dlast, last_n, FLOAT32, SUM, world.comm, s));
  run_issued(&last);
  task_drop(last.task);

  set_phase("teardown");
  OK(T->set_device(&dev));
  for (int i = 0; i < nparked; i++) OK(T->destroy_event(&dev, parked[i]));
  nparked = 0;
  OK(T->destroy_event(&dev, world.calc_ev));
  if (member) OK(T->destroy_event(&dev, sub.calc_ev));
  OK(T->set_device(&dev));
  OK(T->destroy_stream(&dev, world.ctx_stream));
  OK(T->destroy_stream(&dev, world.comm_stream));
  if (member) OK(T->destroy_stream(&dev, sub.comm_stream));
  OK(T->destroy_stream(&dev, calc));
  OK(X.destroy_comm(world.comm));
  if (member) OK(X.destroy_comm(sub.comm));
  OK(X.destroy_comm(NULL));
  /* The in-flight all_reduce ran to completion on its destroyed stream. */
  set_phase("in-flight all_reduce at teardown");
  OK(T->memory_copy_d2h(&dev, hlast, dlast, last_n * sizeof(float)));
  for (size_t i = 0; i < last_n; i++) expect("result", FLOAT32, hlast, i, reduced(SUM, r, i, 70, 0), 0);
  dfree(dlast, last_n * sizeof(float));
  free(hlast);
  set_phase("teardown");
  OK(T->deinit_device(&dev));
  OK(T->finalize());
  printf("rank %d: paddle replay OK (%d ranks, layout %zu, %s, %d task events parked)\n", rank, nranks, layout,
         params.device_type, ever_parked);
  free(iface);
  return 0;
}
