/* What bench/mpi_coll.c and bench/capi_coll.c share, so that OpenMPI and xccl
 * through its C API are timed alike: the collective's name, the sizes (as
 * nccl-tests: all-gather and reduce-scatter count the whole buffer of nranks
 * blocks), the iterations per size, the check of the result (float32 sum of
 * rank + 1) and the output's columns. */
#ifndef XCCL_BENCH_COLL_PLAN_H_
#define XCCL_BENCH_COLL_PLAN_H_
#include <stdio.h>
#include <string.h>

typedef struct {
  int ag, rs, bc, rd; /* all-gather, reduce-scatter, broadcast, reduce; none: all-reduce */
  int sr;             /* sendrecv: each rank sends to rank + 1 and receives from rank - 1 (nccl-tests' sendrecv) */
} coll_kind;

/* coll_parse reads the collective's name; 0 when it is not one. */
static int coll_parse(const char* name, coll_kind* k) {
  k->ag = !strcmp(name, "all_gather");
  k->rs = !strcmp(name, "reduce_scatter");
  k->bc = !strcmp(name, "broadcast");
  k->rd = !strcmp(name, "reduce");
  k->sr = !strcmp(name, "sendrecv");
  return k->ag || k->rs || k->bc || k->rd || k->sr || !strcmp(name, "all_reduce");
}

/* coll_busfactor turns algorithm bandwidth into bus bandwidth (nccl-tests). */
static double coll_busfactor(coll_kind k, int n) {
  return k.ag || k.rs ? (double)(n - 1) / n : k.bc || k.rd || k.sr ? 1.0 : 2.0 * (n - 1) / n;
}

/* coll_count is the elements per call (per rank block) at b bytes, 0 to skip
 * the size; *total gets the floats of the whole buffer. */
static size_t coll_count(coll_kind k, size_t b, int n, size_t* total) {
  size_t c = k.ag || k.rs ? b / 4 / (size_t)n : b / 4;
  *total = k.ag || k.rs ? c * (size_t)n : c;
  return c;
}

static int coll_iters(size_t b) { return b < (1 << 20) ? 2000 : b < (16 << 20) ? 100 : 20; }

/* coll_wrong counts the wrong elements of r on this rank (inputs rank + 1;
 * rank 0 is the root; the root's own buffer is not checked; sendrecv's
 * rank 0 receives from the last rank, the others from rank - 1). */
static long coll_wrong(coll_kind k, const float* r, size_t c, size_t total, int rank, int n) {
  long wrong = 0;
  size_t outn = k.ag ? total : c;
  for (size_t i = 0; i < outn && (k.rd ? rank == 0 : rank != 0); i++) {
    float want = k.ag ? (float)(i / c + 1) : k.bc ? 1.0f : k.sr ? (float)rank : n * (n + 1) / 2.0f;
    wrong += r[i] != want;
  }
  return wrong;
}

static void coll_header(const char* peer, const char* coll, int n) {
  printf("# peer=%s coll=%s nranks=%d\n# %12s %12s %10s %10s %10s %6s\n", peer, coll, n, "bytes", "count", "time_us",
         "algbw", "busbw", "wrong");
}

/* coll_row prints one size: tmax is the slowest rank's seconds per call. */
static void coll_row(size_t total, size_t c, double tmax, double factor, long wrong) {
  double alg = (double)total * 4.0 / tmax / 1e9;
  printf("  %12zu %12zu %10.2f %10.3f %10.3f %6ld\n", total * 4, c, tmax * 1e6, alg, alg * factor, wrong);
}
#endif
