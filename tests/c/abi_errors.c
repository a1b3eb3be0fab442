/* abi_errors: bad input through the C ABI. Every call must return the
 * documented status with a message from XcclGetLastError, never crash or
 * hang. Runs as one process (it makes its own 1-rank communicator). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "xccl.h"

static int failures;

static void expect(const char* what, C_Status got, C_Status want, const char* needle) {
  const char* msg = XcclGetLastError();
  if (got != want) {
    printf("FAIL %s: status %d, want %d (%s)\n", what, (int)got, (int)want, msg);
    failures++;
  } else if (needle && !strstr(msg, needle)) {
    printf("FAIL %s: message \"%s\" lacks \"%s\"\n", what, msg, needle);
    failures++;
  } else {
    printf("ok   %-44s -> %d %s\n", what, (int)got, want == C_SUCCESS ? "" : msg);
  }
}

/* NCCL's single-thread pattern: inits of several ranks inside one group
 * are made together at its end; then grouped collectives over all of them. */
static void one_thread_four_ranks(void) {
  enum { N = 4, K = 1000 };
  size_t sz = 0;
  XcclGetUniqueIdSize(&sz);
  C_CCLRootId id = {sz, calloc(1, sz)};
  expect("4 ranks: GetUniqueId", XcclGetUniqueId(&id), C_SUCCESS, NULL);
  C_CCLComm comms[N] = {0};
  expect("4 ranks: GroupStart", XcclGroupStart(), C_SUCCESS, NULL);
  for (int r = 0; r < N; r++) expect("4 ranks: CommInitRank in a group", XcclCommInitRank(N, &id, (size_t)r, &comms[r]), C_SUCCESS, NULL);
  float early = 1;
  expect("4 ranks: comm used before GroupEnd", XcclAllReduce(&early, &early, 1, FLOAT32, SUM, comms[0], NULL), C_ERROR, "not made yet");
  /* The refused call fails the group (as ncclGroupEnd after a failed call);
   * its inits are made all the same: their handles are the caller's. */
  expect("4 ranks: GroupEnd makes them, and fails for the refused call", XcclGroupEnd(), C_ERROR,
         "a call of the group was refused, so none of its operations ran");
  free(id.data);
  static float buf[N][K], src[N][K], ring[N][K];
  for (int r = 0; r < N; r++)
    for (int i = 0; i < K; i++) buf[r][i] = (float)(r + 1) * (float)(i % 7), src[r][i] = (float)(r * K + i);
  expect("4 ranks: GroupStart", XcclGroupStart(), C_SUCCESS, NULL);
  for (int r = 0; r < N; r++) XcclAllReduce(buf[r], buf[r], K, FLOAT32, SUM, comms[r], NULL);
  for (int r = 0; r < N; r++) {
    XcclSend(src[r], K, FLOAT32, (size_t)((r + 1) % N), comms[r], NULL);
    XcclRecv(ring[r], K, FLOAT32, (size_t)((r + N - 1) % N), comms[r], NULL);
  }
  expect("4 ranks: grouped all-reduce and ring from one thread", XcclGroupEnd(), C_SUCCESS, NULL);
  for (int r = 0; r < N; r++)
    for (int i = 0; i < K; i++)
      if (buf[r][i] != 10.0f * (float)(i % 7) || ring[r][i] != (float)(((r + N - 1) % N) * K + i)) {
        printf("FAIL 4 ranks: rank %d element %d = %g / %g\n", r, i, buf[r][i], ring[r][i]);
        failures++;
        r = N;
        break;
      }
  for (int r = 0; r < N; r++) expect("4 ranks: DestroyComm", XcclDestroyComm(comms[r]), C_SUCCESS, NULL);
}

/* XcclCommInitAll, as ncclCommInitAll: N ranks in this process on the
 * devices listed, driven from this thread with a group; its errors. */
