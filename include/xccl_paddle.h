/*
 * xccl_paddle.h - the PaddlePaddle CustomDevice plugin ABI as libxccl.so
 * implements it: InitPlugin(CustomRuntimeParams*) and the C_DeviceInterface
 * table, in plain C (Paddle's own device_ext.h is C++ only).
 *
 * Paddle grew C_DeviceInterface without bumping its version (0.1.1), so the
 * layout is told apart by interface->size alone. libxccl.so fills each
 * layout it can pin down exactly, and refuses any other size (device_type
 * stays NULL, Paddle skips the library with a warning):
 *
 *   904 bytes  device_ext.h as of Paddle @2ea8a24f (2.4/2.5-era): no
 *              COMPLEX types, no xccl_all_to_all.
 *   912 bytes  Paddle @059a3bea (2.6 / 3.0-era): COMPLEX64/128 and
 *              xccl_all_to_all after xccl_recv.
 *   1032 bytes late-2025 develop (seen in fork @a4d98ae8): xccl_get_comm_name
 *              first in the ccl block, device-taking info entries, eigen and
 *              blas-handle entries, transform_unary/binary.
 *
 * CustomRuntimeParams is 88 bytes, or 96 with pir_default_passes; both are
 * accepted (libxccl.so never writes pir_default_passes).
 */
#ifndef XCCL_PADDLE_H_
#define XCCL_PADDLE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XCCL_PADDLE_RUNTIME_MAJOR 0
#define XCCL_PADDLE_RUNTIME_MINOR 1
#define XCCL_PADDLE_RUNTIME_PATCH 1

typedef struct C_Device_st {
  int id;
} * C_Device;
typedef struct C_Profiler_st* C_Profiler;
typedef void (*C_Callback)(C_Device device, C_Stream stream, void* user_data, C_Status* status);

/* ---- blocks shared by every layout ---- */
#define XCCL_PADDLE_DEVICE_BLOCK                                                                   \
  C_Status (*initialize)(void);                                                                    \
  C_Status (*finalize)(void);                                                                      \
  C_Status (*init_device)(const C_Device device);                                                  \
  C_Status (*set_device)(const C_Device device);                                                   \
  C_Status (*get_device)(const C_Device device);                                                   \
  C_Status (*deinit_device)(const C_Device device);                                                \
  C_Status (*create_stream)(const C_Device device, C_Stream* stream);                              \
  C_Status (*destroy_stream)(const C_Device device, C_Stream stream);                              \
  C_Status (*query_stream)(const C_Device device, C_Stream stream);                                \
  C_Status (*stream_add_callback)(const C_Device device, C_Stream stream, C_Callback callback,     \
                                  void* user_data);                                                \
  C_Status (*create_event)(const C_Device device, C_Event* event);                                 \
  C_Status (*record_event)(const C_Device device, C_Stream stream, C_Event event);                 \
  C_Status (*destroy_event)(const C_Device device, C_Event event);                                 \
  C_Status (*query_event)(const C_Device device, C_Event event);                                   \
  C_Status (*synchronize_device)(const C_Device device);                                           \
  C_Status (*synchronize_stream)(const C_Device device, C_Stream stream);                          \
  C_Status (*synchronize_event)(const C_Device device, C_Event event);                             \
  C_Status (*stream_wait_event)(const C_Device device, C_Stream stream, C_Event event);            \
  void* reserved_dev_api[8];

#define XCCL_PADDLE_MEMORY_BLOCK                                                                   \
  C_Status (*device_memory_allocate)(const C_Device device, void** ptr, size_t size);              \
  C_Status (*device_memory_deallocate)(const C_Device device, void* ptr, size_t size);             \
  C_Status (*device_memory_set)(const C_Device device, void* ptr, unsigned char value, size_t size); \
  C_Status (*host_memory_allocate)(const C_Device device, void** ptr, size_t size);                \
  C_Status (*host_memory_deallocate)(const C_Device device, void* ptr, size_t size);               \
  C_Status (*unified_memory_allocate)(const C_Device device, void** ptr, size_t size);             \
  C_Status (*unified_memory_deallocate)(const C_Device device, void* ptr, size_t size);            \
  C_Status (*memory_copy_h2d)(const C_Device device, void* dst, const void* src, size_t size);     \
  C_Status (*memory_copy_d2h)(const C_Device device, void* dst, const void* src, size_t size);     \
  C_Status (*memory_copy_d2d)(const C_Device device, void* dst, const void* src, size_t size);     \
  C_Status (*memory_copy_p2p)(const C_Device dst_device, const C_Device src_device, void* dst,     \
                              const void* src, size_t size);                                       \
  C_Status (*async_memory_copy_h2d)(const C_Device device, C_Stream stream, void* dst,             \
                                    const void* src, size_t size);                                 \
  C_Status (*async_memory_copy_d2h)(const C_Device device, C_Stream stream, void* dst,             \
                                    const void* src, size_t size);                                 \
  C_Status (*async_memory_copy_d2d)(const C_Device device, C_Stream stream, void* dst,             \
                                    const void* src, size_t size);                                 \
  C_Status (*async_memory_copy_p2p)(const C_Device dst_device, const C_Device src_device,          \
                                    C_Stream stream, void* dst, const void* src, size_t size);     \
  void* reserved_mem_api[8];

