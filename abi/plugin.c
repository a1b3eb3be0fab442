// InitPlugin: the PaddlePaddle CustomDevice entry point. It checks the sizes
// Paddle passes, picks the C_DeviceInterface layout by interface->size
// (see xccl_paddle.h), and fills every entry the device can honour. The
// xccl_* entries are the public Xccl* functions themselves.
#include <stdio.h>
#include "xccl_paddle.h"
#include "_cgo_export.h"

void xccl_call_callback(C_Callback cb, int device, C_Stream stream, void* user_data, C_Status status) {
  struct C_Device_st d = {device};
  cb(&d, stream, user_data, &status);
}

static C_Status init_device(const C_Device d) { return xcclpInitDevice(d); }
static C_Status set_device(const C_Device d) { return xcclpSetDevice(d); }
static C_Status get_device(const C_Device d) { return xcclpGetDevice(d); }
static C_Status deinit_device(const C_Device d) { return xcclpDeinitDevice(d); }
static C_Status create_stream(const C_Device d, C_Stream* s) { return xcclpCreateStream(d, s); }
static C_Status destroy_stream(const C_Device d, C_Stream s) { return xcclpDestroyStream(d, s); }
static C_Status query_stream(const C_Device d, C_Stream s) { return xcclpQueryStream(d, s); }
static C_Status add_callback(const C_Device d, C_Stream s, C_Callback cb, void* ud) {
  return xcclpStreamAddCallback(d, s, cb, ud);
}
static C_Status create_event(const C_Device d, C_Event* e) { return xcclpCreateEvent(d, e); }
static C_Status record_event(const C_Device d, C_Stream s, C_Event e) { return xcclpRecordEvent(d, s, e); }
static C_Status destroy_event(const C_Device d, C_Event e) { return xcclpDestroyEvent(d, e); }
static C_Status query_event(const C_Device d, C_Event e) { return xcclpQueryEvent(d, e); }
static C_Status sync_device(const C_Device d) { return xcclpSynchronizeDevice(d); }
static C_Status sync_stream(const C_Device d, C_Stream s) { return xcclpSynchronizeStream(d, s); }
static C_Status sync_event(const C_Device d, C_Event e) { return xcclpSynchronizeEvent(d, e); }
static C_Status wait_event(const C_Device d, C_Stream s, C_Event e) { return xcclpStreamWaitEvent(d, s, e); }

static C_Status mem_alloc(const C_Device d, void** p, size_t n) { return xcclpMemAlloc(d, p, n, 0); }
static C_Status mem_free(const C_Device d, void* p, size_t n) { return xcclpMemFree(d, p, n, 0); }
static C_Status host_alloc(const C_Device d, void** p, size_t n) { return xcclpMemAlloc(d, p, n, 1); }
static C_Status host_free(const C_Device d, void* p, size_t n) { return xcclpMemFree(d, p, n, 1); }
static C_Status mem_set(const C_Device d, void* p, unsigned char v, size_t n) { return xcclpMemSet(d, p, v, n); }
/* copy kinds: 0 host→device, 1 device→host, 2 device→device (runtime.CopyKind) */
static C_Status h2d(const C_Device d, void* dst, const void* src, size_t n) {
  return xcclpCopy(d, NULL, dst, (void*)src, n, 0);
}
static C_Status d2h(const C_Device d, void* dst, const void* src, size_t n) {
  return xcclpCopy(d, NULL, dst, (void*)src, n, 1);
}
static C_Status d2d(const C_Device d, void* dst, const void* src, size_t n) {
  return xcclpCopy(d, NULL, dst, (void*)src, n, 2);
}
static C_Status p2p(const C_Device dd, const C_Device sd, void* dst, const void* src, size_t n) {
  (void)sd;
  return xcclpCopy(dd, NULL, dst, (void*)src, n, 2);
}
static C_Status ah2d(const C_Device d, C_Stream s, void* dst, const void* src, size_t n) {
  return xcclpCopy(d, s, dst, (void*)src, n, 0);
}
static C_Status ad2h(const C_Device d, C_Stream s, void* dst, const void* src, size_t n) {
  return xcclpCopy(d, s, dst, (void*)src, n, 1);
}
static C_Status ad2d(const C_Device d, C_Stream s, void* dst, const void* src, size_t n) {
  return xcclpCopy(d, s, dst, (void*)src, n, 2);
}
static C_Status ap2p(const C_Device dd, const C_Device sd, C_Stream s, void* dst, const void* src, size_t n) {
  (void)sd;
  return xcclpCopy(dd, s, dst, (void*)src, n, 2);
}

