/* The floor for a 2-rank small collective on one machine: two processes
 * bounce a cache line through shared memory, each spinning on the line
 * the other writes. Prints the one-way latency (half a round trip) in µs,
 * the median of 5 runs of ITERS round trips.
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

enum { ITERS = 200000, RUNS = 5 };

typedef struct {
  _Alignas(64) _Atomic uint64_t ping;
  _Alignas(64) _Atomic uint64_t pong;
} lines;

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
  waitpid(pid, 0, 0);
  printf("# shared-memory ping-pong, one way (median of %d x %d round trips)\n%.3f us\n", RUNS, ITERS, median(us, RUNS));
  return 0;
}