#define XCCL_PADDLE_INFO_SIZES                                                                     \
  C_Status (*get_device_count)(size_t * count);                                                    \
  C_Status (*get_device_list)(size_t * devices);                                                   \
  C_Status (*device_memory_stats)(const C_Device device, size_t* total_memory, size_t* free_memory); \
  C_Status (*device_min_chunk_size)(const C_Device device, size_t* size);                          \
  C_Status (*device_max_chunk_size)(const C_Device device, size_t* size);                          \
  C_Status (*device_max_alloc_size)(const C_Device device, size_t* size);                          \
  C_Status (*device_extra_padding_size)(const C_Device device, size_t* size);                      \
  C_Status (*device_init_alloc_size)(const C_Device device, size_t* size);                         \
  C_Status (*device_realloc_size)(const C_Device device, size_t* size);

/* The info block of the 904 and 912 layouts (no device argument). */
#define XCCL_PADDLE_INFO_V1                                                                        \
  XCCL_PADDLE_INFO_SIZES                                                                           \
  C_Status (*get_compute_capability)(size_t * compute_capability);                                 \
  C_Status (*get_runtime_version)(size_t * version);                                               \
  C_Status (*get_driver_version)(size_t * version);                                                \
  void* reserved_info_api[8];

#define XCCL_PADDLE_CCL_CORE                                                                       \
  C_Status (*xccl_get_unique_id_size)(size_t * size);                                              \
  C_Status (*xccl_get_unique_id)(C_CCLRootId * unique_id);                                         \
  C_Status (*xccl_comm_init_rank)(size_t ranks, C_CCLRootId* unique_id, size_t rank,               \
                                  C_CCLComm* comm);                                                \
  C_Status (*xccl_destroy_comm)(C_CCLComm comm);                                                   \
  C_Status (*xccl_all_reduce)(void* send_buf, void* recv_buf, size_t count, C_DataType data_type,  \
                              C_CCLReduceOp op, C_CCLComm comm, C_Stream stream);                  \
  C_Status (*xccl_broadcast)(void* buf, size_t count, C_DataType data_type, size_t root,           \
                             C_CCLComm comm, C_Stream stream);                                     \
  C_Status (*xccl_reduce)(void* send_buf, void* recv_buf, size_t count, C_DataType data_type,      \
                          C_CCLReduceOp op, size_t root, C_CCLComm comm, C_Stream stream);         \
  C_Status (*xccl_all_gather)(void* send_buf, void* recv_buf, size_t count, C_DataType data_type,  \
                              C_CCLComm comm, C_Stream stream);                                    \
  C_Status (*xccl_reduce_scatter)(void* send_buf, void* recv_buf, size_t count,                    \
                                  C_DataType data_type, C_CCLReduceOp op, C_CCLComm comm,          \
                                  C_Stream stream);                                                \
  C_Status (*xccl_group_start)(void);                                                              \
  C_Status (*xccl_group_end)(void);                                                                \
  C_Status (*xccl_send)(void* send_buf, size_t count, C_DataType data_type, size_t dest_rank,      \
                        C_CCLComm comm, C_Stream stream);                                          \
  C_Status (*xccl_recv)(void* recv_buf, size_t count, C_DataType data_type, size_t src_rank,       \
                        C_CCLComm comm, C_Stream stream);

#define XCCL_PADDLE_ALL_TO_ALL                                                                     \
  C_Status (*xccl_all_to_all)(const void** send_buf, const size_t* send_count,                     \
                              const C_DataType* send_dtype, void** recv_buf,                       \
                              const size_t* recv_count, const C_DataType* recv_dtype, size_t rank, \
                              size_t nranks, C_CCLComm comm, C_Stream stream);

#define XCCL_PADDLE_PROFILER_BLOCK                                                                 \
  C_Status (*profiler_initialize)(C_Profiler prof, void** user_data);                              \
  C_Status (*profiler_finalize)(C_Profiler prof, void* user_data);                                 \
  C_Status (*profiler_prepare_tracing)(C_Profiler prof, void* user_data);                          \
  C_Status (*profiler_start_tracing)(C_Profiler prof, void* user_data);                            \
  C_Status (*profiler_stop_tracing)(C_Profiler prof, void* user_data);                             \
  C_Status (*profiler_collect_trace_data)(C_Profiler prof, uint64_t start_ns, void* user_data);    \
  void* reserved_profiler_api[8];

#define XCCL_PADDLE_AXPBY                                                                          \
  C_Status (*blas_axpby)(const C_Device device, C_Stream stream, C_DataType dtype, size_t numel,   \
                         float alpha, void* x, float beta, void* y);

