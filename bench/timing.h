/* What the C benchmarks share to time themselves: a monotonic clock in
 * seconds, and the median of a few runs (inline: a program that uses one
 * builds without warnings about the other). */
#ifndef XCCL_BENCH_TIMING_H_
#define XCCL_BENCH_TIMING_H_
#include <stdlib.h>
#include <time.h>

static inline double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int timing_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* median sorts v (n runs) and returns its middle one. */
static inline double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof v[0], timing_cmp);
  return v[n / 2];
}
#endif
