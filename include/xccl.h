/*
 * xccl.h - the public C API of libxccl.so: one collective-communication ABI
 * over every accelerator vendor's library, with a built-in host (CPU) device.
 *
 * The types are Paddle's CustomDevice types (paddle/phi/backends/device_ext.h):
 * same names, same numeric values, same layouts, so a Paddle plugin and a
 * C/C++ engine call the same entry points. If you also include Paddle's
 * device_ext.h, include it first and define XCCL_HAVE_PADDLE_TYPES.
 *
 * Every function returns C_SUCCESS or an error status; XcclGetLastError()
 * returns the message of the last failure on the calling thread.
 *   C_ERROR          the arguments are wrong or unsupported (nothing happened)
 *   C_FAILED         the operation failed (peer lost, timeout, broken comm)
 *   C_INTERNAL_ERROR a bug in xccl (reported, never a crash)
 */
#ifndef XCCL_H_
#define XCCL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef XCCL_HAVE_PADDLE_TYPES
typedef enum {
  C_SUCCESS = 0,
  C_WARNING = 1,
  C_FAILED = 2,
  C_ERROR = 3,
  C_INTERNAL_ERROR = 4
} C_Status;

typedef enum {
  UNDEFINED = 0,
  BOOL,
  UINT8,
  UINT16,
  UINT32,
  UINT64,
  INT8,
  INT16,
  INT32,
  INT64,
  FLOAT16,
  FLOAT32,
  FLOAT64,
  BFLOAT16,
  COMPLEX64,
  COMPLEX128
} C_DataType;

typedef enum { SUM = 0, AVG = 1, MAX = 2, MIN = 3, PRODUCT = 4 } C_CCLReduceOp;

/* A unique id: sz bytes at data (XcclGetUniqueIdSize tells sz). Paddle's
 * layout: the size comes first. */
typedef struct {
  size_t sz;
  void* data;
} C_CCLRootId;

typedef struct C_CCLComm_st* C_CCLComm;
typedef struct C_Stream_st* C_Stream;
typedef struct C_Event_st* C_Event;
#endif /* XCCL_HAVE_PADDLE_TYPES */

/* The capability matrix of a device ("host", "nvidia", ...; NULL: the
 * XCCL_DEVICE default): one line per data type listing the reduce ops it
 * supports, written NUL-terminated into buf (C_ERROR if len is too small). */
C_Status XcclGetCapabilities(const char* device, char* buf, size_t len);

/* Version as major*10000 + minor*100 + patch. */
C_Status XcclGetVersion(int* version);

/* Message of the last failed call on this thread ("" if none). The string
 * stays valid until the next failing call on the same thread. */
const char* XcclGetLastError(void);
/* A status's fixed text, as ncclGetErrorString ("unknown status" for a value
 * that is none); the details of a failure are XcclGetLastError's. */
const char* XcclGetErrorString(C_Status status);

/* Unique ids. Rank 0 calls XcclGetUniqueId and hands the bytes to the other
 * ranks (xcclrun passes them as hex in XCCL_UNIQUE_ID). id->sz must be at
 * least the size; it is set to the size written. */
C_Status XcclGetUniqueIdSize(size_t* size);
C_Status XcclGetUniqueId(C_CCLRootId* id);

/* Communicators. The id bytes are copied. Blocks until all nranks ranks
 * joined, or XCCL_TIMEOUT passes. */
C_Status XcclCommInitRank(size_t nranks, C_CCLRootId* id, size_t rank, C_CCLComm* comm);
/* XcclCommInitRank with settings, as ncclCommInitRankConfig: start from
 * XCCL_CONFIG_INITIALIZER and set what differs. config may be NULL (the
 * defaults). timeout_seconds bounds the init and, on the host engine (host
 * and mixed communicators), every later operation, as XcclCommSetTimeout;
 * 0 keeps XCCL_TIMEOUT. */
