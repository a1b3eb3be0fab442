// Package ascend is the Huawei Ascend device: HCCL and the ACL runtime
// (CANN), loaded at run time. XCCL_HCCL_LIBRARY and XCCL_ACL_LIBRARY
// override the paths. Facts: hccl.h / hccl_types.h (CANN 2025) and
// acl_rt.h; see ../../shared/reference/vendor-apis.md §1.
//
// HCCL quirks handled here: the id is a 4108-byte HcclRootInfo passed by
// pointer and init takes (nRanks, root, rank, comm*); counts are uint64;
// broadcast is in place only (xccl's broadcast has one buffer); there is no
// AVG; group calls exist only in the newest headers, so groups and
// all-to-all use HcclBatchSendRecv when it is there.
package ascend

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

// RootInfoBytes is HCCL_ROOT_INFO_BYTES.
const RootInfoBytes = 4108

// HcclDataType (hccl_types.h): INT8=0 INT16=1 INT32=2 FP16=3 FP32=4 INT64=5
// UINT64=6 UINT8=7 UINT16=8 UINT32=9 FP64=10 BFP16=11. The reductions take
// only the types CANN documents for them on Atlas A2/A3 (HcclAllReduce,
// CANN 8.5: int8, int16, int32, int64, float16, float32, bfp16; uint64 and
// fp64 only on the Atlas 350), and PROD takes neither int16 nor bfp16.
// BOOL reduces as INT8 (MAX/MIN only, as 0/1 bytes); complex types have no
// HCCL type. Moves (broadcast, all-gather, send/recv) are untyped: bytes as
// INT8.
var dtypes = map[rt.DataType]int{
	rt.Int8: 0, rt.Int16: 1, rt.Int32: 2, rt.Float16: 3, rt.Float32: 4, rt.Int64: 5, rt.BFloat16: 11, rt.Bool: 0,
}

// HcclReduceOp: SUM=0 PROD=1 MAX=2 MIN=3; no AVG.
var ops = map[rt.ReduceOp]int{rt.Sum: 0, rt.Product: 1, rt.Max: 2, rt.Min: 3}

const hcclInt8 = 0 // the type of untyped moves: every HCCL call documents int8

var table = vendor.NewTable("ascend", "HCCL", dtypes, ops).Refuse(rt.Product, rt.Int16, rt.BFloat16)

func init() { rt.Register("ascend", func() (rt.Device, error) { return Open() }) }

// Device is the Ascend device.
type Device struct {
	hccl, acl *dl.Library

	getRootInfo, initRootInfo, destroy, allReduce, broadcast, reduce, allGather, reduceScatter fn
	send, recv, gStart, gEnd, batch, errString, asyncErr                                       fn

	aclInit, count, setDev, getDev, devSync, sCreate, sDestroy, sSync, eCreate, eRecord, eSync fn
	eDestroy, waitEvent, malloc, free, mallocHost, freeHost, memcpy, memcpyAsync, memset       fn
	memInfo                                                                                    fn

	countOnce sync.Once
	n         int
}

// Open loads HCCL and ACL and initialises ACL once.
func Open() (*Device, error) {
	d := &Device{}
	var err error
	if d.hccl, err = dl.Open("XCCL_HCCL_LIBRARY", "libhccl.so", "/usr/local/Ascend/ascend-toolkit/latest/lib64/libhccl.so"); err != nil {
		return nil, err
	}
	// CANN 8.x moved the communicator calls (root info, init, destroy,
	// groups, async errors) to libhcomm.so, which libhccl.so loads itself:
	// symbols come from either. Older CANN has no libhcomm.so.
	if hcomm, herr := dl.Open("XCCL_HCOMM_LIBRARY", "libhcomm.so", "/usr/local/Ascend/ascend-toolkit/latest/lib64/libhcomm.so"); herr == nil {
		d.hccl.With(hcomm)
	} else if rt.Getenv("XCCL_HCOMM_LIBRARY") != "" {
		return nil, herr
	}
	if d.acl, err = dl.Open("XCCL_ACL_LIBRARY", "libascendcl.so", "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so"); err != nil {
		return nil, err
	}
	if err = d.hccl.Bind(map[string]*unsafe.Pointer{
		"HcclGetRootInfo": &d.getRootInfo, "HcclCommInitRootInfo": &d.initRootInfo, "HcclCommDestroy": &d.destroy,
		"HcclAllReduce": &d.allReduce, "HcclBroadcast": &d.broadcast,
		"HcclAllGather": &d.allGather, "HcclReduceScatter": &d.reduceScatter, "HcclSend": &d.send, "HcclRecv": &d.recv,
	}, map[string]*unsafe.Pointer{
		"HcclReduce":     &d.reduce, // not in CANN before 6
		"HcclGroupStart": &d.gStart, "HcclGroupEnd": &d.gEnd, "HcclBatchSendRecv": &d.batch,
		"HcclGetErrorString": &d.errString, "HcclGetCommAsyncError": &d.asyncErr,
	}); err != nil {
		return nil, err
	}
	if err = d.acl.Bind(map[string]*unsafe.Pointer{
		"aclInit": &d.aclInit, "aclrtGetDeviceCount": &d.count, "aclrtSetDevice": &d.setDev, "aclrtGetDevice": &d.getDev,
		"aclrtSynchronizeDevice": &d.devSync, "aclrtCreateStream": &d.sCreate, "aclrtDestroyStream": &d.sDestroy,
		"aclrtSynchronizeStream": &d.sSync, "aclrtCreateEvent": &d.eCreate, "aclrtRecordEvent": &d.eRecord,
		"aclrtSynchronizeEvent": &d.eSync, "aclrtDestroyEvent": &d.eDestroy, "aclrtStreamWaitEvent": &d.waitEvent,
		"aclrtMalloc": &d.malloc, "aclrtFree": &d.free, "aclrtMallocHost": &d.mallocHost, "aclrtFreeHost": &d.freeHost,
		"aclrtMemcpy": &d.memcpy, "aclrtMemcpyAsync": &d.memcpyAsync, "aclrtMemsetAsync": &d.memset,
	}, map[string]*unsafe.Pointer{"aclrtGetMemInfo": &d.memInfo}); err != nil {
		return nil, err
	}
	// aclInit once per process; 100002 is ACL_ERROR_REPEAT_INITIALIZE.
	if rc := cACLInit(d.aclInit); rc != 0 && rc != 100002 {
		return nil, rt.Failedf("ascend: aclInit returned %d", rc)
	}
	return d, nil
}

