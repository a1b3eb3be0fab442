/* split: XcclCommSplit under xcclrun (1 or more ranks), as ncclCommSplit.
 * Colors rank%2 with keys -rank (new rank 0 is the highest old one), the
 * last of three or more ranks XCCL_SPLIT_NOCOLOR (NULL communicator); each
 * new communicator's rank, size and all-reduce over its members only, and a
 * split of it; then the errors: NULL newcomm, NULL comm, a bad config, a
 * color below -1 on one rank (every rank fails, naming it). The parent
 * still works after each. A split inside a group, made at XcclGroupEnd (as
 * NCCL's). Then XcclCommInitAll of one rank on this process's device, with
 * an all-reduce in XcclMemAlloc's memory (so that it runs on a GPU too),
 * and of three ranks, which one thread splits in a group (skipped with the
 * argument "one-device": on one GPU, where NCCL refuses three ranks).
 * Prints "ok" lines, "FAIL" lines, exits 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xccl.h"

static int failures, rank, n;

static void expect(C_Status got, C_Status want, const char* what, const char* needle) {
  const char* msg = XcclGetLastError();
  if (got != want || (needle && !strstr(msg, needle))) {
    printf("FAIL rank %d: %s: status %d, want %d (%s)\n", rank, what, (int)got, (int)want, msg);
    failures++;
  }
}

static void check(int ok, const char* what, long a, long b) {
  if (!ok) {
    printf("FAIL rank %d: %s (%ld, %ld)\n", rank, what, a, b);
    failures++;
  }
}

/* the sum over comm of v */
static long sum(C_CCLComm comm, long v) {
  long long x = v;
  expect(XcclAllReduce(&x, &x, 1, INT64, SUM, comm, NULL), C_SUCCESS, "all-reduce", NULL);
  return (long)x;
}

