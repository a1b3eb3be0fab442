package mlu

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
	rt "github.com/xccl-project/xccl/runtime"
)

// The CNRT runtime entries. Streams are queues and events are notifiers.
// cnrtMemTransDir_t: HostToDev=0 DevToDev=1 DevToHost=2.
var dirs = map[rt.CopyKind]int{rt.HostToDevice: 0, rt.DeviceToDevice: 1, rt.DeviceToHost: 2}

// DeviceCount is cnrtGetDeviceCount.
func (d *Device) DeviceCount() int {
	d.countOnce.Do(func() {
		if n, rc := ccall.OutInt(d.count); rc == 0 {
			d.n = n
		}
	})
	return d.n
}

// SetDevice is cnrtSetDevice (per thread).
func (d *Device) SetDevice(id int) error { return d.checkRT("SetDevice", ccall.Int(d.setDev, id)) }

// GetDevice is cnrtGetDevice.
func (d *Device) GetDevice() (int, error) {
	n, rc := ccall.OutInt(d.getDev)
	return n, d.checkRT("GetDevice", rc)
}

// SynchronizeDevice binds id and calls cnrtSyncDevice.
func (d *Device) SynchronizeDevice(id int) error {
	if err := d.SetDevice(id); err != nil {
		return err
	}
	return d.checkRT("SyncDevice", ccall.Void(d.devSync))
}

// CreateStream is cnrtQueueCreate.
func (d *Device) CreateStream() (rt.Stream, error) {
	q, rc := ccall.OutPtr(d.qCreate)
	return rt.Stream(q), d.checkRT("QueueCreate", rc)
}

// DestroyStream is cnrtQueueDestroy.
func (d *Device) DestroyStream(s rt.Stream) error {
	if s == 0 {
		return nil
	}
	return d.checkRT("QueueDestroy", ccall.Ptr(d.qDestroy, uintptr(s)))
}

// SynchronizeStream is cnrtQueueSync.
func (d *Device) SynchronizeStream(s rt.Stream) error {
	return d.checkRT("QueueSync", ccall.Ptr(d.qSync, uintptr(s)))
}

// cnrt.h's answers of cnrtQueueQuery and cnrtQueryNotifier while work is
// pending: cnrtErrorNotReady (CNRT 6, as Cambricon's guide and torch_mlu
// read it), or cnrtErrorBusy, which the same header documents for them
// (deprecated, still returned by some releases).
const (
	cnrtErrorNotReady = 1
	cnrtErrorBusy     = 632014
)

// queried turns a query's answer into nil (done), rt.ErrNotReady, or the
// error it is.
func (d *Device) queried(what string, rc int) error {
	if rc == cnrtErrorNotReady || rc == cnrtErrorBusy {
		return rt.ErrNotReady
	}
	return d.checkRT(what, rc)
}

// QueryStream is cnrtQueueQuery; without the symbol it synchronizes.
func (d *Device) QueryStream(s rt.Stream) error {
	if d.qQuery == nil {
		return d.SynchronizeStream(s)
	}
	return d.queried("QueueQuery", ccall.Ptr(d.qQuery, uintptr(s)))
}

// CreateEvent is cnrtNotifierCreate.
func (d *Device) CreateEvent() (rt.Event, error) {
	n, rc := ccall.OutPtr(d.nCreate)
	return rt.Event(n), d.checkRT("NotifierCreate", rc)
}

// RecordEvent is cnrtPlaceNotifier(notifier, queue).
func (d *Device) RecordEvent(e rt.Event, s rt.Stream) error {
	return d.checkRT("PlaceNotifier", ccall.PtrPtr(d.nPlace, uintptr(e), uintptr(s)))
}

// QueryEvent is cnrtQueryNotifier, or a wait without it.
func (d *Device) QueryEvent(e rt.Event) error {
	if d.nQuery == nil {
		return d.SynchronizeEvent(e)
	}
	return d.queried("QueryNotifier", ccall.Ptr(d.nQuery, uintptr(e)))
}

