package ncclshape

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>

// NCCL-shaped collectives: (send, recv, count, dtype, [op], [root|peer], comm, stream).
typedef int (*allreduce_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*bcast_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*reduce_t)(const void*, void*, size_t, int, int, int, void*, void*);
typedef int (*gather_t)(const void*, void*, size_t, int, void*, void*);
typedef int (*p2p_t)(void*, size_t, int, int, void*, void*);
typedef int (*void_t)(void);
typedef int (*ptr_t)(void*);
typedef int (*ptr_ptr_t)(void*, void*);
typedef const char* (*errstr_t)(int);

static int x_allreduce(void* f, uintptr_t s, uintptr_t r, size_t n, int dt, int op, uintptr_t c, uintptr_t st) {
  return ((allreduce_t)f)((const void*)s, (void*)r, n, dt, op, (void*)c, (void*)st);
}
static int x_bcast(void* f, uintptr_t s, uintptr_t r, size_t n, int dt, int root, uintptr_t c, uintptr_t st) {
  return ((bcast_t)f)((const void*)s, (void*)r, n, dt, root, (void*)c, (void*)st);
}
static int x_reduce(void* f, uintptr_t s, uintptr_t r, size_t n, int dt, int op, int root, uintptr_t c, uintptr_t st) {
  return ((reduce_t)f)((const void*)s, (void*)r, n, dt, op, root, (void*)c, (void*)st);
}
static int x_gather(void* f, uintptr_t s, uintptr_t r, size_t n, int dt, uintptr_t c, uintptr_t st) {
  return ((gather_t)f)((const void*)s, (void*)r, n, dt, (void*)c, (void*)st);
}
static int x_p2p(void* f, uintptr_t b, size_t n, int dt, int peer, uintptr_t c, uintptr_t st) {
  return ((p2p_t)f)((void*)b, n, dt, peer, (void*)c, (void*)st);
}
static int x_void(void* f) { return ((void_t)f)(); }
static int x_ptr(void* f, uintptr_t a) { return ((ptr_t)f)((void*)a); }
static int x_ptr_ptr(void* f, uintptr_t a, uintptr_t b) { return ((ptr_ptr_t)f)((void*)a, (void*)b); }
static const char* x_errstr(void* f, int code) { return ((errstr_t)f)(code); }

// ncclCommInitRank(comm*, int nranks, ncclUniqueId BY VALUE, int rank): one
// trampoline per id size, since C passes the id struct itself.
typedef struct { char internal[128]; } id128;
typedef int (*init128_t)(void**, int, id128, int);
static int x_init128(void* f, void* comm, int nranks, const void* id, int rank) {
  id128 v;
  memcpy(&v, id, sizeof v);
  return ((init128_t)f)((void**)comm, nranks, v, rank);
}

// CUDA-shaped runtime calls.
typedef int (*int_t)(int);
typedef int (*alloc_t)(void**, size_t);
typedef int (*copy_t)(void*, const void*, size_t, int);
typedef int (*copyasync_t)(void*, const void*, size_t, int, void*);
typedef int (*memset_t)(void*, int, size_t, void*);
typedef int (*meminfo_t)(size_t*, size_t*);
typedef int (*waitev_t)(void*, void*, unsigned int);
typedef void (*hostfn_t)(void*);
typedef int (*launch_t)(void*, hostfn_t, void*);

static int x_int(void* f, int a) { return ((int_t)f)(a); }
static int x_alloc(void* f, void** p, size_t n) { return ((alloc_t)f)(p, n); }
static int x_copy(void* f, uintptr_t d, uintptr_t s, size_t n, int kind) { return ((copy_t)f)((void*)d, (const void*)s, n, kind); }
static int x_copyasync(void* f, uintptr_t d, uintptr_t s, size_t n, int kind, uintptr_t st) {
  return ((copyasync_t)f)((void*)d, (const void*)s, n, kind, (void*)st);
}
static int x_memset(void* f, uintptr_t p, int v, size_t n, uintptr_t st) { return ((memset_t)f)((void*)p, v, n, (void*)st); }
static int x_meminfo(void* f, size_t* fr, size_t* tot) { return ((meminfo_t)f)(fr, tot); }
static int x_waitev(void* f, uintptr_t s, uintptr_t e) { return ((waitev_t)f)((void*)s, (void*)e, 0); }

