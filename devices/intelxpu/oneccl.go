package intelxpu

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xccl-project/xccl/devices/internal/ccall"
	"github.com/xccl-project/xccl/devices/internal/dl"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

var onecclLibs = []string{"libccl.so.2", "libccl.so"}

// zeInitGPUOnly is ZE_INIT_FLAG_GPU_ONLY: Level Zero counts GPUs, not NPUs.
const zeInitGPUOnly = 1

// OneCCLSpec is oneCCL's C API (the oneccl* names of include/oneapi/ccl.h,
// oneCCL 2021.17 and later, in libccl.so.2; libccl.so is the C++ API):
// NCCL-shaped, with NCCL's dtype and op numbering, a 4096-byte unique id by
// value and size_t nranks. Its result codes differ from NCCL's except for
// InvalidArgument=4 and InvalidUsage=5, which are the ones xccl tells apart.
// The stream is a sycl::queue* the framework owns (NULL for host buffers).
// The header marks onecclCommAbort and onecclCommGetAsyncError (which takes
// only the communicator) CCL_C_NOT_IMPLEMENTED: neither is bound, so Abort
// breaks the communicator and Destroy frees it. onecclCommFinalize,
// onecclCommRegister and onecclMemAlloc are exported and answer
// onecclNotImplemented where the backend lacks them (the header still marks
// Finalize CCL_C_NOT_IMPLEMENTED): bound, and that answer means absent.
var OneCCLSpec = ncclshape.Spec{
	Name: "intelxpu", Vendor: "oneCCL",
	CCLEnv: "XCCL_ONECCL_LIBRARY", CCLLibs: onecclLibs, CCL: "oneccl",
	IDSize: 4096, SizeTRanks: true, DTypes: ncclshape.NCCLDataTypes, Ops: ncclshape.NCCLOps, ByteType: 0,
	Unimplemented:  []string{"onecclCommAbort", "onecclCommGetAsyncError"},
	NotImplemented: 12, // onecclNotImplemented: a backend without finalize or registration
	InProgress:     6,  // onecclInProgress
	Runtime:        openLevelZero,
}

// levelZeroRuntime counts Intel GPUs through Level Zero and binds the
// calling thread's device with onecclSetDevice. Streams, events and memory
// belong to SYCL, which a C library cannot create: those entries are
// refused with C_ERROR, and the NULL stream is always idle.
type levelZeroRuntime struct {
	ze, ccl                            *dl.Library
	zeInit, driverGet, deviceGet, setD fn

	mu      sync.Mutex
	current map[int]int

	countOnce sync.Once
	n         int
}

func openLevelZero() (ncclshape.Runtime, error) {
	l := &levelZeroRuntime{current: map[int]int{}}
	var err error
	if l.ze, err = dl.Open("XCCL_LEVELZERO_LIBRARY", "libze_loader.so.1", "libze_loader.so"); err != nil {
		return nil, err
	}
	if l.ccl, err = dl.Open("XCCL_ONECCL_LIBRARY", onecclLibs...); err != nil {
		return nil, err
	}
	if err = l.ze.Bind(map[string]*unsafe.Pointer{"zeInit": &l.zeInit, "zeDriverGet": &l.driverGet, "zeDeviceGet": &l.deviceGet}, nil); err != nil {
		return nil, err
	}
	if err = l.ccl.Bind(map[string]*unsafe.Pointer{"onecclSetDevice": &l.setD}, nil); err != nil {
		return nil, err
	}
	if rc := ccall.Int(l.zeInit, zeInitGPUOnly); rc != 0 {
		return nil, rt.Failedf("intelxpu: zeInit returned %#x", rc)
	}
	return l, nil
}

func (l *levelZeroRuntime) Libraries() string { return l.ze.Name }