typedef struct {
  size_t size;            /* sizeof(XcclConfig): fields past it are taken as unset */
  double timeout_seconds; /* 0: XCCL_TIMEOUT */
} XcclConfig;
#define XCCL_CONFIG_INITIALIZER {sizeof(XcclConfig), 0.0}
C_Status XcclCommInitRankConfig(size_t nranks, C_CCLRootId* id, size_t rank, const XcclConfig* config,
                                C_CCLComm* comm);
/* As ncclCommInitAll: one communicator of ndev ranks in this process, rank i
 * on device devlist[i] (devlist NULL: devices 0..ndev-1), comms[i] its
 * handle; then one thread may drive them all inside XcclGroupStart/End. On
 * failure no handle is made. Not inside a group. */
C_Status XcclCommInitAll(C_CCLComm* comms, int ndev, const int* devlist);
/* As ncclCommSplit: every rank of comm calls it; the ranks passing the same
 * color (>= 0) form a new communicator on their devices, ranked by key, then
 * by rank in comm. XCCL_SPLIT_NOCOLOR joins none and sets *newcomm to NULL.
 * config NULL (or fields left unset) takes comm's settings. Blocks until the
 * new communicators are made; a color below -1 fails on every rank, naming
 * the rank. Inside XcclGroupStart/End it is made at the outermost
 * XcclGroupEnd with the group's other splits and inits, as NCCL's, so that
 * one thread splits the communicators of several ranks (XcclCommInitAll's):
 * *newcomm is then a handle usable once the group ended (NULL at once for
 * XCCL_SPLIT_NOCOLOR); a bad argument still fails the call, a failed split
 * fails XcclGroupEnd. Two splits of one communicator in a group run in the
 * order they were called; before the group's operations. */
#define XCCL_SPLIT_NOCOLOR (-1)
C_Status XcclCommSplit(C_CCLComm comm, int color, int key, C_CCLComm* newcomm, const XcclConfig* config);
/* Joins the communicator of the job this process was started in, with no
 * id handed around: under xcclrun, OpenMPI's mpirun (OMPI_COMM_WORLD_*),
 * Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), a PMI launcher
 * (PMI_RANK, PMI_SIZE) or torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
 * MASTER_ADDR, MASTER_PORT); run alone, rank 0 of 1. Rank 0 serves the
 * bootstrap at the address every rank derives alike (XCCL_ROOT_ADDR, else
 * MASTER_ADDR, else Slurm's first node, else loopback when all ranks share
 * this machine); ranks prove membership with XCCL_JOB_KEY or
 * XCCL_JOB_KEY_FILE (required unless the root is loopback). Where the device
 * has several devices, the rank's device is set to local_rank first. rank,
 * nranks and local_rank may be NULL. Errors name the variable missing or
 * inconsistent. Not inside a group. */
C_Status XcclCommInitFromEnv(C_CCLComm* comm, int* rank, int* nranks, int* local_rank);
/* Destroy finalizes first, as ncclCommDestroy does: operations issued on
 * streams run before anything is freed (host device, within the timeout).
 * NULL is accepted; so is a communicator already aborted. A communicator's
 * operations run in the order they were issued, whatever their streams. */
C_Status XcclDestroyComm(C_CCLComm comm);
C_Status XcclCommCount(C_CCLComm comm, int* count);
C_Status XcclCommUserRank(C_CCLComm comm, int* rank);
/* As ncclCommRegister / ncclCommDeregister: registers size bytes at buff
 * with comm for collectives that may use them in place; *handle is for
 * XcclCommDeregister. The library's registration where it has one
 * (NCCL-shaped libraries with <ccl>CommRegister, NCCL >= 2.19); elsewhere
 * the range is recorded and calls run as before (on the host engine the
 * buffers its peers map are XcclMemAlloc's). Deregister works after
 * XcclCommFinalize; the library's destroy (XcclDestroyComm) releases what
 * is left, after the work issued. The memory must stay allocated until
 * then. A handle comm did not give out is C_ERROR; so is a size of 0. */
