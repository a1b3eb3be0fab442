// Package mlu is the Cambricon MLU device: CNCL and the CNRT runtime
// (Neuware), loaded at run time. XCCL_CNCL_LIBRARY and XCCL_CNRT_LIBRARY
// override the paths. Facts: cncl.h (CNCL 1.25.0) and cnrt.h; see
// ../../shared/reference/vendor-apis.md §2.
//
// CNCL quirks handled here: the clique id is 136 bytes (128 data + a
// 64-bit hash) passed by pointer; a communicator is made with
// cnclInitComms(&comm, 1, {current device}, {rank}, nranks, id); its dtype
// enum is CNCL's own (no FLOAT64) and there is no AVG; cnrtMemcpyAsync
// takes the queue before the direction, and DevToDev=1 precedes DevToHost=2.
package mlu

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
	"github.com/xccl-project/xccl/devices/internal/dl"
	"github.com/xccl-project/xccl/devices/internal/vendor"
	rt "github.com/xccl-project/xccl/runtime"
)

// CliqueIDBytes is sizeof(cnclCliqueId): char data[128] + uint64_t hash.
const CliqueIDBytes = 136

// cnclDataType_t: Float16=0x10 Bfloat16=0x11 Float32=0x12 Int8=0x20 Int16=0x21
// Int32=0x22 Int64=0x23 Uint8=0x30 Uint16=0x31 Uint32=0x32 Uint64=0x33.
// No float64. BOOL travels as Uint8 (MAX/MIN only).
var dtypes = map[rt.DataType]int{
	rt.Float16: 0x10, rt.BFloat16: 0x11, rt.Float32: 0x12, rt.Int8: 0x20, rt.Int16: 0x21, rt.Int32: 0x22,
	rt.Int64: 0x23, rt.Uint8: 0x30, rt.Uint16: 0x31, rt.Uint32: 0x32, rt.Uint64: 0x33, rt.Bool: 0x30,
}

// cnclReduceOp_t: Sum=0 Prod=1 Max=2 Min=3; no Avg.
var ops = map[rt.ReduceOp]int{rt.Sum: 0, rt.Product: 1, rt.Max: 2, rt.Min: 3}

var table = vendor.NewTable("mlu", "CNCL", dtypes, ops)

const cnclUint8 = 0x30

func init() { rt.Register("mlu", func() (rt.Device, error) { return Open() }) }

// Device is the MLU device.
type Device struct {
	cncl, cnrt *dl.Library

	getClique, initComms, freeComm, destroyComms, abort, asyncErr, errStr fn
	allReduce, broadcast, reduce, allGather, reduceScatter, send, recv    fn
	gStart, gEnd                                                          fn

	count, setDev, getDev, devSync, qCreate, qDestroy, qSync, qQuery fn
	nCreate, nPlace, nWait, nSync, nDestroy, nQuery                  fn
	malloc, free, hostMalloc, hostFree, memcpy, memcpyAsync, memset  fn
	memInfo                                                          fn

	countOnce sync.Once
	n         int
}

