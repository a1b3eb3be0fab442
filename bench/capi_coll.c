/* The host device's collectives through the C API (include/xccl.h), timed as
 * bench/mpi_coll.c times OpenMPI's: same sizes, iterations and columns, so
 * `make bench` can set the C entry points beside xccl-perf (which calls the
 * Go API and never crosses cgo) and OpenMPI. What C, Python and Paddle
 * callers pay per call is this column.
 *
 *   xcclrun -n 2 ./capi_coll all_gather 8 65536
 * Prints: bytes count time_us algbw_GBs busbw_GBs wrong */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xccl.h"

static void check(C_Status st, const char* what) {
  if (st != C_SUCCESS) {
    fprintf(stderr, "capi_coll: %s: %d: %s\n", what, (int)st, XcclGetLastError());
    exit(1);
  }
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const char* coll = argc > 1 ? argv[1] : "all_reduce";
  size_t minb = argc > 2 ? strtoull(argv[2], 0, 10) : 8, maxb = argc > 3 ? strtoull(argv[3], 0, 10) : (64u << 10);
  int ag = !strcmp(coll, "all_gather"), rs = !strcmp(coll, "reduce_scatter"), bc = !strcmp(coll, "broadcast"),
      rd = !strcmp(coll, "reduce");
  if (!ag && !rs && !bc && !rd && strcmp(coll, "all_reduce")) {
    fprintf(stderr, "capi_coll: unknown collective %s\n", coll);
    return 2;
  }
  C_CCLComm comm = NULL;
  int rank, n;
  check(XcclCommInitFromEnv(&comm, &rank, &n, NULL), "XcclCommInitFromEnv");
  double factor = ag || rs ? (double)(n - 1) / n : bc || rd ? 1.0 : 2.0 * (n - 1) / n;
  float *s = malloc(maxb + 64), *r = malloc(maxb + 64);
  if (!s || !r) return 1;
  /* A rank's first calls after init run slow: settle first, as xccl-perf does. */
  for (int i = 0; i < 1000; i++) check(XcclAllReduce(s, r, 1, FLOAT32, SUM, comm, NULL), "settle");
  if (rank == 0)
    printf("# peer=xccl-capi coll=%s nranks=%d\n# %12s %12s %10s %10s %10s %6s\n", coll, n, "bytes", "count", "time_us",
           "algbw", "busbw", "wrong");
  for (size_t b = minb; b <= maxb; b *= 4) {
    size_t total = b / 4, c = ag || rs ? total / (size_t)n : total; /* c: elements per call (per rank block) */
    if (!c) continue;
    total = ag || rs ? c * (size_t)n : c;
    for (size_t i = 0; i < total; i++) s[i] = (float)(rank + 1);
    int iters = b < (1 << 20) ? 2000 : b < (16 << 20) ? 100 : 20;
    double t0 = 0;
    for (int it = -5; it < iters; it++) {
      if (it == 0) {
        check(XcclAllReduce(s, r, 1, FLOAT32, SUM, comm, NULL), "barrier");
        t0 = now_s();
      }
      C_Status st;
      if (ag) st = XcclAllGather(s, r, c, FLOAT32, comm, NULL);
      else if (rs) st = XcclReduceScatter(s, r, c, FLOAT32, SUM, comm, NULL);
      else if (bc) st = XcclBroadcast(rank == 0 ? s : r, c, FLOAT32, 0, comm, NULL);
      else if (rd) st = XcclReduce(s, r, c, FLOAT32, SUM, 0, comm, NULL);
      else st = XcclAllReduce(s, r, c, FLOAT32, SUM, comm, NULL);
      check(st, coll);
    }
    double t = (now_s() - t0) / iters, tmax;
    check(XcclAllReduce(&t, &tmax, 1, FLOAT64, MAX, comm, NULL), "time");
    long wrong = 0;
    size_t outn = ag ? total : c;
    for (size_t i = 0; i < outn && (rd ? rank == 0 : rank != 0); i++) {
      float want = ag ? (float)(i / c + 1) : rs ? n * (n + 1) / 2.0f : bc ? 1.0f : n * (n + 1) / 2.0f;
      wrong += r[i] != want;
    }
    double alg = (double)total * 4.0 / tmax / 1e9;
    if (rank == 0) printf("  %12zu %12zu %10.2f %10.3f %10.3f %6ld\n", total * 4, c, tmax * 1e6, alg, alg * factor, wrong);
  }
  check(XcclDestroyComm(comm), "XcclDestroyComm");
  free(s);
  free(r);
  return 0;
}