// SynchronizeEvent is cnrtWaitNotifier.
func (d *Device) SynchronizeEvent(e rt.Event) error {
	return d.checkRT("WaitNotifier", ccall.Ptr(d.nSync, uintptr(e)))
}

// DestroyEvent is cnrtNotifierDestroy.
func (d *Device) DestroyEvent(e rt.Event) error {
	return d.checkRT("NotifierDestroy", ccall.Ptr(d.nDestroy, uintptr(e)))
}

// StreamWaitEvent is cnrtQueueWaitNotifier(notifier, queue, 0).
func (d *Device) StreamWaitEvent(s rt.Stream, e rt.Event) error {
	return d.checkRT("QueueWaitNotifier", ccall.WaitEvent(d.nWait, uintptr(e), uintptr(s)))
}

// MemAlloc is cnrtMalloc.
func (d *Device) MemAlloc(dev, size int) (unsafe.Pointer, error) {
	p, rc := ccall.Alloc(d.malloc, size)
	return p, d.checkRT("Malloc", rc)
}

// MemFree is cnrtFree.
func (d *Device) MemFree(dev int, p unsafe.Pointer, size int) error {
	return d.checkRT("Free", ccall.Ptr(d.free, uintptr(p)))
}

// HostAlloc is cnrtHostMalloc.
func (d *Device) HostAlloc(size int) (unsafe.Pointer, error) {
	if d.hostMalloc == nil {
		return nil, rt.Errorf("mlu: cnrtHostMalloc is missing")
	}
	p, rc := ccall.Alloc(d.hostMalloc, size)
	return p, d.checkRT("HostMalloc", rc)
}

// HostFree is cnrtFreeHost.
func (d *Device) HostFree(p unsafe.Pointer, size int) error {
	if d.hostFree == nil {
		return rt.Errorf("mlu: cnrtFreeHost is missing")
	}
	return d.checkRT("FreeHost", ccall.Ptr(d.hostFree, uintptr(p)))
}

// Memset is cnrtMemsetAsync, synchronized for the NULL queue.
func (d *Device) Memset(dev int, p unsafe.Pointer, v byte, size int, s rt.Stream) error {
	if err := d.checkRT("MemsetAsync", ccall.Memset(d.memset, uintptr(p), v, size, uintptr(s))); err != nil || s != 0 {
		return err
	}
	return d.SynchronizeStream(0)
}

// Memcpy is cnrtMemcpy (NULL queue) or cnrtMemcpyAsync(_V2).
func (d *Device) Memcpy(dev int, dst, src unsafe.Pointer, size int, kind rt.CopyKind, s rt.Stream) error {
	dir := dirs[kind]
	if s == 0 {
		return d.checkRT("Memcpy", ccall.Copy(d.memcpy, uintptr(dst), uintptr(src), size, dir))
	}
	return d.checkRT("MemcpyAsync", cCopyAsync(d.memcpyAsync, uintptr(dst), uintptr(src), size, uintptr(s), dir))
}

// MemStats is cnrtMemGetInfo(&free, &total) when the library has it.
func (d *Device) MemStats(dev int) (total, free uint64, err error) {
	if d.memInfo == nil {
		return 0, 0, rt.Errorf("mlu: cnrtMemGetInfo is missing")
	}
	free, total, rc := ccall.MemInfo(d.memInfo)
	return total, free, d.checkRT("MemGetInfo", rc)
}

// MinChunkSize is 512, like Paddle's MLU plugin.
func (d *Device) MinChunkSize(int) int { return 512 }

// AddCallback waits for the queue, then runs fn.
func (d *Device) AddCallback(s rt.Stream, fn func(error)) error {
	err := d.SynchronizeStream(s)
	fn(err)
	return err
}

// Axpby needs a kernel xccl does not have.
func (d *Device) Axpby(int, rt.Stream, rt.DataType, int, float32, unsafe.Pointer, float32, unsafe.Pointer) error {
	return rt.Errorf("mlu: blas_axpby is not available (no kernels in xccl)")
}

var _ rt.Device = (*Device)(nil)