// Open loads CNCL and CNRT.
func Open() (*Device, error) {
	d := &Device{}
	var err error
	if d.cncl, err = dl.Open("XCCL_CNCL_LIBRARY", "libcncl.so", "/usr/local/neuware/lib64/libcncl.so"); err != nil {
		return nil, err
	}
	if d.cnrt, err = dl.Open("XCCL_CNRT_LIBRARY", "libcnrt.so", "/usr/local/neuware/lib64/libcnrt.so"); err != nil {
		return nil, err
	}
	if err = d.cncl.Bind(map[string]*unsafe.Pointer{
		"cnclGetCliqueId": &d.getClique, "cnclInitComms": &d.initComms, "cnclAllReduce": &d.allReduce,
		"cnclBroadcast": &d.broadcast, "cnclReduce": &d.reduce, "cnclAllGather": &d.allGather,
		"cnclReduceScatter": &d.reduceScatter, "cnclSend": &d.send, "cnclRecv": &d.recv,
		"cnclGroupStart": &d.gStart, "cnclGroupEnd": &d.gEnd,
	}, map[string]*unsafe.Pointer{
		"cnclFreeComm": &d.freeComm, "cnclDestroyComms": &d.destroyComms, "cnclAbortComm": &d.abort,
		"cnclGetCommAsyncError": &d.asyncErr, "cnclGetErrorStr": &d.errStr,
	}); err != nil {
		return nil, err
	}
	if d.freeComm == nil && d.destroyComms == nil {
		return nil, rt.Failedf("mlu: %s has neither cnclFreeComm nor cnclDestroyComms", d.cncl.Name)
	}
	if err = d.cnrt.Bind(map[string]*unsafe.Pointer{
		"cnrtGetDeviceCount": &d.count, "cnrtSetDevice": &d.setDev, "cnrtGetDevice": &d.getDev, "cnrtSyncDevice": &d.devSync,
		"cnrtQueueCreate": &d.qCreate, "cnrtQueueDestroy": &d.qDestroy, "cnrtQueueSync": &d.qSync,
		"cnrtNotifierCreate": &d.nCreate, "cnrtPlaceNotifier": &d.nPlace, "cnrtQueueWaitNotifier": &d.nWait,
		"cnrtWaitNotifier": &d.nSync, "cnrtNotifierDestroy": &d.nDestroy,
		"cnrtMalloc": &d.malloc, "cnrtFree": &d.free, "cnrtMemcpy": &d.memcpy,
		"cnrtMemcpyAsync_V2|cnrtMemcpyAsync": &d.memcpyAsync, "cnrtMemsetAsync": &d.memset,
	}, map[string]*unsafe.Pointer{
		"cnrtQueueQuery": &d.qQuery, "cnrtQueryNotifier": &d.nQuery, "cnrtHostMalloc": &d.hostMalloc,
		"cnrtFreeHost": &d.hostFree, "cnrtMemGetInfo": &d.memInfo,
	}); err != nil {
		return nil, err
	}
	return d, nil
}

// Name is "mlu".
func (d *Device) Name() string { return "mlu" }

// Libraries names what was loaded.
func (d *Device) Libraries() string { return d.cncl.Name + ", " + d.cnrt.Name }

func (d *Device) check(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	st := rt.StatusFailed
	if rc == 0x07 || rc == 0x11 || rc == 0x21 { // ERR_ARGUMENTS, ERR_UNSUPPORTED, ERR_NULL_POINTER
		st = rt.StatusError
	}
	return &rt.Error{Status: st, Msg: fmt.Sprintf("mlu: cncl%s returned %#x %s", what, rc, ccall.ErrStr(d.errStr, rc))}
}

func (d *Device) checkRT(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	return rt.Failedf("mlu: cnrt%s returned %d", what, rc)
}

// Supports is the CNCL capability matrix.
func (d *Device) Supports(dt rt.DataType, op rt.ReduceOp) error { return table.Supports(dt, op) }

// SelfP2P: CNCL matches a send to self with a receive from self inside a
// group; ungrouped, xccl copies device to device (runtime.SelfInGroup).
func (d *Device) SelfP2P() rt.SelfMode { return rt.SelfInGroup }

// UniqueIDSize is sizeof(cnclCliqueId).
func (d *Device) UniqueIDSize() int { return CliqueIDBytes }

// NewUniqueID is cnclGetCliqueId.
func (d *Device) NewUniqueID() ([]byte, error) {
	id := make([]byte, CliqueIDBytes)
	return id, d.check("GetCliqueId", ccall.Ptr(d.getClique, uintptr(unsafe.Pointer(&id[0]))))
}

// CommInitRank makes a one-device communicator on the calling thread's
// current device (cnrtGetDevice), as Paddle's MLU plugin does.
func (d *Device) CommInitRank(nranks int, id []byte, rank int) (rt.Comm, error) {
	if len(id) != CliqueIDBytes {
		return nil, rt.Errorf("mlu: unique id is %d bytes, want %d", len(id), CliqueIDBytes)
	}
	dev, err := d.GetDevice()
	if err != nil {
		return nil, err
	}
	comm, rc := vendor.Joining(func() (uintptr, int) { return cInit(d.initComms, dev, rank, nranks, id) })
	if err := d.check("InitComms", rc); err != nil {
		return nil, err
	}
	return &Comm{CommBase: vendor.NewCommBase("mlu", rank, nranks), d: d, comm: comm}, nil
}

