/* collectives: every collective through the C ABI, checked element by
 * element on every rank: broadcast, reduce, all-gather, reduce-scatter,
 * all-to-all with per-peer counts, gather and scatter, a send/recv ring (plain and grouped),
 * fused all-reduces, pre-multiplied sums,
 * all-reduce on a stream, in-place and out-of-place, odd counts.
 *
 *   xcclrun -n 4 ./collectives [count]
 */
#include <stdint.h>
#include "common.h"

static int rank, n;
static long failures;

#define EXPECT(cond, ...)                            \
  do {                                               \
    if (!(cond)) {                                   \
      if (failures++ < 10) {                         \
        fprintf(stderr, "rank %d: ", rank);          \
        fprintf(stderr, __VA_ARGS__);                \
        fprintf(stderr, "\n");                       \
      }                                              \
    }                                                \
  } while (0)

static int32_t val(int r, size_t i) { return (int32_t)(r * 1000 + (int)(i % 997)); }

int main(int argc, char** argv) {
  size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 100003;
  C_CCLComm comm = join_from_env(&rank, &n);
  int q = -1, cnt = -1;
  CHECK(XcclCommUserRank(comm, &q));
  CHECK(XcclCommCount(comm, &cnt));
  EXPECT(q == rank && cnt == n, "comm says rank %d of %d", q, cnt);

  int32_t* a = malloc(count * n * sizeof(int32_t));
  int32_t* b = malloc(count * n * sizeof(int32_t));

  /* broadcast from the last rank */
  for (size_t i = 0; i < count; i++) a[i] = rank == n - 1 ? val(rank, i) : -1;
  CHECK(XcclBroadcast(a, count, INT32, (size_t)(n - 1), comm, NULL));
  for (size_t i = 0; i < count; i++) EXPECT(a[i] == val(n - 1, i), "broadcast[%zu] = %d", i, a[i]);

  /* reduce (max) to rank 0, out of place, then in place */
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < count; i++) a[i] = val(rank, i);
    int32_t* out = inplace ? a : b;
    CHECK(XcclReduce(a, out, count, INT32, MAX, 0, comm, NULL));
    if (rank == 0)
      for (size_t i = 0; i < count; i++) EXPECT(out[i] == val(n - 1, i), "reduce max[%zu] = %d", i, out[i]);
  }

  /* all-gather, out of place and in place */
  for (int inplace = 0; inplace < 2; inplace++) {
    int32_t* send = inplace ? b + (size_t)rank * count : a;
    for (size_t i = 0; i < count; i++) send[i] = val(rank, i);
    CHECK(XcclAllGather(send, b, count, INT32, comm, NULL));
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++)
        EXPECT(b[(size_t)r * count + i] == val(r, i), "allgather block %d [%zu] = %d", r, i, b[(size_t)r * count + i]);
  }

  /* reduce-scatter (sum) */
  for (size_t i = 0; i < count * n; i++) a[i] = val(rank, i);
  CHECK(XcclReduceScatter(a, b, count, INT32, SUM, comm, NULL));
  for (size_t i = 0; i < count; i++) {
    int32_t want = 0;
    for (int r = 0; r < n; r++) want += val(r, (size_t)rank * count + i);
    EXPECT(b[i] == want, "reducescatter[%zu] = %d want %d", i, b[i], want);
  }

  /* all-reduce (sum) on a stream: enqueue, then synchronize */
  C_Stream s = NULL;
  CHECK(XcclStreamCreate(&s));
  for (size_t i = 0; i < count; i++) a[i] = val(rank, i);
  CHECK(XcclAllReduce(a, a, count, INT32, SUM, comm, s));
  CHECK(XcclStreamSynchronize(s));
  CHECK(XcclStreamQuery(s));
  for (size_t i = 0; i < count; i++) {
    int32_t want = 0;
    for (int r = 0; r < n; r++) want += val(r, i);
    EXPECT(a[i] == want, "allreduce on stream [%zu] = %d want %d", i, a[i], want);
  }
  CHECK(XcclStreamDestroy(s));

  /* all-to-all: rank r sends p+1 elements to rank p */
  const void** sb = malloc(n * sizeof(void*));
  void** rb = malloc(n * sizeof(void*));
  size_t *sc = malloc(n * sizeof(size_t)), *rc = malloc(n * sizeof(size_t));
  C_DataType *st = malloc(n * sizeof(C_DataType)), *rt = malloc(n * sizeof(C_DataType));
  for (int p = 0; p < n; p++) {
    int32_t* blk = a + (size_t)p * (size_t)n;
    for (int i = 0; i <= p; i++) blk[i] = rank * 100 + p * 10 + i;
    sb[p] = blk;
    sc[p] = (size_t)p + 1;
    st[p] = INT32;
    rb[p] = b + (size_t)p * (size_t)n;
    rc[p] = (size_t)rank + 1;
    rt[p] = INT32;
  }
  CHECK(XcclAllToAll(sb, sc, st, rb, rc, rt, (size_t)rank, (size_t)n, comm, NULL));
  for (int p = 0; p < n; p++)
    for (int i = 0; i <= rank; i++) {
      int32_t got = b[(size_t)p * (size_t)n + (size_t)i];
      EXPECT(got == p * 100 + rank * 10 + i, "alltoall from %d [%d] = %d", p, i, got);
    }

  /* gather to the last rank (NULL receive buffer elsewhere), then scatter
   * it back from there in place */
  for (size_t i = 0; i < count; i++) a[i] = val(rank, i);
  CHECK(XcclGather(a, rank == n - 1 ? b : NULL, count, INT32, (size_t)(n - 1), comm, NULL));
  if (rank == n - 1)
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++)
        EXPECT(b[(size_t)r * count + i] == val(r, i), "gather block %d [%zu] = %d", r, i, b[(size_t)r * count + i]);
  for (size_t i = 0; i < count; i++) a[i] = -1;
  int32_t* into = rank == n - 1 ? b + (size_t)rank * count : a;
  CHECK(XcclScatter(rank == n - 1 ? b : NULL, into, count, INT32, (size_t)(n - 1), comm, NULL));
  for (size_t i = 0; i < count; i++) EXPECT(into[i] == val(rank, i), "scatter [%zu] = %d", i, into[i]);

  /* send/recv ring: sends first, without and with a group */
  if (n > 1) {
    for (int grouped = 0; grouped < 2; grouped++) {
      for (size_t i = 0; i < count; i++) a[i] = val(rank, i);
      if (grouped) CHECK(XcclGroupStart());
      CHECK(XcclSend(a, count, INT32, (size_t)((rank + 1) % n), comm, NULL));
      CHECK(XcclRecv(b, count, INT32, (size_t)((rank + n - 1) % n), comm, NULL));
      if (grouped) CHECK(XcclGroupEnd());
      for (size_t i = 0; i < count; i++)
        EXPECT(b[i] == val((rank + n - 1) % n, i), "ring recv (grouped=%d) [%zu] = %d", grouped, i, b[i]);
    }
  }

  /* fused all-reduce of three buffers (one empty), counted by the stats */
  {
    CHECK(XcclCommEnableStats(comm, 1));
    int32_t x[5], y[1] = {0}, z[3];
    for (int i = 0; i < 5; i++) x[i] = val(rank, (size_t)i);
    for (int i = 0; i < 3; i++) z[i] = val(rank, (size_t)(10 + i));
    const void* sends[3] = {x, y, z};
    void* recvs[3] = {x, y, z};
    size_t counts[3] = {5, 0, 3};
    CHECK(XcclAllReduceFused(sends, recvs, counts, 3, INT32, SUM, comm, NULL));
    for (int i = 0; i < 5; i++) {
      int32_t want = 0;
      for (int r = 0; r < n; r++) want += val(r, (size_t)i);
      EXPECT(x[i] == want, "fused buffer 0 [%d] = %d, want %d", i, x[i], want);
    }
    for (int i = 0; i < 3; i++) {
      int32_t want = 0;
      for (int r = 0; r < n; r++) want += val(r, (size_t)(10 + i));
      EXPECT(z[i] == want, "fused buffer 2 [%d] = %d, want %d", i, z[i], want);
    }
    char stats[4096];
    CHECK(XcclCommGetStats(comm, stats, sizeof stats));
    EXPECT(strstr(stats, "\"fused_calls\":1") != NULL, "stats lack the fused call: %s", stats);
    EXPECT(XcclCommGetStats(comm, stats, 8) == C_ERROR, "an 8-byte stats buffer is refused");
    char algos[2048];
    CHECK(XcclGetAlgorithms(NULL, algos, sizeof algos));
    EXPECT(strlen(algos) > 0, "algorithms: empty");
  }

  /* pre-multiplied sums (ncclRedOpCreatePreMulSum): each rank's input times
   * its own scalar, summed; a device scalar is read when the call runs, a
   * host-immediate one when the op is made. Where the device has none
   * (HCCL, CNCL, BKCL), C_ERROR. */
  {
    const char* dev = getenv("XCCL_DEVICE");
    double sd = 0, sh = rank + 1.0, x[7], y[7];
    C_CCLReduceOp od, oh;
    C_Status st = XcclRedOpCreatePreMulSum(&od, &sd, FLOAT64, XCCL_SCALAR_DEVICE, comm);
    if (st == C_SUCCESS) {
      CHECK(XcclRedOpCreatePreMulSum(&oh, &sh, FLOAT64, XCCL_SCALAR_HOST_IMMEDIATE, comm));
      EXPECT(od >= XCCL_PREMUL_SUM_FIRST && oh >= XCCL_PREMUL_SUM_FIRST && od != oh, "ops %d and %d", (int)od, (int)oh);
      sd = 0.5 * (rank + 1), sh = -1; /* the call reads sd now; sh was read at creation */
      for (int i = 0; i < 7; i++) x[i] = i + rank;
      CHECK(XcclAllReduce(x, y, 7, FLOAT64, od, comm, NULL));
      CHECK(XcclAllReduce(x, x, 7, FLOAT64, oh, comm, NULL));
      for (int i = 0; i < 7; i++) {
        double wd = 0, wh = 0;
        for (int r = 0; r < n; r++) wd += 0.5 * (r + 1) * (i + r), wh += (r + 1.0) * (i + r);
        EXPECT(y[i] == wd, "premul sum (device scalar) [%d] = %g, want %g", i, y[i], wd);
        EXPECT(x[i] == wh, "premul sum (host scalar, in place) [%d] = %g, want %g", i, x[i], wh);
      }
      EXPECT(XcclAllReduce(x, y, 7, FLOAT32, od, comm, NULL) == C_ERROR, "a FLOAT64 op on FLOAT32 is refused");
      CHECK(XcclRedOpDestroy(od, comm));
      CHECK(XcclRedOpDestroy(oh, comm));
      EXPECT(XcclAllReduce(x, y, 7, FLOAT64, od, comm, NULL) == C_ERROR, "a destroyed op is refused");
      EXPECT(XcclRedOpDestroy(od, comm) == C_ERROR, "a second destroy is refused");
    } else {
      const char* why = XcclGetLastError();
      EXPECT(st == C_ERROR && dev && strcmp(dev, "host"), "premul sum on %s: %d %s", dev ? dev : "host", (int)st, why);
    }
  }

  /* a per-communicator timeout: positive seconds only */
  EXPECT(XcclCommSetTimeout(comm, 0) == C_ERROR, "a zero timeout is refused");
  {
    const char* dev = getenv("XCCL_DEVICE");
    C_Status st = XcclCommSetTimeout(comm, 120);
    EXPECT(dev && strcmp(dev, "host") ? st == C_ERROR || st == C_SUCCESS : st == C_SUCCESS, "set a timeout: %s",
           XcclGetLastError());
  }

  /* what the communicator reduces, and how (a mixed one names its clusters) */
  {
    char caps[8192];
    CHECK(XcclCommGetCapabilities(comm, caps, sizeof caps));
    char* nl = strchr(caps, '\n');
    if (nl) *nl = 0;
    if (rank == 0) printf("capabilities: %s\n", caps);
  }

  /* count 0 with NULL buffers is a no-op */
  CHECK(XcclAllReduce(NULL, NULL, 0, FLOAT32, SUM, comm, NULL));

  CHECK(XcclDestroyComm(comm));
  CHECK(XcclDestroyComm(NULL));
  printf("rank %d of %d: collectives %s\n", rank, n, failures ? "FAILED" : "all correct");
  free(a); free(b); free(sb); free(rb); free(sc); free(rc); free(st); free(rt);
  return failures ? 1 : 0;
}
