/* fast_path: the host device's C fast path (devices/host/fast.c) through the
 * C entries, under xcclrun (2 or more ranks): long runs of small collectives
 * of every kind (fused all-reduces too) checked element by element; a mismatch it meets (C_ERROR on
 * every rank, the call named); a group (the call waits for its end); a
 * stream's work before a NULL-stream call (in order); a destroyed handle
 * (refused, also once another communicator reuses the state), a finalized
 * one (refused); XcclMemAlloc's
 * memory (fused batches that copy once). Prints "ok"
 * lines, "FAIL" lines, exits 1 on any failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xccl.h"

static int failures, rank, n;

static void check(int ok, const char* what, long a, long b) {
  if (!ok) {
    printf("FAIL rank %d: %s (%ld, %ld): %s\n", rank, what, a, b, XcclGetLastError());
    failures++;
  }
}

static void expect(C_Status got, C_Status want, const char* what, const char* needle) {
  const char* msg = XcclGetLastError();
  if (got != want || (needle && !strstr(msg, needle))) {
    printf("FAIL rank %d: %s: status %d, want %d (%s)\n", rank, what, (int)got, (int)want, msg);
    failures++;
  }
}

/* value of rank r's element i in call k */
static int32_t val(int r, int i, int k) { return (int32_t)(r * 1000 + i + k % 97); }

static void collectives(C_CCLComm comm, int calls) {
  enum { MAXC = 200 };
  int32_t* send = malloc(sizeof(int32_t) * MAXC * (size_t)(n + 1));
  int32_t* recv = malloc(sizeof(int32_t) * MAXC * (size_t)(n + 1));
  for (int k = 0; k < calls; k++) {
    int kind = k % 6, count = 1 + (k * 7) % MAXC, root = k % n, inplace = (k / 6) % 2;
    for (int i = 0; i < MAXC * (n + 1); i++) send[i] = val(rank, i, k);
    memset(recv, 0xff, sizeof(int32_t) * (size_t)count * (size_t)(n + 1));
    C_Status st = C_SUCCESS;
    switch (kind) {
      case 0: /* all-reduce, SUM or MAX */
        if (inplace) memcpy(recv, send, sizeof(int32_t) * (size_t)count);
        st = XcclAllReduce(inplace ? recv : send, recv, (size_t)count, INT32, k % 3 ? SUM : MAX, comm, NULL);
        for (int i = 0; i < count; i++) {
          int32_t want = 0;
          for (int p = 0; p < n; p++) want = k % 3 ? want + val(p, i, k) : (p == 0 || val(p, i, k) > want ? val(p, i, k) : want);
          check(recv[i] == want, "all-reduce", recv[i], want);
        }
        break;
      case 1: /* broadcast */
        st = XcclBroadcast(send, (size_t)count, INT32, (size_t)root, comm, NULL);
        for (int i = 0; i < count; i++) check(send[i] == val(root, i, k), "broadcast", send[i], val(root, i, k));
        break;
      case 2: /* reduce; the others pass no receive buffer */
        st = XcclReduce(send, rank == root ? recv : NULL, (size_t)count, INT32, SUM, (size_t)root, comm, NULL);
        for (int i = 0; rank == root && i < count; i++) {
          int32_t want = 0;
          for (int p = 0; p < n; p++) want += val(p, i, k);
          check(recv[i] == want, "reduce", recv[i], want);
        }
        break;
      case 3: /* all-gather, in place: this rank's block already in recv */
        if (inplace) memcpy(recv + rank * count, send, sizeof(int32_t) * (size_t)count);
        st = XcclAllGather(inplace ? recv + rank * count : send, recv, (size_t)count, INT32, comm, NULL);
        for (int p = 0; p < n; p++)
          for (int i = 0; i < count; i++) check(recv[p * count + i] == val(p, i, k), "all-gather", recv[p * count + i], val(p, i, k));
        break;
      case 4: /* reduce-scatter */
        st = XcclReduceScatter(send, inplace ? send + rank * count : recv, (size_t)count, INT32, SUM, comm, NULL);
        for (int i = 0; i < count; i++) {
          int32_t want = 0, got = inplace ? send[rank * count + i] : recv[i];
          for (int p = 0; p < n; p++) want += val(p, rank * count + i, k);
          check(got == want, "reduce-scatter", got, want);
        }
        break;
      case 5: { /* fused all-reduce of 2-5 buffers, consecutive in send (and recv) */
        size_t nb = 2 + (size_t)(k % 4), counts[5], off = 0;
        const void* sends[5];
        void* recvs[5];
        for (size_t b = 0; b < nb; b++) {
          counts[b] = 1 + (size_t)(k * 3 + (int)b * 11) % 60;
          sends[b] = send + off;
          recvs[b] = inplace ? (void*)(send + off) : (void*)(recv + off);
          off += counts[b];
        }
        st = XcclAllReduceFused(sends, recvs, counts, nb, INT32, SUM, comm, NULL);
        int32_t* got = inplace ? send : recv;
        for (size_t i = 0; i < off; i++) {
          int32_t want = 0;
          for (int p = 0; p < n; p++) want += val(p, (int)i, k);
          check(got[i] == want, "fused all-reduce", got[i], want);
        }
        break;
      }
    }
    expect(st, C_SUCCESS, "collective", NULL);
    if (failures) break;
  }
  free(send);
  free(recv);
}

