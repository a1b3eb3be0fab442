/* OpenMPI's all-reduce, all-gather, reduce-scatter, broadcast and reduce, timed
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

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* coll = argc > 1 ? argv[1] : "all_reduce";
  size_t minb = argc > 2 ? strtoull(argv[2], 0, 10) : 8, maxb = argc > 3 ? strtoull(argv[3], 0, 10) : (32u << 20);
  int ag = !strcmp(coll, "all_gather"), rs = !strcmp(coll, "reduce_scatter"), bc = !strcmp(coll, "broadcast"),
      rd = !strcmp(coll, "reduce");
  if (!ag && !rs && !bc && !rd && strcmp(coll, "all_reduce")) {
    if (rank == 0) fprintf(stderr, "unknown collective %s\n", coll);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double factor = ag || rs ? (double)(n - 1) / n : bc || rd ? 1.0 : 2.0 * (n - 1) / n;
  float *s = malloc(maxb + 64), *r = malloc(maxb + 64);
  if (rank == 0)
    printf("# peer=openmpi coll=%s nranks=%d\n# %12s %12s %10s %10s %10s %6s\n", coll, n, "bytes", "count", "time_us",
           "algbw", "busbw", "wrong");
  for (size_t b = minb; b <= maxb; b *= 4) {
    size_t total = b / 4, c = ag || rs ? total / (size_t)n : total; /* c: elements per call (per rank block) */
    if (!c) continue;
    total = ag || rs ? c * (size_t)n : c;
    for (size_t i = 0; i < total; i++) s[i] = (float)(rank + 1);
    int iters = b < (1 << 20) ? 2000 : b < (16 << 20) ? 100 : 20;
    for (int it = -5; it < iters; it++) {
      if (it == 0) MPI_Barrier(MPI_COMM_WORLD);
      static double t0;
      if (it == 0) t0 = MPI_Wtime();
      if (ag) MPI_Allgather(s, (int)c, MPI_FLOAT, r, (int)c, MPI_FLOAT, MPI_COMM_WORLD);
      else if (rs) MPI_Reduce_scatter_block(s, r, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (bc) MPI_Bcast(rank == 0 ? s : r, (int)c, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else if (rd) MPI_Reduce(s, r, (int)c, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      else MPI_Allreduce(s, r, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (it == iters - 1) {
        double t = (MPI_Wtime() - t0) / iters, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        long wrong = 0;
        size_t outn = ag ? total : c;
        for (size_t i = 0; i < outn && (rd ? rank == 0 : rank != 0); i++) {
          float want = ag ? (float)(i / c + 1) : rs ? n * (n + 1) / 2.0f : bc ? 1.0f : n * (n + 1) / 2.0f;
          wrong += r[i] != want;
        }
        double alg = (double)total * 4.0 / tmax / 1e9;
        if (rank == 0)
          printf("  %12zu %12zu %10.2f %10.3f %10.3f %6ld\n", total * 4, c, tmax * 1e6, alg, alg * factor, wrong);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