static C_Status mem_stats(const C_Device d, size_t* total, size_t* free_) { return xcclpMemStats(d, total, free_); }
static C_Status min_chunk(const C_Device d, size_t* n) { return xcclpMinChunkSize(d, n); }
static C_Status capability_v1(size_t* v) { return xcclpInfo(NULL, 0, v); }
static C_Status runtime_v1(size_t* v) { return xcclpInfo(NULL, 1, v); }
static C_Status driver_v1(size_t* v) { return xcclpInfo(NULL, 2, v); }
static C_Status capability(const C_Device d, size_t* v) { return xcclpInfo(d, 0, v); }
static C_Status runtime_version(const C_Device d, size_t* v) { return xcclpInfo(d, 1, v); }
static C_Status driver_version(const C_Device d, size_t* v) { return xcclpInfo(d, 2, v); }
static C_Status multi_process(const C_Device d, size_t* v) { return xcclpInfo(d, 3, v); }
static C_Status half_supported(const C_Device d, bool* v) {
  (void)d;
  if (!v) return C_ERROR;
  *v = true; /* FLOAT16 and BFLOAT16 reduce in float32, rounded once */
  return C_SUCCESS;
}
static C_Status comm_name(C_CCLComm c, char* name) { return xcclpCommName(c, name); }
static C_Status axpby(const C_Device d, C_Stream s, C_DataType dt, size_t n, float a, void* x, float b, void* y) {
  return xcclpAxpby(d, s, dt, n, a, x, b, y);
}

/* The xccl_* entries every layout shares, by name. */
#define FILL_CCL(t)                                                         \
  do {                                                                      \
    (t)->xccl_get_unique_id_size = XcclGetUniqueIdSize;                     \
    (t)->xccl_get_unique_id = XcclGetUniqueId;                              \
    (t)->xccl_comm_init_rank = XcclCommInitRank;                            \
    (t)->xccl_destroy_comm = XcclDestroyComm;                               \
    (t)->xccl_all_reduce = XcclAllReduce;                                   \
    (t)->xccl_broadcast = XcclBroadcast;                                    \
    (t)->xccl_reduce = XcclReduce;                                          \
    (t)->xccl_all_gather = XcclAllGather;                                   \
    (t)->xccl_reduce_scatter = XcclReduceScatter;                           \
    (t)->xccl_group_start = XcclGroupStart;                                 \
    (t)->xccl_group_end = XcclGroupEnd;                                     \
    (t)->xccl_send = XcclSend;                                              \
    (t)->xccl_recv = XcclRecv;                                              \
  } while (0)

/* The entries every layout shares, by name. */
#define FILL_COMMON(t)                                                      \
  do {                                                                      \
    (t)->initialize = xcclpInitialize;                                      \
    (t)->finalize = xcclpFinalize;                                          \
    (t)->init_device = init_device;                                         \
    (t)->set_device = set_device;                                           \
    (t)->get_device = get_device;                                           \
    (t)->deinit_device = deinit_device;                                     \
    (t)->create_stream = create_stream;                                     \
    (t)->destroy_stream = destroy_stream;                                   \
    (t)->query_stream = query_stream;                                       \
    (t)->stream_add_callback = add_callback;                                \
    (t)->create_event = create_event;                                       \
    (t)->record_event = record_event;                                       \
    (t)->destroy_event = destroy_event;                                     \
    (t)->query_event = query_event;                                         \
    (t)->synchronize_device = sync_device;                                  \
    (t)->synchronize_stream = sync_stream;                                  \
    (t)->synchronize_event = sync_event;                                    \
    (t)->stream_wait_event = wait_event;                                    \
    (t)->device_memory_allocate = mem_alloc;                                \
    (t)->device_memory_deallocate = mem_free;                               \
    (t)->device_memory_set = mem_set;                                       \
    (t)->host_memory_allocate = host_alloc;                                 \
    (t)->host_memory_deallocate = host_free;                                \
    (t)->unified_memory_allocate = host_alloc;                              \
    (t)->unified_memory_deallocate = host_free;                             \
    (t)->memory_copy_h2d = h2d;                                             \
    (t)->memory_copy_d2h = d2h;                                             \
    (t)->memory_copy_d2d = d2d;                                             \
    (t)->memory_copy_p2p = p2p;                                             \
    (t)->async_memory_copy_h2d = ah2d;                                      \
    (t)->async_memory_copy_d2h = ad2h;                                      \
    (t)->async_memory_copy_d2d = ad2d;                                      \
    (t)->async_memory_copy_p2p = ap2p;                                      \
    (t)->get_device_count = xcclpDeviceCount;                               \
    (t)->get_device_list = xcclpDeviceList;                                 \
    (t)->device_memory_stats = mem_stats;                                   \
    (t)->device_min_chunk_size = min_chunk;                                 \
    FILL_CCL(t);                                                            \
    (t)->blas_axpby = axpby;                                                \
  } while (0)

