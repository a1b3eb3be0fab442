package ascend

/*
#include <stdint.h>
#include <stddef.h>

// HCCL and ACL signatures no other vendor shares (hccl.h, acl_rt.h).
typedef int (*init_t)(uint32_t, const void*, uint32_t, void**);
typedef int (*malloc_t)(void**, size_t, int);
typedef int (*memcpy_t)(void*, size_t, const void*, size_t, int);
typedef int (*memcpyasync_t)(void*, size_t, const void*, size_t, int, void*);
typedef int (*memset_t)(void*, size_t, int32_t, size_t, void*);
typedef int (*meminfo_t)(int, size_t*, size_t*);
typedef int (*batch_t)(void*, uint32_t, void*, void*);
typedef int (*init_acl_t)(const char*);

static int x_init(void* f, uint32_t n, const void* root, uint32_t rank, uintptr_t* comm) {
  return ((init_t)f)(n, root, rank, (void**)comm);
}
static int x_malloc(void* f, void** p, size_t n, int policy) { return ((malloc_t)f)(p, n, policy); }
static int x_memcpy(void* f, uintptr_t d, uintptr_t s, size_t n, int kind) {
  return ((memcpy_t)f)((void*)d, n, (const void*)s, n, kind);
}
static int x_memcpy_async(void* f, uintptr_t d, uintptr_t s, size_t n, int kind, uintptr_t st) {
  return ((memcpyasync_t)f)((void*)d, n, (const void*)s, n, kind, (void*)st);
}
static int x_memset(void* f, uintptr_t p, int v, size_t n, uintptr_t st) {
  return ((memset_t)f)((void*)p, n, v, n, (void*)st);
}
static int x_meminfo(void* f, int attr, size_t* fr, size_t* tot) { return ((meminfo_t)f)(attr, fr, tot); }
static int x_batch(void* f, void* items, uint32_t n, uintptr_t comm, uintptr_t st) {
  return ((batch_t)f)(items, n, (void*)comm, (void*)st);
}
static int x_acl_init(void* f) { return ((init_acl_t)f)(NULL); }
*/
import "C"

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
)

type fn = ccall.Fn

func cInit(f fn, n int, root []byte, rank int) (uintptr, int) {
	var comm C.uintptr_t
	rc := C.x_init(f, C.uint32_t(n), unsafe.Pointer(&root[0]), C.uint32_t(rank), &comm)
	return uintptr(comm), int(rc)
}

func cMalloc(f fn, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.x_malloc(f, &p, C.size_t(n), 0) // ACL_MEM_MALLOC_HUGE_FIRST
	return p, int(rc)
}

// aclrtMemcpy(dst, destMax, src, count, kind): destMax is the 2nd argument.
func cMemcpy(f fn, d, s uintptr, n, kind int) int {
	return int(C.x_memcpy(f, C.uintptr_t(d), C.uintptr_t(s), C.size_t(n), C.int(kind)))
}

func cMemcpyAsync(f fn, d, s uintptr, n, kind int, st uintptr) int {
	return int(C.x_memcpy_async(f, C.uintptr_t(d), C.uintptr_t(s), C.size_t(n), C.int(kind), C.uintptr_t(st)))
}

func cMemset(f fn, p uintptr, v byte, n int, st uintptr) int {
	return int(C.x_memset(f, C.uintptr_t(p), C.int(v), C.size_t(n), C.uintptr_t(st)))
}

func cMemInfo(f fn, attr int) (free, total uint64, rc int) {
	var fr, tot C.size_t
	rc = int(C.x_meminfo(f, C.int(attr), &fr, &tot))
	return uint64(fr), uint64(tot), rc
}

// sendRecvItem is HcclSendRecvItem: {type, buf, count, dataType, remoteRank}
// with C's padding; it holds no Go pointers, so C may read the slice.
type sendRecvItem struct {
	Type   int32 // HCCL_SEND=0, HCCL_RECV=1
	_      int32
	Buf    uintptr
	Count  uint64
	DType  int32
	Remote uint32
}

func cBatch(f fn, items []sendRecvItem, comm, st uintptr) int {
	if len(items) == 0 {
		return 0
	}
	return int(C.x_batch(f, unsafe.Pointer(&items[0]), C.uint32_t(len(items)), C.uintptr_t(comm), C.uintptr_t(st)))
}

func cACLInit(f fn) int { return int(C.x_acl_init(f)) }