static void init_all(void) {
  enum { N = 3, K = 777 };
  C_CCLComm comms[N] = {0};
  int devs[N] = {2, 0, 1}, bad[N] = {0, 1, 999};
  expect("CommInitAll(NULL comms)", XcclCommInitAll(NULL, N, NULL), C_ERROR, "comms is NULL");
  expect("CommInitAll(ndev 0)", XcclCommInitAll(comms, 0, NULL), C_ERROR, "ndev 0");
  expect("CommInitAll(devlist out of range)", XcclCommInitAll(comms, N, bad), C_ERROR, "devlist[2] = 999");
  expect("GroupStart", XcclGroupStart(), C_SUCCESS, NULL);
  expect("CommInitAll inside a group", XcclCommInitAll(comms, N, devs), C_ERROR, "inside a group");
  expect("GroupEnd", XcclGroupEnd(), C_SUCCESS, NULL);
  if (comms[0] || comms[1] || comms[2]) { printf("FAIL CommInitAll left handles after failing\n"); failures++; }
  expect("CommInitAll(3 ranks, devlist 2 0 1)", XcclCommInitAll(comms, N, devs), C_SUCCESS, NULL);
  static float buf[N][K];
  for (int r = 0; r < N; r++) {
    int rank = -1, count = -1;
    XcclCommUserRank(comms[r], &rank);
    XcclCommCount(comms[r], &count);
    if (rank != r || count != N) { printf("FAIL CommInitAll: handle %d is rank %d of %d\n", r, rank, count); failures++; }
    for (int i = 0; i < K; i++) buf[r][i] = (float)(r + 1) * (float)(i % 5);
  }
  expect("GroupStart", XcclGroupStart(), C_SUCCESS, NULL);
  for (int r = 0; r < N; r++) XcclAllReduce(buf[r], buf[r], K, FLOAT32, SUM, comms[r], NULL);
  expect("CommInitAll: grouped all-reduce from one thread", XcclGroupEnd(), C_SUCCESS, NULL);
  for (int r = 0; r < N; r++)
    for (int i = 0; i < K; i++)
      if (buf[r][i] != 6.0f * (float)(i % 5)) {
        printf("FAIL CommInitAll: rank %d element %d = %g\n", r, i, buf[r][i]);
        failures++;
        r = N;
        break;
      }
  for (int r = 0; r < N; r++) expect("CommInitAll: DestroyComm", XcclDestroyComm(comms[r]), C_SUCCESS, NULL);
  C_CCLComm two[2] = {0};
  expect("CommInitAll(2 ranks, devlist NULL)", XcclCommInitAll(two, 2, NULL), C_SUCCESS, NULL);
  /* Finalized, each takes no more calls: a small all-reduce outside a group
   * (the C fast path's) fails at once instead of waiting for rank 1. */
  float one = 1;
  int dev = -1;
  expect("CommDevice(NULL)", XcclCommDevice(two[1], NULL), C_ERROR, "device is NULL");
  expect("CommDevice", XcclCommDevice(two[1], &dev), C_SUCCESS, NULL);
  if (dev != 1) { printf("FAIL CommDevice of CommInitAll's rank 1 (devlist NULL) is %d\n", dev); failures++; }
  expect("GroupStart", XcclGroupStart(), C_SUCCESS, NULL);
  expect("CommFinalize inside a group", XcclCommFinalize(two[0]), C_ERROR, "inside a group");
  expect("GroupEnd", XcclGroupEnd(), C_SUCCESS, NULL);
  for (int r = 0; r < 2; r++) expect("CommFinalize", XcclCommFinalize(two[r]), C_SUCCESS, NULL);
  expect("AllReduce after CommFinalize", XcclAllReduce(&one, &one, 1, FLOAT32, SUM, two[0], NULL), C_ERROR, "finalized");
  expect("Gather after CommFinalize", XcclGather(&one, &one, 1, FLOAT32, 0, two[1], NULL), C_ERROR,
         "Gather: the communicator was finalized (CommFinalize): only its Destroy is left [count 1, FLOAT32, root 0; rank 1 of 2]");
  expect("CommFinalize(again)", XcclCommFinalize(two[0]), C_SUCCESS, NULL);
  for (int r = 0; r < 2; r++) expect("CommInitAll: DestroyComm", XcclDestroyComm(two[r]), C_SUCCESS, NULL);
  expect("CommFinalize(destroyed)", XcclCommFinalize(two[0]), C_ERROR, "unknown communicator");
}

