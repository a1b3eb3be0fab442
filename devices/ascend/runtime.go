package ascend

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
	rt "github.com/xccl-project/xccl/runtime"
)

// The ACL runtime entries. aclrtMemcpyKind: H2D=1 D2H=2 D2D=3; aclrtMemAttr:
// DDR=0 HBM=1. ACL has no stream query or host callback in the set bound
// here, so QueryStream/QueryEvent synchronize and AddCallback waits first.

// DeviceCount is aclrtGetDeviceCount.
func (d *Device) DeviceCount() int {
	d.countOnce.Do(func() {
		if n, rc := ccall.OutInt(d.count); rc == 0 {
			d.n = n
		}
	})
	return d.n
}

// SetDevice is aclrtSetDevice on the calling thread.
func (d *Device) SetDevice(id int) error { return d.checkACL("SetDevice", ccall.Int(d.setDev, id)) }

// GetDevice is aclrtGetDevice.
func (d *Device) GetDevice() (int, error) {
	n, rc := ccall.OutInt(d.getDev)
	return n, d.checkACL("GetDevice", rc)
}

// SynchronizeDevice binds id and waits for it.
func (d *Device) SynchronizeDevice(id int) error {
	if err := d.SetDevice(id); err != nil {
		return err
	}
	return d.checkACL("SynchronizeDevice", ccall.Void(d.devSync))
}

// CreateStream is aclrtCreateStream.
func (d *Device) CreateStream() (rt.Stream, error) {
	s, rc := ccall.OutPtr(d.sCreate)
	return rt.Stream(s), d.checkACL("CreateStream", rc)
}

// DestroyStream is aclrtDestroyStream.
func (d *Device) DestroyStream(s rt.Stream) error {
	if s == 0 {
		return nil
	}
	return d.checkACL("DestroyStream", ccall.Ptr(d.sDestroy, uintptr(s)))
}

// SynchronizeStream is aclrtSynchronizeStream.
func (d *Device) SynchronizeStream(s rt.Stream) error {
	return d.checkACL("SynchronizeStream", ccall.Ptr(d.sSync, uintptr(s)))
}

// QueryStream synchronizes, then reports done.
func (d *Device) QueryStream(s rt.Stream) error { return d.SynchronizeStream(s) }

// CreateEvent is aclrtCreateEvent.
func (d *Device) CreateEvent() (rt.Event, error) {
	e, rc := ccall.OutPtr(d.eCreate)
	return rt.Event(e), d.checkACL("CreateEvent", rc)
}

// RecordEvent is aclrtRecordEvent(event, stream).
func (d *Device) RecordEvent(e rt.Event, s rt.Stream) error {
	return d.checkACL("RecordEvent", ccall.PtrPtr(d.eRecord, uintptr(e), uintptr(s)))
}

// QueryEvent synchronizes the event, then reports done.
func (d *Device) QueryEvent(e rt.Event) error { return d.SynchronizeEvent(e) }

// SynchronizeEvent is aclrtSynchronizeEvent.
func (d *Device) SynchronizeEvent(e rt.Event) error {
	return d.checkACL("SynchronizeEvent", ccall.Ptr(d.eSync, uintptr(e)))
}

// DestroyEvent is aclrtDestroyEvent.
func (d *Device) DestroyEvent(e rt.Event) error {
	return d.checkACL("DestroyEvent", ccall.Ptr(d.eDestroy, uintptr(e)))
}

// StreamWaitEvent is aclrtStreamWaitEvent(stream, event).
func (d *Device) StreamWaitEvent(s rt.Stream, e rt.Event) error {
	return d.checkACL("StreamWaitEvent", ccall.PtrPtr(d.waitEvent, uintptr(s), uintptr(e)))
}

// MemAlloc is aclrtMalloc(HUGE_FIRST).
func (d *Device) MemAlloc(dev, size int) (unsafe.Pointer, error) {
	p, rc := cMalloc(d.malloc, size)
	return p, d.checkACL("Malloc", rc)
}

// MemFree is aclrtFree.
func (d *Device) MemFree(dev int, p unsafe.Pointer, size int) error {
	return d.checkACL("Free", ccall.Ptr(d.free, uintptr(p)))
}

// HostAlloc is aclrtMallocHost.
func (d *Device) HostAlloc(size int) (unsafe.Pointer, error) {
	p, rc := ccall.Alloc(d.mallocHost, size)
	return p, d.checkACL("MallocHost", rc)
}

// HostFree is aclrtFreeHost.
func (d *Device) HostFree(p unsafe.Pointer, size int) error {
	return d.checkACL("FreeHost", ccall.Ptr(d.freeHost, uintptr(p)))
}

// Memset is aclrtMemsetAsync, synchronized for the NULL stream.
func (d *Device) Memset(dev int, p unsafe.Pointer, v byte, size int, s rt.Stream) error {
	if err := d.checkACL("MemsetAsync", cMemset(d.memset, uintptr(p), v, size, uintptr(s))); err != nil || s != 0 {
		return err
	}
	return d.SynchronizeStream(0)
}

// Memcpy is aclrtMemcpy (NULL stream) or aclrtMemcpyAsync.
func (d *Device) Memcpy(dev int, dst, src unsafe.Pointer, size int, kind rt.CopyKind, s rt.Stream) error {
	k := int(kind) + 1
	if s == 0 {
		return d.checkACL("Memcpy", cMemcpy(d.memcpy, uintptr(dst), uintptr(src), size, k))
	}
	return d.checkACL("MemcpyAsync", cMemcpyAsync(d.memcpyAsync, uintptr(dst), uintptr(src), size, k, uintptr(s)))
}

// MemStats is aclrtGetMemInfo: HBM, or DDR on parts without HBM.
func (d *Device) MemStats(dev int) (total, free uint64, err error) {
	if d.memInfo == nil {
		return 0, 0, rt.Errorf("ascend: aclrtGetMemInfo is missing")
	}
	for _, attr := range []int{1, 0} { // ACL_HBM_MEM, ACL_DDR_MEM
		fr, tot, rc := cMemInfo(d.memInfo, attr)
		if rc == 0 && tot > 0 {
			return tot, fr, nil
		}
	}
	return 0, 0, rt.Failedf("ascend: aclrtGetMemInfo reports no memory")
}

// MinChunkSize is 512: ACL allocations are 32-byte aligned, Paddle's NPU
// plugin uses 512-byte chunks.
func (d *Device) MinChunkSize(int) int { return 512 }

// AddCallback waits for the stream, then runs fn.
func (d *Device) AddCallback(s rt.Stream, fn func(error)) error {
	err := d.SynchronizeStream(s)
	fn(err)
	return err
}

// Axpby needs a kernel xccl does not have.
func (d *Device) Axpby(int, rt.Stream, rt.DataType, int, float32, unsafe.Pointer, float32, unsafe.Pointer) error {
	return rt.Errorf("ascend: blas_axpby is not available (no kernels in xccl)")
}

var _ rt.Device = (*Device)(nil)
