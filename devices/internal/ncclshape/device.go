// Package ncclshape is the forwarder written once for every NCCL-shaped
// vendor: NVIDIA NCCL + CUDA runtime, AMD/Hygon RCCL + HIP, MetaX MCCL +
// MACA, Moore Threads MCCL + MUSA, Iluvatar CoreX and T-Head PPU (NCCL and
// CUDA names), Enflame ECCL + TOPS, Gaudi HCCL, oneCCL: any library with
// NCCL's argument order and a by-value unique id. A Spec names the
// libraries, symbol prefixes and enum tables; the device loads them at run
// time and forwards every call, on the caller's stream.
package ncclshape

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"

	"github.com/xccl-project/xccl/devices/internal/dl"
	"github.com/xccl-project/xccl/devices/internal/vendor"
	rt "github.com/xccl-project/xccl/runtime"
)

// Spec describes one NCCL-shaped vendor.
type Spec struct {
	Name     string   // device name: "nvidia", "dcu"
	Vendor   string   // library family in messages: "NCCL", "RCCL"
	CCLEnv   string   // env var overriding the CCL library path
	CCLLibs  []string // candidate sonames
	CCL      string   // symbol prefix: "nccl"
	RTEnv    string   // env var overriding the runtime library path
	RTLibs   []string
	RT       string // runtime prefix: "cuda", "hip", "mc", "musa", "tops"
	IDSize   int    // unique-id bytes, passed by value: 128 (NCCL), 1032 (Gaudi HCCL), 4096 (oneCCL)
	DTypes   map[rt.DataType]int
	Ops      map[rt.ReduceOp]int
	ByteType int // the vendor's 1-byte type, for untyped moves
	// MoveTypes, where the vendor moves no 1-byte type (Gaudi): its types
	// for untyped moves, widest first. A move of n bytes takes the first
	// whose size divides n; one that none divides is refused. Nil: ByteType.
	MoveTypes []MoveType
	// UserErrors are the result codes that mean the caller's error
	// (C_ERROR; the rest are C_FAILED). Nil: NCCL's InvalidArgument=4 and
	// InvalidUsage=5.
	UserErrors []int
	// Unimplemented names optional symbols the vendor's header declares
	// but marks not implemented (oneCCL's onecclCommAbort): left unbound.
	Unimplemented []string
	// NotImplemented is the result code with which the library says an
	// optional entry it exports does nothing on this backend (oneCCL's
	// onecclNotImplemented, 12); 0: none. Finalize and Register take it as
	// the entry's absence.
	NotImplemented int
	// InProgress is the library's ncclInProgress (0: NCCL's 7; oneCCL's is
	// 6): a non-blocking communicator's answer while its work is queued.
	InProgress int
	// SizeTRanks: CommInitRank takes nranks as size_t (oneCCL), not int.
	SizeTRanks bool
	// GroupP2P wraps every send and receive in GroupStart/End (Gaudi's
	// hcclSend/hcclRecv block the device outside a group).
	GroupP2P bool
	// SelfCopy: the library is not known to match a send to self with a
	// receive from self inside a group; xccl copies device to device
	// instead (runtime.SelfCopy). NCCL and RCCL match them (NCCL ≥ 2.7).
	SelfCopy bool
	// Runtime opens the device runtime; nil means the CUDA-shaped runtime
	// named by RT, RTEnv and RTLibs (cuda*, hip*, mc*, musa*, tops*).
	Runtime func() (Runtime, error)
}

// MoveType is a vendor type that moves Size-byte units.
type MoveType struct{ Size, Type int }

// NullStreamer is a runtime whose CCL refuses the NULL stream (Gaudi's
// HCCL): NullStream is the stream the NULL stream stands for on device dev
// (a communicator's: the one it was made on), the one the runtime's own
// NULL-stream copies there use.
type NullStreamer interface {
	NullStream(dev int) (rt.Stream, error)
}

