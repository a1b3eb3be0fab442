package kunlun

/*
#include <stdint.h>
#include <stddef.h>

// BKCL puts the communicator first and orders the rest its own way.
typedef int (*init_t)(void**, int, int, const void*);
typedef int (*coll_t)(void*, const void*, void*, size_t, int, int, void*);           // all_reduce, reduce_scatter, broadcast(root)
typedef int (*reduce_t)(void*, const void*, void*, size_t, int, int, int, void*);    // reduce
typedef int (*gather_t)(void*, const void*, size_t, void*, int, void*);              // all_gather: count before recv
typedef int (*p2p_t)(void*, void*, size_t, int, int, void*);                          // send/recv: peer before dtype
typedef int (*malloc_t)(void**, uint64_t, int);

static int x_init(void* f, uintptr_t* ctx, int rank, int nranks, const void* id) {
  return ((init_t)f)((void**)ctx, rank, nranks, id);
}
static int x_coll(void* f, uintptr_t c, uintptr_t s, uintptr_t r, size_t n, int dt, int op, uintptr_t st) {
  return ((coll_t)f)((void*)c, (const void*)s, (void*)r, n, dt, op, (void*)st);
}
static int x_reduce(void* f, uintptr_t c, uintptr_t s, uintptr_t r, size_t n, int dt, int op, int root, uintptr_t st) {
  return ((reduce_t)f)((void*)c, (const void*)s, (void*)r, n, dt, op, root, (void*)st);
}
static int x_gather(void* f, uintptr_t c, uintptr_t s, size_t n, uintptr_t r, int dt, uintptr_t st) {
  return ((gather_t)f)((void*)c, (const void*)s, n, (void*)r, dt, (void*)st);
}
static int x_p2p(void* f, uintptr_t c, uintptr_t b, size_t n, int peer, int dt, uintptr_t st) {
  return ((p2p_t)f)((void*)c, (void*)b, n, peer, dt, (void*)st);
}
static int x_malloc(void* f, void** p, uint64_t n) { return ((malloc_t)f)(p, n, 0); }
*/
import "C"

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
)

type fn = ccall.Fn

// bkcl_init_rank(&ctx, rank, nranks, &id): rank before nranks.
func cInit(f fn, rank, nranks int, id []byte) (uintptr, int) {
	var ctx C.uintptr_t
	rc := C.x_init(f, &ctx, C.int(rank), C.int(nranks), unsafe.Pointer(&id[0]))
	return uintptr(ctx), int(rc)
}

// cColl: (ctx, send, recv, count, dtype, op-or-root, stream).
func cColl(f fn, ctx, s, r uintptr, n, dt, op int, st uintptr) int {
	return int(C.x_coll(f, C.uintptr_t(ctx), C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(op), C.uintptr_t(st)))
}

func cReduce(f fn, ctx, s, r uintptr, n, dt, op, root int, st uintptr) int {
	return int(C.x_reduce(f, C.uintptr_t(ctx), C.uintptr_t(s), C.uintptr_t(r), C.size_t(n), C.int(dt), C.int(op), C.int(root), C.uintptr_t(st)))
}

// cGather: bkcl_all_gather(ctx, send, sendcount, recv, dtype, stream).
func cGather(f fn, ctx, s uintptr, n int, r uintptr, dt int, st uintptr) int {
	return int(C.x_gather(f, C.uintptr_t(ctx), C.uintptr_t(s), C.size_t(n), C.uintptr_t(r), C.int(dt), C.uintptr_t(st)))
}

// cP2P: bkcl_send/recv(ctx, buf, count, peer, dtype, stream).
func cP2P(f fn, ctx, b uintptr, n, peer, dt int, st uintptr) int {
	return int(C.x_p2p(f, C.uintptr_t(ctx), C.uintptr_t(b), C.size_t(n), C.int(peer), C.int(dt), C.uintptr_t(st)))
}

// xpu_malloc(&p, size, XPU_MEM_MAIN).
func cMalloc(f fn, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.x_malloc(f, &p, C.uint64_t(n))
	return p, int(rc)
}
