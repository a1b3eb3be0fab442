package xccl

import (
	"sync"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// Memory for communication buffers, as ncclMemAlloc and ncclMemFree: the
// device's own allocation made for collectives where it has one
// (rt.CommMemAllocator; on the host device, memory the ranks of a machine
// share at every size, so collectives on it copy once between them), else
// its MemAlloc. The free needs no size or device: they are kept here.

type allocation struct {
	dev  rt.Device
	id   int // the device's device id when it was allocated
	size int
}

var (
	allocMu sync.Mutex
	allocs  = map[uintptr]allocation{}
)

// MemAlloc allocates size bytes of the calling thread's current device of
// dev. Size 0 allocates nothing and returns nil, as cudaMalloc does.
func MemAlloc(dev rt.Device, size int) (unsafe.Pointer, error) {
	if dev == nil || size <= 0 || size > maxBytes {
		return MemAllocOn(dev, 0, size) // its answer: an error, or nil for size 0
	}
	id, err := dev.GetDevice()
	if err != nil {
		return nil, err
	}
	return MemAllocOn(dev, id, size)
}

// MemAllocOn is MemAlloc on device id of dev, whatever the thread's.
func MemAllocOn(dev rt.Device, id, size int) (unsafe.Pointer, error) {
	if dev == nil {
		return nil, rt.Errorf("no device")
	}
	if size < 0 || size > maxBytes {
		return nil, rt.Errorf("allocation of %d bytes", size)
	}
	if size == 0 {
		return nil, nil
	}
	if id < 0 || id >= dev.DeviceCount() {
		return nil, rt.Errorf("%s: device %d out of range [0, %d)", dev.Name(), id, dev.DeviceCount())
	}
	p, err := rt.CommMemAlloc(dev, id, size)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, rt.Failedf("%s: allocation of %d bytes returned no memory", dev.Name(), size)
	}
	allocMu.Lock()
	allocs[uintptr(p)] = allocation{dev: dev, id: id, size: size}
	allocMu.Unlock()
	return p, nil
}

// MemFree frees memory from MemAlloc, on the device it came from whatever
// the thread's current device. nil is accepted; a pointer MemAlloc did not
// return (or one freed already) is an error and nothing is freed.
func MemFree(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	allocMu.Lock()
	a, ok := allocs[uintptr(p)]
	delete(allocs, uintptr(p))
	allocMu.Unlock()
	if !ok {
		return rt.Errorf("%p was not allocated by XcclMemAlloc (or was freed already)", p)
	}
	return a.dev.MemFree(a.id, p, a.size)
}