// Name is "ascend".
func (d *Device) Name() string { return "ascend" }

// Libraries names what was loaded.
func (d *Device) Libraries() string { return d.hccl.Name + ", " + d.acl.Name }

func (d *Device) check(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	st := rt.StatusFailed
	if rc == 1 || rc == 2 || rc == 5 { // HCCL_E_PARA, HCCL_E_PTR, HCCL_E_NOT_SUPPORT
		st = rt.StatusError
	}
	return &rt.Error{Status: st, Msg: fmt.Sprintf("ascend: Hccl%s returned %d %s", what, rc, ccall.ErrStr(d.errString, rc))}
}

func (d *Device) checkACL(what string, rc int) error {
	if rc == 0 {
		return nil
	}
	return rt.Failedf("ascend: aclrt%s returned %d", what, rc)
}

// Supports is the HCCL capability matrix.
func (d *Device) Supports(dt rt.DataType, op rt.ReduceOp) error { return table.Supports(dt, op) }

// SelfP2P: HCCL matches a send to self with a receive from self inside a
// group; ungrouped, xccl copies device to device (runtime.SelfInGroup).
func (d *Device) SelfP2P() rt.SelfMode { return rt.SelfInGroup }

// UniqueIDSize is sizeof(HcclRootInfo).
func (d *Device) UniqueIDSize() int { return RootInfoBytes }

// NewUniqueID is HcclGetRootInfo.
func (d *Device) NewUniqueID() ([]byte, error) {
	id := make([]byte, RootInfoBytes)
	return id, d.check("GetRootInfo", ccall.Ptr(d.getRootInfo, uintptr(unsafe.Pointer(&id[0]))))
}

// CommInitRank is HcclCommInitRootInfo(nRanks, &root, rank, &comm).
func (d *Device) CommInitRank(nranks int, id []byte, rank int) (rt.Comm, error) {
	if len(id) != RootInfoBytes {
		return nil, rt.Errorf("ascend: unique id is %d bytes, want %d", len(id), RootInfoBytes)
	}
	comm, rc := vendor.Joining(func() (uintptr, int) { return cInit(d.initRootInfo, nranks, id, rank) })
	if err := d.check("CommInitRootInfo", rc); err != nil {
		return nil, err
	}
	return &Comm{CommBase: vendor.NewCommBase("ascend", rank, nranks), d: d, comm: comm}, nil
}

