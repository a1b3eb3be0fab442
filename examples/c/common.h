/* Shared helpers of the C examples: joining the job, checks, clocks. */
#ifndef XCCL_EXAMPLES_COMMON_H_
#define XCCL_EXAMPLES_COMMON_H_
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "xccl.h"

#define CHECK(call)                                                                       \
  do {                                                                                    \
    C_Status st_ = (call);                                                                \
    if (st_ != C_SUCCESS) {                                                               \
      fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, (int)st_,        \
              XcclGetLastError());                                                        \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Joins the job's communicator: under xcclrun, mpirun, srun or torchrun
 * (XcclCommInitFromEnv reads the launcher's variables and agrees on the
 * root with the other ranks), or, run alone, as rank 0 of 1. */
static inline C_CCLComm join_from_env(int* rank, int* nranks) {
  C_CCLComm comm = NULL;
  CHECK(XcclCommInitFromEnv(&comm, rank, nranks, NULL));
  return comm;
}
#endif
