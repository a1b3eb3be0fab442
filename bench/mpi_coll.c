/* OpenMPI's all-reduce, all-gather, reduce-scatter, broadcast, reduce and
 * sendrecv (MPI_Sendrecv around the ring), timed
 * like ../shared/bench/peers/mpi_allreduce.c (float32, sum; same sizes,
 * iterations and columns) so `make bench` can set xccl-perf beside them.
 * Sizes follow nccl-tests: all-gather and reduce-scatter count the whole
 * buffer of nranks blocks.
 *
 *   mpirun -np 4 ./mpi_coll all_gather 8 33554432
 * Prints: bytes count time_us algbw_GBs busbw_GBs wrong */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_plan.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* coll = argc > 1 ? argv[1] : "all_reduce";
  size_t minb = argc > 2 ? strtoull(argv[2], 0, 10) : 8, maxb = argc > 3 ? strtoull(argv[3], 0, 10) : (32u << 20);
  coll_kind k;
  if (!coll_parse(coll, &k)) {
    if (rank == 0) fprintf(stderr, "unknown collective %s\n", coll);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double factor = coll_busfactor(k, n);
  float *s = malloc(maxb + 64), *r = malloc(maxb + 64);
  if (rank == 0) coll_header("openmpi", coll, n);
  for (size_t b = minb; b <= maxb; b *= 4) {
    size_t total, c = coll_count(k, b, n, &total); /* c: elements per call (per rank block) */
    if (!c) continue;
    for (size_t i = 0; i < total; i++) s[i] = (float)(rank + 1);
    int iters = coll_iters(b);
    for (int it = -5; it < iters; it++) {
      if (it == 0) MPI_Barrier(MPI_COMM_WORLD);
      static double t0;
      if (it == 0) t0 = MPI_Wtime();
      if (k.ag) MPI_Allgather(s, (int)c, MPI_FLOAT, r, (int)c, MPI_FLOAT, MPI_COMM_WORLD);
      else if (k.rs) MPI_Reduce_scatter_block(s, r, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (k.bc) MPI_Bcast(rank == 0 ? s : r, (int)c, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else if (k.rd) MPI_Reduce(s, r, (int)c, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      else if (k.sr)
        MPI_Sendrecv(s, (int)c, MPI_FLOAT, (rank + 1) % n, 0, r, (int)c, MPI_FLOAT, (rank + n - 1) % n, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
      else MPI_Allreduce(s, r, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (it == iters - 1) {
        double t = (MPI_Wtime() - t0) / iters, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        long wrong = coll_wrong(k, r, c, total, rank, n);
        if (rank == 0) coll_row(total, c, tmax, factor, wrong);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