// RunGroup runs a group as HCCL allows one: HcclGroupStart/End (CANN 8,
// libhcomm) may not mix collectives with sends and receives, the 950 takes
// no collectives in them, and Atlas training and inference parts have no
// groups at all. So the group's collectives run one by one in issue order
// (every rank issues the same order, so none waits on a later one; each
// is queued on its stream), unless they are on several communicators (one
// thread driving several ranks, whose first calls may wait for each other
// to link) and the library has group calls: then between HcclGroupStart
// and HcclGroupEnd. Its sends and receives, which do need each other, run
// next as one HcclBatchSendRecv (every CANN since 6) where they are on one
// communicator, else between HcclGroupStart and HcclGroupEnd too.
func (d *Device) RunGroup(ops []*rt.Op) error {
	var colls []*rt.Op
	spread := false // the collectives are on several communicators
	for _, op := range ops {
		if op.Kind != rt.OpSend && op.Kind != rt.OpRecv {
			spread = spread || len(colls) > 0 && op.Comm != colls[0].Comm
			colls = append(colls, op)
		}
	}
	if spread && d.gStart != nil && d.gEnd != nil {
		if err := vendor.RunOps(func() error { return d.check("GroupStart", ccall.Void(d.gStart)) },
			func() error { return d.check("GroupEnd", ccall.Void(d.gEnd)) }, colls, d.run); err != nil {
			return err
		}
	} else if err := vendor.Each(colls, d.run); err != nil {
		return err
	}
	var items []sendRecvItem
	var p2p []*rt.Op
	var one *Comm // the communicator of every send and receive, if one
	for _, op := range ops {
		if op.Kind != rt.OpSend && op.Kind != rt.OpRecv {
			continue
		}
		c, _ := op.Comm.(*Comm)
		if len(p2p) == 0 {
			one = c
		} else if c != one {
			one = nil
		}
		p2p = append(p2p, op)
		items = append(items, item(op))
	}
	switch {
	case len(p2p) == 0:
		return nil
	case one != nil && d.batch != nil:
		err := one.Fail(d.check("BatchSendRecv", cBatch(d.batch, items, one.comm, uintptr(p2p[0].Stream))))
		runtime.KeepAlive(ops) // the items hold the buffers' addresses only
		return err
	case d.gStart != nil && d.gEnd != nil:
		return vendor.RunOps(func() error { return d.check("GroupStart", ccall.Void(d.gStart)) },
			func() error { return d.check("GroupEnd", ccall.Void(d.gEnd)) }, p2p, d.run)
	}
	return rt.Errorf("ascend: this HCCL has no group calls; the sends and receives of a group must be on one communicator (batched)")
}

func item(op *rt.Op) sendRecvItem {
	n := uint64(op.Count * op.Type.Size())
	if op.Kind == rt.OpSend {
		return sendRecvItem{Type: 0, Buf: uintptr(op.Send), Count: n, DType: hcclInt8, Remote: uint32(op.Root)}
	}
	return sendRecvItem{Type: 1, Buf: uintptr(op.Recv), Count: n, DType: hcclInt8, Remote: uint32(op.Root)}
}

func (d *Device) run(op *rt.Op) error {
	c, ok := op.Comm.(*Comm)
	if !ok || c.d != d {
		return rt.Errorf("ascend: group mixes in a communicator of another device")
	}
	return c.Run(op)
}

// Comm is an HCCL communicator.
type Comm struct {
	vendor.CommBase
	d    *Device
	comm uintptr
}

// Run forwards one operation on the caller's stream.
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
			return c.Fail(d.check("AllReduce", ccall.Coll(d.allReduce, s, r, op.Count, dt, ro, c.comm, st)))
		case rt.OpReduce:
			if d.reduce == nil {
				return rt.Errorf("ascend: this HCCL has no HcclReduce (CANN 6 and later have)")
			}
			return c.Fail(d.check("Reduce", ccall.CollRoot(d.reduce, s, r, op.Count, dt, ro, op.Root, c.comm, st)))
		default:
			return c.Fail(d.check("ReduceScatter", ccall.Coll(d.reduceScatter, s, r, op.Count, dt, ro, c.comm, st)))
		}
	}
	n := op.Count * op.Type.Size() // moves as bytes
	switch op.Kind {
	case rt.OpBroadcast: // HcclBroadcast(buf, count, dtype, root, comm, stream): in place
		return c.Fail(d.check("Broadcast", ccall.P2P(d.broadcast, r, n, hcclInt8, op.Root, c.comm, st)))
	case rt.OpAllGather:
		return c.Fail(d.check("AllGather", ccall.Move(d.allGather, s, r, n, hcclInt8, c.comm, st)))
	case rt.OpSend:
		return c.Fail(d.check("Send", ccall.P2P(d.send, s, n, hcclInt8, op.Root, c.comm, st)))
	case rt.OpRecv:
		return c.Fail(d.check("Recv", ccall.P2P(d.recv, r, n, hcclInt8, op.Root, c.comm, st)))
	case rt.OpAllToAll:
		p2p := vendor.SplitAllToAll(c, op)
		if len(p2p) == 0 {
			return nil
		}
		return d.RunGroup(p2p)
	}
	return rt.Errorf("ascend: unknown operation %v", op.Kind)
}

// AsyncError reports local failures and HcclGetCommAsyncError when present
// (HCCL_E_NOT_SUPPORT, as the 950 answers it, is no error).
func (c *Comm) AsyncError() error {
	return c.CommBase.AsyncError(c.d.asyncErr, c.comm, func(what string, rc int) error {
		if rc == hcclNotSupport && what == "CommGetAsyncError" {
			return nil
		}
		return c.d.check(what, rc)
	})
}

// hcclNotSupport is HCCL_E_NOT_SUPPORT.
const hcclNotSupport = 5

// Destroy is HcclCommDestroy.
func (c *Comm) Destroy() error { return c.d.check("CommDestroy", ccall.Ptr(c.d.destroy, c.comm)) }

// Abort: HCCL has no abort; the communicator is marked broken.
func (c *Comm) Abort() { _ = c.Fail(rt.Failedf("ascend: communicator aborted")) }

// KeepsOnAbort: HCCL has no abort, so Abort only breaks the communicator
// and Destroy frees it (HcclCommDestroy waits for its work in flight).
func (c *Comm) KeepsOnAbort() bool { return true }
