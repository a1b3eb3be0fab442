// Package kunlun is the Baidu Kunlun XPU device: BKCL and the XPU runtime
// (XRE), loaded at run time. XCCL_BKCL_LIBRARY and XCCL_XPURT_LIBRARY
// override the paths. Facts: ../../shared/reference/vendor-apis.md §4.
//
// BKCL quirks handled here: the communicator comes first in every call;
// init is (ctx*, rank, nranks, id*); all_gather takes the count before the
// receive buffer, send/recv the peer before the dtype; MIN and MAX are
// swapped relative to NCCL; new (P800) releases export only C++-mangled
// xccl_* names, tried after the C names.
//
// UNCONFIRMED (no BKCL header was found): the dtype values
// FLOAT=0 FLOAT16=1 BFLOAT16=2 FLOAT64=3 INT32=4 INT64=5 UINT8=6, the op
// values ADD=0 PRODUCT=1 MIN=2 MAX=3, and the 128-byte unique id all come
// from Kunlunxin's own XCCL ctypes binding (cosmos-rl pyxccl_wrapper.py);
// the mangled names come from the same binding.
package kunlun

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

// UniqueIDBytes is the BKCL/XCCL unique id size (UNCONFIRMED, see above).
const UniqueIDBytes = 128

var dtypes = map[rt.DataType]int{
	rt.Float32: 0, rt.Float16: 1, rt.BFloat16: 2, rt.Float64: 3, rt.Int32: 4, rt.Int64: 5, rt.Uint8: 6, rt.Bool: 6,
}

// BKCL's MIN/MAX order differs from NCCL's; there is no AVG.
var ops = map[rt.ReduceOp]int{rt.Sum: 0, rt.Product: 1, rt.Min: 2, rt.Max: 3}

var table = vendor.NewTable("kunlun", "BKCL", dtypes, ops)

const bkclUint8 = 6

func init() { rt.Register("kunlun", func() (rt.Device, error) { return Open() }) }

// Device is the Kunlun device.
type Device struct {
	bkcl, xpu *dl.Library

	getID, initRank, destroy, abort, allReduce, broadcast, reduce, allGather, reduceScatter fn
	send, recv, gStart, gEnd                                                                fn

	count, setDev, getDev, sCreate, sDestroy, wait, malloc, free, memcpy, memcpyAsync fn
	eCreate, eRecord, eWait, eDestroy, streamWaitEvent                                fn

	countOnce sync.Once
	n         int

	streamsMu sync.RWMutex      // held (read) while SynchronizeDevice waits for them
	streams   map[rt.Stream]int // the streams CreateStream made, and their devices
}

// Open loads BKCL and the XPU runtime.
func Open() (*Device, error) {
	d := &Device{streams: map[rt.Stream]int{}}
	var err error
	if d.bkcl, err = dl.Open("XCCL_BKCL_LIBRARY", "libbkcl.so", "/usr/local/xccl/so/libbkcl.so"); err != nil {
		return nil, err
	}
	if d.xpu, err = dl.Open("XCCL_XPURT_LIBRARY", "libxpurt.so", "/usr/local/xpu/so/libxpurt.so"); err != nil {
		return nil, err
	}
	if err = d.bkcl.Bind(map[string]*unsafe.Pointer{
		"bkcl_get_unique_id|_Z18xccl_get_unique_idP12XCCLUniqueId":                   &d.getID,
		"bkcl_init_rank|_Z14xccl_init_rankPPviiPK12XCCLUniqueId":                     &d.initRank,
		"bkcl_destroy_context|_Z20xccl_destroy_contextPv":                            &d.destroy,
		"bkcl_all_reduce|_Z15xccl_all_reducePvPKvS_m12XCCLDataType6XCCLOpS_":         &d.allReduce,
		"bkcl_broadcast|_Z14xccl_broadcastPvPKvS_m12XCCLDataTypeiS_":                 &d.broadcast,
		"bkcl_all_gather|_Z15xccl_all_gatherPvPKvmS_12XCCLDataTypeS_":                &d.allGather,
		"bkcl_reduce_scatter|_Z19xccl_reduce_scatterPvPKvS_m12XCCLDataType6XCCLOpS_": &d.reduceScatter,
		"bkcl_send|_Z9xccl_sendPvPKvmi12XCCLDataTypeS_":                              &d.send,
		"bkcl_recv|_Z9xccl_recvPvS_mi12XCCLDataTypeS_":                               &d.recv,
		"bkcl_group_start|_Z16xccl_group_startv":                                     &d.gStart,
		"bkcl_group_end|_Z14xccl_group_endv":                                         &d.gEnd,
	}, map[string]*unsafe.Pointer{
		"bkcl_reduce": &d.reduce, "bkcl_comm_abort|_Z15xccl_comm_abortPv": &d.abort,
	}); err != nil {
		return nil, err
	}
	if err = d.xpu.Bind(map[string]*unsafe.Pointer{
		"xpu_device_count": &d.count, "xpu_set_device": &d.setDev, "xpu_current_device": &d.getDev,
		"xpu_stream_create": &d.sCreate, "xpu_stream_destroy": &d.sDestroy, "xpu_wait": &d.wait,
		"xpu_malloc": &d.malloc, "xpu_free": &d.free, "xpu_memcpy": &d.memcpy,
	}, map[string]*unsafe.Pointer{
		"xpu_memcpy_async": &d.memcpyAsync, "xpu_event_create": &d.eCreate, "xpu_event_record": &d.eRecord,
		"xpu_event_wait": &d.eWait, "xpu_event_destroy": &d.eDestroy, "xpu_stream_wait_event": &d.streamWaitEvent,
	}); err != nil {
		return nil, err
	}
	return d, nil
}

