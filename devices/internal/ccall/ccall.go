// Package ccall holds the C trampolines vendor packages share: cgo cannot
// call a C function pointer, so every C signature that a vendor entry point
// has gets one small C function here, named after its shape. Pointers the
// caller owns (device buffers, streams, communicators) travel as uintptr and
// are never dereferenced.
package ccall

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>

// NCCL-shaped collectives: (send, recv, count, dtype, [op], [root|peer], comm, stream).
// The function comes as uintptr_t too: a pointer argument is checked by cgo
// on every call (cgocheck), about 2% of a forwarded call.
typedef int (*allreduce_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*bcast_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*reduce_t)(const void*, void*, size_t, int, int, int, void*, void*);
typedef int (*gather_t)(const void*, void*, size_t, int, void*, void*);
typedef int (*p2p_t)(void*, size_t, int, int, void*, void*);
typedef int (*void_t)(void);
typedef int (*ptr_t)(void*);
typedef int (*ptr_ptr_t)(void*, void*);
typedef const char* (*errstr_t)(int);
typedef int (*commreg_t)(void*, void*, size_t, void**);

static int x_allreduce(uintptr_t f, uintptr_t s, uintptr_t r, size_t n, int dt, int op, uintptr_t c, uintptr_t st) {
  return ((allreduce_t)f)((const void*)s, (void*)r, n, dt, op, (void*)c, (void*)st);
}
static int x_bcast(uintptr_t f, uintptr_t s, uintptr_t r, size_t n, int dt, int root, uintptr_t c, uintptr_t st) {
  return ((bcast_t)f)((const void*)s, (void*)r, n, dt, root, (void*)c, (void*)st);
}
static int x_reduce(uintptr_t f, uintptr_t s, uintptr_t r, size_t n, int dt, int op, int root, uintptr_t c, uintptr_t st) {
  return ((reduce_t)f)((const void*)s, (void*)r, n, dt, op, root, (void*)c, (void*)st);
}
static int x_gather(uintptr_t f, uintptr_t s, uintptr_t r, size_t n, int dt, uintptr_t c, uintptr_t st) {
  return ((gather_t)f)((const void*)s, (void*)r, n, dt, (void*)c, (void*)st);
}
static int x_p2p(uintptr_t f, uintptr_t b, size_t n, int dt, int peer, uintptr_t c, uintptr_t st) {
  return ((p2p_t)f)((void*)b, n, dt, peer, (void*)c, (void*)st);
}
static int x_void(void* f) { return ((void_t)f)(); }
static int x_ptr(void* f, uintptr_t a) { return ((ptr_t)f)((void*)a); }
static int x_ptr_ptr(void* f, uintptr_t a, uintptr_t b) { return ((ptr_ptr_t)f)((void*)a, (void*)b); }
static const char* x_errstr(void* f, int code) { return ((errstr_t)f)(code); }
static int x_commreg(void* f, uintptr_t c, uintptr_t b, size_t n, uintptr_t* h) {
  void* out = NULL;
  int rc = ((commreg_t)f)((void*)c, (void*)b, n, &out);
  *h = (uintptr_t)out;
  return rc;
}
typedef int (*premul_t)(int*, void*, int, int, void*);
typedef int (*int_ptr_t)(int, void*);
static int x_premul(void* f, uintptr_t s, int dt, int res, uintptr_t c, int* op) {
  return ((premul_t)f)(op, (void*)s, dt, res, (void*)c);
}
static int x_int_ptr(void* f, int a, uintptr_t b) { return ((int_ptr_t)f)(a, (void*)b); }

// CUDA-shaped runtime calls.
typedef int (*int_t)(int);
typedef int (*alloc_t)(void**, size_t);
typedef int (*allocflags_t)(void**, size_t, unsigned int);
typedef int (*copy_t)(void*, const void*, size_t, int);
typedef int (*copyasync_t)(void*, const void*, size_t, int, void*);
typedef int (*memset_t)(void*, int, size_t, void*);
typedef int (*meminfo_t)(size_t*, size_t*);
typedef int (*waitev_t)(void*, void*, unsigned int);
typedef int (*register_t)(void*, size_t, unsigned int);
typedef void (*hostfn_t)(void*);
typedef int (*launch_t)(void*, hostfn_t, void*);