// RunGroup brackets the ops with cnclGroupStart/End.
func (d *Device) RunGroup(ops []*rt.Op) error {
	return vendor.RunOps(func() error { return d.check("GroupStart", ccall.Void(d.gStart)) },
		func() error { return d.check("GroupEnd", ccall.Void(d.gEnd)) }, ops, func(op *rt.Op) error {
			c, ok := op.Comm.(*Comm)
			if !ok || c.d != d {
				return rt.Errorf("mlu: group mixes in a communicator of another device")
			}
			return c.Run(op)
		})
}

// Comm is a CNCL communicator.
type Comm struct {
	vendor.CommBase
	d    *Device
	comm uintptr
}

// Run forwards one operation on the caller's queue.
func (c *Comm) Run(op *rt.Op) error {
	defer runtime.KeepAlive(op) // Go memory stays put until the vendor call returns
	d := c.d
	s, r, q := uintptr(op.Send), uintptr(op.Recv), uintptr(op.Stream)
	switch op.Kind {
	case rt.OpAllReduce, rt.OpReduce, rt.OpReduceScatter:
		dt, ro, err := table.Translate(op.Type, op.Red)
		if err != nil {
			return err
		}
		switch op.Kind {
		case rt.OpAllReduce:
			return c.Fail(d.check("AllReduce", ccall.Coll(d.allReduce, s, r, op.Count, dt, ro, c.comm, q)))
		case rt.OpReduce:
			return c.Fail(d.check("Reduce", ccall.CollRoot(d.reduce, s, r, op.Count, dt, ro, op.Root, c.comm, q)))
		default:
			return c.Fail(d.check("ReduceScatter", ccall.Coll(d.reduceScatter, s, r, op.Count, dt, ro, c.comm, q)))
		}
	}
	n := op.Count * op.Type.Size()
	switch op.Kind {
	case rt.OpBroadcast:
		return c.Fail(d.check("Broadcast", ccall.MoveRoot(d.broadcast, s, r, n, cnclUint8, op.Root, c.comm, q)))
	case rt.OpAllGather:
		return c.Fail(d.check("AllGather", ccall.Move(d.allGather, s, r, n, cnclUint8, c.comm, q)))
	case rt.OpSend:
		return c.Fail(d.check("Send", ccall.P2P(d.send, s, n, cnclUint8, op.Root, c.comm, q)))
	case rt.OpRecv:
		return c.Fail(d.check("Recv", ccall.P2P(d.recv, r, n, cnclUint8, op.Root, c.comm, q)))
	case rt.OpAllToAll: // per-peer buffers: grouped sends and receives
		return d.RunGroup(vendor.SplitAllToAll(c, op))
	}
	return rt.Errorf("mlu: unknown operation %v", op.Kind)
}

// cnclAsyncInProgress is CNCL_RET_ASYNC_IN_PROGRESS: "the asynchronous
// operations have not completed yet. This result is not an error actually."
const cnclAsyncInProgress = 0x06

// AsyncError: cnclGetCommAsyncError returns the state itself; work still
// in progress is no error.
func (c *Comm) AsyncError() error {
	err := c.Broken()
	if err != nil || c.d.asyncErr == nil || c.Freed() {
		return err
	}
	rc := ccall.Ptr(c.d.asyncErr, c.comm)
	if rc == cnclAsyncInProgress {
		return nil
	}
	return c.d.check("GetCommAsyncError", rc)
}

// Destroy is cnclFreeComm (or cnclDestroyComms).
func (c *Comm) Destroy() error {
	if !c.Free() { // cnclAbortComm freed it
		return nil
	}
	if c.d.freeComm != nil {
		return c.d.check("FreeComm", ccall.Ptr(c.d.freeComm, c.comm))
	}
	return c.d.check("DestroyComms", cDestroyComms(c.d.destroyComms, c.comm))
}

// KeepsOnAbort: without cnclAbortComm, Abort only breaks the communicator,
// and Destroy frees it.
func (c *Comm) KeepsOnAbort() bool { return c.d.abort == nil }

// Abort is cnclAbortComm when present.
func (c *Comm) Abort() {
	_ = c.Fail(rt.Failedf("mlu: communicator aborted")) // first: AsyncError asks CNCL no more
	if c.d.abort != nil && c.Free() {
		_ = ccall.Ptr(c.d.abort, c.comm) // frees it, as ncclCommAbort does
	}
}
