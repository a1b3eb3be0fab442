/* Shared helpers of the C examples: rank setup from xcclrun's environment. */
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

static inline int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Joins the communicator xcclrun describes (XCCL_RANK, XCCL_NRANKS,
 * XCCL_UNIQUE_ID as hex). Run alone (no XCCL_UNIQUE_ID), it is rank 0 of 1
 * and makes its own id, as rank 0 of an NCCL program does. */
static inline C_CCLComm join_from_env(int* rank, int* nranks) {
  const char* r = getenv("XCCL_RANK");
  const char* n = getenv("XCCL_NRANKS");
  const char* hex = getenv("XCCL_UNIQUE_ID");
  size_t size = 0;
  CHECK(XcclGetUniqueIdSize(&size));
  unsigned char* bytes = calloc(1, size);
  C_CCLRootId id = {.sz = size, .data = bytes};
  *rank = r ? atoi(r) : 0;
  *nranks = n ? atoi(n) : 1;
  if (hex) {
    if (strlen(hex) != 2 * size) {
      fprintf(stderr, "XCCL_UNIQUE_ID has %zu hex digits, want %zu\n", strlen(hex), 2 * size);
      exit(1);
    }
    for (size_t i = 0; i < size; i++) {
      int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) {
        fprintf(stderr, "XCCL_UNIQUE_ID is not hex\n");
        exit(1);
      }
      bytes[i] = (unsigned char)(hi * 16 + lo);
    }
  } else if (*nranks == 1) {
    CHECK(XcclGetUniqueId(&id));
  } else {
    fprintf(stderr, "XCCL_UNIQUE_ID is not set: run me under xcclrun\n");
    exit(1);
  }
  C_CCLComm comm = NULL;
  CHECK(XcclCommInitRank((size_t)*nranks, &id, (size_t)*rank, &comm));
  free(bytes);
  return comm;
}
#endif