static int x_int(void* f, int a) { return ((int_t)f)(a); }
static int x_alloc(void* f, void** p, size_t n) { return ((alloc_t)f)(p, n); }
static int x_allocflags(void* f, void** p, size_t n, unsigned int fl) { return ((allocflags_t)f)(p, n, fl); }
static int x_copy(void* f, uintptr_t d, uintptr_t s, size_t n, int kind) { return ((copy_t)f)((void*)d, (const void*)s, n, kind); }
static int x_copyasync(void* f, uintptr_t d, uintptr_t s, size_t n, int kind, uintptr_t st) {
  return ((copyasync_t)f)((void*)d, (const void*)s, n, kind, (void*)st);
}
static int x_memset(void* f, uintptr_t p, int v, size_t n, uintptr_t st) { return ((memset_t)f)((void*)p, v, n, (void*)st); }
static int x_meminfo(void* f, size_t* fr, size_t* tot) { return ((meminfo_t)f)(fr, tot); }
static int x_waitev(void* f, uintptr_t s, uintptr_t e) { return ((waitev_t)f)((void*)s, (void*)e, 0); }
static int x_register(void* f, uintptr_t p, size_t n, unsigned int fl) { return ((register_t)f)((void*)p, n, fl); }

extern void xcclNcclHostFunc(void*);
static int x_launch(void* f, uintptr_t st, uintptr_t handle) { return ((launch_t)f)((void*)st, xcclNcclHostFunc, (void*)handle); }
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// Fn is a resolved C function.
type Fn = unsafe.Pointer

// Coll calls f(send, recv, count, dtype, op, comm, stream): all-reduce and reduce-scatter.
func Coll(f Fn, s, r uintptr, n, dt, op int, comm, st uintptr) int {
	return int(C.x_allreduce(C.uintptr_t(uintptr(f)), C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(op), C.uintptr_t(comm), C.uintptr_t(st)))
}

// MoveRoot calls f(send, recv, count, dtype, root, comm, stream): broadcast.
func MoveRoot(f Fn, s, r uintptr, n, dt, root int, comm, st uintptr) int {
	return int(C.x_bcast(C.uintptr_t(uintptr(f)), C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(root), C.uintptr_t(comm), C.uintptr_t(st)))
}

// CollRoot calls f(send, recv, count, dtype, op, root, comm, stream): reduce.
func CollRoot(f Fn, s, r uintptr, n, dt, op, root int, comm, st uintptr) int {
	return int(C.x_reduce(C.uintptr_t(uintptr(f)), C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(op), C.int(root), C.uintptr_t(comm), C.uintptr_t(st)))
}

// Move calls f(send, recv, count, dtype, comm, stream): all-gather.
func Move(f Fn, s, r uintptr, n, dt int, comm, st uintptr) int {
	return int(C.x_gather(C.uintptr_t(uintptr(f)), C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.uintptr_t(comm), C.uintptr_t(st)))
}

// P2P calls f(buf, count, dtype, peer, comm, stream): send, recv, in-place broadcast.
func P2P(f Fn, b uintptr, n, dt, peer int, comm, st uintptr) int {
	return int(C.x_p2p(C.uintptr_t(uintptr(f)), C.uintptr_t(b), C.size_t(n), C.int(dt), C.int(peer), C.uintptr_t(comm), C.uintptr_t(st)))
}

// Void calls f(); Ptr f(a); PtrPtr f(a, b); Int f(int).
func Void(f Fn) int                 { return int(C.x_void(f)) }
func Ptr(f Fn, a uintptr) int       { return int(C.x_ptr(f, C.uintptr_t(a))) }
func PtrPtr(f Fn, a, b uintptr) int { return int(C.x_ptr_ptr(f, C.uintptr_t(a), C.uintptr_t(b))) }
func Int(f Fn, a int) int           { return int(C.x_int(f, C.int(a))) }

// ErrStr calls a const char* f(int code) error-string function (nil: "").
func ErrStr(f Fn, code int) string {
	if f == nil {
		return ""
	}
	return C.GoString(C.x_errstr(f, C.int(code)))
}

