package mlu

/*
#include <stdint.h>
#include <stddef.h>

// CNCL/CNRT signatures no other vendor shares (cncl.h 1.25, cnrt.h).
typedef int (*initcomms_t)(void**, int, const int*, const int*, int, const void*);
typedef int (*destroycomms_t)(void**, int);
typedef int (*copyasync_t)(void*, void*, size_t, void*, int);

static int x_init(void* f, uintptr_t* comm, int dev, int rank, int nranks, const void* clique) {
  int devs[1] = {dev}, ranks[1] = {rank};
  return ((initcomms_t)f)((void**)comm, 1, devs, ranks, nranks, clique);
}
static int x_destroy(void* f, uintptr_t comm) { void* c = (void*)comm; return ((destroycomms_t)f)(&c, 1); }
static int x_copyasync(void* f, uintptr_t d, uintptr_t s, size_t n, uintptr_t q, int dir) {
  return ((copyasync_t)f)((void*)d, (void*)s, n, (void*)q, dir);
}
*/
import "C"

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
)

type fn = ccall.Fn

// cnclInitComms(&comm, 1, {dev}, {rank}, nranks, clique).
func cInit(f fn, dev, rank, nranks int, clique []byte) (uintptr, int) {
	var comm C.uintptr_t
	rc := C.x_init(f, &comm, C.int(dev), C.int(rank), C.int(nranks), unsafe.Pointer(&clique[0]))
	return uintptr(comm), int(rc)
}

// cnclDestroyComms(&comm, 1).
func cDestroyComms(f fn, comm uintptr) int { return int(C.x_destroy(f, C.uintptr_t(comm))) }

// cnrtMemcpyAsync(dst, src, bytes, queue, dir): the queue before the direction.
func cCopyAsync(f fn, d, s uintptr, n int, q uintptr, dir int) int {
	return int(C.x_copyasync(f, C.uintptr_t(d), C.uintptr_t(s), C.size_t(n), C.uintptr_t(q), C.int(dir)))
}