static void fill_904(xccl_paddle_interface_904* t) {
  FILL_COMMON(t);
  t->get_compute_capability = capability_v1;
  t->get_runtime_version = runtime_v1;
  t->get_driver_version = driver_v1;
}

static void fill_912(xccl_paddle_interface_912* t) {
  FILL_COMMON(t);
  t->get_compute_capability = capability_v1;
  t->get_runtime_version = runtime_v1;
  t->get_driver_version = driver_v1;
  t->xccl_all_to_all = XcclAllToAll;
}

static void fill_1032(xccl_paddle_interface_1032* t) {
  FILL_COMMON(t);
  t->get_compute_capability = capability;
  t->get_runtime_version = runtime_version;
  t->get_driver_version = driver_version;
  t->get_multi_process = multi_process;
  t->is_float16_supported = half_supported;
  t->is_bfloat16_supported = half_supported;
  t->xccl_get_comm_name = comm_name;
  t->xccl_all_to_all = XcclAllToAll;
}

void InitPlugin(CustomRuntimeParams* params) {
  char msg[256];
  if (!params || !params->interface) {
    xcclpLogWarn("InitPlugin: params or params->interface is NULL; not loading");
    return;
  }
  /* Paddle's check macro only rejects when both sizes differ; we reject when
   * either is unknown, and never write past what Paddle allocated. */
  if (params->size != 88 && params->size != sizeof(CustomRuntimeParams)) {
    snprintf(msg, sizeof msg, "InitPlugin: CustomRuntimeParams is %zu bytes, want 88 or 96; not loading", params->size);
    xcclpLogWarn(msg);
    return;
  }
  size_t isize = *(size_t*)params->interface;
  if (isize != sizeof(xccl_paddle_interface_904) && isize != sizeof(xccl_paddle_interface_912) &&
      isize != sizeof(xccl_paddle_interface_1032)) {
    snprintf(msg, sizeof msg,
             "InitPlugin: C_DeviceInterface is %zu bytes, a layout this libxccl does not know "
             "(it serves 904, 912 and 1032); not loading",
             isize);
    xcclpLogWarn(msg);
    return;
  }
  /* the device first: where it cannot be opened nothing is written, and
   * Paddle, finding device_type NULL, skips the library */
  char *type = NULL, *sub = NULL;
  if (xcclpDeviceTypes(&type, &sub) != C_SUCCESS) return;
  switch (isize) {
    case sizeof(xccl_paddle_interface_904):
      fill_904((xccl_paddle_interface_904*)params->interface);
      break;
    case sizeof(xccl_paddle_interface_912):
      fill_912((xccl_paddle_interface_912*)params->interface);
      break;
    default:
      fill_1032((xccl_paddle_interface_1032*)params->interface);
      break;
  }
  params->version.major = XCCL_PADDLE_RUNTIME_MAJOR;
  params->version.minor = XCCL_PADDLE_RUNTIME_MINOR;
  params->version.patch = XCCL_PADDLE_RUNTIME_PATCH;
  params->sub_device_type = sub;
  params->device_type = type; /* last: non-NULL tells Paddle we loaded */
}

C_Status XcclPaddleFillCollectives(void* device_interface) {
  char msg[256];
  if (!device_interface) {
    snprintf(msg, sizeof msg, "XcclPaddleFillCollectives: device_interface is NULL");
    return xcclpRefuse(msg);
  }
  size_t isize = *(size_t*)device_interface;
  switch (isize) {
    case sizeof(xccl_paddle_interface_904):
      FILL_CCL((xccl_paddle_interface_904*)device_interface);
      return C_SUCCESS;
    case sizeof(xccl_paddle_interface_912): {
      xccl_paddle_interface_912* t = device_interface;
      FILL_CCL(t);
      t->xccl_all_to_all = XcclAllToAll;
      return C_SUCCESS;
    }
    case sizeof(xccl_paddle_interface_1032): {
      xccl_paddle_interface_1032* t = device_interface;
      FILL_CCL(t);
      t->xccl_all_to_all = XcclAllToAll;
      t->xccl_get_comm_name = comm_name;
      return C_SUCCESS;
    }
  }
  snprintf(msg, sizeof msg,
           "XcclPaddleFillCollectives: C_DeviceInterface is %zu bytes, a layout this libxccl does not know "
           "(it serves 904, 912 and 1032); nothing written",
           isize);
  return xcclpRefuse(msg);
}
