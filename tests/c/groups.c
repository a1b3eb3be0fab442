/* groups: group semantics under xcclrun (2 or more ranks), as NCCL's.
 *   1. Grouping is each rank's own choice: rank 0 issues two small
 *      all-reduces in a group, the others one by one (skipped with the
 *      argument "fused": with XCCL_FUSION_BYTES set every rank must group
 *      alike).
 *   2. A group runs its calls in order: AllReduce(a, a) twice in one group
 *      is a * n * n, and a chain x -> y -> z reads y as the first call left
 *      it; every rank gets the same values.
 *   3. A NULL-stream call in a group led by a stream call is synchronous:
 *      its result is there when XcclGroupEnd returns.
 *   5. XcclAllReduceFused in a group on rank 0 and outside one elsewhere
 *      is the same call (run before 4).
 *   6. Groups of sends and receives (C records them and enters Go once
 *      at the end, fast.c; after 3, Go takes them): a ring exchange; the same with an all-reduce
 *      and a nested group inside (Go adopts the record, also two groups
 *      deep); a send to a rank out of range inside a group fails at once,
 *      and the group's end then fails and runs none of it (ncclGroupEnd);
 *      more calls than C records (20 messages each way); count 0 (6c
 *      refused with the rest, 6f a message of no bytes, whose receive
 *      waits for its send).
 *   4. A communicator split with no config takes the parent's
 *      XcclCommSetTimeout: a child collective whose peer comes 3 s late
 *      fails after the 1 s set on the parent (C_FAILED).
 * Prints "ok" lines, "FAIL" lines, exits 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "xccl.h"

#define N 64

static int failures, rank, n;

static void expect(C_Status got, C_Status want, const char* what) {
  if (got != want) {
    printf("FAIL rank %d: %s: status %d, want %d (%s)\n", rank, what, (int)got, (int)want, XcclGetLastError());
    failures++;
  }
}

static void same(const float* got, float want, int count, const char* what) {
  for (int i = 0; i < count; i++) {
    if (got[i] != want) {
      printf("FAIL rank %d: %s: [%d] = %g, want %g\n", rank, what, i, got[i], want);
      failures++;
      return;
    }
  }
}

static void fill(float* v, float x) {
  for (int i = 0; i < N; i++) v[i] = x;
}

/* 6: run first on a communicator whose C fast state is on (C records
 * the groups), then again after 3 has used a stream (Go takes them). */