// Runtime is the device-runtime half (devices, streams, events, memory)
// that an NCCL-shaped CCL runs beside.
type Runtime interface {
	rt.Runtime
	Libraries() string
}

// NCCLDataTypes is ncclDataType_t (nccl.h): Int8=0 Uint8=1 Int32=2 Uint32=3
// Int64=4 Uint64=5 Float16=6 Float32=7 Float64=8 Bfloat16=9. BOOL travels as
// Uint8 for moves and MAX/MIN (0/1 bytes: max = or, min = and); its SUM and
// PRODUCT would not stay 0/1 and are refused. INT16/UINT16 and complex
// types have no NCCL type and are refused.
var NCCLDataTypes = map[rt.DataType]int{
	rt.Int8: 0, rt.Uint8: 1, rt.Int32: 2, rt.Uint32: 3, rt.Int64: 4, rt.Uint64: 5,
	rt.Float16: 6, rt.Float32: 7, rt.Float64: 8, rt.BFloat16: 9, rt.Bool: 1,
}

// NCCLOps is ncclRedOp_t: Sum=0 Prod=1 Max=2 Min=3 Avg=4.
var NCCLOps = map[rt.ReduceOp]int{rt.Sum: 0, rt.Product: 1, rt.Max: 2, rt.Min: 3, rt.Avg: 4}

// Device is an NCCL-shaped device, loaded on first use.
type Device struct {
	Runtime
	spec Spec
	ccl  *dl.Library

	getUniqueID, commInitRank, commDestroy, commAbort, asyncError, errString         fn
	allReduce, broadcast, reduce, allGather, reduceScatter, send, recv, gStart, gEnd fn
	memAlloc, memFree                                                                fn // <ccl>MemAlloc/MemFree where the library has them
	commFinalize                                                                     fn // <ccl>CommFinalize where the library has it (NCCL >= 2.14)
	commRegister, commDeregister                                                     fn // <ccl>CommRegister/Deregister where the library has them (NCCL >= 2.19)
	redOpPreMul, redOpDestroy                                                        fn // <ccl>RedOpCreatePreMulSum/RedOpDestroy where the library has them (NCCL >= 2.11)

	table *vendor.Table

	commMu  sync.Mutex
	commMem map[uintptr]struct{} // what CommMemAlloc took from memAlloc
}

// Open loads the spec's libraries and resolves every symbol.
func Open(s Spec) (*Device, error) {
	if s.IDSize != 128 && s.IDSize != 1032 && s.IDSize != 4096 {
		return nil, rt.Errorf("%s: no by-value trampoline for a %d-byte unique id", s.Name, s.IDSize)
	}
	d := &Device{spec: s, table: vendor.NewTable(s.Name, s.Vendor, s.DTypes, s.Ops), commMem: map[uintptr]struct{}{}}
	var err error
	if d.ccl, err = dl.Open(s.CCLEnv, s.CCLLibs...); err != nil {
		return nil, err
	}
	c := s.CCL
	optional := map[string]*unsafe.Pointer{
		c + "CommAbort": &d.commAbort, c + "CommGetAsyncError": &d.asyncError, c + "GetErrorString": &d.errString,
		c + "MemAlloc": &d.memAlloc, c + "MemFree": &d.memFree, c + "CommFinalize": &d.commFinalize,
		c + "CommRegister": &d.commRegister, c + "CommDeregister": &d.commDeregister,
		c + "RedOpCreatePreMulSum": &d.redOpPreMul, c + "RedOpDestroy": &d.redOpDestroy,
	}
	for _, name := range s.Unimplemented {
		delete(optional, name)
	}
	err = d.ccl.Bind(map[string]*unsafe.Pointer{
		c + "GetUniqueId": &d.getUniqueID, c + "CommInitRank": &d.commInitRank, c + "CommDestroy": &d.commDestroy,
		c + "AllReduce": &d.allReduce, c + "Broadcast": &d.broadcast, c + "Reduce": &d.reduce,
		c + "AllGather": &d.allGather, c + "ReduceScatter": &d.reduceScatter, c + "Send": &d.send, c + "Recv": &d.recv,
		c + "GroupStart": &d.gStart, c + "GroupEnd": &d.gEnd,
	}, optional)
	if err != nil {
		return nil, err
	}
	open := s.Runtime
	if open == nil {
		open = func() (Runtime, error) { return OpenCUDARuntime(s.Name, s.RT, s.RTEnv, s.RTLibs) }
	}
	if d.Runtime, err = open(); err != nil {
		return nil, err
	}
	return d, nil
}