/* 904 bytes: Paddle @2ea8a24f. */
typedef struct {
  size_t size;
  XCCL_PADDLE_DEVICE_BLOCK
  XCCL_PADDLE_MEMORY_BLOCK
  XCCL_PADDLE_INFO_V1
  XCCL_PADDLE_CCL_CORE
  void* reserved_ccl_api[8];
  XCCL_PADDLE_PROFILER_BLOCK
  XCCL_PADDLE_AXPBY
  void* reserved_other_api[7];
} xccl_paddle_interface_904;

/* 912 bytes: Paddle @059a3bea. */
typedef struct {
  size_t size;
  XCCL_PADDLE_DEVICE_BLOCK
  XCCL_PADDLE_MEMORY_BLOCK
  XCCL_PADDLE_INFO_V1
  XCCL_PADDLE_CCL_CORE
  XCCL_PADDLE_ALL_TO_ALL
  void* reserved_ccl_api[8];
  XCCL_PADDLE_PROFILER_BLOCK
  XCCL_PADDLE_AXPBY
  void* reserved_other_api[7];
} xccl_paddle_interface_912;

/* 1032 bytes: late-2025 develop. C++ objects (device properties, eigen,
 * blas handles, std::array) are opaque pointers here; xccl leaves them NULL. */
typedef struct {
  size_t size;
  XCCL_PADDLE_DEVICE_BLOCK
  XCCL_PADDLE_MEMORY_BLOCK
  XCCL_PADDLE_INFO_SIZES
  C_Status (*get_compute_capability)(const C_Device device, size_t* compute_capability);
  C_Status (*get_device_properties)(const C_Device device, void* device_properties);
  C_Status (*get_runtime_version)(const C_Device device, size_t* version);
  C_Status (*get_driver_version)(const C_Device device, size_t* version);
  C_Status (*get_multi_process)(const C_Device device, size_t* multi_process);
  C_Status (*get_max_threads_per_mp)(const C_Device device, size_t* threads_per_mp);
  C_Status (*get_max_threads_per_block)(const C_Device device, size_t* threads_per_block);
  C_Status (*get_max_grid_dim_size)(const C_Device device, unsigned int (*grid_dim_size)[3]);
  C_Status (*is_float16_supported)(const C_Device device, bool* supported);
  C_Status (*is_bfloat16_supported)(const C_Device device, bool* supported);
  void* init_eigen_device;
  void* destroy_eigen_device;
  void* reserved_info_api[8];
  C_Status (*xccl_get_comm_name)(C_CCLComm comm, char* comm_name);
  XCCL_PADDLE_CCL_CORE
  XCCL_PADDLE_ALL_TO_ALL
  void* reserved_ccl_api[8];
  XCCL_PADDLE_PROFILER_BLOCK
  void* init_blas_handle;
  void* blas_set_math_mode;
  void* init_blaslt_handle;
  void* destroy_blas_handle;
  void* destroy_blaslt_handle;
  XCCL_PADDLE_AXPBY
  void* transform_unary;
  void* transform_binary;
  void* reserved_other_api[5];
} xccl_paddle_interface_1032;

/* The layout most Paddle releases in use have. */
typedef xccl_paddle_interface_912 C_DeviceInterface;

typedef struct {
  size_t major, minor, patch;
} CustomRuntimeVersion;

/* 96 bytes; Paddle releases before pir_default_passes pass 88 and the same
 * fields up to sub_device_type. */
typedef struct {
  size_t size;
  void* interface; /* one of the xccl_paddle_interface_* layouts */
  CustomRuntimeVersion version;
  char* device_type;
  char* sub_device_type;
  void* pir_default_passes; /* C++ object: always left NULL */
  char reserved[32];
} CustomRuntimeParams;

/* Fills params for the layout interface->size names; see the top. The device
 * type is XCCL_PLUGIN_DEVICE_TYPE, default "xccl_<device>" ("xccl_host"). */
void InitPlugin(CustomRuntimeParams* params);

/* For a vendor's own PaddleCustomDevice plugin (Ascend npu, Cambricon mlu,
 * ...) that has its kernels and runtime but wants xccl's collectives: fills
 * only the xccl_* entries of device_interface (a C_DeviceInterface of any
 * layout above, told by its leading size field) with xccl's, and leaves
 * every runtime entry as the plugin set it. One line in the plugin's own
 * InitPlugin, after it filled its entries:
 *
 *   XcclPaddleFillCollectives(params->interface);
 *
 * The streams Paddle then passes are the plugin's own: they reach the vendor
 * library untouched, so pick the device xccl forwards to with XCCL_DEVICE
 * (auto finds the vendor). C_ERROR, with XcclGetLastError() saying why, for
 * NULL or a size that is none of the layouts; nothing is written then. */
C_Status XcclPaddleFillCollectives(void* device_interface);

#ifdef __cplusplus
}
#endif

#endif /* XCCL_PADDLE_H_ */