// DeviceCount sums the devices of every Level Zero driver.
func (l *levelZeroRuntime) DeviceCount() int {
	l.countOnce.Do(func() {
		var nd uint32
		if ccall.PtrPtr(l.driverGet, uintptr(unsafe.Pointer(&nd)), 0) != 0 || nd == 0 {
			return
		}
		drivers := make([]uintptr, nd)
		if ccall.PtrPtr(l.driverGet, uintptr(unsafe.Pointer(&nd)), uintptr(unsafe.Pointer(&drivers[0]))) != 0 {
			return
		}
		for _, drv := range drivers[:nd] {
			var n uint32
			if cDeviceGet(l.deviceGet, drv, &n) == 0 {
				l.n += int(n)
			}
		}
	})
	return l.n
}

func (l *levelZeroRuntime) SetDevice(id int) error {
	if rc := ccall.Int(l.setD, id); rc != 0 {
		return rt.Failedf("intelxpu: onecclSetDevice(%d) returned %d", id, rc)
	}
	l.mu.Lock()
	l.current[unix.Gettid()] = id
	l.mu.Unlock()
	return nil
}

func (l *levelZeroRuntime) GetDevice() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current[unix.Gettid()], nil
}

func sycl(what string) error {
	return rt.Errorf("intelxpu (oneCCL): %s needs SYCL, which xccl cannot drive; use the framework's queue and memory", what)
}

func (l *levelZeroRuntime) SynchronizeDevice(int) error         { return sycl("synchronize_device") }
func (l *levelZeroRuntime) CreateStream() (rt.Stream, error)    { return 0, sycl("create_stream") }
func (l *levelZeroRuntime) DestroyStream(s rt.Stream) error     { return idle(s, "destroy_stream") }
func (l *levelZeroRuntime) SynchronizeStream(s rt.Stream) error { return idle(s, "synchronize_stream") }
func (l *levelZeroRuntime) QueryStream(s rt.Stream) error       { return idle(s, "query_stream") }
func (l *levelZeroRuntime) CreateEvent() (rt.Event, error)      { return 0, sycl("create_event") }
func (l *levelZeroRuntime) RecordEvent(rt.Event, rt.Stream) error {
	return sycl("record_event")
}
func (l *levelZeroRuntime) QueryEvent(rt.Event) error       { return sycl("query_event") }
func (l *levelZeroRuntime) SynchronizeEvent(rt.Event) error { return sycl("synchronize_event") }
func (l *levelZeroRuntime) DestroyEvent(rt.Event) error     { return sycl("destroy_event") }
func (l *levelZeroRuntime) StreamWaitEvent(rt.Stream, rt.Event) error {
	return sycl("stream_wait_event")
}
func (l *levelZeroRuntime) MemAlloc(int, int) (unsafe.Pointer, error) {
	return nil, sycl("memory_allocate")
}
func (l *levelZeroRuntime) MemFree(int, unsafe.Pointer, int) error { return sycl("memory_deallocate") }
func (l *levelZeroRuntime) HostAlloc(int) (unsafe.Pointer, error) {
	return nil, sycl("host_memory_allocate")
}
func (l *levelZeroRuntime) HostFree(unsafe.Pointer, int) error { return sycl("host_memory_deallocate") }
func (l *levelZeroRuntime) MemStats(int) (uint64, uint64, error) {
	return 0, 0, sycl("device_memory_stats")
}
func (l *levelZeroRuntime) MinChunkSize(int) int { return 256 }
func (l *levelZeroRuntime) AddCallback(rt.Stream, func(error)) error {
	return sycl("stream_add_callback")
}
func (l *levelZeroRuntime) Memset(int, unsafe.Pointer, byte, int, rt.Stream) error {
	return sycl("device_memory_set")
}
func (l *levelZeroRuntime) Memcpy(int, unsafe.Pointer, unsafe.Pointer, int, rt.CopyKind, rt.Stream) error {
	return sycl("memory_copy")
}
func (l *levelZeroRuntime) Axpby(int, rt.Stream, rt.DataType, int, float32, unsafe.Pointer, float32, unsafe.Pointer) error {
	return sycl("blas_axpby")
}

// idle: the NULL stream (host buffers) has nothing pending.
func idle(s rt.Stream, what string) error {
	if s == 0 {
		return nil
	}
	return sycl(what)
}