// Name is the device name.
func (d *Device) Name() string { return d.spec.Name }

// CanRegisterHost says whether the runtime can register host memory
// (rt.HostRegisterer; intelxpu's Level Zero runtime cannot).
func (d *Device) CanRegisterHost() bool {
	r, ok := d.Runtime.(rt.HostRegisterer)
	return ok && r.CanRegisterHost()
}

// HostRegister pins host memory through the runtime, where it can.
func (d *Device) HostRegister(p unsafe.Pointer, size int) error {
	if r, ok := d.Runtime.(rt.HostRegisterer); ok {
		return r.HostRegister(p, size)
	}
	return rt.Errorf("%s: the runtime cannot register host memory", d.spec.Name)
}

// HostUnregister undoes HostRegister.
func (d *Device) HostUnregister(p unsafe.Pointer) error {
	if r, ok := d.Runtime.(rt.HostRegisterer); ok {
		return r.HostUnregister(p)
	}
	return rt.Errorf("%s: the runtime cannot register host memory", d.spec.Name)
}

// CommMemAlloc is the library's <ccl>MemAlloc(&p, size) where it has one
// and its free (NCCL >= 2.19's ncclMemAlloc: memory NCCL can register for
// zero-copy and NVLS collectives), on the calling thread's device, as the
// runtime's MemAlloc is; else the runtime's MemAlloc. It is
// XcclMemAlloc's memory (rt.CommMemAllocator), not every tensor's: each
// allocation takes at least the driver's granularity.
func (d *Device) CommMemAlloc(dev, size int) (unsafe.Pointer, error) {
	if d.memAlloc == nil || d.memFree == nil {
		return d.Runtime.MemAlloc(dev, size)
	}
	p, rc := ccall.Alloc(d.memAlloc, size)
	if d.notImplemented(rc) { // oneCCL's backend without it: the runtime's memory
		return d.Runtime.MemAlloc(dev, size)
	}
	if err := d.check("MemAlloc", rc); err != nil {
		return nil, err
	}
	d.commMu.Lock()
	d.commMem[uintptr(p)] = struct{}{}
	d.commMu.Unlock()
	return p, nil
}

// MemFree frees device memory: with <ccl>MemFree what CommMemAlloc took
// from <ccl>MemAlloc, the rest with the runtime's free.
func (d *Device) MemFree(dev int, p unsafe.Pointer, size int) error {
	d.commMu.Lock()
	_, comm := d.commMem[uintptr(p)]
	delete(d.commMem, uintptr(p))
	d.commMu.Unlock()
	if !comm {
		return d.Runtime.MemFree(dev, p, size)
	}
	if err := d.check("MemFree", ccall.Ptr(d.memFree, uintptr(p))); err != nil {
		d.commMu.Lock()
		d.commMem[uintptr(p)] = struct{}{} // still the library's to free
		d.commMu.Unlock()
		return err
	}
	return nil
}

// Libraries names what was loaded, for probes and logs.
func (d *Device) Libraries() string { return d.ccl.Name + ", " + d.Runtime.Libraries() }