int main(void) {
  int local;
  C_CCLComm comm;
  if (XcclCommInitFromEnv(&comm, &rank, &n, &local) != C_SUCCESS) {
    printf("FAIL init: %s\n", XcclGetLastError());
    return 1;
  }
  collectives(comm, 2000);
  printf("ok   rank %d: 2000 small collectives of every kind\n", rank);

  /* A mismatch met in C: rank 0 all-reduces 4 elements, the others 5. */
  int32_t m[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  expect(XcclAllReduce(m, m, rank == 0 ? 4 : 5, INT32, SUM, comm, NULL), C_ERROR, "mismatched all-reduce",
         "collective mismatch");
  expect(XcclAllReduce(m, m, 1, INT32, SUM, comm, NULL), C_SUCCESS, "the call after a mismatch", NULL);
  collectives(comm, 100);
  /* And in a fused batch: rank 0's second buffer is shorter. */
  const void* fs[2] = {m, m + 4};
  void* fr[2] = {m, m + 4};
  size_t fc[2] = {4, rank == 0 ? 3 : 4};
  expect(XcclAllReduceFused(fs, fr, fc, 2, INT32, SUM, comm, NULL), C_ERROR, "mismatched fused all-reduce",
         "collective mismatch");
  collectives(comm, 100);
  printf("ok   rank %d: a mismatch is every rank's C_ERROR, the next calls run\n", rank);

  /* A group: the call runs at its end, not before. */
  int32_t g = rank + 1;
  expect(XcclGroupStart(), C_SUCCESS, "group start", NULL);
  expect(XcclAllReduce(&g, &g, 1, INT32, SUM, comm, NULL), C_SUCCESS, "all-reduce in a group", NULL);
  check(g == rank + 1, "a grouped all-reduce ran before the group's end", g, rank + 1);
  expect(XcclGroupEnd(), C_SUCCESS, "group end", NULL);
  check(g == n * (n + 1) / 2, "grouped all-reduce", g, n * (n + 1) / 2);
  collectives(comm, 100);

  /* A stream's sum, then a NULL-stream max: in that order (max first would give n*n). */
  C_Stream s;
  expect(XcclStreamCreate(&s), C_SUCCESS, "stream create", NULL);
  int32_t x = rank + 1;
  expect(XcclAllReduce(&x, &x, 1, INT32, SUM, comm, s), C_SUCCESS, "all-reduce on a stream", NULL);
  expect(XcclAllReduce(&x, &x, 1, INT32, MAX, comm, NULL), C_SUCCESS, "NULL-stream all-reduce after it", NULL);
  check(x == n * (n + 1) / 2, "NULL-stream call ran before the stream's", x, n * (n + 1) / 2);
  expect(XcclStreamSynchronize(s), C_SUCCESS, "stream synchronize", NULL);
  collectives(comm, 100);
  expect(XcclStreamDestroy(s), C_SUCCESS, "stream destroy", NULL);
  printf("ok   rank %d: groups and streams keep their order\n", rank);

  /* XcclMemAlloc's memory: a fused all-reduce of ten 2 KiB buffers, each its
   * own allocation, checked element by element; with 2 ranks it copies once
   * (the engine's allreduce.single_copy count), as it never does from malloc. */
  enum { NB = 10, BC = 512 };
  const void* ms[NB];
  void* mr[NB];
  size_t mc[NB];
  expect(XcclCommEnableStats(comm, 1), C_SUCCESS, "enable stats", NULL);
  for (int b = 0; b < NB; b++) {
    void *sp = NULL, *rp = NULL;
    expect(XcclMemAlloc(&sp, BC * sizeof(float)), C_SUCCESS, "XcclMemAlloc", NULL);
    expect(XcclMemAlloc(&rp, BC * sizeof(float)), C_SUCCESS, "XcclMemAlloc", NULL);
    if (!sp || !rp) {
      printf("FAIL rank %d: XcclMemAlloc gave NULL\n", rank);
      return 1;
    }
    ms[b] = sp, mr[b] = rp, mc[b] = BC;
  }
  for (int k = 0; k < 20; k++) {
    for (int b = 0; b < NB; b++)
      for (int i = 0; i < BC; i++) ((float*)ms[b])[i] = (float)val(rank, b * BC + i, k), ((float*)mr[b])[i] = -1;
    expect(XcclAllReduceFused(ms, mr, mc, NB, FLOAT32, SUM, comm, NULL), C_SUCCESS, "fused all-reduce in XcclMemAlloc memory", NULL);
    for (int b = 0; b < NB; b++)
      for (int i = 0; i < BC; i++) {
        float want = 0;
        for (int p = 0; p < n; p++) want += (float)val(p, b * BC + i, k);
        check(((float*)mr[b])[i] == want, "fused all-reduce in XcclMemAlloc memory", (long)((float*)mr[b])[i], (long)want);
      }
  }
  char stats[8192];
  expect(XcclCommGetStats(comm, stats, sizeof stats), C_SUCCESS, "stats", NULL);
  const char* sc = strstr(stats, "\"allreduce.single_copy\":");
  long copied_once = sc ? strtol(sc + strlen("\"allreduce.single_copy\":"), NULL, 10) : 0;
  if (n == 2) check(copied_once >= 19, "fused batches in XcclMemAlloc memory that copied once, of 20", copied_once, 19);
  for (int b = 0; b < NB; b++) {
    expect(XcclMemFree((void*)ms[b]), C_SUCCESS, "XcclMemFree", NULL);
    expect(XcclMemFree(mr[b]), C_SUCCESS, "XcclMemFree", NULL);
  }
  expect(XcclMemFree(mr[0]), C_ERROR, "XcclMemFree twice", "not allocated by XcclMemAlloc");
  expect(XcclCommEnableStats(comm, 0), C_SUCCESS, "disable stats", NULL);
  collectives(comm, 100);
  printf("ok   rank %d: XcclMemAlloc memory: fused batches right, %ld copied once\n", rank, copied_once);

  /* A destroyed handle is refused, also once another communicator took its state. */
  size_t idsz = 0;
  XcclGetUniqueIdSize(&idsz);
  C_CCLRootId id = {idsz, calloc(1, idsz)};
  if (rank == 0) expect(XcclGetUniqueId(&id), C_SUCCESS, "unique id", NULL);
  expect(XcclBroadcast(id.data, idsz, UINT8, 0, comm, NULL), C_SUCCESS, "id broadcast", NULL);
  expect(XcclDestroyComm(comm), C_SUCCESS, "destroy", NULL);
  int32_t y = 1;
  expect(XcclAllReduce(&y, &y, 1, INT32, SUM, comm, NULL), C_ERROR, "all-reduce on a destroyed handle", "unknown communicator");
  C_CCLComm comm2;
  expect(XcclCommInitRank((size_t)n, &id, (size_t)rank, &comm2), C_SUCCESS, "second communicator", NULL);
  free(id.data);
  collectives(comm2, 300);
  expect(XcclAllReduce(&y, &y, 1, INT32, SUM, comm, NULL), C_ERROR, "the old handle, a new communicator live", "unknown communicator");
  check(y == 1, "the old handle's call wrote", y, 1);
  /* Finalized, it refuses the calls the fast path would take. */
  expect(XcclCommFinalize(comm2), C_SUCCESS, "finalize", NULL);
  expect(XcclAllReduce(&y, &y, 1, INT32, SUM, comm2, NULL), C_ERROR, "all-reduce after finalize", "finalized");
  expect(XcclBroadcast(&y, 1, INT32, 0, comm2, NULL), C_ERROR, "broadcast after finalize", "finalized");
  check(y == 1, "a call after finalize wrote", y, 1);
  expect(XcclDestroyComm(comm2), C_SUCCESS, "destroy the second", NULL);
  printf("ok   rank %d: destroyed and finalized handles are refused\n", rank);
  return failures ? 1 : 0;
}
