package kunlun

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
	rt "github.com/xccl-project/xccl/runtime"
)

// The XPU runtime entries (xpu/runtime.h). XPUMemcpyKind: D2H=0 H2D=1 D2D=2,
// not CUDA's order. Event calls are optional in XRE; without them an event
// is a stream synchronization.
var kinds = map[rt.CopyKind]int{rt.DeviceToHost: 0, rt.HostToDevice: 1, rt.DeviceToDevice: 2}

// DeviceCount is xpu_device_count.
func (d *Device) DeviceCount() int {
	d.countOnce.Do(func() {
		if n, rc := ccall.OutInt(d.count); rc == 0 {
			d.n = n
		}
	})
	return d.n
}

// SetDevice is xpu_set_device (per thread).
func (d *Device) SetDevice(id int) error { return d.checkRT("set_device", ccall.Int(d.setDev, id)) }

// GetDevice is xpu_current_device.
func (d *Device) GetDevice() (int, error) {
	n, rc := ccall.OutInt(d.getDev)
	return n, d.checkRT("current_device", rc)
}

// SynchronizeDevice waits for device id's default stream (xpu_wait(NULL)
// waits for that one alone), then for every stream CreateStream made on
// it; the calling thread's device is left as it was.
func (d *Device) SynchronizeDevice(id int) error {
	prev, err := d.GetDevice()
	if err != nil {
		return err
	}
	if err := d.SetDevice(id); err != nil {
		return err
	}
	defer func() { _ = d.SetDevice(prev) }()
	if err := d.SynchronizeStream(0); err != nil {
		return err
	}
	d.streamsMu.RLock() // none is destroyed meanwhile
	defer d.streamsMu.RUnlock()
	for s, dev := range d.streams {
		if dev == id {
			if err := d.SynchronizeStream(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// CreateStream is xpu_stream_create, on the calling thread's device.
func (d *Device) CreateStream() (rt.Stream, error) {
	dev, err := d.GetDevice()
	if err != nil {
		return 0, err
	}
	s, rc := ccall.OutPtr(d.sCreate)
	if err := d.checkRT("stream_create", rc); err != nil {
		return 0, err
	}
	d.streamsMu.Lock()
	d.streams[rt.Stream(s)] = dev
	d.streamsMu.Unlock()
	return rt.Stream(s), nil
}

// DestroyStream is xpu_stream_destroy.
func (d *Device) DestroyStream(s rt.Stream) error {
	if s == 0 {
		return nil
	}
	// Forgotten first: a stream made next may get the same handle.
	d.streamsMu.Lock()
	dev, known := d.streams[s]
	delete(d.streams, s)
	d.streamsMu.Unlock()
	if err := d.checkRT("stream_destroy", ccall.Ptr(d.sDestroy, uintptr(s))); err != nil {
		if known {
			d.streamsMu.Lock()
			d.streams[s] = dev
			d.streamsMu.Unlock()
		}
		return err
	}
	return nil
}

// SynchronizeStream is xpu_wait.
func (d *Device) SynchronizeStream(s rt.Stream) error {
	return d.checkRT("wait", ccall.Ptr(d.wait, uintptr(s)))
}

// QueryStream waits, then reports done (XRE has no stream query here).
func (d *Device) QueryStream(s rt.Stream) error { return d.SynchronizeStream(s) }

// CreateEvent is xpu_event_create (or a placeholder event without it).
func (d *Device) CreateEvent() (rt.Event, error) {
	if d.eCreate == nil {
		return rt.Event(1), nil
	}
	e, rc := ccall.OutPtr(d.eCreate)
	return rt.Event(e), d.checkRT("event_create", rc)
}

// RecordEvent is xpu_event_record(event, stream), or a stream wait.
func (d *Device) RecordEvent(e rt.Event, s rt.Stream) error {
	if d.eRecord == nil {
		return d.SynchronizeStream(s)
	}
	return d.checkRT("event_record", ccall.PtrPtr(d.eRecord, uintptr(e), uintptr(s)))
}

// QueryEvent waits for the event, then reports done.
func (d *Device) QueryEvent(e rt.Event) error { return d.SynchronizeEvent(e) }

// SynchronizeEvent is xpu_event_wait when present.
func (d *Device) SynchronizeEvent(e rt.Event) error {
	if d.eWait == nil {
		return nil // recorded synchronously
	}
	return d.checkRT("event_wait", ccall.Ptr(d.eWait, uintptr(e)))
}

// DestroyEvent is xpu_event_destroy when present.
func (d *Device) DestroyEvent(e rt.Event) error {
	if d.eDestroy == nil {
		return nil
	}
	return d.checkRT("event_destroy", ccall.Ptr(d.eDestroy, uintptr(e)))
}

// StreamWaitEvent is xpu_stream_wait_event(stream, event) when present.
func (d *Device) StreamWaitEvent(s rt.Stream, e rt.Event) error {
	if d.streamWaitEvent == nil {
		return d.SynchronizeEvent(e)
	}
	return d.checkRT("stream_wait_event", ccall.PtrPtr(d.streamWaitEvent, uintptr(s), uintptr(e)))
}

// MemAlloc is xpu_malloc(XPU_MEM_MAIN).
func (d *Device) MemAlloc(dev, size int) (unsafe.Pointer, error) {
	p, rc := cMalloc(d.malloc, size)
	return p, d.checkRT("malloc", rc)
}

// MemFree is xpu_free.
func (d *Device) MemFree(dev int, p unsafe.Pointer, size int) error {
	return d.checkRT("free", ccall.Ptr(d.free, uintptr(p)))
}

// HostAlloc: XRE has no pinned allocator bound here.
func (d *Device) HostAlloc(int) (unsafe.Pointer, error) {
	return nil, rt.Errorf("kunlun: no pinned host allocator")
}

// HostFree: see HostAlloc.
func (d *Device) HostFree(unsafe.Pointer, int) error {
	return rt.Errorf("kunlun: no pinned host allocator")
}

// Memset copies a host pattern to the device (XRE has no memset here).
func (d *Device) Memset(dev int, p unsafe.Pointer, v byte, size int, s rt.Stream) error {
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = v
	}
	if size == 0 {
		return nil
	}
	if err := d.SynchronizeStream(s); err != nil {
		return err
	}
	return d.checkRT("memcpy", ccall.Copy(d.memcpy, uintptr(p), uintptr(unsafe.Pointer(&buf[0])), size, kinds[rt.HostToDevice]))
}

// Memcpy is xpu_memcpy, or xpu_memcpy_async on a stream when present.
func (d *Device) Memcpy(dev int, dst, src unsafe.Pointer, size int, kind rt.CopyKind, s rt.Stream) error {
	k := kinds[kind]
	if s == 0 || d.memcpyAsync == nil {
		if err := d.SynchronizeStream(s); err != nil {
			return err
		}
		return d.checkRT("memcpy", ccall.Copy(d.memcpy, uintptr(dst), uintptr(src), size, k))
	}
	return d.checkRT("memcpy_async", ccall.CopyAsync(d.memcpyAsync, uintptr(dst), uintptr(src), size, k, uintptr(s)))
}

// MemStats: XRE reports no free memory through the calls bound here.
func (d *Device) MemStats(int) (total, free uint64, err error) {
	return 0, 0, rt.Errorf("kunlun: memory statistics are not available")
}

// MinChunkSize is 64, the XPU allocation alignment Paddle uses.
func (d *Device) MinChunkSize(int) int { return 64 }

// AddCallback waits for the stream, then runs fn.
func (d *Device) AddCallback(s rt.Stream, fn func(error)) error {
	err := d.SynchronizeStream(s)
	fn(err)
	return err
}

// Axpby needs a kernel xccl does not have.
func (d *Device) Axpby(int, rt.Stream, rt.DataType, int, float32, unsafe.Pointer, float32, unsafe.Pointer) error {
	return rt.Errorf("kunlun: blas_axpby is not available (no kernels in xccl)")
}

var _ rt.Device = (*Device)(nil)