// check turns a vendor result into an error naming the vendor call.
func (d *Device) check(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	msg := ccall.ErrStr(d.errString, rc)
	st := rt.StatusFailed
	user := d.spec.UserErrors
	if user == nil {
		user = []int{4, 5} // ncclInvalidArgument, ncclInvalidUsage
	}
	if slices.Contains(user, rc) {
		st = rt.StatusError
	}
	return &rt.Error{Status: st, Msg: fmt.Sprintf("%s: %s%s returned %d %s", d.spec.Name, d.spec.CCL, what, rc, msg)}
}

// Supports is the capability matrix: a pair maps to the vendor's exact
// enums or is refused, naming vendor, dtype and op.
func (d *Device) Supports(dt rt.DataType, op rt.ReduceOp) error { return d.table.Supports(dt, op) }

// SelfP2P says who matches sends to self: the library inside a group,
// unless the spec says it is not trusted with them.
func (d *Device) SelfP2P() rt.SelfMode {
	if d.spec.SelfCopy {
		return rt.SelfCopy
	}
	return rt.SelfInGroup
}

// UniqueIDSize is the vendor's id size.
func (d *Device) UniqueIDSize() int { return d.spec.IDSize }

// NewUniqueID calls the vendor's GetUniqueId.
func (d *Device) NewUniqueID() ([]byte, error) {
	id := make([]byte, d.spec.IDSize)
	if err := d.check("GetUniqueId", ccall.Ptr(d.getUniqueID, uintptr(unsafe.Pointer(&id[0])))); err != nil {
		return nil, err
	}
	return id, nil
}

// CommInitRank joins the vendor communicator on the calling thread's device.
func (d *Device) CommInitRank(nranks int, id []byte, rank int) (rt.Comm, error) {
	if len(id) != d.spec.IDSize {
		return nil, rt.Errorf("%s: unique id is %d bytes, want %d", d.spec.Name, len(id), d.spec.IDSize)
	}
	dev := 0 // the device the vendor binds the communicator to (needed for a NULL-stream substitute)
	if _, ok := d.Runtime.(NullStreamer); ok {
		var err error
		if dev, err = d.Runtime.GetDevice(); err != nil {
			return nil, err
		}
	}
	comm, rc := vendor.Joining(func() (uintptr, int) {
		return cInit(d.commInitRank, d.spec.IDSize, d.spec.SizeTRanks, nranks, id, rank)
	})
	c := &Comm{CommBase: vendor.NewCommBase(d.spec.Name, rank, nranks), d: d, comm: comm, dev: dev}
	if rc == d.inProgress() && comm != 0 {
		if rc = c.settle(rc); rc != 0 { // half made: the caller gets no communicator
			if d.commAbort != nil { // as NCCL asks of a communicator in error
				_ = ccall.Ptr(d.commAbort, comm)
			} else {
				_ = ccall.Ptr(d.commDestroy, comm)
			}
		}
	}
	if err := d.check("CommInitRank", rc); err != nil {
		return nil, err
	}
	return c, nil
}

// answer is a call's error from the library's rc (waited for where it is
// "in progress"); a failure breaks the communicator.
func (c *Comm) answer(what string, rc int) error { return c.Fail(c.d.check(what, c.settle(rc))) }

// inProgress is the library's ncclInProgress.
func (d *Device) inProgress() int {
	if d.spec.InProgress != 0 {
		return d.spec.InProgress
	}
	return 7
}