/* XcclGetErrorString: each status's fixed text. */
static void error_strings(void) {
  const struct { C_Status st; const char* needle; } want[] = {
      {C_SUCCESS, "success"}, {C_WARNING, "warning"}, {C_FAILED, "failed"}, {C_ERROR, "invalid argument"},
      {C_INTERNAL_ERROR, "internal error"}, {(C_Status)42, "unknown status"}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char* s = XcclGetErrorString(want[i].st);
    if (!s || !strstr(s, want[i].needle)) {
      printf("FAIL GetErrorString(%d) = \"%s\", want \"%s\"\n", (int)want[i].st, s ? s : "(null)", want[i].needle);
      failures++;
    } else {
      printf("ok   GetErrorString(%d) -> %s\n", (int)want[i].st, s);
    }
  }
}

/* Two threads destroy one handle at once, many times: exactly one of them
 * destroys it, the other is told the communicator is unknown. */
static C_CCLComm racing_comm;
static C_Status racing_status[2];
static void* destroy_racing(void* i) {
  racing_status[(intptr_t)i] = XcclDestroyComm(racing_comm);
  return NULL;
}
static void destroy_race(void) {
  size_t sz = 0;
  XcclGetUniqueIdSize(&sz);
  for (int k = 0; k < 50; k++) {
    C_CCLRootId id = {sz, calloc(1, sz)};
    racing_comm = NULL;
    if (XcclGetUniqueId(&id) != C_SUCCESS || XcclCommInitRank(1, &id, 0, &racing_comm) != C_SUCCESS) {
      printf("FAIL destroy race: init: %s\n", XcclGetLastError());
      failures++;
      free(id.data);
      return;
    }
    free(id.data);
    pthread_t th[2];
    for (intptr_t i = 0; i < 2; i++) pthread_create(&th[i], NULL, destroy_racing, (void*)i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    int ok = (racing_status[0] == C_SUCCESS) + (racing_status[1] == C_SUCCESS);
    int unknown = (racing_status[0] == C_ERROR) + (racing_status[1] == C_ERROR);
    if (ok != 1 || unknown != 1) {
      printf("FAIL destroy race %d: statuses %d and %d, want one C_SUCCESS and one C_ERROR\n", k, (int)racing_status[0], (int)racing_status[1]);
      failures++;
      return;
    }
  }
  printf("ok   %-44s -> one destroys, one is told it is unknown (50 times)\n", "DestroyComm from two threads at once");
}

/* A stranger dials the root's port (from the id bytes) and sends junk. */
static void stranger(const unsigned char* id) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  memcpy(&a.sin_addr, id + 8 + 12, 4); /* IPv4-mapped root address */
  a.sin_port = htons((uint16_t)(id[24] << 8 | id[25]));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    printf("FAIL stranger could not even connect\n");
    failures++;
    return;
  }
  const char junk[] = "\x00\x00\x00\x10GET / HTTP/1.0\r\n\r\n";
  ssize_t w = write(fd, junk, sizeof junk - 1);
  (void)w;
  char buf[512];
  ssize_t r = read(fd, buf, sizeof buf); /* the root answers with a refusal and closes */
  (void)r;
  close(fd);
  printf("ok   %-44s\n", "stranger on the root port refused");
}