extern void xcclNcclHostFunc(void*);
static int x_launch(void* f, uintptr_t st, uintptr_t handle) { return ((launch_t)f)((void*)st, xcclNcclHostFunc, (void*)handle); }
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

type fn = unsafe.Pointer

func cAllReduce(f fn, s, r uintptr, n, dt, op int, comm, st uintptr) int {
	return int(C.x_allreduce(f, C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(op), C.uintptr_t(comm), C.uintptr_t(st)))
}

func cBroadcast(f fn, s, r uintptr, n, dt, root int, comm, st uintptr) int {
	return int(C.x_bcast(f, C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(root), C.uintptr_t(comm), C.uintptr_t(st)))
}

func cReduce(f fn, s, r uintptr, n, dt, op, root int, comm, st uintptr) int {
	return int(C.x_reduce(f, C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(op), C.int(root), C.uintptr_t(comm), C.uintptr_t(st)))
}

func cGather(f fn, s, r uintptr, n, dt int, comm, st uintptr) int {
	return int(C.x_gather(f, C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.uintptr_t(comm), C.uintptr_t(st)))
}

func cP2P(f fn, b uintptr, n, dt, peer int, comm, st uintptr) int {
	return int(C.x_p2p(f, C.uintptr_t(b), C.size_t(n), C.int(dt), C.int(peer), C.uintptr_t(comm), C.uintptr_t(st)))
}

func cVoid(f fn) int                 { return int(C.x_void(f)) }
func cPtr(f fn, a uintptr) int       { return int(C.x_ptr(f, C.uintptr_t(a))) }
func cPtrPtr(f fn, a, b uintptr) int { return int(C.x_ptr_ptr(f, C.uintptr_t(a), C.uintptr_t(b))) }
func cInt(f fn, a int) int           { return int(C.x_int(f, C.int(a))) }

func cErrStr(f fn, code int) string {
	if f == nil {
		return ""
	}
	return C.GoString(C.x_errstr(f, C.int(code)))
}

func cInit128(f fn, nranks int, id []byte, rank int) (uintptr, int) {
	var comm uintptr
	rc := C.x_init128(f, unsafe.Pointer(&comm), C.int(nranks), unsafe.Pointer(&id[0]), C.int(rank))
	return comm, int(rc)
}

// cOut calls f(&out) for an out-parameter of pointer or int size.
func cOutPtr(f fn) (uintptr, int) {
	var out uintptr
	rc := C.x_ptr(f, C.uintptr_t(uintptr(unsafe.Pointer(&out))))
	return out, int(rc)
}

func cOutInt(f fn) (int, int) {
	var out C.int
	rc := C.x_ptr(f, C.uintptr_t(uintptr(unsafe.Pointer(&out))))
	return int(out), int(rc)
}

func cAlloc(f fn, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.x_alloc(f, &p, C.size_t(n))
	return p, int(rc)
}

func cCopy(f fn, d, s uintptr, n, kind int) int {
	return int(C.x_copy(f, C.uintptr_t(d), C.uintptr_t(s), C.size_t(n), C.int(kind)))
}

func cCopyAsync(f fn, d, s uintptr, n, kind int, st uintptr) int {
	return int(C.x_copyasync(f, C.uintptr_t(d), C.uintptr_t(s), C.size_t(n), C.int(kind), C.uintptr_t(st)))
}

func cMemset(f fn, p uintptr, v byte, n int, st uintptr) int {
	return int(C.x_memset(f, C.uintptr_t(p), C.int(v), C.size_t(n), C.uintptr_t(st)))
}

func cMemInfo(f fn) (free, total uint64, rc int) {
	var fr, tot C.size_t
	rc = int(C.x_meminfo(f, &fr, &tot))
	return uint64(fr), uint64(tot), rc
}

func cWaitEvent(f fn, s, e uintptr) int { return int(C.x_waitev(f, C.uintptr_t(s), C.uintptr_t(e))) }

// cLaunchHostFunc enqueues fn on the stream; the vendor calls it back on
// one of its threads once earlier work is done.
func cLaunchHostFunc(f fn, st uintptr, cb func()) int {
	h := cgo.NewHandle(cb)
	rc := int(C.x_launch(f, C.uintptr_t(st), C.uintptr_t(h)))
	if rc != 0 {
		h.Delete()
	}
	return rc
}
