// Reduction kernels of the host device (kernels_c.go), shared with the C
// fast path (fast.c): static, so each includer has its own copy.
#ifndef XCCL_HOST_KERNELS_H
#define XCCL_HOST_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#pragma GCC diagnostic ignored "-Wunused-function"

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

#endif
