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

// synapseRuntime is the Gaudi device runtime (SynapseAI, libSynapse.so).
// A device is acquired by module id; the calling thread's current device is
// remembered here. Synchronous copies go through a per-device internal
// stream. synDmaDir: HOST_TO_DRAM=0 DRAM_TO_HOST=1
// DRAM_TO_DRAM=2. Synapse's event calls (synEventCreate takes a device and
// flags) are not bound: the reference gives no confirmed signatures, so an
// event is a stream synchronization.
type synapseRuntime struct {
	lib *dl.Library

	initialize, count, acquire, sCreate, sSync, sDestroy, dMalloc, dFree, hMalloc, hFree, copy fn
	memInfo, devSync                                                                           fn

	mu       sync.Mutex
	acquired map[int]uint32  // module → synDeviceId
	current  map[int]int     // OS thread → module
	internal map[int]uintptr // module → stream for synchronous copies

	countOnce sync.Once
	n         int
}

func openSynapse(lib *dl.Library) (*synapseRuntime, error) {
	s := &synapseRuntime{lib: lib, acquired: map[int]uint32{}, current: map[int]int{}, internal: map[int]uintptr{}}
	if err := lib.Bind(map[string]*unsafe.Pointer{
		"synInitialize": &s.initialize, "synDeviceGetCount": &s.count, "synDeviceAcquireByModuleId": &s.acquire,
		"synStreamCreateGeneric": &s.sCreate, "synStreamSynchronize": &s.sSync, "synStreamDestroy": &s.sDestroy,
		"synDeviceMalloc": &s.dMalloc, "synDeviceFree": &s.dFree, "synHostMalloc": &s.hMalloc, "synHostFree": &s.hFree,
		"synMemCopyAsync": &s.copy,
	}, map[string]*unsafe.Pointer{"synDeviceGetMemoryInfo": &s.memInfo, "synDeviceSynchronize": &s.devSync}); err != nil {
		return nil, err
	}
	_ = ccall.Void(s.initialize) // a second initialization is not an error for us
	return s, nil
}

func (s *synapseRuntime) check(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	return rt.Failedf("intelxpu: syn%s returned %d", what, rc)
}

// Libraries names libSynapse.
func (s *synapseRuntime) Libraries() string { return s.lib.Name }

func (s *synapseRuntime) DeviceCount() int {
	s.countOnce.Do(func() {
		if n, rc := ccall.OutInt(s.count); rc == 0 {
			s.n = n
		}
	})
	return s.n
}

// device returns the synDeviceId of module, acquiring it once.
func (s *synapseRuntime) device(module int) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.acquired[module]; ok {
		return id, nil
	}
	id, rc := cAcquire(s.acquire, module)
	if err := s.check("DeviceAcquireByModuleId", rc); err != nil {
		return 0, err
	}
	s.acquired[module] = id
	return id, nil
}

func (s *synapseRuntime) currentDevice() (uint32, int, error) {
	m, _ := s.GetDevice()
	id, err := s.device(m)
	return id, m, err
}

func (s *synapseRuntime) SetDevice(module int) error {
	if module < 0 || module >= s.DeviceCount() {
		return rt.Errorf("intelxpu: device %d out of range [0, %d)", module, s.DeviceCount())
	}
	if _, err := s.device(module); err != nil {
		return err
	}
	s.mu.Lock()
	s.current[unix.Gettid()] = module
	s.mu.Unlock()
	return nil
}

func (s *synapseRuntime) GetDevice() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current[unix.Gettid()], nil
}

// SynchronizeDevice is synDeviceSynchronize: every stream of the device
// (HCCL's and the framework's too), as Paddle's intel_hpu calls it; a
// Synapse without it synchronizes the internal stream.
func (s *synapseRuntime) SynchronizeDevice(module int) error {
	if s.devSync != nil {
		dev, err := s.device(module)
		if err != nil {
			return err
		}
		return s.check("DeviceSynchronize", ccall.Int(s.devSync, int(dev)))
	}
	st, err := s.internalStream(module)
	if err != nil {
		return err
	}
	return s.SynchronizeStream(rt.Stream(st))
}

func (s *synapseRuntime) internalStream(module int) (uintptr, error) {
	dev, err := s.device(module)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.internal[module]; ok {
		return st, nil
	}
	st, rc := cStreamCreate(s.sCreate, dev)
	if err := s.check("StreamCreateGeneric", rc); err != nil {
		return 0, err
	}
	s.internal[module] = st
	return st, nil
}

var _ ncclshape.NullStreamer = (*synapseRuntime)(nil)

// NullStream is device module's internal stream: the one NULL-stream
// copies there use, and HCCL's calls on the NULL stream (HCCL refuses a
// NULL stream; ncclshape.NullStreamer).
func (s *synapseRuntime) NullStream(module int) (rt.Stream, error) {
	st, err := s.internalStream(module)
	return rt.Stream(st), err
}