// Name is "kunlun".
func (d *Device) Name() string { return "kunlun" }

// Libraries names what was loaded.
func (d *Device) Libraries() string { return d.bkcl.Name + ", " + d.xpu.Name }

func (d *Device) check(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	st := rt.StatusFailed
	if rc == 4 { // INVALID_ARGUMENT
		st = rt.StatusError
	}
	return &rt.Error{Status: st, Msg: fmt.Sprintf("kunlun: bkcl_%s returned %d", what, rc)}
}

func (d *Device) checkRT(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	return rt.Failedf("kunlun: xpu_%s returned %d", what, rc)
}

// Supports is the BKCL capability matrix.
func (d *Device) Supports(dt rt.DataType, op rt.ReduceOp) error { return table.Supports(dt, op) }

// SelfP2P: BKCL matches a send to self with a receive from self inside a
// group; ungrouped, xccl copies device to device (runtime.SelfInGroup).
func (d *Device) SelfP2P() rt.SelfMode { return rt.SelfInGroup }

// UniqueIDSize is the BKCL id size.
func (d *Device) UniqueIDSize() int { return UniqueIDBytes }

// NewUniqueID is bkcl_get_unique_id.
func (d *Device) NewUniqueID() ([]byte, error) {
	id := make([]byte, UniqueIDBytes)
	return id, d.check("get_unique_id", ccall.Ptr(d.getID, uintptr(unsafe.Pointer(&id[0]))))
}

// CommInitRank is bkcl_init_rank(&ctx, rank, nranks, &id).
func (d *Device) CommInitRank(nranks int, id []byte, rank int) (rt.Comm, error) {
	if len(id) != UniqueIDBytes {
		return nil, rt.Errorf("kunlun: unique id is %d bytes, want %d", len(id), UniqueIDBytes)
	}
	ctx, rc := vendor.Joining(func() (uintptr, int) { return cInit(d.initRank, rank, nranks, id) })
	if err := d.check("init_rank", rc); err != nil {
		return nil, err
	}
	return &Comm{CommBase: vendor.NewCommBase("kunlun", rank, nranks), d: d, ctx: ctx}, nil
}

// RunGroup brackets the ops with bkcl_group_start/end.
func (d *Device) RunGroup(ops []*rt.Op) error {
	return vendor.RunOps(func() error { return d.check("group_start", ccall.Void(d.gStart)) },
		func() error { return d.check("group_end", ccall.Void(d.gEnd)) }, ops, func(op *rt.Op) error {
			c, ok := op.Comm.(*Comm)
			if !ok || c.d != d {
				return rt.Errorf("kunlun: group mixes in a communicator of another device")
			}
			return c.Run(op)
		})
}

// Comm is a BKCL context.
type Comm struct {
	vendor.CommBase
	d   *Device
	ctx uintptr
}

// Run forwards one operation on the caller's stream, context first.
func (c *Comm) Run(op *rt.Op) error {
	defer runtime.KeepAlive(op) // Go memory stays put until the vendor call returns
	d := c.d
	s, r, st := uintptr(op.Send), uintptr(op.Recv), uintptr(op.Stream)
	switch op.Kind {
	case rt.OpAllReduce, rt.OpReduce, rt.OpReduceScatter:
		dt, ro, err := table.Translate(op.Type, op.Red)
		if err != nil {
			return err
		}
		switch op.Kind {
		case rt.OpAllReduce:
			return c.Fail(d.check("all_reduce", cColl(d.allReduce, c.ctx, s, r, op.Count, dt, ro, st)))
		case rt.OpReduce:
			if d.reduce == nil {
				return rt.Errorf("kunlun: this BKCL has no reduce (only the C-named bkcl_reduce is known)")
			}
			return c.Fail(d.check("reduce", cReduce(d.reduce, c.ctx, s, r, op.Count, dt, ro, op.Root, st)))
		default:
			return c.Fail(d.check("reduce_scatter", cColl(d.reduceScatter, c.ctx, s, r, op.Count, dt, ro, st)))
		}
	}
	n := op.Count * op.Type.Size()
	switch op.Kind {
	case rt.OpBroadcast:
		return c.Fail(d.check("broadcast", cColl(d.broadcast, c.ctx, s, r, n, bkclUint8, op.Root, st)))
	case rt.OpAllGather:
		return c.Fail(d.check("all_gather", cGather(d.allGather, c.ctx, s, n, r, bkclUint8, st)))
	case rt.OpSend:
		return c.Fail(d.check("send", cP2P(d.send, c.ctx, s, n, op.Root, bkclUint8, st)))
	case rt.OpRecv:
		return c.Fail(d.check("recv", cP2P(d.recv, c.ctx, r, n, op.Root, bkclUint8, st)))
	case rt.OpAllToAll: // per-peer buffers: grouped sends and receives
		return d.RunGroup(vendor.SplitAllToAll(c, op))
	}
	return rt.Errorf("kunlun: unknown operation %v", op.Kind)
}

// AsyncError: BKCL has no async-error query; local failures only.
func (c *Comm) AsyncError() error { return c.Broken() }

// Destroy is bkcl_destroy_context.
func (c *Comm) Destroy() error { return c.d.check("destroy_context", ccall.Ptr(c.d.destroy, c.ctx)) }

// KeepsOnAbort: whether bkcl_comm_abort frees the context is not
// documented, so Destroy still frees it (bkcl_destroy_context) after an
// Abort, as before.
func (c *Comm) KeepsOnAbort() bool { return true }

// Abort is bkcl_comm_abort when present.
func (c *Comm) Abort() {
	if c.d.abort != nil {
		_ = ccall.Ptr(c.d.abort, c.ctx)
	}
	_ = c.Fail(rt.Failedf("kunlun: communicator aborted"))
}
