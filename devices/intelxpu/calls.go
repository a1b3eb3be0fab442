package intelxpu

/*
#include <stdint.h>
#include <stddef.h>

// Synapse signatures (synapse_api.h): device ids are uint32, device
// addresses uint64, and synMemCopyAsync orders (stream, src, size, dst, dir).
typedef int (*acquire_t)(uint32_t*, uint32_t);
typedef int (*screate_t)(void**, uint32_t, uint32_t);
typedef int (*dmalloc_t)(uint32_t, uint64_t, uint64_t, uint32_t, uint64_t*);
typedef int (*dfree_t)(uint32_t, uint64_t, uint32_t);
typedef int (*hmalloc_t)(uint32_t, uint64_t, uint32_t, void**);
typedef int (*hfree_t)(uint32_t, void*, uint32_t);
typedef int (*copy_t)(void*, uint64_t, uint64_t, uint64_t, int);
typedef int (*meminfo_t)(uint32_t, uint64_t*, uint64_t*);
typedef int (*zedev_t)(void*, uint32_t*, void**);

static int x_acquire(void* f, uint32_t* dev, uint32_t module) { return ((acquire_t)f)(dev, module); }
static int x_screate(void* f, uintptr_t* s, uint32_t dev) { return ((screate_t)f)((void**)s, dev, 0); }
static int x_dmalloc(void* f, uint32_t dev, uint64_t n, uint64_t* addr) { return ((dmalloc_t)f)(dev, n, 0, 0, addr); }
static int x_dfree(void* f, uint32_t dev, uint64_t addr) { return ((dfree_t)f)(dev, addr, 0); }
static int x_hmalloc(void* f, uint32_t dev, uint64_t n, void** p) { return ((hmalloc_t)f)(dev, n, 0, p); }
static int x_hfree(void* f, uint32_t dev, void* p) { return ((hfree_t)f)(dev, p, 0); }
static int x_copy(void* f, uintptr_t s, uint64_t src, uint64_t n, uint64_t dst, int dir) {
  return ((copy_t)f)((void*)s, src, n, dst, dir);
}
static int x_meminfo(void* f, uint32_t dev, uint64_t* fr, uint64_t* tot) { return ((meminfo_t)f)(dev, fr, tot); }
// zeDeviceGet(driver, &count, NULL): the count only.
static int x_zedev(void* f, uintptr_t drv, uint32_t* n) { *n = 0; return ((zedev_t)f)((void*)drv, n, NULL); }
*/
import "C"

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
)

type fn = ccall.Fn

func cAcquire(f fn, module int) (uint32, int) {
	var dev C.uint32_t
	rc := C.x_acquire(f, &dev, C.uint32_t(module))
	return uint32(dev), int(rc)
}

func cStreamCreate(f fn, dev uint32) (uintptr, int) {
	var s C.uintptr_t
	rc := C.x_screate(f, &s, C.uint32_t(dev))
	return uintptr(s), int(rc)
}

func cDevMalloc(f fn, dev uint32, n int) (uint64, int) {
	var addr C.uint64_t
	rc := C.x_dmalloc(f, C.uint32_t(dev), C.uint64_t(n), &addr)
	return uint64(addr), int(rc)
}

func cDevFree(f fn, dev uint32, addr uint64) int {
	return int(C.x_dfree(f, C.uint32_t(dev), C.uint64_t(addr)))
}

func cHostMalloc(f fn, dev uint32, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.x_hmalloc(f, C.uint32_t(dev), C.uint64_t(n), &p)
	return p, int(rc)
}

func cHostFree(f fn, dev uint32, p unsafe.Pointer) int {
	return int(C.x_hfree(f, C.uint32_t(dev), p))
}

// synMemCopyAsync(stream, src, size, dst, dir).
func cCopy(f fn, s uintptr, src, n, dst uint64, dir int) int {
	return int(C.x_copy(f, C.uintptr_t(s), C.uint64_t(src), C.uint64_t(n), C.uint64_t(dst), C.int(dir)))
}

func cMemInfo(f fn, dev uint32) (free, total uint64, rc int) {
	var fr, tot C.uint64_t
	rc = int(C.x_meminfo(f, C.uint32_t(dev), &fr, &tot))
	return uint64(fr), uint64(tot), rc
}

func cDeviceGet(f fn, driver uintptr, n *uint32) int {
	return int(C.x_zedev(f, C.uintptr_t(driver), (*C.uint32_t)(unsafe.Pointer(n))))
}