int main(int argc, char** argv) {
  int one_device = argc > 1 && strcmp(argv[1], "one-device") == 0;
  C_CCLComm world = NULL;
  if (XcclCommInitFromEnv(&world, &rank, &n, NULL) != C_SUCCESS) {
    printf("FAIL init: %s\n", XcclGetLastError());
    return 1;
  }
  int color = (n >= 3 && rank == n - 1) ? XCCL_SPLIT_NOCOLOR : rank % 2;
  C_CCLComm sub = (C_CCLComm)(void*)&world; /* must be overwritten */
  expect(XcclCommSplit(world, color, -rank, &sub, NULL), C_SUCCESS, "split", NULL);
  if (color == XCCL_SPLIT_NOCOLOR) {
    check(sub == NULL, "no color: newcomm is NULL", 0, 0);
  } else if (sub == NULL) {
    printf("FAIL rank %d: color %d got no communicator\n", rank, color);
    failures++;
  } else {
    /* members: the ranks of this color but the no-color one, new order by -rank */
    int size = 0, mine = 0;
    long want = 0;
    for (int r = n - 1; r >= 0; r--) {
      if (r % 2 != color || (n >= 3 && r == n - 1)) continue;
      if (r == rank) mine = size;
      size++;
      want += r + 1;
    }
    int got_rank = -1, got_size = -1;
    expect(XcclCommUserRank(sub, &got_rank), C_SUCCESS, "user rank", NULL);
    expect(XcclCommCount(sub, &got_size), C_SUCCESS, "count", NULL);
    check(got_rank == mine, "new rank", got_rank, mine);
    check(got_size == size, "new size", got_size, size);
    long s = sum(sub, rank + 1);
    check(s == want, "sum over the members", s, want);
    /* a split of the split, with a config: one color, equal keys: the same order */
    XcclConfig cfg = XCCL_CONFIG_INITIALIZER;
    cfg.timeout_seconds = 30;
    C_CCLComm again = NULL;
    expect(XcclCommSplit(sub, 5, 0, &again, &cfg), C_SUCCESS, "split of the split", NULL);
    int r2 = -1;
    expect(XcclCommUserRank(again, &r2), C_SUCCESS, "user rank of the split's split", NULL);
    check(r2 == mine, "rank of the split's split", r2, mine);
    s = sum(again, rank + 1);
    check(s == want, "sum over the split's split", s, want);
    expect(XcclDestroyComm(again), C_SUCCESS, "destroy", NULL);
    expect(XcclDestroyComm(sub), C_SUCCESS, "destroy", NULL);
  }
  long all = (long)n * (n + 1) / 2;
  long s = sum(world, rank + 1);
  check(s == all, "the parent after the split", s, all);
  if (failures == 0) printf("ok   rank %d: split\n", rank);

  /* errors every rank makes alike: refused before anything crosses */
  int f0 = failures;
  expect(XcclCommSplit(world, 0, 0, NULL, NULL), C_ERROR, "NULL newcomm", "newcomm is NULL");
  sub = (C_CCLComm)(void*)&world;
  expect(XcclCommSplit(NULL, 0, 0, &sub, NULL), C_ERROR, "NULL comm", NULL);
  check(sub == NULL, "newcomm NULL after a failure", 0, 0);
  XcclConfig bad = XCCL_CONFIG_INITIALIZER;
  bad.timeout_seconds = -1;
  expect(XcclCommSplit(world, 0, 0, &sub, &bad), C_ERROR, "negative timeout", "timeout_seconds");
  /* a color below -1 on rank 1 (rank 0 alone: itself): every rank fails */
  int culprit = n > 1 ? 1 : 0;
  expect(XcclCommSplit(world, rank == culprit ? -7 : 0, 0, &sub, NULL), C_ERROR, "color -7", "passed color -7");
  check(sub == NULL, "newcomm NULL after a bad color", 0, 0);
  /* a bad config, or no newcomm, on one rank only: every rank fails, none waits */
  expect(XcclCommSplit(world, 0, 0, &sub, rank == culprit ? &bad : NULL), C_ERROR, "one rank's bad config",
         rank == culprit ? "timeout_seconds" : "passed a bad argument");
  expect(XcclCommSplit(world, 0, 0, rank == culprit ? NULL : &sub, NULL), C_ERROR, "one rank's NULL newcomm",
         rank == culprit ? "newcomm is NULL" : "passed a bad argument");
  s = sum(world, rank + 1);
  check(s == all, "the parent after the errors", s, all);
  if (failures == f0) printf("ok   rank %d: errors\n", rank);

  /* inside a group (as NCCL's): made at XcclGroupEnd; a no-color rank's
   * handle is NULL at once */
  f0 = failures;
  C_CCLComm later = NULL;
  int gcolor = (n >= 3 && rank == 0) ? XCCL_SPLIT_NOCOLOR : 0;
  expect(XcclGroupStart(), C_SUCCESS, "group start", NULL);
  expect(XcclCommSplit(world, gcolor, -rank, &later, NULL), C_SUCCESS, "split inside a group", NULL);
  check((later == NULL) == (gcolor == XCCL_SPLIT_NOCOLOR), "a handle unless no color", 0, 0);
  expect(XcclGroupEnd(), C_SUCCESS, "group end", NULL);
  if (later) {
    long want = 0;
    for (int r = 0; r < n; r++) want += (n >= 3 && r == 0) ? 0 : r + 1;
    s = sum(later, rank + 1);
    check(s == want, "a split made at the group's end", s, want);
    int size = -1;
    expect(XcclCommCount(later, &size), C_SUCCESS, "count", NULL);
    check(size == (n >= 3 ? n - 1 : n), "its size", size, n);
    expect(XcclDestroyComm(later), C_SUCCESS, "destroy the group's split", NULL);
  }
  /* bad arguments in a group: refused at the call, and every rank's
   * XcclGroupEnd fails (the exchange still ran, so none waits); the parent
   * goes on */
  expect(XcclGroupStart(), C_SUCCESS, "group start", NULL);
  expect(XcclCommSplit(world, 0, 0, NULL, NULL), C_ERROR, "NULL newcomm in a group", "newcomm is NULL");
  expect(XcclGroupEnd(), C_ERROR, "the group of a bad split", NULL);
  s = sum(world, rank + 1);
  check(s == all, "the parent after a bad split in a group", s, all);
  /* two splits of one communicator in one group: made in that order */
  C_CCLComm ga = NULL, gb = NULL;
  expect(XcclGroupStart(), C_SUCCESS, "group start", NULL);
  expect(XcclCommSplit(world, 0, rank, &ga, NULL), C_SUCCESS, "first split in a group", NULL);
  expect(XcclCommSplit(world, rank % 2, rank, &gb, NULL), C_SUCCESS, "second split in a group", NULL);
  expect(XcclGroupEnd(), C_SUCCESS, "group end", NULL);
  if (ga && gb) {
    long wb = 0;
    for (int r = rank % 2; r < n; r += 2) wb += r + 1;
    s = sum(ga, rank + 1);
    check(s == all, "the first of two splits in a group", s, all);
    s = sum(gb, rank + 1);
    check(s == wb, "the second of two splits in a group", s, wb);
  } else {
    check(0, "two splits in a group made both", ga != NULL, gb != NULL);
  }
  XcclDestroyComm(ga);
  XcclDestroyComm(gb);
  if (failures == f0) printf("ok   rank %d: split in a group\n", rank);

  expect(XcclDestroyComm(world), C_SUCCESS, "destroy", NULL);

  f0 = failures;
  C_CCLComm one = NULL;
  void* dev = NULL;
  expect(XcclCommInitAll(&one, 1, NULL), C_SUCCESS, "init all (1 rank)", NULL);
  int r1 = -1, n1 = -1;
  expect(XcclCommUserRank(one, &r1), C_SUCCESS, "init all: user rank", NULL);
  expect(XcclCommCount(one, &n1), C_SUCCESS, "init all: count", NULL);
  check(r1 == 0 && n1 == 1, "init all: rank 0 of 1", r1, n1);
  expect(XcclMemAlloc(&dev, 4096), C_SUCCESS, "init all: XcclMemAlloc", NULL);
  expect(XcclAllReduce(dev, dev, 1024, FLOAT32, SUM, one, NULL), C_SUCCESS, "init all: all-reduce", NULL);
  expect(XcclMemFree(dev), C_SUCCESS, "init all: XcclMemFree", NULL);
  expect(XcclDestroyComm(one), C_SUCCESS, "init all: destroy", NULL);
  if (failures == f0) printf("ok   rank %d: init all\n", rank);

  /* one thread splits the 3 communicators XcclCommInitAll made, in a
   * group, then drives the halves in a group: {0, 2} and {1} */
  if (one_device) return failures ? 1 : 0;
  f0 = failures;
  C_CCLComm three[3] = {NULL, NULL, NULL}, halves[3] = {NULL, NULL, NULL};
  int devs[3] = {0, 1, 2};
  expect(XcclCommInitAll(three, 3, devs), C_SUCCESS, "init all (3 ranks)", NULL);
  expect(XcclGroupStart(), C_SUCCESS, "group start", NULL);
  for (int i = 0; i < 3; i++) expect(XcclCommSplit(three[i], i % 2, i, &halves[i], NULL), C_SUCCESS, "split of one of 3", NULL);
  expect(XcclGroupEnd(), C_SUCCESS, "group end", NULL);
  long long v[3] = {1, 2, 3};
  expect(XcclGroupStart(), C_SUCCESS, "group start", NULL);
  for (int i = 0; i < 3; i++) expect(XcclAllReduce(&v[i], &v[i], 1, INT64, SUM, halves[i], NULL), C_SUCCESS, "half all-reduce", NULL);
  expect(XcclGroupEnd(), C_SUCCESS, "group end", NULL);
  check(v[0] == 4 && v[2] == 4 && v[1] == 2, "the halves' sums", (long)v[0], (long)v[1]);
  for (int i = 0; i < 3; i++) {
    expect(XcclDestroyComm(halves[i]), C_SUCCESS, "destroy a half", NULL);
    expect(XcclDestroyComm(three[i]), C_SUCCESS, "destroy one of 3", NULL);
  }
  if (failures == f0) printf("ok   rank %d: one thread splits three ranks in a group\n", rank);
  return failures ? 1 : 0;
}
