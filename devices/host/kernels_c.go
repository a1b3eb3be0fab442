package host

// Reduction kernels in C, compiled with -O3 and cloned for AVX2 (the
// loader picks the clone the CPU runs; others get the SSE2 baseline), for
// the integer and real floating types and SUM, PRODUCT, MAX, MIN. They
// compute exactly what the Go loops in kernels.go compute (one IEEE add or
// multiply per element, so nothing to contract into an FMA; NaN-propagating
// MAX/MIN) and take over from 1 KiB on, where
// the cgo call costs less than the speed-up (measured: BenchmarkReduce).

/*
#cgo CFLAGS: -O3 -fno-strict-aliasing
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define XCCL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define XCCL_CLONES
#endif

#define XCCL_KERNELS(T)                                                                         \
  XCCL_CLONES static void sum_##T(T* restrict d, const T* restrict s, size_t n) {               \
    for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] + s[i]);                                     \
  }                                                                                             \
  XCCL_CLONES static void prod_##T(T* restrict d, const T* restrict s, size_t n) {              \
    for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] * s[i]);                                     \
  }                                                                                             \
  XCCL_CLONES static void max_##T(T* restrict d, const T* restrict s, size_t n) {               \
    for (size_t i = 0; i < n; i++) d[i] = (s[i] > d[i] || s[i] != s[i]) ? s[i] : d[i];          \
  }                                                                                             \
  XCCL_CLONES static void min_##T(T* restrict d, const T* restrict s, size_t n) {               \
    for (size_t i = 0; i < n; i++) d[i] = (s[i] < d[i] || s[i] != s[i]) ? s[i] : d[i];          \
  }                                                                                             \
  static int reduce_##T(void* d, const void* s, size_t bytes, int op) {                         \
    size_t n = bytes / sizeof(T);                                                               \
    switch (op) {                                                                               \
      case 0: case 1: sum_##T((T*)d, (const T*)s, n); return 0;                                 \
      case 2: max_##T((T*)d, (const T*)s, n); return 0;                                         \
      case 3: min_##T((T*)d, (const T*)s, n); return 0;                                         \
      case 4: prod_##T((T*)d, (const T*)s, n); return 0;                                        \
    }                                                                                           \
    return 1;                                                                                   \
  }

// Unsigned arithmetic wraps; signed types are added as unsigned (two's
// complement wrap, as Go does) through these twins.
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
typedef int8_t i8; typedef int16_t i16; typedef int32_t i32; typedef int64_t i64;
XCCL_KERNELS(u8) XCCL_KERNELS(u16) XCCL_KERNELS(u32) XCCL_KERNELS(u64)
XCCL_KERNELS(float) XCCL_KERNELS(double)

#define XCCL_SIGNED_ORDER(T, U)                                                                 \
  XCCL_CLONES static void smax_##T(T* restrict d, const T* restrict s, size_t n) {              \
    for (size_t i = 0; i < n; i++) d[i] = s[i] > d[i] ? s[i] : d[i];                            \
  }                                                                                             \
  XCCL_CLONES static void smin_##T(T* restrict d, const T* restrict s, size_t n) {              \
    for (size_t i = 0; i < n; i++) d[i] = s[i] < d[i] ? s[i] : d[i];                            \
  }                                                                                             \
  static int reduce_##T(void* d, const void* s, size_t bytes, int op) {                         \
    size_t n = bytes / sizeof(T);                                                               \
    switch (op) {                                                                               \
      case 2: smax_##T((T*)d, (const T*)s, n); return 0;                                        \
      case 3: smin_##T((T*)d, (const T*)s, n); return 0;                                        \
    }                                                                                           \
    return reduce_##U(d, s, bytes, op);                                                         \
  }
XCCL_SIGNED_ORDER(i8, u8) XCCL_SIGNED_ORDER(i16, u16) XCCL_SIGNED_ORDER(i32, u32) XCCL_SIGNED_ORDER(i64, u64)

// dtype values are C_DataType's; op values C_CCLReduceOp's. 1: not handled.
static int xccl_reduce(void* d, const void* s, size_t bytes, int dtype, int op) {
  switch (dtype) {
    case 2: return reduce_u8(d, s, bytes, op);
    case 3: return reduce_u16(d, s, bytes, op);
    case 4: return reduce_u32(d, s, bytes, op);
    case 5: return reduce_u64(d, s, bytes, op);
    case 6: return reduce_i8(d, s, bytes, op);
    case 7: return reduce_i16(d, s, bytes, op);
    case 8: return reduce_i32(d, s, bytes, op);
    case 9: return reduce_i64(d, s, bytes, op);
    case 11: return reduce_float(d, s, bytes, op);
    case 12: return reduce_double(d, s, bytes, op);
  }
  return 1;
}
*/
import "C"

import (
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// cKernelMin is the smallest reduction handed to C.
const cKernelMin = 1 << 10

// useCKernels can be turned off by tests to compare with the Go loops.
var useCKernels = true

// reduceC reduces with the C kernels; false: not handled (too small, or a
// type/op the C side does not cover), use the Go loops.
func reduceC(dst, src []byte, dt rt.DataType, op rt.ReduceOp) bool {
	if !useCKernels || len(dst) < cKernelMin {
		return false
	}
	src = src[:len(dst)]
	return C.xccl_reduce(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), C.size_t(len(dst)), C.int(dt), C.int(op)) == 0
}
