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

// Three-operand forms, d = a op b, the same arithmetic as above with a in
// the place of d. d may be a (then it is d op= b); nothing else overlaps.
#define XCCL_KERNELS3(T)                                                                        \
  XCCL_CLONES static void sum3_##T(T* d, const T* a, const T* b, size_t n) {                    \
    for (size_t i = 0; i < n; i++) d[i] = (T)(a[i] + b[i]);                                     \
  }                                                                                             \
  XCCL_CLONES static void prod3_##T(T* d, const T* a, const T* b, size_t n) {                   \
    for (size_t i = 0; i < n; i++) d[i] = (T)(a[i] * b[i]);                                     \
  }                                                                                             \
  XCCL_CLONES static void max3_##T(T* d, const T* a, const T* b, size_t n) {                    \
    for (size_t i = 0; i < n; i++) d[i] = (b[i] > a[i] || b[i] != b[i]) ? b[i] : a[i];          \
  }                                                                                             \
  XCCL_CLONES static void min3_##T(T* d, const T* a, const T* b, size_t n) {                    \
    for (size_t i = 0; i < n; i++) d[i] = (b[i] < a[i] || b[i] != b[i]) ? b[i] : a[i];          \
  }                                                                                             \
  static int reduce3_##T(void* d, const void* a, const void* b, size_t bytes, int op) {         \
    size_t n = bytes / sizeof(T);                                                               \
    switch (op) {                                                                               \
      case 0: case 1: sum3_##T((T*)d, (const T*)a, (const T*)b, n); return 0;                   \
      case 2: max3_##T((T*)d, (const T*)a, (const T*)b, n); return 0;                           \
      case 3: min3_##T((T*)d, (const T*)a, (const T*)b, n); return 0;                           \
      case 4: prod3_##T((T*)d, (const T*)a, (const T*)b, n); return 0;                          \
    }                                                                                           \
    return 1;                                                                                   \
  }
XCCL_KERNELS3(u8) XCCL_KERNELS3(u16) XCCL_KERNELS3(u32) XCCL_KERNELS3(u64)
XCCL_KERNELS3(float) XCCL_KERNELS3(double)

#define XCCL_SIGNED_ORDER3(T, U)                                                                \
  XCCL_CLONES static void smax3_##T(T* d, const T* a, const T* b, size_t n) {                   \
    for (size_t i = 0; i < n; i++) d[i] = b[i] > a[i] ? b[i] : a[i];                            \
  }                                                                                             \
  XCCL_CLONES static void smin3_##T(T* d, const T* a, const T* b, size_t n) {                   \
    for (size_t i = 0; i < n; i++) d[i] = b[i] < a[i] ? b[i] : a[i];                            \
  }                                                                                             \
  static int reduce3_##T(void* d, const void* a, const void* b, size_t bytes, int op) {         \
    size_t n = bytes / sizeof(T);                                                               \
    switch (op) {                                                                               \
      case 2: smax3_##T((T*)d, (const T*)a, (const T*)b, n); return 0;                          \
      case 3: smin3_##T((T*)d, (const T*)a, (const T*)b, n); return 0;                          \
    }                                                                                           \
    return reduce3_##U(d, a, b, bytes, op);                                                     \
  }
XCCL_SIGNED_ORDER3(i8, u8) XCCL_SIGNED_ORDER3(i16, u16) XCCL_SIGNED_ORDER3(i32, u32) XCCL_SIGNED_ORDER3(i64, u64)

static int xccl_reduce3(void* d, const void* a, const void* b, size_t bytes, int dtype, int op) {
  switch (dtype) {
    case 2: return reduce3_u8(d, a, b, bytes, op);
    case 3: return reduce3_u16(d, a, b, bytes, op);
    case 4: return reduce3_u32(d, a, b, bytes, op);
    case 5: return reduce3_u64(d, a, b, bytes, op);
    case 6: return reduce3_i8(d, a, b, bytes, op);
    case 7: return reduce3_i16(d, a, b, bytes, op);
    case 8: return reduce3_i32(d, a, b, bytes, op);
    case 9: return reduce3_i64(d, a, b, bytes, op);
    case 11: return reduce3_float(d, a, b, bytes, op);
    case 12: return reduce3_double(d, a, b, bytes, op);
  }
  return 1;
}