// settle waits while rc says the communicator's work is in progress: NCCL
// makes every communicator non-blocking under NCCL_COMM_BLOCKING=0, and
// then init, the collectives and GroupEnd return ncclInProgress, to be
// polled with CommGetAsyncError until it says otherwise. It returns that
// answer (0 once the work is queued), or rc where the library cannot be
// asked; still in progress after XCCL_TIMEOUT, it gives up with rc.
func (c *Comm) settle(rc int) int {
	d := c.d
	ip := d.inProgress()
	if rc != ip || d.asyncError == nil {
		return rc
	}
	deadline := time.Now().Add(rt.Load().Timeout)
	for i := 0; ; i++ {
		var res int32
		if r := ccall.PtrPtr(d.asyncError, c.comm, uintptr(unsafe.Pointer(&res))); r != 0 {
			return r
		}
		if int(res) != ip {
			return int(res)
		}
		if time.Now().After(deadline) {
			return rc
		}
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// RunGroup brackets the ops with the vendor's GroupStart/GroupEnd.
func (d *Device) RunGroup(ops []*rt.Op) error {
	return vendor.RunOps(d.groupStart, d.groupEnd(ops), ops, func(op *rt.Op) error {
		c, ok := op.Comm.(*Comm)
		if !ok || c.d != d {
			return rt.Errorf("%s: group mixes in a communicator of another device", d.spec.Name)
		}
		return c.Run(op)
	})
}

func (d *Device) groupStart() error { return d.check("GroupStart", ccall.Void(d.gStart)) }

// groupEnd is GroupEnd; "in progress" settles every communicator the
// group ran on (ops), as a non-blocking communicator's GroupEnd must be.
func (d *Device) groupEnd(ops []*rt.Op) func() error {
	return func() error {
		rc := ccall.Void(d.gEnd)
		if rc == d.inProgress() {
			rc = 0
			seen := map[*Comm]bool{}
			for _, op := range ops {
				if c, ok := op.Comm.(*Comm); ok && c.d == d && !seen[c] {
					seen[c] = true
					if r := c.settle(d.inProgress()); r != 0 && rc == 0 {
						rc = r
					}
				}
			}
		}
		return d.check("GroupEnd", rc)
	}
}

// Comm is a vendor communicator.
type Comm struct {
	vendor.CommBase
	d    *Device
	comm uintptr
	dev  int // the calling thread's device at init
}

// Run forwards one operation, stream untouched. op, and any Go memory it
// points to, stays alive until the vendor call returns.
func (c *Comm) Run(op *rt.Op) error {
	defer runtime.KeepAlive(op)
	if c.Freed() { // the vendor's abort freed it
		return c.Broken()
	}
	d := c.d
	st, err := d.stream(op.Stream, c.dev)
	if err != nil {
		return err
	}
	s, r := uintptr(op.Send), uintptr(op.Recv)
	switch op.Kind {
	case rt.OpAllReduce, rt.OpReduce, rt.OpReduceScatter:
		dt, ro, err := d.table.Translate(op.Type, op.Red)
		if p := op.PreMul; p != nil { // the library's own op (CreatePreMulSum), of the type's
			dt, _, err = d.table.Translate(op.Type, rt.Sum)
			ro = int(p.Handle - 1)
		} else if err == nil && op.Red == rt.Avg && c.Size() == 1 {
			// One rank's average is its input: forwarded as SUM, the same
			// result. NCCL 2.28.9's one-rank AVG out of place leaves the
			// last elements of some counts unwritten (117649 floats: the
			// last 25), seen on an H100 (bench/gpu/run.sh).
			_, ro, err = d.table.Translate(op.Type, rt.Sum)
		}
		if err != nil {
			return err
		}
		switch op.Kind {
		case rt.OpAllReduce:
			return c.answer("AllReduce", ccall.Coll(d.allReduce, s, r, op.Count, dt, ro, c.comm, st))
		case rt.OpReduce:
			return c.answer("Reduce", ccall.CollRoot(d.reduce, s, r, op.Count, dt, ro, op.Root, c.comm, st))
		default:
			return c.answer("ReduceScatter", ccall.Coll(d.reduceScatter, s, r, op.Count, dt, ro, c.comm, st))
		}
	}
	if op.Kind == rt.OpAllToAll {
		return c.allToAll(op)
	}
	// Moves are untyped: bytes as the vendor's 1-byte type, or units of a
	// wider one.
	n, bt, err := d.move(op.Kind, op.Count*op.Type.Size())
	if err != nil {
		return err
	}
	switch op.Kind {
	case rt.OpBroadcast:
		return c.answer("Broadcast", ccall.MoveRoot(d.broadcast, s, r, n, bt, op.Root, c.comm, st))
	case rt.OpAllGather:
		return c.answer("AllGather", ccall.Move(d.allGather, s, r, n, bt, c.comm, st))
	case rt.OpSend, rt.OpRecv:
		if d.spec.GroupP2P {
			return c.grouped(op, func() error { return c.p2p(op, n, bt, st) })
		}
		return c.p2p(op, n, bt, st)
	}
	return rt.Errorf("%s: unknown operation %v", d.spec.Name, op.Kind)
}

// stream is the vendor stream an op's stream stands for: itself, or for
// the NULL stream on a runtime whose CCL refuses it, the runtime's on the
// communicator's device dev.
func (d *Device) stream(s rt.Stream, dev int) (uintptr, error) {
	if ns, ok := d.Runtime.(NullStreamer); ok && s == 0 {
		st, err := ns.NullStream(dev)
		return uintptr(st), err
	}
	return uintptr(s), nil
}

// move is the count and vendor type of an untyped move of n bytes.
func (d *Device) move(k rt.OpKind, n int) (int, int, error) {
	if d.spec.MoveTypes == nil {
		return n, d.spec.ByteType, nil
	}
	for _, m := range d.spec.MoveTypes {
		if n%m.Size == 0 {
			return n / m.Size, m.Type, nil
		}
	}
	return 0, 0, rt.Errorf("%s (%s): %v of %d bytes: the library moves no unit that divides it (it has no 1-byte type)",
		d.spec.Name, d.spec.Vendor, k, n)
}

func (c *Comm) p2p(op *rt.Op, n, bt int, st uintptr) error {
	d := c.d
	if op.Kind == rt.OpSend {
		return c.answer("Send", ccall.P2P(d.send, uintptr(op.Send), n, bt, op.Root, c.comm, st))
	}
	return c.answer("Recv", ccall.P2P(d.recv, uintptr(op.Recv), n, bt, op.Root, c.comm, st))
}

// grouped runs f, op's call, between GroupStart and GroupEnd.
func (c *Comm) grouped(op *rt.Op, f func() error) error {
	return c.Fail(vendor.Group(c.d.groupStart, c.d.groupEnd([]*rt.Op{op}), f))
}

// allToAll is grouped sends and receives (NCCL has no per-peer all-to-all).
func (c *Comm) allToAll(op *rt.Op) error { return c.Fail(c.d.RunGroup(vendor.SplitAllToAll(c, op))) }

// AsyncError asks the vendor (when it can tell, and the communicator is
// not freed) and reports local failures. "In progress" (a non-blocking
// communicator's work being queued) is no error.
func (c *Comm) AsyncError() error {
	return c.CommBase.AsyncError(c.d.asyncError, c.comm, func(what string, rc int) error {
		if rc == c.d.inProgress() && what == "CommGetAsyncError(async)" {
			return nil
		}
		return c.d.check(what, rc)
	})
}

// KeepsOnAbort: without the vendor's abort, Abort only breaks the
// communicator, and Destroy frees it.
func (c *Comm) KeepsOnAbort() bool { return c.d.commAbort == nil }

// Destroy frees the vendor communicator, unless the vendor's abort did.
func (c *Comm) Destroy() error {
	if !c.Free() {
		return nil
	}
	return c.d.check("CommDestroy", ccall.Ptr(c.d.commDestroy, c.comm))
}

// Finalize is the library's <ccl>CommFinalize where it has one (on a
// blocking communicator, as xccl makes them, it returns when the issued
// work is done); else nothing: <ccl>CommDestroy waits for that work.
func (c *Comm) Finalize() error {
	if c.d.commFinalize == nil || c.Freed() {
		return nil
	}
	rc := c.settle(ccall.Ptr(c.d.commFinalize, c.comm))
	if c.d.notImplemented(rc) {
		return nil
	}
	return c.Fail(c.d.check("CommFinalize", rc))
}

// notImplemented says whether rc is the library's "does nothing here".
func (d *Device) notImplemented(rc int) bool {
	return rc != 0 && rc == d.spec.NotImplemented
}

// Register is the library's <ccl>CommRegister where it has the pair (0:
// none, nothing registered).
func (c *Comm) Register(buf unsafe.Pointer, size int) (uintptr, error) {
	if c.d.commRegister == nil || c.d.commDeregister == nil {
		return 0, nil
	}
	if c.Freed() {
		return 0, rt.Errorf("%s: CommRegister: the communicator was freed (aborted or destroyed)", c.d.spec.Name)
	}
	h, rc := ccall.CommRegister(c.d.commRegister, c.comm, uintptr(buf), size)
	if c.d.notImplemented(rc) {
		return 0, nil
	}
	if err := c.d.check("CommRegister", rc); err != nil {
		return 0, err
	}
	return h, nil
}

// Deregister is the library's <ccl>CommDeregister of what Register made.
func (c *Comm) Deregister(h uintptr) error {
	if h == 0 || c.d.commDeregister == nil || c.Freed() {
		return nil
	}
	return c.d.check("CommDeregister", ccall.PtrPtr(c.d.commDeregister, c.comm, h))
}

// CreatePreMulSum is the library's <ccl>RedOpCreatePreMulSum for p: the
// handle is its op plus one (0 stands for none).
func (c *Comm) CreatePreMulSum(p *rt.PreMul) (uintptr, error) {
	d := c.d
	if d.redOpPreMul == nil || d.redOpDestroy == nil {
		return 0, rt.Errorf("%s (%s): the library has no %sRedOpCreatePreMulSum (NCCL has it from 2.11)", d.spec.Name, d.spec.Vendor, d.spec.CCL)
	}
	if c.Freed() {
		return 0, rt.Errorf("%s: RedOpCreatePreMulSum: the communicator was freed (aborted or destroyed)", d.spec.Name)
	}
	dt, _, err := d.table.Translate(p.Type, rt.Sum)
	if err != nil {
		return 0, err
	}
	res, scalar := 1, uintptr(unsafe.Pointer(&p.Value[0])) // ncclScalarHostImmediate: read now
	if p.Device {
		res, scalar = 0, uintptr(p.Scalar) // ncclScalarDevice
	}
	op, rc := ccall.RedOpCreatePreMulSum(d.redOpPreMul, scalar, dt, res, c.comm)
	runtime.KeepAlive(p)
	if d.notImplemented(rc) {
		return 0, rt.Errorf("%s (%s): %sRedOpCreatePreMulSum is not implemented by this backend", d.spec.Name, d.spec.Vendor, d.spec.CCL)
	}
	if err := d.check("RedOpCreatePreMulSum", rc); err != nil {
		return 0, err
	}
	return uintptr(op) + 1, nil
}

// DestroyPreMulSum is the library's <ccl>RedOpDestroy of what
// CreatePreMulSum made (nothing once the communicator is freed: its
// destroy took the ops with it).
func (c *Comm) DestroyPreMulSum(h uintptr) error {
	if h == 0 || c.Freed() {
		return nil
	}
	return c.d.check("RedOpDestroy", ccall.IntPtr(c.d.redOpDestroy, int(h-1), c.comm))
}

// Abort uses the vendor's abort when it has one (which frees the
// communicator, as ncclCommAbort does: it must not be destroyed after).
func (c *Comm) Abort() {
	_ = c.Fail(rt.Failedf("%s: communicator aborted", c.d.spec.Name)) // first: AsyncError asks the vendor no more
	if c.d.commAbort != nil && c.Free() {
		_ = ccall.Ptr(c.d.commAbort, c.comm)
	}
}
