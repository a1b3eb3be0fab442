/* allreduce: the NCCL-style "hello world" of xccl. Every rank all-reduces
 * float32 buffers of growing size (sum), checks every element, and rank 0
 * prints time and bandwidth like nccl-tests (busbw = algbw * 2(n-1)/n).
 *
 *   xcclrun -n 4 ./allreduce [max_bytes] [iters]
 *
 * Exit status 0 only if every element on every rank was right. */
#include "common.h"

int main(int argc, char** argv) {
  size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 10) : (32u << 20);
  int iters_arg = argc > 2 ? atoi(argv[2]) : 0;
  int rank, n;
  C_CCLComm comm = join_from_env(&rank, &n);
  float* buf = malloc(maxb < 8 ? 8 : maxb);
  float* out = malloc(maxb < 8 ? 8 : maxb);
  long wrong_total = 0;
  if (rank == 0) {
    const char* dev = getenv("XCCL_DEVICE");
    printf("# xccl allreduce: %d ranks, float32 sum, device %s\n", n, dev ? dev : "auto");
    printf("# %12s %12s %10s %10s %10s %8s\n", "bytes", "count", "time_us", "algbw", "busbw", "#wrong");
  }
  for (size_t b = 8; b <= maxb; b *= 4) {
    size_t count = b / sizeof(float);
    int iters = iters_arg > 0 ? iters_arg : (b < (1u << 20) ? 200 : b < (16u << 20) ? 20 : 5);
    for (size_t i = 0; i < count; i++) buf[i] = (float)(rank + 1) + (float)(i % 7);
    /* correctness first: one out-of-place all-reduce, every element checked */
    CHECK(XcclAllReduce(buf, out, count, FLOAT32, SUM, comm, NULL));
    long wrong = 0;
    for (size_t i = 0; i < count; i++) {
      float want = (float)(n * (n + 1) / 2) + (float)n * (float)(i % 7);
      if (out[i] != want) wrong++;
    }
    /* then time in-place all-reduces */
    CHECK(XcclAllReduce(buf, buf, 1, FLOAT32, SUM, comm, NULL)); /* barrier-ish */
    double t0 = now_s();
    for (int it = 0; it < iters; it++) CHECK(XcclAllReduce(out, out, count, FLOAT32, SUM, comm, NULL));
    /* float32 for the bookkeeping too: every device has it */
    float t = (float)((now_s() - t0) / iters);
    float tmax = t;
    CHECK(XcclAllReduce(&t, &tmax, 1, FLOAT32, MAX, comm, NULL));
    float wsum = (float)wrong, wall = 0;
    CHECK(XcclAllReduce(&wsum, &wall, 1, FLOAT32, SUM, comm, NULL));
    wrong_total += (long)wall;
    double alg = (double)b / tmax / 1e9;
    if (rank == 0)
      printf("  %12zu %12zu %10.2f %10.3f %10.3f %8ld\n", b, count, tmax * 1e6, alg, alg * 2.0 * (n - 1) / n,
             (long)wall);
  }
  printf("rank %d of %d: %s\n", rank, n, wrong_total ? "WRONG RESULTS" : "all results correct");
  CHECK(XcclDestroyComm(comm));
  free(buf);
  free(out);
  return wrong_total ? 1 : 0;
}