int main(void) {
  size_t size = 0;
  expect("GetUniqueIdSize(NULL)", XcclGetUniqueIdSize(NULL), C_ERROR, "NULL");
  expect("GetUniqueIdSize", XcclGetUniqueIdSize(&size), C_SUCCESS, NULL);
  unsigned char* bytes = calloc(1, size);
  C_CCLRootId id = {.sz = size, .data = bytes};
  C_CCLRootId small = {.sz = size / 2, .data = bytes};
  expect("GetUniqueId(NULL)", XcclGetUniqueId(NULL), C_ERROR, "NULL");
  expect("GetUniqueId(short buffer)", XcclGetUniqueId(&small), C_ERROR, "need");

  C_CCLComm comm = NULL;
  /* malformed ids: truncated, random, zero */
  unsigned char* junk = malloc(size);
  for (size_t i = 0; i < size; i++) junk[i] = (unsigned char)(i * 37 + 11);
  C_CCLRootId rnd = {.sz = size, .data = junk};
  C_CCLRootId trunc = {.sz = size - 1, .data = junk};
  expect("CommInitRank(random id)", XcclCommInitRank(1, &rnd, 0, &comm), C_ERROR, "magic");
  expect("CommInitRank(truncated id)", XcclCommInitRank(1, &trunc, 0, &comm), C_ERROR, "bytes");
  expect("CommInitRank(NULL id)", XcclCommInitRank(1, NULL, 0, &comm), C_ERROR, "NULL");
  expect("CommInitRank(NULL comm)", XcclCommInitRank(1, &rnd, 0, NULL), C_ERROR, "NULL");
  expect("CommInitRank(rank 3 of 2)", XcclCommInitRank(2, &rnd, 3, &comm), C_ERROR, "out of range");
  XcclConfig neg = XCCL_CONFIG_INITIALIZER, tiny = XCCL_CONFIG_INITIALIZER;
  neg.timeout_seconds = -1;
  tiny.size = 1;
  expect("CommInitRankConfig(timeout -1)", XcclCommInitRankConfig(1, &rnd, 0, &neg, &comm), C_ERROR, "timeout_seconds");
  expect("CommInitRankConfig(size 1)", XcclCommInitRankConfig(1, &rnd, 0, &tiny, &comm), C_ERROR, "config size");
  {
    /* a 1-rank communicator with a 2 s timeout, and one with no config */
    XcclConfig cfg = XCCL_CONFIG_INITIALIZER;
    cfg.timeout_seconds = 2;
    C_CCLRootId cid = {size, calloc(1, size)};
    C_CCLComm cc = NULL;
    expect("GetUniqueId (config)", XcclGetUniqueId(&cid), C_SUCCESS, NULL);
    expect("CommInitRankConfig(timeout 2 s)", XcclCommInitRankConfig(1, &cid, 0, &cfg, &cc), C_SUCCESS, NULL);
    float one = 1;
    expect("AllReduce on it", XcclAllReduce(&one, &one, 1, FLOAT32, SUM, cc, NULL), C_SUCCESS, NULL);
    expect("DestroyComm (config)", XcclDestroyComm(cc), C_SUCCESS, NULL);
    expect("GetUniqueId (NULL config)", XcclGetUniqueId(&cid), C_SUCCESS, NULL);
    expect("CommInitRankConfig(NULL config)", XcclCommInitRankConfig(1, &cid, 0, NULL, &cc), C_SUCCESS, NULL);
    expect("DestroyComm (NULL config)", XcclDestroyComm(cc), C_SUCCESS, NULL);
    free(cid.data);
  }

  /* a real id, a stranger on its root, then a real 1-rank communicator */
  expect("GetUniqueId", XcclGetUniqueId(&id), C_SUCCESS, NULL);
  stranger(bytes);
  expect("CommInitRank after the stranger", XcclCommInitRank(1, &id, 0, &comm), C_SUCCESS, NULL);

  float f[4] = {1, 2, 3, 4};
  double z[4] = {0};
  expect("AllReduce(NULL comm)", XcclAllReduce(f, f, 4, FLOAT32, SUM, NULL, NULL), C_ERROR, "NULL");
  expect("AllReduce(garbage comm)", XcclAllReduce(f, f, 4, FLOAT32, SUM, (C_CCLComm)(uintptr_t)0x1234, NULL),
         C_ERROR, "unknown communicator");
  /* The same failure over and over is logged once (the test counts). */
  for (int i = 0; i < 3; i++)
    expect("AllReduce(garbage comm 0x5cc1dead), again", XcclAllReduce(f, f, 4, FLOAT32, SUM, (C_CCLComm)(uintptr_t)0x5cc1dead, NULL),
           C_ERROR, "unknown communicator");
  expect("AllReduce(NULL send)", XcclAllReduce(NULL, f, 4, FLOAT32, SUM, comm, NULL), C_ERROR, "send buffer is NULL");
  expect("AllReduce(NULL recv)", XcclAllReduce(f, NULL, 4, FLOAT32, SUM, comm, NULL), C_ERROR, "receive buffer is NULL");
  expect("AllReduce(dtype 99)", XcclAllReduce(f, f, 4, (C_DataType)99, SUM, comm, NULL), C_ERROR, "unknown data type 99");
  expect("AllReduce(op 42)", XcclAllReduce(f, f, 4, FLOAT32, (C_CCLReduceOp)42, comm, NULL), C_ERROR, "unknown reduce op 42");
  expect("AllReduce(COMPLEX64, MAX)", XcclAllReduce(z, z, 2, COMPLEX64, MAX, comm, NULL), C_ERROR, "COMPLEX64");
  expect("AllReduce(BOOL, AVG)", XcclAllReduce(f, f, 4, BOOL, AVG, comm, NULL), C_ERROR, "BOOL");
  expect("AllReduce(count overflow)", XcclAllReduce(f, f, SIZE_MAX / 2, FLOAT64, SUM, comm, NULL), C_ERROR, "");
  expect("AllReduce(count 0, NULL bufs)", XcclAllReduce(NULL, NULL, 0, FLOAT32, SUM, comm, NULL), C_SUCCESS, NULL);
  expect("Broadcast(root 1 of 1)", XcclBroadcast(f, 4, FLOAT32, 1, comm, NULL), C_ERROR, "root 1 out of range");
  expect("Reduce(root 5 of 1)", XcclReduce(f, f, 4, FLOAT32, SUM, 5, comm, NULL), C_ERROR, "root 5 out of range");
  /* A refused call's message names what it was called with. */
  expect("Reduce(root 5 of 1), its arguments", XcclReduce(f, f, 4, FLOAT32, SUM, 5, comm, NULL), C_ERROR,
         "[count 4, FLOAT32, SUM, root 5; rank 0 of 1]");
  expect("AllReduce(op 42), its arguments", XcclAllReduce(f, f, 3, FLOAT32, (C_CCLReduceOp)42, comm, NULL), C_ERROR,
         "[count 3, FLOAT32, ReduceOp(42); rank 0 of 1]");
  /* NCCL allows send/recv to self (Paddle's legacy scatter relies on it). */
  float self_in[3] = {1.5f, -2.0f, 3.25f}, self_out[3] = {0};
  expect("Send(to self)", XcclSend(self_in, 3, FLOAT32, 0, comm, NULL), C_SUCCESS, NULL);
  expect("Recv(from self)", XcclRecv(self_out, 3, FLOAT32, 0, comm, NULL), C_SUCCESS, NULL);
  if (memcmp(self_in, self_out, sizeof self_in) != 0) { printf("FAIL Recv(from self) got other bytes\n"); failures++; }
  /* Count 0 is a no-op whatever the communicator (Paddle's tests pass NULL). */
  expect("AllReduce(count 0, NULL comm)", XcclAllReduce(NULL, NULL, 0, FLOAT32, SUM, NULL, NULL), C_SUCCESS, NULL);
  expect("Send(count 0, NULL comm)", XcclSend(NULL, 0, FLOAT32, 3, NULL, NULL), C_SUCCESS, NULL);
  expect("Recv(peer 9)", XcclRecv(f, 4, FLOAT32, 9, comm, NULL), C_ERROR, "peer 9 out of range");
  expect("Recv(peer 9), its arguments", XcclRecv(f, 4, FLOAT32, 9, comm, NULL), C_ERROR, "[count 4, FLOAT32, peer 9; rank 0 of 1]");
  expect("AllToAll(NULL arrays)", XcclAllToAll(NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, comm, NULL), C_ERROR, "NULL");
  expect("AllToAll(nranks 3)", XcclAllToAll(NULL, NULL, NULL, NULL, NULL, NULL, 0, 3, comm, NULL), C_ERROR, "match");
  expect("Gather(root 1)", XcclGather(f, f, 4, FLOAT32, 1, comm, NULL), C_ERROR, "Gather: root 1 out of range [0, 1)");
  expect("Gather(NULL send)", XcclGather(NULL, f, 4, FLOAT32, 0, comm, NULL), C_ERROR, "Gather: send buffer is NULL");
  expect("Gather(NULL recv on the root)", XcclGather(f, NULL, 4, FLOAT32, 0, comm, NULL), C_ERROR,
         "Gather: receive buffer is NULL on the root");
  expect("Scatter(NULL send on the root)", XcclScatter(NULL, f, 4, FLOAT32, 0, comm, NULL), C_ERROR,
         "Scatter: send buffer is NULL on the root");
  expect("Scatter(dtype 99)", XcclScatter(f, f, 4, (C_DataType)99, 0, comm, NULL), C_ERROR, "Scatter: unknown data type 99");
  expect("Gather(count 0, NULLs)", XcclGather(NULL, NULL, 0, FLOAT32, 0, comm, NULL), C_SUCCESS, NULL);
  expect("Gather in place", XcclGather(f, f, 4, FLOAT32, 0, comm, NULL), C_SUCCESS, NULL);
  expect("GroupEnd without start", XcclGroupEnd(), C_ERROR, "without");
  expect("StreamSynchronize(garbage)", XcclStreamSynchronize((C_Stream)(uintptr_t)0x99), C_ERROR, "unknown stream");
  expect("AllReduce ok", XcclAllReduce(f, f, 4, FLOAT32, SUM, comm, NULL), C_SUCCESS, NULL);
  int v = 0;
  expect("GetVersion", XcclGetVersion(&v), C_SUCCESS, NULL);
  {
    void* m = NULL;
    expect("MemAlloc(NULL ptr)", XcclMemAlloc(NULL, 64), C_ERROR, "ptr is NULL");
    expect("MemAlloc(SIZE_MAX)", XcclMemAlloc(&m, SIZE_MAX), C_ERROR, "too large");
    expect("MemAlloc(0)", XcclMemAlloc(&m, 0), C_SUCCESS, NULL);
    if (m != NULL) { printf("FAIL MemAlloc(0) gave %p, want NULL\n", m); failures++; }
    expect("MemAlloc(4000)", XcclMemAlloc(&m, 4000), C_SUCCESS, NULL);
    if (m == NULL) { printf("FAIL MemAlloc(4000) gave NULL\n"); failures++; }
    memset(m, 1, 4000);
    expect("AllReduce in MemAlloc memory", XcclAllReduce(m, m, 1000, FLOAT32, SUM, comm, NULL), C_SUCCESS, NULL);
    expect("MemFree", XcclMemFree(m), C_SUCCESS, NULL);
    expect("MemFree(twice)", XcclMemFree(m), C_ERROR, "not allocated by XcclMemAlloc");
    expect("MemFree(malloc'd)", XcclMemFree(f), C_ERROR, "not allocated by XcclMemAlloc");
    expect("MemFree(NULL)", XcclMemFree(NULL), C_SUCCESS, NULL);
  }
  {
    void *h = NULL, *h2 = NULL;
    expect("CommRegister(NULL handle)", XcclCommRegister(comm, f, 16, NULL), C_ERROR, "handle is NULL");
    expect("CommRegister(NULL buffer)", XcclCommRegister(comm, NULL, 16, &h), C_ERROR, "buffer is NULL");
    expect("CommRegister(size 0)", XcclCommRegister(comm, f, 0, &h), C_ERROR, "size 0 out of range");
    expect("CommRegister", XcclCommRegister(comm, f, 16, &h), C_SUCCESS, NULL);
    expect("CommRegister(again)", XcclCommRegister(comm, f, 8, &h2), C_SUCCESS, NULL);
    if (h == NULL || h == h2) { printf("FAIL CommRegister handles %p and %p\n", h, h2); failures++; }
    expect("AllReduce in registered memory", XcclAllReduce(f, f, 4, FLOAT32, SUM, comm, NULL), C_SUCCESS, NULL);
    expect("CommDeregister", XcclCommDeregister(comm, h), C_SUCCESS, NULL);
    expect("CommDeregister(again)", XcclCommDeregister(comm, h), C_ERROR, "not registered with this communicator");
    expect("CommDeregister(foreign)", XcclCommDeregister(comm, f), C_ERROR, "not registered with this communicator");
    /* h2 is left for XcclDestroyComm */
  }
  {
    C_CCLReduceOp op = SUM;
    double s = 2;
    expect("RedOpCreatePreMulSum(NULL op)", XcclRedOpCreatePreMulSum(NULL, &s, FLOAT64, XCCL_SCALAR_DEVICE, comm), C_ERROR,
           "op is NULL");
    expect("RedOpCreatePreMulSum(NULL scalar)", XcclRedOpCreatePreMulSum(&op, NULL, FLOAT64, XCCL_SCALAR_DEVICE, comm),
           C_ERROR, "scalar is NULL");
    expect("RedOpCreatePreMulSum(BOOL)", XcclRedOpCreatePreMulSum(&op, &s, BOOL, XCCL_SCALAR_DEVICE, comm), C_ERROR,
           "BOOL has no pre-multiplied sum");
    expect("RedOpCreatePreMulSum(residence 9)",
           XcclRedOpCreatePreMulSum(&op, &s, FLOAT64, (XcclScalarResidence)9, comm), C_ERROR, "unknown scalar residence 9");
    expect("RedOpCreatePreMulSum(NULL comm)", XcclRedOpCreatePreMulSum(&op, &s, FLOAT64, XCCL_SCALAR_DEVICE, NULL),
           C_ERROR, NULL);
    expect("RedOpDestroy(SUM)", XcclRedOpDestroy(SUM, comm), C_ERROR, "not a pre-multiplied sum of this communicator");
    expect("AllReduce(op 70, none made)", XcclAllReduce(&s, &s, 1, FLOAT64, (C_CCLReduceOp)70, comm, NULL), C_ERROR,
           "not a pre-multiplied sum of this communicator");
    expect("RedOpCreatePreMulSum", XcclRedOpCreatePreMulSum(&op, &s, FLOAT64, XCCL_SCALAR_HOST_IMMEDIATE, comm),
           C_SUCCESS, NULL);
    expect("AllReduce(PREMUL_SUM of FLOAT64 on INT32)", XcclAllReduce(&s, &s, 1, INT32, op, comm, NULL), C_ERROR,
           "is a pre-multiplied sum of FLOAT64, the call is of INT32");
    /* op is left for XcclDestroyComm */
  }
  {
    /* One device per process, chosen at its first communicator: another
     * XCCL_DEVICE afterwards is refused by every way of making one. */
    const char* was = getenv("XCCL_DEVICE");
    char* keep = was ? strdup(was) : NULL;
    setenv("XCCL_DEVICE", "nvidia", 1);
    C_CCLRootId did = {size, calloc(1, size)};
    C_CCLComm dc = NULL;
    expect("GetUniqueId (device changed)", XcclGetUniqueId(&did), C_SUCCESS, NULL);
    expect("CommInitRank (device changed)", XcclCommInitRank(1, &did, 0, &dc), C_ERROR, "already uses device");
    expect("CommContextCreate (device changed)", XcclCommContextCreate(77, &did, 0, 1, 0, &dc), C_ERROR,
           "already uses device");
    if (keep) setenv("XCCL_DEVICE", keep, 1); else unsetenv("XCCL_DEVICE");
    free(keep);
    free(did.data);
  }
  C_Status async = C_INTERNAL_ERROR;
  expect("CommGetAsyncError", XcclCommGetAsyncError(comm, &async), C_SUCCESS, NULL);
  if (async != C_SUCCESS) { printf("FAIL async error %d on a healthy comm\n", (int)async); failures++; }
  expect("DestroyComm", XcclDestroyComm(comm), C_SUCCESS, NULL);
  expect("AllReduce(destroyed comm)", XcclAllReduce(f, f, 4, FLOAT32, SUM, comm, NULL), C_ERROR, "unknown communicator");
  expect("DestroyComm(again)", XcclDestroyComm(comm), C_ERROR, "unknown communicator");
  {
    /* An async error's text is XcclGetLastError's after XcclCommGetAsyncError. */
    C_CCLRootId aid = {size, calloc(1, size)};
    C_CCLComm ac = NULL;
    C_Status async = C_SUCCESS;
    expect("GetUniqueId (abort)", XcclGetUniqueId(&aid), C_SUCCESS, NULL);
    expect("CommInitRank (abort)", XcclCommInitRank(1, &aid, 0, &ac), C_SUCCESS, NULL);
    expect("CommAbort", XcclCommAbort(ac), C_SUCCESS, NULL);
    expect("CommGetAsyncError after Abort", XcclCommGetAsyncError(ac, &async), C_SUCCESS, NULL);
    if (async != C_FAILED || !strstr(XcclGetLastError(), "abort")) {
      printf("FAIL async error %d, text \"%s\": want C_FAILED and the abort named\n", (int)async, XcclGetLastError());
      failures++;
    }
    expect("DestroyComm after Abort", XcclDestroyComm(ac), C_SUCCESS, NULL);
    free(aid.data);
  }
  expect("DestroyComm(NULL)", XcclDestroyComm(NULL), C_SUCCESS, NULL);
  one_thread_four_ranks();
  init_all();
  error_strings();
  destroy_race();
  printf("%d passed, %d failed\n", failures ? 0 : 1, failures);
  free(bytes);
  free(junk);
  return failures ? 1 : 0;
}