static void p2p_groups(C_CCLComm comm, const char* path) {
  float x[N], y[N], a[N];
  {
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    float in[20][N];
    fill(x, (float)(rank + 1));
    fill(y, -1);
    expect(XcclGroupStart(), C_SUCCESS, "6a: group start");
    expect(XcclSend(x, N, FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6a: send");
    expect(XcclRecv(y, N, FLOAT32, (size_t)prev, comm, NULL), C_SUCCESS, "6a: recv");
    expect(XcclGroupEnd(), C_SUCCESS, "6a: group end");
    same(y, (float)(prev + 1), N, "6a: ring exchange");

    fill(y, -1);
    fill(a, 1);
    expect(XcclGroupStart(), C_SUCCESS, "6b: group start");
    expect(XcclRecv(y, N, FLOAT32, (size_t)prev, comm, NULL), C_SUCCESS, "6b: recv first");
    expect(XcclGroupStart(), C_SUCCESS, "6b: nested group start");
    expect(XcclSend(x, N, FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6b: send");
    expect(XcclGroupEnd(), C_SUCCESS, "6b: nested group end");
    expect(XcclAllReduce(a, a, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "6b: all-reduce in the group");
    expect(XcclGroupEnd(), C_SUCCESS, "6b: group end");
    same(y, (float)(prev + 1), N, "6b: the exchange of a group with an all-reduce");
    same(a, (float)n, N, "6b: the all-reduce of a group with an exchange");

    fill(y, -1);
    expect(XcclGroupStart(), C_SUCCESS, "6c: group start");
    expect(XcclSend(x, N, FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6c: send");
    expect(XcclSend(x, N, FLOAT32, (size_t)n, comm, NULL), C_ERROR, "6c: a send to a rank out of range");
    expect(XcclRecv(y, N, (C_DataType)99, (size_t)prev, comm, NULL), C_ERROR, "6c: a receive of an unknown type");
    expect(XcclRecv(y, N, FLOAT32, (size_t)prev, comm, NULL), C_SUCCESS, "6c: recv");
    expect(XcclSend(NULL, 0, FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6c: a send of count 0");
    expect(XcclGroupEnd(), C_ERROR, "6c: the end of a group with refused calls (as ncclGroupEnd: none of it runs)");
    same(y, -1, N, "6c: nothing of a group with refused calls ran");

    fill(y, -1);
    fill(a, 1);
    expect(XcclGroupStart(), C_SUCCESS, "6e: group start");
    expect(XcclGroupStart(), C_SUCCESS, "6e: nested group start");
    expect(XcclSend(x, N, FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6e: send");
    expect(XcclAllReduce(a, a, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "6e: all-reduce two groups deep");
    expect(XcclGroupEnd(), C_SUCCESS, "6e: nested group end");
    same(a, 1, N, "6e: nothing ran at the inner group's end");
    expect(XcclRecv(y, N, FLOAT32, (size_t)prev, comm, NULL), C_SUCCESS, "6e: recv");
    expect(XcclGroupEnd(), C_SUCCESS, "6e: group end");
    same(y, (float)(prev + 1), N, "6e: the exchange of a group adopted two deep");
    same(a, (float)n, N, "6e: the all-reduce of a group adopted two deep");

    /* Count 0 between ranks is a message of no bytes, as NCCL's: matched
     * by its receive of count 0, and the data after it in step. */
    fill(y, -1);
    expect(XcclGroupStart(), C_SUCCESS, "6f: group start");
    expect(XcclSend(NULL, 0, FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6f: a send of count 0");
    expect(XcclRecv(NULL, 0, FLOAT32, (size_t)prev, comm, NULL), C_SUCCESS, "6f: a receive of count 0");
    expect(XcclSend(x, N, FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6f: send");
    expect(XcclRecv(y, N, FLOAT32, (size_t)prev, comm, NULL), C_SUCCESS, "6f: recv");
    expect(XcclGroupEnd(), C_SUCCESS, "6f: group end");
    same(y, (float)(prev + 1), N, "6f: the exchange after messages of no bytes");
    if (n > 1 && rank < 2) { /* rank 1 sends its message of no bytes 100 ms late: rank 0's receive waits for it */
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      if (rank == 1) usleep(100000);
      C_Status st = rank == 1 ? XcclSend(NULL, 0, FLOAT32, 0, comm, NULL) : XcclRecv(NULL, 0, FLOAT32, 1, comm, NULL);
      expect(st, C_SUCCESS, "6f: a late message of no bytes");
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
      if (rank == 0 && ms < 50) {
        printf("FAIL rank 0: 6f: a receive of count 0 returned after %.1f ms, before its send (100 ms late)\n", ms);
        exit(1);
      }
    }

    expect(XcclGroupStart(), C_SUCCESS, "6d: group start");
    for (int k = 0; k < 20; k++) {
      fill(in[k], -1);
      expect(XcclSend(x, (int)(N - k), FLOAT32, (size_t)next, comm, NULL), C_SUCCESS, "6d: send");
    }
    for (int k = 0; k < 20; k++) expect(XcclRecv(in[k], (int)(N - k), FLOAT32, (size_t)prev, comm, NULL), C_SUCCESS, "6d: recv");
    expect(XcclGroupEnd(), C_SUCCESS, "6d: group end");
    for (int k = 0; k < 20; k++) {
      same(in[k], (float)(prev + 1), N - k, "6d: twenty messages each way");
      same(in[k] + N - k, -1, k, "6d: past a message");
    }
    printf("ok   rank %d: groups of sends and receives (%s)\n", rank, path);
  }
}

int main(int argc, char** argv) {
  int fused = argc > 1 && strcmp(argv[1], "fused") == 0;
  C_CCLComm comm = NULL;
  if (XcclCommInitFromEnv(&comm, &rank, &n, NULL) != C_SUCCESS) {
    printf("FAIL init: %s\n", XcclGetLastError());
    return 1;
  }
  float a[N], b[N], x[N], y[N], z[N];
  float s = (float)n * (float)(n + 1) / 2; /* the sum of rank + 1 */

  if (!fused) { /* 1 */
    fill(a, (float)(rank + 1));
    fill(b, 2.0f * (float)(rank + 1));
    if (rank == 0) expect(XcclGroupStart(), C_SUCCESS, "group start");
    expect(XcclAllReduce(a, a, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "1: first all-reduce");
    expect(XcclAllReduce(b, b, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "1: second all-reduce");
    if (rank == 0) expect(XcclGroupEnd(), C_SUCCESS, "1: group end");
    same(a, s, N, "1: first all-reduce");
    same(b, 2 * s, N, "1: second all-reduce");
    fill(a, 1);
    expect(XcclAllReduce(a, a, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "1: the next all-reduce");
    same(a, (float)n, N, "1: the next all-reduce");
    printf("ok   rank %d: grouping is local\n", rank);
  }

  p2p_groups(comm, "recorded in C"); /* 6 */

  /* 2 */
  fill(a, 1);
  fill(x, (float)(rank + 1));
  expect(XcclGroupStart(), C_SUCCESS, "2: group start");
  expect(XcclAllReduce(a, a, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "2: a");
  expect(XcclAllReduce(a, a, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "2: a again");
  expect(XcclAllReduce(x, y, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "2: x -> y");
  expect(XcclAllReduce(y, z, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "2: y -> z");
  expect(XcclGroupEnd(), C_SUCCESS, "2: group end");
  same(a, (float)(n * n), N, "2: a * n * n");
  same(y, s, N, "2: y");
  same(z, (float)n * s, N, "2: z");
  printf("ok   rank %d: a group runs in order\n", rank);

  /* 3 */
  C_Stream st = NULL;
  expect(XcclStreamCreate(&st), C_SUCCESS, "3: stream");
  fill(a, (float)(rank + 1));
  fill(x, (float)(rank + 1));
  fill(y, -1);
  expect(XcclGroupStart(), C_SUCCESS, "3: group start");
  expect(XcclAllReduce(a, a, N, FLOAT32, SUM, comm, st), C_SUCCESS, "3: on the stream");
  expect(XcclAllReduce(x, y, N, FLOAT32, SUM, comm, NULL), C_SUCCESS, "3: on the NULL stream");
  expect(XcclGroupEnd(), C_SUCCESS, "3: group end");
  same(y, s, N, "3: the NULL-stream call when XcclGroupEnd returned");
  expect(XcclStreamSynchronize(st), C_SUCCESS, "3: stream synchronize");
  same(a, s, N, "3: the stream's call");
  expect(XcclStreamDestroy(st), C_SUCCESS, "3: stream destroy");
  printf("ok   rank %d: a NULL-stream call of a group is synchronous\n", rank);

  p2p_groups(comm, "after a stream: Go's"); /* 6 again */

  /* 5 */
  {
    const void* sends[2] = {x, z};
    void* recvs[2] = {y, z};
    size_t counts[2] = {N, N / 2};
    fill(x, (float)(rank + 1));
    fill(z, 2.0f * (float)(rank + 1));
    if (rank == 0) expect(XcclGroupStart(), C_SUCCESS, "5: group start");
    expect(XcclAllReduceFused(sends, recvs, counts, 2, FLOAT32, SUM, comm, NULL), C_SUCCESS, "5: fused");
    if (rank == 0) expect(XcclGroupEnd(), C_SUCCESS, "5: group end");
    same(y, s, N, "5: first buffer");
    same(z, 2 * s, N / 2, "5: second buffer");
    same(z + N / 2, 2.0f * (float)(rank + 1), N / 2, "5: past the second buffer's count");
    printf("ok   rank %d: a fused call is one call in a group or not\n", rank);
  }

  /* 4 */
  expect(XcclCommSetTimeout(comm, 1.0), C_SUCCESS, "4: set timeout");
  C_CCLComm child = NULL;
  expect(XcclCommSplit(comm, 0, rank, &child, NULL), C_SUCCESS, "4: split");
  if (child) {
    if (rank == 1) sleep(3);
    fill(a, 1);
    C_Status got = XcclAllReduce(a, a, N, FLOAT32, SUM, child, NULL);
    if (rank == 0) expect(got, C_FAILED, "4: the child's all-reduce with a peer 3 s late, 1 s allowed");
    XcclDestroyComm(child);
  }
  printf("ok   rank %d: a split takes the parent's timeout\n", rank);

  XcclDestroyComm(comm);
  return failures ? 1 : 0;
}