C_Status XcclCommRegister(C_CCLComm comm, void* buff, size_t size, void** handle);
C_Status XcclCommDeregister(C_CCLComm comm, void* handle);
/* As ncclCommCuDevice: the device (index of the communicator's device kind)
 * the communicator was made on. */
C_Status XcclCommDevice(C_CCLComm comm, int* device);
/* As ncclCommFinalize: every later operation on comm (collectives,
 * point-to-point, XcclCommSplit, XcclCommRegister) fails with C_ERROR;
 * queries, XcclCommDeregister, XcclDestroyComm and another
 * XcclCommFinalize still work. Where the device finalizes,
 * it returns once every operation issued on comm is done: the host engine
 * and mixed communicators (C_FAILED if the communicator broke, or if work
 * is still pending after a timeout in which none finished), and
 * NCCL-shaped libraries with <ccl>CommFinalize (NCCL >= 2.14, RCCL, oneCCL
 * backends that implement it). On the others (HCCL, CNCL, BKCL, oneCCL
 * backends without it) XcclDestroyComm waits for that
 * work, as their destroy does. A broken communicator returns its error.
 * Not inside a group. */
C_Status XcclCommFinalize(C_CCLComm comm);
/* As ncclRedOpCreatePreMulSum / ncclRedOpDestroy: *op becomes a reduce op of
 * comm that multiplies each rank's input by that rank's own scalar (one
 * element of data_type), then sums the products: for XcclAllReduce,
 * XcclReduce and XcclReduceScatter of data_type on comm (XcclAllReduceFused
 * runs such a batch as a group). XCCL_SCALAR_DEVICE: scalar is device
 * memory, read when each operation runs; XCCL_SCALAR_HOST_IMMEDIATE: host
 * memory, read by this call. On the host device, every integer and
 * floating type; on NCCL-shaped libraries with <ccl>RedOpCreatePreMulSum
 * (NCCL >= 2.11, RCCL), the library's; on mixed communicators, the host
 * engine's, over the ranks' inputs staged in host memory (no hierarchical
 * plan); elsewhere (HCCL, CNCL, BKCL) C_ERROR. The ops are values from XCCL_PREMUL_SUM_FIRST,
 * at most XCCL_PREMUL_SUM_MAX per communicator at once (a destroyed one's
 * value is given again). XcclRedOpDestroy may follow as soon as the last
 * call using op returned: work queued on streams or in an open group keeps
 * it. An op of another type, or one comm did not make (or destroyed), is
 * C_ERROR (values are per communicator: another's may name one of comm's). */
typedef enum { XCCL_SCALAR_DEVICE = 0, XCCL_SCALAR_HOST_IMMEDIATE = 1 } XcclScalarResidence;
#define XCCL_PREMUL_SUM_FIRST 64
#define XCCL_PREMUL_SUM_MAX 192
C_Status XcclRedOpCreatePreMulSum(C_CCLReduceOp* op, void* scalar, C_DataType data_type, XcclScalarResidence residence,
                                  C_CCLComm comm);
C_Status XcclRedOpDestroy(C_CCLReduceOp op, C_CCLComm comm);

/* Collectives, on the caller's stream (NULL: synchronous on the host
 * device, the vendor's default stream elsewhere). Counts are elements.
 * all_gather: count is per rank, recv holds count*nranks.
 * reduce_scatter: count is per rank (recv), send holds count*nranks. */
C_Status XcclAllReduce(void* send_buf, void* recv_buf, size_t count, C_DataType data_type,
                       C_CCLReduceOp op, C_CCLComm comm, C_Stream stream);
C_Status XcclBroadcast(void* buf, size_t count, C_DataType data_type, size_t root, C_CCLComm comm,
                       C_Stream stream);
