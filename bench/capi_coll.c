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

#include "coll_plan.h"
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
  coll_kind k;
  if (!coll_parse(coll, &k)) {
    fprintf(stderr, "capi_coll: unknown collective %s\n", coll);
    return 2;
  }
  C_CCLComm comm = NULL;
  int rank, n;
  check(XcclCommInitFromEnv(&comm, &rank, &n, NULL), "XcclCommInitFromEnv");
  double factor = coll_busfactor(k, n);
  float *s = malloc(maxb + 64), *r = malloc(maxb + 64);
  if (!s || !r) return 1;
  /* A rank's first calls after init run slow: settle first, as xccl-perf does. */
  for (int i = 0; i < 1000; i++) check(XcclAllReduce(s, r, 1, FLOAT32, SUM, comm, NULL), "settle");
  if (rank == 0) coll_header("xccl-capi", coll, n);
  for (size_t b = minb; b <= maxb; b *= 4) {
    size_t total, c = coll_count(k, b, n, &total); /* c: elements per call (per rank block) */
    if (!c) continue;
    for (size_t i = 0; i < total; i++) s[i] = (float)(rank + 1);
    int iters = coll_iters(b);
    double t0 = 0;
    for (int it = -5; it < iters; it++) {
      if (it == 0) {
        check(XcclAllReduce(s, r, 1, FLOAT32, SUM, comm, NULL), "barrier");
        t0 = now_s();
      }
      C_Status st;
      if (k.ag) st = XcclAllGather(s, r, c, FLOAT32, comm, NULL);
      else if (k.rs) st = XcclReduceScatter(s, r, c, FLOAT32, SUM, comm, NULL);
      else if (k.bc) st = XcclBroadcast(rank == 0 ? s : r, c, FLOAT32, 0, comm, NULL);
      else if (k.rd) st = XcclReduce(s, r, c, FLOAT32, SUM, 0, comm, NULL);
      else if (k.sr) { /* one group of a send and a receive, as nccl-tests' sendrecv */
        check(XcclGroupStart(), "XcclGroupStart");
        check(XcclSend(s, c, FLOAT32, (size_t)(rank + 1) % n, comm, NULL), "XcclSend");
        check(XcclRecv(r, c, FLOAT32, (size_t)(rank + n - 1) % n, comm, NULL), "XcclRecv");
        st = XcclGroupEnd();
      }
      else st = XcclAllReduce(s, r, c, FLOAT32, SUM, comm, NULL);
      check(st, coll);
    }
    double t = (now_s() - t0) / iters, tmax;
    check(XcclAllReduce(&t, &tmax, 1, FLOAT64, MAX, comm, NULL), "time");
    long wrong = coll_wrong(k, r, c, total, rank, n);
    if (rank == 0) coll_row(total, c, tmax, factor, wrong);
  }
  check(XcclDestroyComm(comm), "XcclDestroyComm");
  free(s);
  free(r);
  return 0;
}