func (s *synapseRuntime) CreateStream() (rt.Stream, error) {
	dev, _, err := s.currentDevice()
	if err != nil {
		return 0, err
	}
	st, rc := cStreamCreate(s.sCreate, dev)
	return rt.Stream(st), s.check("StreamCreateGeneric", rc)
}

func (s *synapseRuntime) DestroyStream(st rt.Stream) error {
	if st == 0 {
		return nil
	}
	return s.check("StreamDestroy", ccall.Ptr(s.sDestroy, uintptr(st)))
}

func (s *synapseRuntime) SynchronizeStream(st rt.Stream) error {
	if st == 0 {
		_, m, err := s.currentDevice()
		if err != nil {
			return err
		}
		internal, err := s.internalStream(m)
		if err != nil {
			return err
		}
		st = rt.Stream(internal)
	}
	return s.check("StreamSynchronize", ccall.Ptr(s.sSync, uintptr(st)))
}

func (s *synapseRuntime) QueryStream(st rt.Stream) error { return s.SynchronizeStream(st) }

// Events are stream synchronizations (see the type's comment).
func (s *synapseRuntime) CreateEvent() (rt.Event, error) { return rt.Event(1), nil }

func (s *synapseRuntime) RecordEvent(_ rt.Event, st rt.Stream) error { return s.SynchronizeStream(st) }

func (s *synapseRuntime) QueryEvent(rt.Event) error { return nil }

func (s *synapseRuntime) SynchronizeEvent(rt.Event) error { return nil }

func (s *synapseRuntime) DestroyEvent(rt.Event) error { return nil }

func (s *synapseRuntime) StreamWaitEvent(rt.Stream, rt.Event) error { return nil }

func (s *synapseRuntime) MemAlloc(module, size int) (unsafe.Pointer, error) {
	dev, err := s.device(module)
	if err != nil {
		return nil, err
	}
	addr, rc := cDevMalloc(s.dMalloc, dev, size)
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr)), s.check("DeviceMalloc", rc)
}

func (s *synapseRuntime) MemFree(module int, p unsafe.Pointer, size int) error {
	dev, err := s.device(module)
	if err != nil {
		return err
	}
	return s.check("DeviceFree", cDevFree(s.dFree, dev, uint64(uintptr(p))))
}

func (s *synapseRuntime) HostAlloc(size int) (unsafe.Pointer, error) {
	dev, _, err := s.currentDevice()
	if err != nil {
		return nil, err
	}
	p, rc := cHostMalloc(s.hMalloc, dev, size)
	return p, s.check("HostMalloc", rc)
}

func (s *synapseRuntime) HostFree(p unsafe.Pointer, size int) error {
	dev, _, err := s.currentDevice()
	if err != nil {
		return err
	}
	return s.check("HostFree", cHostFree(s.hFree, dev, p))
}

// Memset copies a host pattern in (no memset is bound).
func (s *synapseRuntime) Memset(module int, p unsafe.Pointer, v byte, size int, st rt.Stream) error {
	if size == 0 {
		return nil
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = v
	}
	if err := s.Memcpy(module, p, unsafe.Pointer(&buf[0]), size, rt.HostToDevice, 0); err != nil {
		return err
	}
	return s.SynchronizeStream(st)
}

var synDirs = map[rt.CopyKind]int{rt.HostToDevice: 0, rt.DeviceToHost: 1, rt.DeviceToDevice: 2}

// Memcpy is synMemCopyAsync; the NULL stream uses the device's internal
// stream and waits for it.
func (s *synapseRuntime) Memcpy(module int, dst, src unsafe.Pointer, size int, kind rt.CopyKind, st rt.Stream) error {
	sync := st == 0
	if sync {
		internal, err := s.internalStream(module)
		if err != nil {
			return err
		}
		st = rt.Stream(internal)
	}
	if err := s.check("MemCopyAsync", cCopy(s.copy, uintptr(st), uint64(uintptr(src)), uint64(size), uint64(uintptr(dst)), synDirs[kind])); err != nil {
		return err
	}
	if sync {
		return s.check("StreamSynchronize", ccall.Ptr(s.sSync, uintptr(st)))
	}
	return nil
}

func (s *synapseRuntime) MemStats(module int) (total, free uint64, err error) {
	if s.memInfo == nil {
		return 0, 0, rt.Errorf("intelxpu: synDeviceGetMemoryInfo is missing")
	}
	dev, err := s.device(module)
	if err != nil {
		return 0, 0, err
	}
	free, total, rc := cMemInfo(s.memInfo, dev)
	return total, free, s.check("DeviceGetMemoryInfo", rc)
}

func (s *synapseRuntime) MinChunkSize(int) int { return 128 }

func (s *synapseRuntime) AddCallback(st rt.Stream, fn func(error)) error {
	err := s.SynchronizeStream(st)
	fn(err)
	return err
}

func (s *synapseRuntime) Axpby(int, rt.Stream, rt.DataType, int, float32, unsafe.Pointer, float32, unsafe.Pointer) error {
	return rt.Errorf("intelxpu: blas_axpby is not available (no kernels in xccl)")
}