C_Status XcclReduce(void* send_buf, void* recv_buf, size_t count, C_DataType data_type,
                    C_CCLReduceOp op, size_t root, C_CCLComm comm, C_Stream stream);
C_Status XcclAllGather(void* send_buf, void* recv_buf, size_t count, C_DataType data_type,
                       C_CCLComm comm, C_Stream stream);
C_Status XcclReduceScatter(void* send_buf, void* recv_buf, size_t count, C_DataType data_type,
                           C_CCLReduceOp op, C_CCLComm comm, C_Stream stream);
/* As ncclGather: rank r's count elements of send_buf land at recv_buf +
 * r*count on root; recv_buf is not used on the other ranks (may be NULL).
 * In place where send_buf == recv_buf + root*count on the root.
 * As ncclScatter: rank r receives count elements from send_buf + r*count on
 * root into recv_buf; send_buf is not used on the other ranks (may be
 * NULL). In place where recv_buf == send_buf + root*count on the root.
 * Both run as an all-to-all with one column (row) on every device. */
C_Status XcclGather(void* send_buf, void* recv_buf, size_t count, C_DataType data_type, size_t root,
                    C_CCLComm comm, C_Stream stream);
C_Status XcclScatter(void* send_buf, void* recv_buf, size_t count, C_DataType data_type, size_t root,
                     C_CCLComm comm, C_Stream stream);

/* Groups: operations between start and end run as one unit; point-to-point
 * calls inside never deadlock on their order. Per calling thread; nestable. */
C_Status XcclGroupStart(void);
C_Status XcclGroupEnd(void);

/* Point to point. A send never blocks waiting for its receiver. On the host
 * device (and a mixed communicator) count 0 between two ranks is a message of
 * no bytes, as NCCL's: its receive of count 0 waits for it. */
C_Status XcclSend(void* send_buf, size_t count, C_DataType data_type, size_t dest_rank, C_CCLComm comm,
                  C_Stream stream);
C_Status XcclRecv(void* recv_buf, size_t count, C_DataType data_type, size_t src_rank, C_CCLComm comm,
                  C_Stream stream);

/* All-to-all with per-peer buffers, counts and types: arrays of nranks
 * entries, the self entry included. rank and nranks must match comm. */
C_Status XcclAllToAll(const void** send_buf, const size_t* send_count, const C_DataType* send_dtype,
                      void** recv_buf, const size_t* recv_count, const C_DataType* recv_dtype, size_t rank,
                      size_t nranks, C_CCLComm comm, C_Stream stream);

/* Several all-reduces of one data type and op at once: recv_bufs[i] = op
 * over all ranks' send_bufs[i] (counts[i] elements), for i < nbufs. The
 * host device packs them into one buffer, reduces once and unpacks; other
 * devices run them as one group. Inside XcclGroupStart/End the call is
 * queued as it would run outside (one batch on the host device), so ranks
 * may make it inside a group or not, each as it likes. */
C_Status XcclAllReduceFused(const void** send_bufs, void** recv_bufs, const size_t* counts, size_t nbufs,
                            C_DataType data_type, C_CCLReduceOp op, C_CCLComm comm, C_Stream stream);

/* Statistics of a communicator, as one line of JSON written NUL-terminated
 * into buf (C_ERROR naming the size needed if len is too small): calls,
 * bytes, errors and a latency histogram per operation, fusion counts, and
 * the device's own counts (host: algorithms chosen, fallbacks taken).
 * Counting is off unless XCCL_STATS=1 or XcclCommEnableStats turned it on. */
C_Status XcclCommGetStats(C_CCLComm comm, char* buf, size_t len);
C_Status XcclCommEnableStats(C_CCLComm comm, int enable);

/* What a communicator can reduce and how, as text written NUL-terminated
 * into buf: its device's capability matrix, or for a mixed communicator
 * (ranks on different devices or XCCL_CLUSTER labels) its clusters, its
 * plan, and per data type which ops run through the clusters' libraries
 * and which through the host engine. */
