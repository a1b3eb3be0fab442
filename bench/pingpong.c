/* The floor for a 2-rank small collective on one machine: two processes
 * bounce a cache line through shared memory, each spinning on the line
 * the other writes. Prints the one-way latency (half a round trip) in µs,
 * the median of 5 runs of ITERS round trips. Then the floor of an 8-byte
 * all-reduce between them: both write their 8 bytes and a sequence number
 * into one line of the other's (a ring of DEPTH lines, as the host
 * engine's fast boxes), wait for the other's, and add; the time per
 * exchange, with nothing else (no call, no fingerprint, no checks).
 *
 *   cc -O2 -o pingpong bench/pingpong.c && ./pingpong */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "timing.h"

enum { ITERS = 200000, RUNS = 5, DEPTH = 32 };

typedef struct {
  _Alignas(64) _Atomic uint64_t seq;
  double data;
} slot;

typedef struct {
  _Alignas(64) _Atomic uint64_t ping;
  _Alignas(64) _Atomic uint64_t pong;
  slot box[2][DEPTH]; /* box[r]: the lines rank r reads */
} lines;

/* exchange runs exchanges first+1..first+n as rank me; returns the sum of
 * the last one, for the check. */
static double exchange(lines* l, int me, uint64_t first, uint64_t n) {
  double mine = me + 1, sum = 0;
  for (uint64_t i = first + 1; i <= first + n; i++) {
    slot* out = &l->box[1 - me][i % DEPTH];
    slot* in = &l->box[me][i % DEPTH];
    out->data = mine;
    atomic_store_explicit(&out->seq, i, memory_order_release);
    while (atomic_load_explicit(&in->seq, memory_order_acquire) != i) {
    }
    sum = me == 0 ? mine + in->data : in->data + mine;
  }
  return sum;
}

int main(void) {
  lines* l = mmap(0, sizeof(lines), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (l == MAP_FAILED) return perror("mmap"), 1;
  pid_t pid = fork();
  if (pid < 0) return perror("fork"), 1;
  uint64_t total = (uint64_t)ITERS * RUNS;
  if (pid == 0) {
    for (uint64_t i = 1; i <= total; i++) {
      while (atomic_load_explicit(&l->ping, memory_order_acquire) != i) {
      }
      atomic_store_explicit(&l->pong, i, memory_order_release);
    }
    for (int r = 0; r < RUNS; r++) exchange(l, 1, (uint64_t)r * ITERS, ITERS);
    _exit(0);
  }
  double us[RUNS];
  uint64_t i = 0;
  for (int r = 0; r < RUNS; r++) {
    double t0 = now();
    for (int k = 0; k < ITERS; k++) {
      i++;
      atomic_store_explicit(&l->ping, i, memory_order_release);
      while (atomic_load_explicit(&l->pong, memory_order_acquire) != i) {
      }
    }
    us[r] = (now() - t0) / ITERS / 2 * 1e6;
  }
  printf("# shared-memory ping-pong, one way (median of %d x %d round trips)\n%.3f us\n", RUNS, ITERS, median(us, RUNS));
  double sum = 0;
  for (int r = 0; r < RUNS; r++) {
    double t0 = now();
    sum = exchange(l, 0, (uint64_t)r * ITERS, ITERS);
    us[r] = (now() - t0) / ITERS * 1e6;
  }
  waitpid(pid, 0, 0);
  if (sum != 3) fprintf(stderr, "pingpong: the exchange's sum is %g, want 3\n", sum);
  printf("# 8-byte exchange, both ways at once (the floor of a 2-rank 8-byte all-reduce; median of %d x %d)\n%.3f us\n",
         RUNS, ITERS, median(us, RUNS));
  return 0;
}