// Reductions in a list, in order: d = a op b. One call from Go for many
// buffers. 1: the type or op is not handled (nothing was written).
typedef struct { uintptr_t d, a, b; size_t bytes; } xccl_job;
static int xccl_reduce_jobs(const xccl_job* j, int n, int dtype, int op) {
  for (int i = 0; i < n; i++) {
    if (xccl_reduce3((void*)j[i].d, (const void*)j[i].a, (const void*)j[i].b, j[i].bytes, dtype, op)) return 1;
  }
  return 0;
}
*/
import "C"

import (
	"runtime"
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

// reduce3Into computes dst = a op b (a may be dst itself) for len(dst)
// bytes: in one pass, in C from cKernelMin on, else in Go (a copy and the
// Go loops for bool and complex).
func reduce3Into(dst, a, b []byte, dt rt.DataType, op rt.ReduceOp) {
	if len(dst) < cKernelMin || !useCKernels {
		if reduce3Go(dst, a, b, dt, op) {
			return
		}
	} else if C.xccl_reduce3(unsafe.Pointer(&dst[0]), unsafe.Pointer(&a[0]),
		unsafe.Pointer(&b[0]), C.size_t(len(dst)), C.int(dt), C.int(op)) == 0 {
		return
	}
	copyIfDistinct(dst, a[:len(dst)])
	reduceInto(dst, b[:len(dst)], dt, op)
}

// redJob is one reduction of a list: dst = a op b (a may be dst itself).
type redJob struct{ dst, a, b []byte }

// cJobs is the list handed to C, kept by each communicator (passed to C,
// a local one would move to the heap: an allocation per call).
type cJobs [16]C.xccl_job

// reduceJobs runs the jobs in order: in one call into C when they are
// large enough in all to pay for it, else with the Go loops. Collectives
// hold collMu (c.cjobs).
func (c *Comm) reduceJobs(jobs []redJob, dt rt.DataType, op rt.ReduceOp) {
	total := 0
	for _, j := range jobs {
		total += len(j.dst)
	}
	if useCKernels && total >= cKernelMin && c.reduceJobsC(jobs, dt, op) {
		return
	}
	for _, j := range jobs {
		reduce3Into(j.dst, j.a, j.b, dt, op)
	}
}

// reduceJobsC hands the jobs to C, 16 at a time; false: C does not cover
// the type or op (nothing was done). The addresses travel as integers (a
// list of pointers to Go memory may not be passed to C): the buffers are C
// memory, shared memory or Go heap memory (which does not move), kept alive
// by jobs until C returns.
func (c *Comm) reduceJobsC(jobs []redJob, dt rt.DataType, op rt.ReduceOp) bool {
	if c.cjobs == nil {
		c.cjobs = new(cJobs)
	}
	cj := c.cjobs
	for len(jobs) > 0 {
		k := min(len(jobs), len(cj))
		for i, j := range jobs[:k] {
			if len(j.dst) == 0 {
				cj[i] = C.xccl_job{}
				continue
			}
			cj[i] = C.xccl_job{d: C.uintptr_t(uintptr(unsafe.Pointer(&j.dst[0]))), a: C.uintptr_t(uintptr(unsafe.Pointer(&j.a[0]))),
				b: C.uintptr_t(uintptr(unsafe.Pointer(&j.b[0]))), bytes: C.size_t(len(j.dst))}
		}
		if C.xccl_reduce_jobs(&cj[0], C.int(k), C.int(dt), C.int(op)) != 0 {
			return false
		}
		runtime.KeepAlive(jobs)
		jobs = jobs[k:]
	}
	return true
}
