package runtime

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"go.uber.org/zap"
)

// Stream is a device stream handle as the caller holds it. 0 is the NULL
// stream: the vendor's default stream, or synchronous execution on the host.
type Stream uintptr

// Event is a device event handle.
type Event uintptr

// OpKind names a collective or point-to-point operation.
type OpKind int

const (
	OpAllReduce OpKind = iota
	OpBroadcast
	OpReduce
	OpAllGather
	OpReduceScatter
	OpSend
	OpRecv
	OpAllToAll
)

var opKindNames = [...]string{"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "Send", "Recv", "AllToAll"}

func (k OpKind) String() string {
	if k < 0 || int(k) >= len(opKindNames) {
		return fmt.Sprintf("OpKind(%d)", int(k))
	}
	return opKindNames[k]
}

// Op is one call, fully described; groups are lists of Ops. Pointers are
// device addresses (host addresses on the host device) and are never
// dereferenced by xccl outside the device that owns them.
type Op struct {
	Kind   OpKind
	Comm   Comm
	Send   unsafe.Pointer
	Recv   unsafe.Pointer
	Count  int
	Type   DataType
	Red    ReduceOp
	Root   int // root for Broadcast/Reduce, peer for Send/Recv
	Stream Stream

	// AllToAll: one entry per rank (the self entry included).
	SendBufs, RecvBufs     []unsafe.Pointer
	SendCounts, RecvCounts []int
	SendTypes, RecvTypes   []DataType

	// PreMul is set, by package xccl, where Red is one of the
	// communicator's pre-multiplied sums (AllReduce, Reduce, ReduceScatter).
	PreMul *PreMul

	// Batch, on an OpAllReduce, lists all-reduces of one Type, Red and
	// Stream to run as one: packed into one buffer, reduced once, unpacked.
	// Count is their total. Only a Comm that is a Fuser gets one.
	Batch []*Op
}

// Fuser is a Comm that runs fused all-reduces (Op.Batch) itself; package
// xccl runs the batch as a group on other devices.
type Fuser interface {
	Comm
	CanFuse() bool
}

// Comm is a communicator of one device. Arguments are validated by package
// xccl before they reach a Comm.
type Comm interface {
	Rank() int
	Size() int
	Device() string
	// Run executes one operation on op.Stream.
	Run(op *Op) error
	// Destroy releases the communicator after pending work completes.
	Destroy() error
	// Abort breaks the communicator at once: pending and later calls fail.
	Abort()
	// AsyncError reports an error raised by work already enqueued.
	AsyncError() error
}

// Finalizer is a Comm that completes its work on request, as
// ncclCommFinalize: Finalize returns once every operation issued on the
// communicator is done (an error if one failed or some are still pending
// when its wait ends), and frees nothing; Destroy then does.
type Finalizer interface {
	Finalize() error
}

// PreMul is a pre-multiplied sum, as ncclRedOpCreatePreMulSum makes: each
// rank multiplies its input by its scalar, then the products are summed.
// Never changed once made: queued operations keep it.
type PreMul struct {
	Type DataType // the only type it reduces
	// Device: the scalar is device memory at Scalar, read when each
	// operation runs (ncclScalarDevice); else Value holds its bytes, read
	// when it was made (ncclScalarHostImmediate).
	Device bool
	Scalar unsafe.Pointer
	Value  [16]byte
	Handle uintptr // the device communicator's own (a library's op); 0 on the host device
}

// ScalarBytes is the scalar's bytes where they are host memory (Value, or
// Scalar on the host device).
func (p *PreMul) ScalarBytes() []byte {
	if p.Device {
		return unsafe.Slice((*byte)(p.Scalar), p.Type.Size())
	}
	return p.Value[:p.Type.Size()]
}

// PreMulSummer is a Comm that runs pre-multiplied sums: Create makes the
// device's own for p (its Handle), Destroy undoes it.
type PreMulSummer interface {
	CreatePreMulSum(p *PreMul) (uintptr, error)
	DestroyPreMulSum(handle uintptr) error
}

// Registrar is a Comm whose library registers buffers, as
// ncclCommRegister: Register returns the library's handle, 0 where the
// library has no registration (nothing to undo); Deregister undoes one.
type Registrar interface {
	Register(buf unsafe.Pointer, size int) (uintptr, error)
	Deregister(handle uintptr) error
}

// CCL is the collective-communication half of a device.
type CCL interface {
	// UniqueIDSize is the fixed size of this device's unique id in bytes.
	UniqueIDSize() int
	// NewUniqueID makes a fresh id (on rank 0) for a new communicator.
	NewUniqueID() ([]byte, error)
	// CommInitRank joins rank of nranks to the communicator named by id.
	CommInitRank(nranks int, id []byte, rank int) (Comm, error)
	// RunGroup executes ops issued between GroupStart and GroupEnd as a
	// unit: point-to-point ops inside it never deadlock on their order.
	RunGroup(ops []*Op) error
	// Supports reports whether dtype × op is reducible on this device; an
	// error explains the refusal.
	Supports(dt DataType, op ReduceOp) error
}

// CopyKind says which way a copy goes.
type CopyKind int

const (
	HostToDevice CopyKind = iota
	DeviceToHost
	DeviceToDevice
)

// Runtime is the device/stream/event/memory half of a device. Device ids
// are dense, 0..DeviceCount()-1. Calls that bind a device act on the
// calling OS thread, as the vendor runtimes do.
type Runtime interface {
	DeviceCount() int
	// SetDevice makes id the calling thread's current device.
	SetDevice(id int) error
	// GetDevice is the calling thread's current device (0 by default).
	GetDevice() (int, error)
	SynchronizeDevice(id int) error

	MemAlloc(dev, size int) (unsafe.Pointer, error)
	MemFree(dev int, p unsafe.Pointer, size int) error
	HostAlloc(size int) (unsafe.Pointer, error)
	HostFree(p unsafe.Pointer, size int) error
	// Memset and Memcpy run on stream s (synchronously for the NULL stream).
	Memset(dev int, p unsafe.Pointer, value byte, size int, s Stream) error
	Memcpy(dev int, dst, src unsafe.Pointer, size int, kind CopyKind, s Stream) error
	// MemStats reports total and free device memory in bytes.
	MemStats(dev int) (total, free uint64, err error)
	// MinChunkSize is the allocation alignment the framework should use.
	MinChunkSize(dev int) int
	// AddCallback runs fn on the host once the stream's earlier work is done.
	AddCallback(s Stream, fn func(error)) error
	// Axpby computes y = alpha*x + beta*y for n elements of dt, on stream s.
	Axpby(dev int, s Stream, dt DataType, n int, alpha float32, x unsafe.Pointer, beta float32, y unsafe.Pointer) error

	CreateStream() (Stream, error)
	DestroyStream(Stream) error
	SynchronizeStream(Stream) error
	// QueryStream returns nil when all work is done, ErrNotReady otherwise.
	QueryStream(Stream) error
	CreateEvent() (Event, error)
	RecordEvent(Event, Stream) error
	QueryEvent(Event) error
	SynchronizeEvent(Event) error
	DestroyEvent(Event) error
	StreamWaitEvent(Stream, Event) error
}

// CommMemAllocator is a runtime with memory made for communication, as
// ncclMemAlloc's: the host device's is shared with the peers on its machine
// at every size; NCCL-shaped devices' is their library's <ccl>MemAlloc.
// MemFree frees it. Without it, MemAlloc serves.
type CommMemAllocator interface {
	CommMemAlloc(dev, size int) (unsafe.Pointer, error)
}

// SmallCommMem is a CommMemAllocator whose allocations cost what
// MemAlloc's do at every size (the host device's arenas), so that an
// allocator of every tensor may use it. ncclMemAlloc's take at least the
// driver's granularity (2 MiB) each.
type SmallCommMem interface {
	CommMemAllocator
	SmallCommMem()
}

// TensorMemAlloc is the memory for any tensor (Paddle's
// device_memory_allocate): d's communication memory where it is
// SmallCommMem, else its MemAlloc.
func TensorMemAlloc(d Device, dev, size int) (unsafe.Pointer, error) {
	if a, ok := d.(SmallCommMem); ok {
		return a.CommMemAlloc(dev, size)
	}
	return d.MemAlloc(dev, size)
}

// CommMemAlloc is d's communication memory (CommMemAllocator) where it
// has some, else its MemAlloc: size bytes of device dev.
func CommMemAlloc(d Device, dev, size int) (unsafe.Pointer, error) {
	if a, ok := d.(CommMemAllocator); ok {
		return a.CommMemAlloc(dev, size)
	}
	return d.MemAlloc(dev, size)
}

// HostRegisterer is a runtime that can pin host memory it did not allocate
// (cudaHostRegister's kind), so that its copies to and from it run at the
// speed of its own pinned memory. The mixed communicator stages through
// host-device memory registered so: the host engine's peers can map it.
type HostRegisterer interface {
	// CanRegisterHost says whether HostRegister can work at all (the
	// runtime has the entry points).
	CanRegisterHost() bool
	HostRegister(p unsafe.Pointer, size int) error
	HostUnregister(p unsafe.Pointer) error
}

// Device is what a device package registers.
type Device interface {
	Name() string
	CCL
	Runtime
}

// ErrNotReady is returned by QueryStream/QueryEvent for pending work.
var ErrNotReady = &Error{Status: StatusFailed, Msg: "not ready"}

var (
	regMu   sync.Mutex
	devices = map[string]func() (Device, error){}
)

// Register makes a device available under name; devices call it from init.
func Register(name string, open func() (Device, error)) {
	regMu.Lock()
	defer regMu.Unlock()
	devices[name] = open
}

// Registered lists registered device names.
func Registered() []string {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]string, 0, len(devices))
	for n := range devices {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var (
	openMu sync.Mutex
	opened = map[string]Device{}
)

// preference is the order "auto" tries devices in; host is the fallback.
// Iluvatar CoreX and T-Head PPU come before nvidia: their libraries carry
// NCCL's and CUDA's names, so on their machines the nvidia device may load
// them too (through LD_LIBRARY_PATH); those two devices load only from
// their vendors' install paths, so they answer only on their own machines
// and, taken first, name the device right. MetaX and Moore Threads share
// libmccl.so; each also needs its own runtime (libmcruntime.so,
// libmusart.so), which tells them apart whatever the order.
var preference = []string{"iluvatar", "ppu", "nvidia", "dcu", "metax", "musa", "ascend", "mlu", "kunlun", "gcu", "intelxpu"}

// ProbeResult says whether a device is usable here, and why or why not.
type ProbeResult struct {
	Name    string
	OK      bool
	Devices int
	Detail  string
}

// Probe tries every registered vendor device in preference order, then
// the host device.
func Probe() []ProbeResult {
	var out []ProbeResult
	names := Registered()
	order := append([]string(nil), preference...)
	for _, n := range names {
		if n != "host" && !contains(order, n) {
			order = append(order, n)
		}
	}
	order = append(order, "host")
	for _, n := range order {
		if !contains(names, n) {
			continue
		}
		d, err := open(n)
		switch {
		case err != nil:
			out = append(out, ProbeResult{Name: n, Detail: err.Error()})
		case d.DeviceCount() == 0:
			out = append(out, ProbeResult{Name: n, Detail: "libraries load, but report no device"})
		default:
			detail := "ready"
			if l, ok := d.(interface{ Libraries() string }); ok {
				detail = "loaded " + l.Libraries()
			}
			out = append(out, ProbeResult{Name: n, OK: true, Devices: d.DeviceCount(), Detail: detail})
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CapabilityMatrix lists, per data type, the reduce ops d supports.
func CapabilityMatrix(d Device) string {
	var b strings.Builder
	for _, dt := range AllDataTypes() {
		var ops []string
		for _, op := range AllReduceOps() {
			if d.Supports(dt, op) == nil {
				ops = append(ops, op.String())
			}
		}
		if len(ops) == 0 {
			ops = []string{"-"}
		}
		fmt.Fprintf(&b, "%-10s %s\n", dt, strings.Join(ops, " "))
	}
	b.WriteString(SelfP2PMode(d).String() + "\n")
	return b.String()
}

// Algorithms explains how d picks its algorithms: a device that chooses
// them itself says so (Algorithms() string); a vendor library picks its own.
func Algorithms(d Device) string {
	if a, ok := d.(interface{ Algorithms() string }); ok {
		return a.Algorithms()
	}
	return fmt.Sprintf("%s: the vendor library picks its algorithms (see its own tuning variables)\n", d.Name())
}

// Open returns the device registered under name, opening it once. "auto"
// (or "", meaning XCCL_DEVICE) probes the vendors in preference order and
// falls back to the host device, logging why each was or was not taken.
func Open(name string) (Device, error) {
	if name == "" {
		if d := chosen.Load(); d != nil {
			return d.dev, nil
		}
		return openDefault()
	}
	if name != "auto" {
		return open(name)
	}
	autoOnce.Do(func() {
		for _, r := range Probe() {
			if r.OK && autoName == "" {
				autoName = r.Name
				Log().Info("XCCL_DEVICE=auto picked a device", zap.String("device", r.Name), zap.Int("devices", r.Devices), zap.String("why", r.Detail))
				continue
			}
			Log().Info("XCCL_DEVICE=auto passed over a device", zap.String("device", r.Name), zap.String("why", r.Detail))
		}
	})
	if autoName == "" {
		return nil, Failedf("XCCL_DEVICE=auto found no usable device")
	}
	return open(autoName)
}

var (
	autoOnce sync.Once
	autoName string
)

// The process's device (Open("")): XCCL_DEVICE as it is at the first
// successful Open(""), not when the configuration was first read, so a
// host (Python) may set it after loading the library and making an id, up
// to its first communicator. Then it stays.
type choice struct {
	dev         Device
	asked, name string // XCCL_DEVICE then, and the device it named
}

var (
	chosenMu sync.Mutex
	chosen   atomic.Pointer[choice]
)

// deviceEnv is XCCL_DEVICE now (default auto); the one place it is read.
func deviceEnv() string { return strings.ToLower(envOr("XCCL_DEVICE", "auto")) }

func openDefault() (Device, error) {
	chosenMu.Lock()
	defer chosenMu.Unlock()
	if d := chosen.Load(); d != nil {
		return d.dev, nil
	}
	asked := deviceEnv()
	d, err := Open(asked)
	if err != nil {
		return nil, err // not kept: a later call may find the device
	}
	chosen.Store(&choice{dev: d, asked: asked, name: d.Name()})
	return d, nil
}

// CheckDeviceChoice fails when XCCL_DEVICE now names another device than
// the one the process chose at its first Open(""): a process has one
// device, and a communicator asked for on another must not silently run on
// it. "auto", or nothing chosen yet, passes.
func CheckDeviceChoice() error {
	d := chosen.Load()
	if d == nil {
		return nil
	}
	now := deviceEnv()
	if now == "auto" || now == d.asked || now == d.name {
		return nil
	}
	return Errorf("XCCL_DEVICE is %q, but this process already uses device %q (XCCL_DEVICE=%q at its first use): "+
		"a process has one device, chosen before its first communicator", now, d.name, d.asked)
}

func open(name string) (Device, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if d, ok := opened[name]; ok {
		return d, nil
	}
	regMu.Lock()
	mk, ok := devices[name]
	regMu.Unlock()
	if !ok {
		return nil, Errorf("unknown device %q (registered: %v)", name, Registered())
	}
	d, err := mk()
	if err != nil {
		return nil, WrapFailed(err, "open device %q", name)
	}
	opened[name] = d
	return d, nil
}

// LaunchRooter is implemented by the host engine: the unique id the ranks
// of a job started by a launcher (mpirun, srun, torchrun) derive alike —
// root address, job id and secret agreed from the environment — and, on
// rank 0 (serve), its bootstrap root served.
type LaunchRooter interface {
	LaunchID(root string, job uint64, secret [32]byte, serve bool) ([]byte, error)
}
