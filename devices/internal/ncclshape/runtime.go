package ncclshape

import (
	"sync"

	"github.com/xccl-project/xccl/devices/internal/ccall"
	"github.com/xccl-project/xccl/devices/internal/dl"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// CUDARuntime forwards the runtime entries to a CUDA-shaped runtime on the
// calling thread: the CUDA runtime's names, argument orders and values
// behind another prefix (cuda*, hip*, mc* of MetaX MACA, musa* of Moore
// Threads, tops* of Enflame). Copy kinds H2D=1 D2H=2 D2D=3 and "not ready"
// = 600 in all of them (where a vendor's value is not confirmed, its
// package says so). Pinned host memory is <rt>MallocHost(ptr, size), or,
// where a runtime has only <rt>HostMalloc(ptr, size, flags) (TOPS),
// that with flags 0 (the default kind). MetaX MACA's mcMallocHost is
// cudaHostAlloc's shape, (ptr, size, flags): MACA's CUDA shims map
// cudaHostAlloc to it and call it with mcMallocHostDefault (0).
type CUDARuntime struct {
	name, prefix string
	lib          *dl.Library

	getCount, setDevice, getDevice, devSync, streamCreate, streamDestroy, streamSync, streamQuery fn
	eventCreate, eventRecord, eventQuery, eventSync, eventDestroy, streamWaitEvent, launchHost    fn
	malloc, free, mallocHost, hostMalloc, freeHost, memcpy, memcpyAsync, memsetAsync, memInfo     fn
	hostRegister, hostUnregister                                                                  fn
	mallocHostFlags                                                                               bool // <rt>MallocHost takes flags (MACA)

	countOnce sync.Once
	count     int
}

// OpenCUDARuntime loads the runtime whose symbols start with prefix.
func OpenCUDARuntime(name, prefix, env string, libs []string) (*CUDARuntime, error) {
	d := &CUDARuntime{name: name, prefix: prefix, mallocHostFlags: prefix == "mc"}
	var err error
	if d.lib, err = dl.Open(env, libs...); err != nil {
		return nil, err
	}
	r := prefix
	err = d.lib.Bind(map[string]*unsafe.Pointer{
		r + "GetDeviceCount": &d.getCount, r + "SetDevice": &d.setDevice, r + "GetDevice": &d.getDevice,
		r + "DeviceSynchronize": &d.devSync, r + "StreamCreate": &d.streamCreate, r + "StreamDestroy": &d.streamDestroy,
		r + "StreamSynchronize": &d.streamSync, r + "StreamQuery": &d.streamQuery, r + "EventCreate": &d.eventCreate,
		r + "EventRecord": &d.eventRecord, r + "EventQuery": &d.eventQuery, r + "EventSynchronize": &d.eventSync,
		r + "EventDestroy": &d.eventDestroy, r + "StreamWaitEvent": &d.streamWaitEvent, r + "Malloc": &d.malloc,
		r + "Free": &d.free, r + "Memcpy": &d.memcpy, r + "MemcpyAsync": &d.memcpyAsync,
		r + "MemsetAsync": &d.memsetAsync, r + "MemGetInfo": &d.memInfo,
	}, map[string]*unsafe.Pointer{
		r + "MallocHost": &d.mallocHost, r + "HostMalloc": &d.hostMalloc, r + "FreeHost|" + r + "HostFree": &d.freeHost,
		r + "LaunchHostFunc": &d.launchHost, r + "HostRegister": &d.hostRegister, r + "HostUnregister": &d.hostUnregister,
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Libraries names the runtime library.
func (d *CUDARuntime) Libraries() string { return d.lib.Name }

func (d *CUDARuntime) checkRT(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	return rt.Failedf("%s: %s%s returned %d", d.name, d.prefix, what, rc)
}

// DeviceCount asks the runtime once.
func (d *CUDARuntime) DeviceCount() int {
	d.countOnce.Do(func() {
		n, rc := ccall.OutInt(d.getCount)
		if rc == 0 {
			d.count = n
		}
	})
	return d.count
}

// SetDevice binds the calling thread.
func (d *CUDARuntime) SetDevice(id int) error {
	return d.checkRT("SetDevice", ccall.Int(d.setDevice, id))
}

// GetDevice is the calling thread's device.
func (d *CUDARuntime) GetDevice() (int, error) {
	n, rc := ccall.OutInt(d.getDevice)
	return n, d.checkRT("GetDevice", rc)
}

// SynchronizeDevice waits for the current device (after binding id).
func (d *CUDARuntime) SynchronizeDevice(id int) error {
	if err := d.SetDevice(id); err != nil {
		return err
	}
	return d.checkRT("DeviceSynchronize", ccall.Void(d.devSync))
}

// CreateStream makes a vendor stream.
func (d *CUDARuntime) CreateStream() (rt.Stream, error) {
	s, rc := ccall.OutPtr(d.streamCreate)
	return rt.Stream(s), d.checkRT("StreamCreate", rc)
}

// DestroyStream destroys a vendor stream.
func (d *CUDARuntime) DestroyStream(s rt.Stream) error {
	if s == 0 {
		return nil
	}
	return d.checkRT("StreamDestroy", ccall.Ptr(d.streamDestroy, uintptr(s)))
}

// SynchronizeStream waits for the stream.
func (d *CUDARuntime) SynchronizeStream(s rt.Stream) error {
	return d.checkRT("StreamSynchronize", ccall.Ptr(d.streamSync, uintptr(s)))
}

// QueryStream: nil when idle, ErrNotReady when busy (cudaErrorNotReady=600).
func (d *CUDARuntime) QueryStream(s rt.Stream) error {
	return d.ready("StreamQuery", ccall.Ptr(d.streamQuery, uintptr(s)))
}

func (d *CUDARuntime) ready(what string, rc int) error {
	switch rc {
	case 0:
		return nil
	case 600: // cudaErrorNotReady / hipErrorNotReady
		return rt.ErrNotReady
	}
	return d.checkRT(what, rc)
}

// CreateEvent makes a vendor event.
func (d *CUDARuntime) CreateEvent() (rt.Event, error) {
	e, rc := ccall.OutPtr(d.eventCreate)
	return rt.Event(e), d.checkRT("EventCreate", rc)
}

// RecordEvent records on the stream.
func (d *CUDARuntime) RecordEvent(e rt.Event, s rt.Stream) error {
	return d.checkRT("EventRecord", ccall.PtrPtr(d.eventRecord, uintptr(e), uintptr(s)))
}

// QueryEvent: nil when complete.
func (d *CUDARuntime) QueryEvent(e rt.Event) error {
	return d.ready("EventQuery", ccall.Ptr(d.eventQuery, uintptr(e)))
}

// SynchronizeEvent waits for the event.
func (d *CUDARuntime) SynchronizeEvent(e rt.Event) error {
	return d.checkRT("EventSynchronize", ccall.Ptr(d.eventSync, uintptr(e)))
}

// DestroyEvent destroys the event.
func (d *CUDARuntime) DestroyEvent(e rt.Event) error {
	return d.checkRT("EventDestroy", ccall.Ptr(d.eventDestroy, uintptr(e)))
}

// StreamWaitEvent makes the stream wait for the event.
func (d *CUDARuntime) StreamWaitEvent(s rt.Stream, e rt.Event) error {
	return d.checkRT("StreamWaitEvent", ccall.WaitEvent(d.streamWaitEvent, uintptr(s), uintptr(e)))
}

// MemAlloc allocates device memory on the calling thread's device.
func (d *CUDARuntime) MemAlloc(dev, size int) (unsafe.Pointer, error) {
	p, rc := ccall.Alloc(d.malloc, size)
	return p, d.checkRT("Malloc", rc)
}

// MemFree frees device memory.
func (d *CUDARuntime) MemFree(dev int, p unsafe.Pointer, size int) error {
	return d.checkRT("Free", ccall.Ptr(d.free, uintptr(p)))
}

// HostAlloc allocates pinned host memory: MallocHost(&p, size), else
// HostMalloc(&p, size, 0), whose third argument is the flags.
func (d *CUDARuntime) HostAlloc(size int) (unsafe.Pointer, error) {
	switch {
	case d.mallocHost != nil && d.mallocHostFlags:
		p, rc := ccall.AllocFlags(d.mallocHost, size, 0)
		return p, d.checkRT("MallocHost", rc)
	case d.mallocHost != nil:
		p, rc := ccall.Alloc(d.mallocHost, size)
		return p, d.checkRT("MallocHost", rc)
	case d.hostMalloc != nil:
		p, rc := ccall.AllocFlags(d.hostMalloc, size, 0)
		return p, d.checkRT("HostMalloc", rc)
	}
	return nil, rt.Errorf("%s: the runtime has no pinned host allocator", d.name)
}

// HostFree frees pinned host memory.
func (d *CUDARuntime) HostFree(p unsafe.Pointer, size int) error {
	if d.freeHost == nil {
		return rt.Errorf("%s: the runtime has no pinned host allocator", d.name)
	}
	return d.checkRT("FreeHost", ccall.Ptr(d.freeHost, uintptr(p)))
}

// CanRegisterHost: the runtime has HostRegister and HostUnregister.
func (d *CUDARuntime) CanRegisterHost() bool { return d.hostRegister != nil && d.hostUnregister != nil }

// HostRegister pins size bytes at p (page-aligned) for the runtime's
// copies: HostRegister(p, size, 0), the default kind.
func (d *CUDARuntime) HostRegister(p unsafe.Pointer, size int) error {
	if !d.CanRegisterHost() {
		return rt.Errorf("%s: the runtime cannot register host memory", d.name)
	}
	return d.checkRT("HostRegister", ccall.Register(d.hostRegister, uintptr(p), size, 0))
}

// HostUnregister undoes HostRegister.
func (d *CUDARuntime) HostUnregister(p unsafe.Pointer) error {
	if d.hostUnregister == nil {
		return rt.Errorf("%s: the runtime cannot register host memory", d.name)
	}
	return d.checkRT("HostUnregister", ccall.Ptr(d.hostUnregister, uintptr(p)))
}

// Memset fills device memory in stream order.
func (d *CUDARuntime) Memset(dev int, p unsafe.Pointer, v byte, size int, s rt.Stream) error {
	if err := d.checkRT("MemsetAsync", ccall.Memset(d.memsetAsync, uintptr(p), v, size, uintptr(s))); err != nil || s != 0 {
		return err
	}
	return d.SynchronizeStream(0)
}

// Memcpy copies; the NULL stream copies synchronously.
func (d *CUDARuntime) Memcpy(dev int, dst, src unsafe.Pointer, size int, kind rt.CopyKind, s rt.Stream) error {
	k := int(kind) + 1 // HostToDevice=1, DeviceToHost=2, DeviceToDevice=3
	if s == 0 {
		return d.checkRT("Memcpy", ccall.Copy(d.memcpy, uintptr(dst), uintptr(src), size, k))
	}
	return d.checkRT("MemcpyAsync", ccall.CopyAsync(d.memcpyAsync, uintptr(dst), uintptr(src), size, k, uintptr(s)))
}

// MemStats is MemGetInfo on the calling thread's device.
func (d *CUDARuntime) MemStats(dev int) (total, free uint64, err error) {
	free, total, rc := ccall.MemInfo(d.memInfo)
	return total, free, d.checkRT("MemGetInfo", rc)
}

// MinChunkSize is the usual 256-byte device alignment.
func (d *CUDARuntime) MinChunkSize(int) int { return 256 }

// AddCallback uses LaunchHostFunc.
func (d *CUDARuntime) AddCallback(s rt.Stream, fn func(error)) error {
	if d.launchHost == nil {
		if err := d.SynchronizeStream(s); err != nil {
			return err
		}
		fn(nil)
		return nil
	}
	return d.checkRT("LaunchHostFunc", ccall.LaunchHostFunc(d.launchHost, uintptr(s), func() { fn(nil) }))
}

// Axpby needs a kernel; vendor devices do not offer one through xccl.
func (d *CUDARuntime) Axpby(int, rt.Stream, rt.DataType, int, float32, unsafe.Pointer, float32, unsafe.Pointer) error {
	return rt.Errorf("%s: blas_axpby is not available (no kernels in xccl)", d.name)
}

var (
	_ rt.Device = (*Device)(nil)
	_ Runtime   = (*CUDARuntime)(nil)
)
