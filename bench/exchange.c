/* The floor for a 2-rank all-reduce of private buffers in one round on one
 * machine: two processes each copy their send buffer into the other's box
 * in shared memory, publish a sequence number, wait for the other's, and
 * sum their send buffer and the box into their receive buffer: what the
 * host engine's direct all-reduce (and a fused batch in the fast boxes)
 * must do at least, with no fingerprint, no checks and no call overhead.
 * Boxes alternate between two slots, so a rank never overwrites data its
 * peer is still reading. Prints the time per all-reduce in µs for each size
 * (median of 5 runs) and, for FUSE buffers of the smallest size, the ratio
 * of FUSE separate exchanges to one exchange of their total: the most a
 * fused batch can gain where nothing but the data costs.
 *
 *   cc -O2 -o exchange bench/exchange.c && ./exchange [bytes...] */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "timing.h"

enum { RUNS = 5, FUSE = 10, MAXB = 1 << 20 };

typedef struct {
  _Alignas(64) _Atomic uint64_t seq;
  _Alignas(64) float box[2][MAXB / sizeof(float)];
} side;

/* rank me's part: iters exchanges of n floats, in batches of calls each
 * (each call its own exchange of n/calls floats) */
static double run(side* s, int me, float* send, float* recv, size_t n, int calls, uint64_t* seq, int iters) {
  side *mine = &s[me], *peer = &s[1 - me];
  size_t part = n / calls;
  double t0 = now();
  for (int it = 0; it < iters; it++) {
    for (int c = 0; c < calls; c++) {
      uint64_t q = ++*seq;
      float* out = peer->box[q & 1];
      memcpy(out, send + c * part, part * sizeof(float));
      atomic_store_explicit(&peer->seq, q, memory_order_release);
      while (atomic_load_explicit(&mine->seq, memory_order_acquire) < q) {
      }
      const float* in = mine->box[q & 1];
      float* r = recv + c * part;
      const float* a = send + c * part;
      for (size_t i = 0; i < part; i++) r[i] = me == 0 ? a[i] + in[i] : in[i] + a[i];
    }
  }
  return (now() - t0) / iters * 1e6;
}

int main(int argc, char** argv) {
  size_t sizes[16] = {2048, 20480};
  int ns = 2;
  if (argc > 1) {
    ns = 0;
    for (int i = 1; i < argc && ns < 16; i++) {
      size_t b = strtoull(argv[i], 0, 0);
      if (b >= sizeof(float) * FUSE && b <= MAXB) sizes[ns++] = b;
    }
  }
  side* s = mmap(0, 2 * sizeof(side), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) return perror("mmap"), 1;
  pid_t pid = fork();
  if (pid < 0) return perror("fork"), 1;
  int me = pid == 0;
  float* send = malloc(MAXB);
  float* recv = malloc(MAXB);
  for (size_t i = 0; i < MAXB / sizeof(float); i++) send[i] = (float)(i % 97) + me;
  uint64_t seq = 0;
  if (me == 0) printf("# one-round 2-process all-reduce through shared-memory boxes, float32 sum, median of %d runs\n"
                      "#      bytes    1 call us   %d calls us  calls/1\n", RUNS, FUSE);
  for (int k = 0; k < ns; k++) {
    size_t n = sizes[k] / sizeof(float) / FUSE * FUSE;
    int iters = (int)(200000000 / (n * sizeof(float) + 2000));
    double one[RUNS], many[RUNS];
    run(s, me, send, recv, n, 1, &seq, iters / 10 + 1); /* warm up */
    for (int r = 0; r < RUNS; r++) {
      one[r] = run(s, me, send, recv, n, 1, &seq, iters);
      many[r] = run(s, me, send, recv, n, FUSE, &seq, iters);
    }
    double t1 = median(one, RUNS), t10 = median(many, RUNS);
    float want = (float)(5 % 97) * 2 + 1; /* element 5 on both ranks */
    if (recv[5] != want) fprintf(stderr, "rank %d: element 5 is %g, want %g\n", me, recv[5], want);
    if (me == 0) printf("%12zu %12.2f %12.2f %8.2f\n", n * sizeof(float), t1, t10, t10 / t1);
  }
  if (me == 1) _exit(0);
  waitpid(pid, 0, 0);
  return 0;
}