// CommRegister calls f(comm, buf, size, &handle) (ncclCommRegister).
func CommRegister(f Fn, comm, buf uintptr, size int) (uintptr, int) {
	var h C.uintptr_t
	rc := C.x_commreg(f, C.uintptr_t(comm), C.uintptr_t(buf), C.size_t(size), &h)
	return uintptr(h), int(rc)
}

// RedOpCreatePreMulSum calls f(&op, scalar, dtype, residence, comm)
// (ncclRedOpCreatePreMulSum) and returns op.
func RedOpCreatePreMulSum(f Fn, scalar uintptr, dt, residence int, comm uintptr) (int, int) {
	var op C.int
	rc := C.x_premul(f, C.uintptr_t(scalar), C.int(dt), C.int(residence), C.uintptr_t(comm), &op)
	return int(op), int(rc)
}

// IntPtr calls f(a, b) (ncclRedOpDestroy's shape: an int and a pointer).
func IntPtr(f Fn, a int, b uintptr) int { return int(C.x_int_ptr(f, C.int(a), C.uintptr_t(b))) }

// OutPtr calls f(&out) for a pointer-sized out-parameter.
func OutPtr(f Fn) (uintptr, int) {
	var out uintptr
	rc := C.x_ptr(f, C.uintptr_t(uintptr(unsafe.Pointer(&out))))
	return out, int(rc)
}

// OutInt calls f(&out) for an int out-parameter.
func OutInt(f Fn) (int, int) {
	var out C.int
	rc := C.x_ptr(f, C.uintptr_t(uintptr(unsafe.Pointer(&out))))
	return int(out), int(rc)
}

// Alloc calls f(&ptr, size).
func Alloc(f Fn, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.x_alloc(f, &p, C.size_t(n))
	return p, int(rc)
}

// AllocFlags calls f(&ptr, size, flags): hipHostMalloc's and
// topsHostMalloc's shape.
func AllocFlags(f Fn, n int, flags uint) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.x_allocflags(f, &p, C.size_t(n), C.uint(flags))
	return p, int(rc)
}

// Register calls f(ptr, size, flags): cudaHostRegister's shape.
func Register(f Fn, p uintptr, n int, flags uint) int {
	return int(C.x_register(f, C.uintptr_t(p), C.size_t(n), C.uint(flags)))
}

// Copy calls f(dst, src, size, kind): cudaMemcpy's shape.
func Copy(f Fn, d, s uintptr, n, kind int) int {
	return int(C.x_copy(f, C.uintptr_t(d), C.uintptr_t(s), C.size_t(n), C.int(kind)))
}

// CopyAsync calls f(dst, src, size, kind, stream).
func CopyAsync(f Fn, d, s uintptr, n, kind int, st uintptr) int {
	return int(C.x_copyasync(f, C.uintptr_t(d), C.uintptr_t(s), C.size_t(n), C.int(kind), C.uintptr_t(st)))
}

// Memset calls f(ptr, value, size, stream).
func Memset(f Fn, p uintptr, v byte, n int, st uintptr) int {
	return int(C.x_memset(f, C.uintptr_t(p), C.int(v), C.size_t(n), C.uintptr_t(st)))
}

// MemInfo calls f(&free, &total).
func MemInfo(f Fn) (free, total uint64, rc int) {
	var fr, tot C.size_t
	rc = int(C.x_meminfo(f, &fr, &tot))
	return uint64(fr), uint64(tot), rc
}

// WaitEvent calls f(stream, event, 0).
func WaitEvent(f Fn, s, e uintptr) int { return int(C.x_waitev(f, C.uintptr_t(s), C.uintptr_t(e))) }

// LaunchHostFunc enqueues fn on the stream; the vendor calls it back on
// one of its threads once earlier work is done.
func LaunchHostFunc(f Fn, st uintptr, cb func()) int {
	h := cgo.NewHandle(cb)
	rc := int(C.x_launch(f, C.uintptr_t(st), C.uintptr_t(h)))
	if rc != 0 {
		h.Delete()
	}
	return rc
}