C_Status XcclCommGetCapabilities(C_CCLComm comm, char* buf, size_t len);

/* How a device picks its algorithms (size limits, XCCL_ALGO choices), as
 * text written NUL-terminated into buf; device as for XcclGetCapabilities. */
C_Status XcclGetAlgorithms(const char* device, char* buf, size_t len);

/* Failure handling, like NCCL: abort breaks the communicator at once and
 * frees what it holds (calls in flight on other threads fail and return
 * first; later calls fail); the async error is the error that broke it
 * (C_SUCCESS if none), and still answers after an abort. Destroying an
 * aborted communicator is allowed and frees nothing more; so is aborting
 * NULL. On the host device a peer's abort reaches the others at once:
 * asked then, their async error is C_FAILED naming it, and their
 * communicator is broken. */
C_Status XcclCommAbort(C_CCLComm comm);
/* How long each later operation may wait for the other ranks before it
 * fails with C_FAILED (host device; XCCL_TIMEOUT is the default). A vendor
 * device answers C_ERROR: its library keeps its own timeouts. */
C_Status XcclCommSetTimeout(C_CCLComm comm, double seconds);
C_Status XcclCommGetAsyncError(C_CCLComm comm, C_Status* async_error);

/* CommContextManager: communicators by ring id, each remembering the rank's
 * device id (several ranks may share a device). Create binds the calling
 * thread to device_id, then makes the communicator (blocking like
 * XcclCommInitRank); creating an existing ring again with the same id, rank,
 * nranks and device returns the same comm, with anything else C_ERROR. The
 * comm belongs to the manager: release it with XcclCommContextDestroy. */
C_Status XcclCommContextCreate(int64_t ring_id, C_CCLRootId* unique_id, size_t rank, size_t nranks, int device_id,
                               C_CCLComm* comm);
C_Status XcclCommContextGet(int64_t ring_id, C_CCLComm* comm); /* C_ERROR when the ring has none */
C_Status XcclCommContextHas(int64_t ring_id, int* has);
C_Status XcclCommContextInfo(int64_t ring_id, int* rank, int* nranks, int* device_id);
C_Status XcclCommContextDestroy(int64_t ring_id);
C_Status XcclCommContextDestroyAll(void);

/* Memory for communication buffers, as ncclMemAlloc/ncclMemFree: size
 * bytes of the current device, made for collectives where the device has
 * such memory. On the host device it is shared with the ranks on this
 * machine at every size (plain device memory is shared from 2 MiB on), so
 * collectives on it read and write the peers' buffers in place, each byte
 * copied once: a fused all-reduce of small buffers, for one, runs two to
 * four times as fast from it as from malloc'd memory (2 ranks). Elsewhere
 * it is the device's plain allocation. size 0 sets *ptr to NULL.
 * XcclMemFree takes only what XcclMemAlloc returned (C_ERROR otherwise,
 * nothing freed), on any thread; NULL is accepted. */
C_Status XcclMemAlloc(void** ptr, size_t size);
C_Status XcclMemFree(void* ptr);

/* Streams and events of the current device (host: ordered work queues). */
C_Status XcclStreamCreate(C_Stream* stream);
C_Status XcclStreamDestroy(C_Stream stream);
C_Status XcclStreamSynchronize(C_Stream stream);
C_Status XcclStreamQuery(C_Stream stream); /* C_SUCCESS: idle; C_FAILED: not ready */
/* An event marks a point of a stream: done once the work queued on the
 * stream before XcclEventRecord has run. */
C_Status XcclEventCreate(C_Event* event);
C_Status XcclEventRecord(C_Event event, C_Stream stream);
C_Status XcclEventQuery(C_Event event); /* C_SUCCESS: done; C_FAILED: not ready */
C_Status XcclEventSynchronize(C_Event event);
C_Status XcclEventDestroy(C_Event event);

#ifdef __cplusplus
}
#endif

#endif /* XCCL_H_ */
