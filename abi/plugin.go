package main

// The runtime entries of the Paddle CustomDevice table (plugin.c fills the
// table and points the xccl_* entries at the Xccl* exports). Device ids come
// in C_Device; a NULL C_Device means the calling thread's current device.

/*
#include "xccl_paddle.h"
void xccl_call_callback(C_Callback cb, int device, C_Stream stream, void* user_data, C_Status status);
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func devID(dev rt.Device, d C.C_Device) (int, error) {
	if d == nil {
		return dev.GetDevice()
	}
	return int(d.id), nil
}

// withDev runs f with the device and the device id d names.
func withDev(name string, d C.C_Device, f func(dev rt.Device, id int) error) C.C_Status {
	return call(name, func() error {
		dev, err := device()
		if err != nil {
			return err
		}
		id, err := devID(dev, d)
		if err != nil {
			return err
		}
		if id < 0 || id >= dev.DeviceCount() {
			return rt.Errorf("device %d out of range [0, %d)", id, dev.DeviceCount())
		}
		return f(dev, id)
	})
}

var (
	typeOnce            sync.Once
	devType, subDevType *C.char
)

//export xcclpDeviceTypes
func xcclpDeviceTypes(typ, sub **C.char) C.C_Status {
	return call("InitPlugin", func() error {
		dev, err := device()
		if err != nil {
			return err
		}
		typeOnce.Do(func() { // static strings, never freed: Paddle keeps them
			name := rt.Getenv("XCCL_PLUGIN_DEVICE_TYPE")
			if name == "" {
				name = "xccl_" + dev.Name()
			}
			devType = C.CString(name)
			subDevType = C.CString(fmt.Sprintf("xccl-%d.%d.%d-%s", xccl.VersionMajor, xccl.VersionMinor, xccl.VersionPatch, dev.Name()))
		})
		*typ, *sub = devType, subDevType
		return nil
	})
}

//export xcclpLogWarn
func xcclpLogWarn(msg *C.char) { rt.Log().Warn(C.GoString(msg)) }

// xcclpRefuse logs msg once, makes it the thread's last error and returns C_ERROR.
//
//export xcclpRefuse
func xcclpRefuse(msg *C.char) C.C_Status {
	m := C.GoString(msg)
	rt.Log().Warn(m)
	setLastError(m)
	return C.C_ERROR
}

//export xcclpInitialize
func xcclpInitialize() C.C_Status {
	return call("initialize", func() error { _, err := device(); return err })
}

//export xcclpFinalize
func xcclpFinalize() C.C_Status {
	return call("finalize", func() error { rt.SyncLog(); return nil })
}

//export xcclpInitDevice
func xcclpInitDevice(d C.C_Device) C.C_Status {
	return withDev("init_device", d, func(rt.Device, int) error { return nil })
}

//export xcclpDeinitDevice
func xcclpDeinitDevice(d C.C_Device) C.C_Status {
	return withDev("deinit_device", d, func(dev rt.Device, id int) error { return dev.SynchronizeDevice(id) })
}

//export xcclpSetDevice
func xcclpSetDevice(d C.C_Device) C.C_Status {
	if d == nil {
		return call("set_device", func() error { return rt.Errorf("device is NULL") })
	}
	return withDev("set_device", d, func(dev rt.Device, id int) error { return dev.SetDevice(id) })
}

//export xcclpGetDevice
func xcclpGetDevice(d C.C_Device) C.C_Status {
	return call("get_device", func() error {
		if d == nil {
			return rt.Errorf("device is NULL")
		}
		dev, err := device()
		if err != nil {
			return err
		}
		id, err := dev.GetDevice()
		d.id = C.int(id)
		return err
	})
}

//export xcclpSynchronizeDevice
func xcclpSynchronizeDevice(d C.C_Device) C.C_Status {
	return withDev("synchronize_device", d, func(dev rt.Device, id int) error { return dev.SynchronizeDevice(id) })
}

//export xcclpCreateStream
func xcclpCreateStream(d C.C_Device, s *C.C_Stream) C.C_Status {
	return withDev("create_stream", d, func(dev rt.Device, _ int) error {
		if s == nil {
			return rt.Errorf("stream is NULL")
		}
		h, err := dev.CreateStream()
		*s = streamHandle(h)
		return err
	})
}

//export xcclpDestroyStream
func xcclpDestroyStream(d C.C_Device, s C.C_Stream) C.C_Status {
	return withDev("destroy_stream", d, func(dev rt.Device, _ int) error { return dev.DestroyStream(stream(s)) })
}

// notReady maps "not ready" to C_FAILED without recording an error.
func notReady(name string, d C.C_Device, query func(dev rt.Device) error) C.C_Status {
	pending := false
	st := withDev(name, d, func(dev rt.Device, _ int) error {
		err := query(dev)
		if err == rt.ErrNotReady {
			pending = true
			return nil
		}
		return err
	})
	if pending {
		return C.C_FAILED
	}
	return st
}

//export xcclpQueryStream
func xcclpQueryStream(d C.C_Device, s C.C_Stream) C.C_Status {
	return notReady("query_stream", d, func(dev rt.Device) error { return dev.QueryStream(stream(s)) })
}

//export xcclpSynchronizeStream
func xcclpSynchronizeStream(d C.C_Device, s C.C_Stream) C.C_Status {
	return withDev("synchronize_stream", d, func(dev rt.Device, _ int) error { return dev.SynchronizeStream(stream(s)) })
}

//export xcclpStreamAddCallback
func xcclpStreamAddCallback(d C.C_Device, s C.C_Stream, cb C.C_Callback, ud unsafe.Pointer) C.C_Status {
	return withDev("stream_add_callback", d, func(dev rt.Device, id int) error {
		if cb == nil {
			return rt.Errorf("callback is NULL")
		}
		return dev.AddCallback(stream(s), func(err error) {
			C.xccl_call_callback(cb, C.int(id), s, ud, C.C_Status(rt.StatusOf(err)))
		})
	})
}

//export xcclpCreateEvent
func xcclpCreateEvent(d C.C_Device, e *C.C_Event) C.C_Status {
	return withDev("create_event", d, func(dev rt.Device, _ int) error {
		if e == nil {
			return rt.Errorf("event is NULL")
		}
		h, err := dev.CreateEvent()
		*e = eventHandle(h)
		return err
	})
}

//export xcclpRecordEvent
func xcclpRecordEvent(d C.C_Device, s C.C_Stream, e C.C_Event) C.C_Status {
	return withDev("record_event", d, func(dev rt.Device, _ int) error { return dev.RecordEvent(event(e), stream(s)) })
}

//export xcclpDestroyEvent
func xcclpDestroyEvent(d C.C_Device, e C.C_Event) C.C_Status {
	return withDev("destroy_event", d, func(dev rt.Device, _ int) error { return dev.DestroyEvent(event(e)) })
}

//export xcclpQueryEvent
func xcclpQueryEvent(d C.C_Device, e C.C_Event) C.C_Status {
	return notReady("query_event", d, func(dev rt.Device) error { return dev.QueryEvent(event(e)) })
}

//export xcclpSynchronizeEvent
func xcclpSynchronizeEvent(d C.C_Device, e C.C_Event) C.C_Status {
	return withDev("synchronize_event", d, func(dev rt.Device, _ int) error { return dev.SynchronizeEvent(event(e)) })
}

//export xcclpStreamWaitEvent
func xcclpStreamWaitEvent(d C.C_Device, s C.C_Stream, e C.C_Event) C.C_Status {
	return withDev("stream_wait_event", d, func(dev rt.Device, _ int) error { return dev.StreamWaitEvent(stream(s), event(e)) })
}

//export xcclpMemAlloc
func xcclpMemAlloc(d C.C_Device, p *unsafe.Pointer, size C.size_t, host C.int) C.C_Status {
	return withDev("memory_allocate", d, func(dev rt.Device, id int) error {
		if p == nil {
			return rt.Errorf("ptr is NULL")
		}
		n, err := toInt("size", size)
		if err != nil {
			return err
		}
		if host != 0 {
			*p, err = dev.HostAlloc(n)
		} else {
			// Paddle's allocator asks for each tensor's bytes (no chunks
			// by default): the host device's are then shared at every
			// size, so that collectives on them copy once (XcclMemAlloc's).
			*p, err = rt.TensorMemAlloc(dev, id, n)
		}
		return err
	})
}

//export xcclpMemFree
func xcclpMemFree(d C.C_Device, p unsafe.Pointer, size C.size_t, host C.int) C.C_Status {
	return withDev("memory_deallocate", d, func(dev rt.Device, id int) error {
		if host != 0 {
			return dev.HostFree(p, int(size))
		}
		return dev.MemFree(id, p, int(size))
	})
}

//export xcclpMemSet
func xcclpMemSet(d C.C_Device, p unsafe.Pointer, v C.uchar, size C.size_t) C.C_Status {
	return withDev("device_memory_set", d, func(dev rt.Device, id int) error {
		n, err := toInt("size", size)
		if err != nil {
			return err
		}
		if n > 0 && p == nil {
			return rt.Errorf("ptr is NULL")
		}
		return dev.Memset(id, p, byte(v), n, 0)
	})
}

//export xcclpCopy
func xcclpCopy(d C.C_Device, s C.C_Stream, dst, src unsafe.Pointer, size C.size_t, kind C.int) C.C_Status {
	return withDev("memory_copy", d, func(dev rt.Device, id int) error {
		n, err := toInt("size", size)
		if err != nil {
			return err
		}
		return dev.Memcpy(id, dst, src, n, rt.CopyKind(kind), stream(s))
	})
}

//export xcclpDeviceCount
func xcclpDeviceCount(count *C.size_t) C.C_Status {
	return call("get_device_count", func() error {
		if count == nil {
			return rt.Errorf("count is NULL")
		}
		dev, err := device()
		if err != nil {
			return err
		}
		*count = C.size_t(dev.DeviceCount())
		return nil
	})
}

//export xcclpDeviceList
func xcclpDeviceList(list *C.size_t) C.C_Status {
	return call("get_device_list", func() error {
		if list == nil {
			return rt.Errorf("devices is NULL")
		}
		dev, err := device()
		if err != nil {
			return err
		}
		ids := unsafe.Slice(list, dev.DeviceCount())
		for i := range ids {
			ids[i] = C.size_t(i)
		}
		return nil
	})
}

//export xcclpMemStats
func xcclpMemStats(d C.C_Device, total, free *C.size_t) C.C_Status {
	return withDev("device_memory_stats", d, func(dev rt.Device, id int) error {
		if total == nil || free == nil {
			return rt.Errorf("total or free is NULL")
		}
		t, f, err := dev.MemStats(id)
		*total, *free = C.size_t(t), C.size_t(f)
		return err
	})
}

//export xcclpMinChunkSize
func xcclpMinChunkSize(d C.C_Device, size *C.size_t) C.C_Status {
	return withDev("device_min_chunk_size", d, func(dev rt.Device, id int) error {
		if size == nil {
			return rt.Errorf("size is NULL")
		}
		*size = C.size_t(dev.MinChunkSize(id))
		return nil
	})
}

// xcclpInfo answers the info entries: what 0 compute capability, 1 runtime
// version, 2 driver version, 3 multiprocessors (CPUs on the host device).
//
//export xcclpInfo
func xcclpInfo(d C.C_Device, what C.int, v *C.size_t) C.C_Status {
	return call("get_info", func() error {
		if v == nil {
			return rt.Errorf("value is NULL")
		}
		switch what {
		case 0:
			*v = 0
		case 1, 2:
			*v = C.size_t(xccl.VersionCode())
		case 3:
			*v = C.size_t(runtime.NumCPU())
		default:
			return rt.Errorf("unknown info %d", int(what))
		}
		return nil
	})
}

//export xcclpCommName
func xcclpCommName(comm C.C_CCLComm, name *C.char) C.C_Status {
	return call("xccl_get_comm_name", func() error {
		if name == nil {
			return rt.Errorf("comm_name is NULL")
		}
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		s := fmt.Sprintf("xccl-%s-%p-rank%d-of%d", c.Device().Name(), comm, c.Rank(), c.Size())
		if len(s) > 127 {
			s = s[:127]
		}
		b := unsafe.Slice((*byte)(unsafe.Pointer(name)), len(s)+1)
		copy(b, s)
		b[len(s)] = 0
		return nil
	})
}

//export xcclpAxpby
func xcclpAxpby(d C.C_Device, s C.C_Stream, dt C.C_DataType, n C.size_t, alpha C.float, x unsafe.Pointer, beta C.float, y unsafe.Pointer) C.C_Status {
	return withDev("blas_axpby", d, func(dev rt.Device, id int) error {
		count, err := toInt("numel", n)
		if err != nil {
			return err
		}
		return dev.Axpby(id, stream(s), dtype(dt), count, float32(alpha), x, float32(beta), y)
	})
}
