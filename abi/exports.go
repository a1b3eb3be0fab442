package main

/*
#include "xccl.h"
#include "group.h"
void xccl_abi_go_group(int open);
*/
import "C"

import (
	"fmt"
	"math"
	goruntime "runtime"
	"time"
	"unsafe"

	"github.com/xccl-project/xccl/devices/host"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

//export XcclGetVersion
func XcclGetVersion(version *C.int) C.C_Status {
	return call("XcclGetVersion", func() error {
		if version == nil {
			return rt.Errorf("version is NULL")
		}
		*version = C.int(xccl.VersionCode())
		return nil
	})
}

// xcclGetCapabilities is XcclGetCapabilities (constwrap.c) without const.
//
//export xcclGetCapabilities
func xcclGetCapabilities(name *C.char, buf *C.char, n C.size_t) C.C_Status {
	return call("XcclGetCapabilities", func() error {
		if buf == nil {
			return rt.Errorf("buf is NULL")
		}
		dev, err := device()
		if name != nil {
			dev, err = rt.Open(C.GoString(name))
		}
		if err != nil {
			return err
		}
		return putString(buf, n, rt.CapabilityMatrix(dev))
	})
}

// putString writes s NUL-terminated into the caller's buffer of n bytes.
func putString(buf *C.char, n C.size_t, s string) error {
	if buf == nil {
		return rt.Errorf("buf is NULL")
	}
	if uint64(len(s)) >= uint64(n) {
		return rt.Errorf("buffer of %d bytes is too small for %d", uint64(n), len(s)+1)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return nil
}

//export xcclGetAlgorithms
func xcclGetAlgorithms(name *C.char, buf *C.char, n C.size_t) C.C_Status {
	return call("XcclGetAlgorithms", func() error {
		dev, err := device()
		if name != nil {
			dev, err = rt.Open(C.GoString(name))
		}
		if err != nil {
			return err
		}
		return putString(buf, n, rt.Algorithms(dev))
	})
}

//export XcclCommGetStats
func XcclCommGetStats(comm C.C_CCLComm, buf *C.char, n C.size_t) C.C_Status {
	return call("XcclCommGetStats", func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		return putString(buf, n, c.StatsJSON())
	})
}

//export XcclCommGetCapabilities
func XcclCommGetCapabilities(comm C.C_CCLComm, buf *C.char, n C.size_t) C.C_Status {
	return call("XcclCommGetCapabilities", func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		return putString(buf, n, c.Capabilities())
	})
}

//export XcclCommSetTimeout
func XcclCommSetTimeout(comm C.C_CCLComm, seconds C.double) C.C_Status {
	return call("XcclCommSetTimeout", func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		s := float64(seconds)
		if !(s > 0 && s < 1e9) {
			return rt.Errorf("timeout of %v seconds: want more than 0 and less than 1e9", s)
		}
		return c.SetTimeout(time.Duration(s * float64(time.Second)))
	})
}

//export XcclCommEnableStats
func XcclCommEnableStats(comm C.C_CCLComm, enable C.int) C.C_Status {
	return call("XcclCommEnableStats", func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		c.EnableStats(enable != 0)
		return nil
	})
}

//export xcclAllReduceFused
func xcclAllReduceFused(sendBufs, recvBufs *unsafe.Pointer, counts *C.size_t, nbufs C.size_t, dt C.C_DataType,
	op C.C_CCLReduceOp, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclAllReduceFused", grouped(func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		if nbufs > 1<<20 {
			return rt.Errorf("nbufs %d is more than 2^20 buffers", uint64(nbufs))
		}
		k := int(nbufs)
		if k > 0 && (sendBufs == nil || recvBufs == nil || counts == nil) {
			return rt.Errorf("an array argument is NULL")
		}
		sends, recvs := make([]unsafe.Pointer, k), make([]unsafe.Pointer, k)
		ns := make([]int, k)
		if k > 0 {
			copy(sends, unsafe.Slice(sendBufs, k))
			copy(recvs, unsafe.Slice(recvBufs, k))
			for i, v := range unsafe.Slice(counts, k) {
				if ns[i], err = toInt("count", v); err != nil {
					return err
				}
			}
		}
		return c.AllReduceFusedIn(threadGroup(), sends, recvs, ns, dtype(dt), redop(op), stream(s))
	}))
}

//export XcclGetUniqueIdSize
func XcclGetUniqueIdSize(size *C.size_t) C.C_Status {
	return call("XcclGetUniqueIdSize", func() error {
		if size == nil {
			return rt.Errorf("size is NULL")
		}
		*size = C.size_t(xccl.UniqueIDSize(nil))
		return nil
	})
}

//export XcclGetUniqueId
func XcclGetUniqueId(id *C.C_CCLRootId) C.C_Status {
	return call("XcclGetUniqueId", func() error {
		if id == nil || id.data == nil {
			return rt.Errorf("unique id or its data is NULL")
		}
		// xccl's ids are one kind for every device: no device is opened,
		// so a process may still choose its device (XCCL_DEVICE) after
		// making an id, before its first communicator.
		if int(id.sz) < xccl.UniqueIDSize(nil) {
			return rt.Errorf("unique id buffer is %d bytes, need %d", int(id.sz), xccl.UniqueIDSize(nil))
		}
		b, err := xccl.GetUniqueID(nil)
		if err != nil {
			return err
		}
		copy(unsafe.Slice((*byte)(id.data), len(b)), b)
		id.sz = C.size_t(len(b))
		return nil
	})
}

//export XcclCommInitRank
func XcclCommInitRank(nranks C.size_t, id *C.C_CCLRootId, rank C.size_t, comm *C.C_CCLComm) C.C_Status {
	return call("XcclCommInitRank", func() error { return initRank(nranks, id, rank, comm, 0) })
}

//export xcclCommInitRankConfig
func xcclCommInitRankConfig(nranks C.size_t, id *C.C_CCLRootId, rank C.size_t, config *C.XcclConfig, comm *C.C_CCLComm) C.C_Status {
	return call("XcclCommInitRankConfig", func() error {
		timeout, err := configTimeout(config)
		if err != nil {
			return err
		}
		return initRank(nranks, id, rank, comm, timeout)
	})
}

// configTimeout is an XcclConfig's timeout (0: unset, or no config).
func configTimeout(config *C.XcclConfig) (time.Duration, error) {
	if config == nil {
		return 0, nil
	}
	if config.size < C.size_t(unsafe.Sizeof(C.size_t(0))) {
		return 0, rt.Errorf("config size %d is too small (XCCL_CONFIG_INITIALIZER sets it)", uint64(config.size))
	}
	if config.size < C.size_t(unsafe.Offsetof(config.timeout_seconds)+unsafe.Sizeof(config.timeout_seconds)) {
		return 0, nil
	}
	s := float64(config.timeout_seconds)
	if s < 0 || math.IsNaN(s) || s > 1e9 {
		return 0, rt.Errorf("config timeout_seconds %v must be 0 (XCCL_TIMEOUT) or positive", s)
	}
	return time.Duration(s * float64(time.Second)), nil
}

//export xcclCommInitAll
func xcclCommInitAll(comms *C.C_CCLComm, ndev C.int, devlist *C.int) C.C_Status {
	return call("XcclCommInitAll", func() error {
		if comms == nil {
			return rt.Errorf("comms is NULL")
		}
		if ndev < 1 || ndev > 1<<16 {
			return rt.Errorf("ndev %d must be between 1 and 65536", int(ndev))
		}
		if g := threadGroup(); g != nil && g.Active() {
			return rt.Errorf("XcclCommInitAll inside a group: call it outside XcclGroupStart/End")
		}
		dev, err := initDevice()
		if err != nil {
			return err
		}
		devs := make([]int, int(ndev))
		for i := range devs {
			devs[i] = i
		}
		if devlist != nil {
			for i, d := range unsafe.Slice(devlist, int(ndev)) {
				devs[i] = int(d)
			}
		}
		cs, err := xccl.CommInitAll(dev, devs, xccl.Config{Cluster: rt.Load().Cluster})
		if err != nil {
			return err
		}
		out := unsafe.Slice(comms, int(ndev))
		for i, c := range cs {
			out[i] = newCommHandle(c)
		}
		return nil
	})
}

//export xcclCommSplit
func xcclCommSplit(comm C.C_CCLComm, color, key C.int, newcomm *C.C_CCLComm, config *C.XcclConfig) C.C_Status {
	return call("XcclCommSplit", func() error {
		if newcomm != nil {
			*newcomm = nil
		}
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		// A bad newcomm or config still joins the exchange (as a negative
		// timeout, which fails every rank), so that no other rank waits.
		bad := error(nil)
		timeout, err := configTimeout(config)
		if err != nil {
			bad, timeout = err, -1
		}
		if newcomm == nil {
			bad, timeout = rt.Errorf("newcomm is NULL"), -1
		}
		if g := threadGroup(); g != nil && g.Active() {
			// As NCCL's: made at the group's end, with its other splits and
			// inits, so that one thread splits the communicators of several
			// ranks; *newcomm is a handle usable once the group ended.
			var h C.C_CCLComm
			var slot uintptr // h's key in comms
			if bad == nil && int(color) != xccl.SplitNoColor {
				h = newPendingHandle()
				slot = uintptr(unsafe.Pointer(h))
			}
			g.DeferOn(c, func() error { // two splits of one communicator run in the order they came
				nc, err := c.Split(int(color), int(key), xccl.Config{Timeout: timeout})
				if err != nil {
					err = rt.WrapFailed(err, "XcclCommSplit (deferred to XcclGroupEnd)")
				}
				switch {
				case h == nil:
				case err != nil:
					comms.Store(slot, failedComm{err})
				default:
					comms.Store(slot, nc)
				}
				return err
			})
			if bad != nil {
				return bad
			}
			*newcomm = h
			return nil
		}
		nc, err := c.Split(int(color), int(key), xccl.Config{Timeout: timeout})
		if bad != nil {
			return bad
		}
		if err != nil || nc == nil {
			return err
		}
		*newcomm = newCommHandle(nc)
		return nil
	})
}

// checkInit checks an init's arguments (XcclCommInitRank's and
// XcclCommContextCreate's).
func checkInit(nranks C.size_t, id *C.C_CCLRootId, rank C.size_t, comm *C.C_CCLComm) error {
	switch {
	case comm == nil:
		return rt.Errorf("comm is NULL")
	case id == nil || id.data == nil:
		return rt.Errorf("unique id or its data is NULL")
	case id.sz > 1<<20:
		return rt.Errorf("unique id size %d is not plausible", uint64(id.sz))
	case uint64(nranks) > 1<<20:
		return rt.Errorf("nranks %d is more than the %d a communicator may have", uint64(nranks), 1<<20)
	case uint64(rank) >= uint64(nranks):
		return rt.Errorf("rank %d out of range for %d ranks", uint64(rank), uint64(nranks))
	}
	return nil
}

// initRank is XcclCommInitRank with a timeout (0: XCCL_TIMEOUT).
func initRank(nranks C.size_t, id *C.C_CCLRootId, rank C.size_t, comm *C.C_CCLComm, timeout time.Duration) error {
	if err := checkInit(nranks, id, rank, comm); err != nil {
		return err
	}
	dev, err := initDevice()
	if err != nil {
		return err
	}
	b := C.GoBytes(id.data, C.int(id.sz)) // Paddle's id memory lives only during the call
	if g := threadGroup(); g != nil && g.Active() {
		// As NCCL does: made at the group's end, together with the
		// group's other inits, on the device the caller has set now.
		devID, err := dev.GetDevice()
		if err != nil {
			return err
		}
		if len(b) != xccl.UniqueIDSize(dev) {
			return rt.Errorf("CommInitRank: unique id is %d bytes, xccl's ids are %d", len(b), xccl.UniqueIDSize(dev))
		}
		h := newPendingHandle()
		key := uintptr(unsafe.Pointer(h))
		g.Defer(func() error {
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			if prev, err := dev.GetDevice(); err == nil {
				defer func() { _ = dev.SetDevice(prev) }() // the thread goes back to the pool as it was
			}
			c, err := func() (*xccl.Comm, error) {
				if err := dev.SetDevice(devID); err != nil {
					return nil, err
				}
				return xccl.CommInitRankConfig(dev, int(nranks), b, int(rank), xccl.Config{Cluster: rt.Load().Cluster, Timeout: timeout})
			}()
			if err != nil {
				err = rt.WrapFailed(err, "XcclCommInitRank (rank %d of %d, deferred to XcclGroupEnd)", int(rank), int(nranks))
				comms.Store(key, failedComm{err})
				return err
			}
			comms.Store(key, c)
			return nil
		})
		*comm = h
		return nil
	}
	c, err := xccl.CommInitRankConfig(dev, int(nranks), b, int(rank), xccl.Config{Cluster: rt.Load().Cluster, Timeout: timeout})
	if err != nil {
		return err
	}
	*comm = newCommHandle(c)
	return nil
}

//export XcclCommInitFromEnv
func XcclCommInitFromEnv(comm *C.C_CCLComm, rank, nranks, localRank *C.int) C.C_Status {
	return call("XcclCommInitFromEnv", func() error {
		if comm == nil {
			return rt.Errorf("comm is NULL")
		}
		if g := threadGroup(); g != nil && g.Active() {
			return rt.Errorf("XcclCommInitFromEnv inside a group: call it outside XcclGroupStart/End")
		}
		dev, err := initDevice()
		if err != nil {
			return err
		}
		c, e, err := xccl.CommInitFromEnv(dev)
		if err != nil {
			return err
		}
		*comm = newCommHandle(c)
		for _, out := range []struct {
			p *C.int
			v int
		}{{rank, e.Rank}, {nranks, e.Size}, {localRank, e.LocalRank}} {
			if out.p != nil {
				*out.p = C.int(out.v)
			}
		}
		return nil
	})
}

//export XcclDestroyComm
func XcclDestroyComm(comm C.C_CCLComm) C.C_Status {
	return call("XcclDestroyComm", func() error {
		if comm == nil {
			return nil
		}
		c, err := dropComm(comm)
		if err != nil || c == nil { // nil: a deferred init that failed
			return err
		}
		return c.Destroy()
	})
}

//export XcclCommAbort
func XcclCommAbort(comm C.C_CCLComm) C.C_Status {
	return call("XcclCommAbort", func() error {
		if comm == nil {
			return nil // as ncclCommAbort(NULL)
		}
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		c.Abort()
		return nil
	})
}

//export XcclCommGetAsyncError
func XcclCommGetAsyncError(comm C.C_CCLComm, asyncError *C.C_Status) C.C_Status {
	return call("XcclCommGetAsyncError", func() error {
		if asyncError == nil {
			return rt.Errorf("async_error is NULL")
		}
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		err = c.AsyncError()
		*asyncError = C.C_Status(rt.StatusOf(err))
		if err != nil { // its text, for XcclGetLastError (the call itself succeeds), logged once
			report("XcclCommGetAsyncError: "+err.Error(), rt.StatusOf(err))
		}
		return nil
	})
}

//export XcclCommCount
func XcclCommCount(comm C.C_CCLComm, count *C.int) C.C_Status {
	return commInt("XcclCommCount", comm, count, "count", (*xccl.Comm).Size)
}

//export XcclCommUserRank
func XcclCommUserRank(comm C.C_CCLComm, rank *C.int) C.C_Status {
	return commInt("XcclCommUserRank", comm, rank, "rank", (*xccl.Comm).Rank)
}

//export XcclCommDevice
func XcclCommDevice(comm C.C_CCLComm, device *C.int) C.C_Status {
	return commInt("XcclCommDevice", comm, device, "device", (*xccl.Comm).DeviceID)
}

// commInt answers query name of comm, get's value, into out (named
// what in the error when it is NULL).
func commInt(name string, comm C.C_CCLComm, out *C.int, what string, get func(*xccl.Comm) int) C.C_Status {
	return call(name, func() error {
		if out == nil {
			return rt.Errorf("%s is NULL", what)
		}
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		*out = C.int(get(c))
		return nil
	})
}

//export XcclCommFinalize
func XcclCommFinalize(comm C.C_CCLComm) C.C_Status {
	return call("XcclCommFinalize", func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		if g := threadGroup(); g != nil && g.Active() {
			return rt.Errorf("inside a group: call it after XcclGroupEnd (the group's operations are not issued yet)")
		}
		return c.Finalize()
	})
}

//export XcclRedOpCreatePreMulSum
func XcclRedOpCreatePreMulSum(op *C.C_CCLReduceOp, scalar unsafe.Pointer, dt C.C_DataType, residence C.XcclScalarResidence, comm C.C_CCLComm) C.C_Status {
	return call("XcclRedOpCreatePreMulSum", func() error {
		if op == nil {
			return rt.Errorf("op is NULL")
		}
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		o, err := c.CreatePreMulSum(scalar, dtype(dt), xccl.ScalarResidence(residence))
		if err != nil {
			return err
		}
		*op = C.C_CCLReduceOp(o)
		return nil
	})
}

//export XcclRedOpDestroy
func XcclRedOpDestroy(op C.C_CCLReduceOp, comm C.C_CCLComm) C.C_Status {
	return call("XcclRedOpDestroy", func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		return c.DestroyPreMulSum(redop(op))
	})
}

// xcclCommRegister and xcclCommDeregister are XcclCommRegister and
// XcclCommDeregister with the handle as the integer it is (an opaque
// token, never a pointer); constwrap.c defines the public symbols.
//
//export xcclCommRegister
func xcclCommRegister(comm C.C_CCLComm, buf unsafe.Pointer, size C.size_t, handle *C.uintptr_t) C.C_Status {
	return call("XcclCommRegister", func() error {
		if handle == nil {
			return rt.Errorf("handle is NULL")
		}
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		n, err := toInt("size", size)
		if err != nil {
			return err
		}
		h, err := c.Register(buf, n)
		if err != nil {
			return err
		}
		*handle = C.uintptr_t(h)
		return nil
	})
}

//export xcclCommDeregister
func xcclCommDeregister(comm C.C_CCLComm, handle C.uintptr_t) C.C_Status {
	return call("XcclCommDeregister", func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		return c.Deregister(uintptr(handle))
	})
}

// do validates the size_t arguments and submits op, from xccl.NewOp, on
// comm (queued when this thread has an open group). The entries fill a
// pooled Op in place: a literal passed down by value was copied twice, 250
// bytes each time, read back right after its fields were stored.
func do(comm C.C_CCLComm, count C.size_t, op *rt.Op) error {
	return doIn(comm, count, op, threadGroup())
}

// doIn is do with the calling thread's group (nil: none) already found.
func doIn(comm C.C_CCLComm, count C.size_t, op *rt.Op, g *xccl.Group) error {
	c, err := lookupComm(comm)
	if err != nil {
		if count == 0 {
			return nil // count 0 is a no-op whatever the communicator (Paddle's own tests pass NULL)
		}
		g.Fail(err) // a refused call fails the thread's open group (Submit: the others)
		return err
	}
	if op.Count, err = toInt("count", count); err != nil {
		g.Fail(err)
		return err
	}
	args := briefOf(op) // op is the pool's after Submit
	return refused(c.Submit(g, op), args, c.Rank(), c.Size())
}

// refused says, of a refused call (C_ERROR), what it was; other errors
// pass as they are.
func refused(err error, args brief, rank, n int) error {
	if rt.StatusOf(err) == rt.StatusError {
		return rt.Errorf("%v [%s; rank %d of %d]", err, args, rank, n)
	}
	return err
}

// brief is what the message of a refused call says of its arguments.
type brief struct {
	kind  rt.OpKind
	count int
	dt    rt.DataType
	red   rt.ReduceOp
	root  int
}

func briefOf(op *rt.Op) brief {
	return brief{kind: op.Kind, count: op.Count, dt: op.Type, red: op.Red, root: op.Root}
}

func (op brief) String() string {
	s := fmt.Sprintf("count %d, %v", op.count, op.dt)
	switch op.kind {
	case rt.OpAllReduce, rt.OpReduceScatter:
		s += fmt.Sprintf(", %v", op.red)
	case rt.OpReduce:
		s += fmt.Sprintf(", %v, root %d", op.red, op.root)
	case rt.OpBroadcast:
		s += fmt.Sprintf(", root %d", op.root)
	case rt.OpSend, rt.OpRecv:
		s += fmt.Sprintf(", peer %d", op.root)
	}
	return s
}

// The C entries of the collectives (fast.c) try the host device's C fast
// path, then call these.

//export xcclAllReduce
func xcclAllReduce(sendBuf, recvBuf unsafe.Pointer, count C.size_t, dt C.C_DataType, op C.C_CCLReduceOp, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclAllReduce", func() error {
		o := xccl.NewOp()
		o.Kind, o.Send, o.Recv, o.Type, o.Red, o.Stream = rt.OpAllReduce, sendBuf, recvBuf, dtype(dt), redop(op), stream(s)
		return do(comm, count, o)
	})
}

//export xcclBroadcast
func xcclBroadcast(buf unsafe.Pointer, count C.size_t, dt C.C_DataType, root C.size_t, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclBroadcast", func() error {
		r, err := toInt("root", root)
		if err != nil {
			return err
		}
		o := xccl.NewOp()
		o.Kind, o.Send, o.Recv, o.Type, o.Root, o.Stream = rt.OpBroadcast, buf, buf, dtype(dt), r, stream(s)
		return do(comm, count, o)
	})
}

//export xcclReduce
func xcclReduce(sendBuf, recvBuf unsafe.Pointer, count C.size_t, dt C.C_DataType, op C.C_CCLReduceOp, root C.size_t, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclReduce", func() error {
		r, err := toInt("root", root)
		if err != nil {
			return err
		}
		o := xccl.NewOp()
		o.Kind, o.Send, o.Recv, o.Type, o.Red, o.Root, o.Stream = rt.OpReduce, sendBuf, recvBuf, dtype(dt), redop(op), r, stream(s)
		return do(comm, count, o)
	})
}

//export xcclAllGather
func xcclAllGather(sendBuf, recvBuf unsafe.Pointer, count C.size_t, dt C.C_DataType, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclAllGather", func() error {
		o := xccl.NewOp()
		o.Kind, o.Send, o.Recv, o.Type, o.Stream = rt.OpAllGather, sendBuf, recvBuf, dtype(dt), stream(s)
		return do(comm, count, o)
	})
}

//export xcclReduceScatter
func xcclReduceScatter(sendBuf, recvBuf unsafe.Pointer, count C.size_t, dt C.C_DataType, op C.C_CCLReduceOp, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclReduceScatter", func() error {
		o := xccl.NewOp()
		o.Kind, o.Send, o.Recv, o.Type, o.Red, o.Stream = rt.OpReduceScatter, sendBuf, recvBuf, dtype(dt), redop(op), stream(s)
		return do(comm, count, o)
	})
}

// The C entries XcclSend and XcclRecv (fast.c) pass the calling thread's
// id when a group is open anywhere (0: none), so that a call inside a
// group finds it without asking C again.

//export xcclSend
func xcclSend(buf unsafe.Pointer, count C.size_t, dt C.C_DataType, dest C.size_t, comm C.C_CCLComm, s C.C_Stream, tid C.int) C.C_Status {
	return call("XcclSend", func() error {
		p, err := toInt("dest_rank", dest)
		if err != nil {
			return err
		}
		o := xccl.NewOp()
		o.Kind, o.Send, o.Type, o.Root, o.Stream = rt.OpSend, buf, dtype(dt), p, stream(s)
		return doIn(comm, count, o, groupOf(int(tid)))
	})
}

//export xcclRecv
func xcclRecv(buf unsafe.Pointer, count C.size_t, dt C.C_DataType, src C.size_t, comm C.C_CCLComm, s C.C_Stream, tid C.int) C.C_Status {
	return call("XcclRecv", func() error {
		p, err := toInt("src_rank", src)
		if err != nil {
			return err
		}
		o := xccl.NewOp()
		o.Kind, o.Recv, o.Type, o.Root, o.Stream = rt.OpRecv, buf, dtype(dt), p, stream(s)
		return doIn(comm, count, o, groupOf(int(tid)))
	})
}

//export XcclGather
func XcclGather(sendBuf, recvBuf unsafe.Pointer, count C.size_t, dt C.C_DataType, root C.size_t, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclGather", grouped(func() error { return rooted(comm, count, root, sendBuf, recvBuf, dt, s, (*xccl.Comm).Gather) }))
}

//export XcclScatter
func XcclScatter(sendBuf, recvBuf unsafe.Pointer, count C.size_t, dt C.C_DataType, root C.size_t, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclScatter", grouped(func() error { return rooted(comm, count, root, sendBuf, recvBuf, dt, s, (*xccl.Comm).Scatter) }))
}

// grouped is f, whose error, inside the calling thread's open group, fails
// the group (as ncclGroupEnd after a failed call: xccl.Group.Fail).
func grouped(f func() error) func() error {
	return func() error {
		err := f()
		if err != nil && openGroups.Load() > 0 {
			threadGroup().Fail(err)
		}
		return err
	}
}

// rooted runs XcclGather or XcclScatter (f) on the calling thread's group.
func rooted(comm C.C_CCLComm, count, root C.size_t, send, recv unsafe.Pointer, dt C.C_DataType, s C.C_Stream,
	f func(*xccl.Comm, *xccl.Group, unsafe.Pointer, unsafe.Pointer, int, rt.DataType, int, rt.Stream) error) error {
	c, err := lookupComm(comm)
	if err != nil {
		if count == 0 {
			return nil // as do: count 0 is a no-op whatever the communicator
		}
		return err
	}
	n, err := toInt("count", count)
	if err != nil {
		return err
	}
	r, err := toInt("root", root)
	if err != nil {
		return err
	}
	err = f(c, threadGroup(), send, recv, n, dtype(dt), r, stream(s))
	if rt.StatusOf(err) == rt.StatusError {
		return rt.Errorf("%v [count %d, %v, root %d; rank %d of %d]", err, n, dtype(dt), r, c.Rank(), c.Size())
	}
	return err
}

// xcclAllToAll is XcclAllToAll without the const qualifiers Go cannot
// spell; constwrap.c defines the public symbol and forwards here.
//
//export xcclAllToAll
func xcclAllToAll(sendBuf *unsafe.Pointer, sendCount *C.size_t, sendType *C.C_DataType, recvBuf *unsafe.Pointer,
	recvCount *C.size_t, recvType *C.C_DataType, rank, nranks C.size_t, comm C.C_CCLComm, s C.C_Stream) C.C_Status {
	return call("XcclAllToAll", grouped(func() error {
		c, err := lookupComm(comm)
		if err != nil {
			return err
		}
		n := c.Size()
		if int(nranks) != n || uint64(nranks) > 1<<20 || int(rank) != c.Rank() {
			return rt.Errorf("rank %d / nranks %d do not match the communicator (rank %d of %d)", uint64(rank), uint64(nranks), c.Rank(), n)
		}
		if sendBuf == nil || sendCount == nil || sendType == nil || recvBuf == nil || recvCount == nil || recvType == nil {
			return rt.Errorf("an array argument is NULL")
		}
		op := rt.Op{Kind: rt.OpAllToAll, Stream: stream(s),
			SendBufs:   append([]unsafe.Pointer(nil), unsafe.Slice(sendBuf, n)...),
			RecvBufs:   append([]unsafe.Pointer(nil), unsafe.Slice(recvBuf, n)...),
			SendCounts: make([]int, n), RecvCounts: make([]int, n),
			SendTypes: make([]rt.DataType, n), RecvTypes: make([]rt.DataType, n)}
		sc, rc := unsafe.Slice(sendCount, n), unsafe.Slice(recvCount, n)
		st, rtp := unsafe.Slice(sendType, n), unsafe.Slice(recvType, n)
		for p := 0; p < n; p++ {
			if op.SendCounts[p], err = toInt("send count", sc[p]); err != nil {
				return err
			}
			if op.RecvCounts[p], err = toInt("recv count", rc[p]); err != nil {
				return err
			}
			op.SendTypes[p], op.RecvTypes[p] = dtype(st[p]), dtype(rtp[p])
		}
		return c.Do(threadGroup(), op)
	}))
}

// XcclGroupStart and XcclGroupEnd are C entries (fast.c) that pass the
// calling thread's id.

//export xcclGroupStart
func xcclGroupStart(tid C.int) C.C_Status {
	return call("XcclGroupStart", func() error {
		g := groupOf(int(tid))
		if g == nil {
			g = newGroup(int(tid))
		}
		g.Start()
		return nil
	})
}

//export xcclGroupEnd
func xcclGroupEnd(tid C.int) C.C_Status {
	return call("XcclGroupEnd", func() error {
		g := groupOf(int(tid))
		if g == nil || !g.Active() {
			return rt.Errorf("XcclGroupEnd without XcclGroupStart on this thread")
		}
		err := g.End()
		if !g.Active() {
			groupMu.Lock()
			delete(groups, int(tid))
			groupMu.Unlock()
			openGroups.Add(-1)
			C.xccl_abi_go_group(0)
			groupPool.Put(g) // its maps serve the next group
		}
		return err
	})
}

// xcclGroupRecorded runs a group of sends and receives C recorded (fast.c)
// at its end: as Go's group of the same calls.
//
//export xcclGroupRecorded
func xcclGroupRecorded(recs *C.xccl_rec, n C.int) C.C_Status {
	return call("XcclGroupEnd", func() error {
		g := groupPool.Get().(*xccl.Group)
		g.Start()
		replay(g, recs, n) // a refused call fails the group: End then runs none of it, as on Go's path
		err := g.End()
		if !g.Active() {
			groupPool.Put(g)
		}
		return err
	})
}

//export XcclMemAlloc
func XcclMemAlloc(ptr *unsafe.Pointer, size C.size_t) C.C_Status {
	return onDevice("XcclMemAlloc", func(dev rt.Device) error {
		if ptr == nil {
			return rt.Errorf("ptr is NULL")
		}
		n, err := toInt("size", size)
		if err != nil {
			return err
		}
		p, err := xccl.MemAlloc(dev, n)
		if err != nil {
			return err
		}
		*ptr = p
		return nil
	})
}

//export XcclMemFree
func XcclMemFree(ptr unsafe.Pointer) C.C_Status {
	return call("XcclMemFree", func() error { return xccl.MemFree(ptr) })
}

// onDevice runs fn on the process's device (XCCL_DEVICE).
func onDevice(name string, fn func(dev rt.Device) error) C.C_Status {
	return call(name, func() error {
		dev, err := device()
		if err != nil {
			return err
		}
		return fn(dev)
	})
}

// queryOnDevice is onDevice for a query: "not ready" is C_FAILED without
// recording an error.
func queryOnDevice(name string, query func(dev rt.Device) error) C.C_Status {
	notReady := false
	st := onDevice(name, func(dev rt.Device) error {
		err := query(dev)
		if err == rt.ErrNotReady {
			notReady = true // not an error: no message is recorded
			return nil
		}
		return err
	})
	if notReady {
		return C.C_FAILED
	}
	return st
}

//export XcclStreamCreate
func XcclStreamCreate(s *C.C_Stream) C.C_Status {
	return onDevice("XcclStreamCreate", func(dev rt.Device) error {
		if s == nil {
			return rt.Errorf("stream is NULL")
		}
		h, err := dev.CreateStream()
		if err != nil {
			return err
		}
		*s = streamHandle(h)
		return nil
	})
}

//export XcclStreamDestroy
func XcclStreamDestroy(s C.C_Stream) C.C_Status {
	return onDevice("XcclStreamDestroy", func(dev rt.Device) error { return dev.DestroyStream(stream(s)) })
}

//export XcclStreamSynchronize
func XcclStreamSynchronize(s C.C_Stream) C.C_Status {
	return onDevice("XcclStreamSynchronize", func(dev rt.Device) error { return dev.SynchronizeStream(stream(s)) })
}

//export XcclStreamQuery
func XcclStreamQuery(s C.C_Stream) C.C_Status {
	return queryOnDevice("XcclStreamQuery", func(dev rt.Device) error { return dev.QueryStream(stream(s)) })
}

//export XcclEventCreate
func XcclEventCreate(e *C.C_Event) C.C_Status {
	return onDevice("XcclEventCreate", func(dev rt.Device) error {
		if e == nil {
			return rt.Errorf("event is NULL")
		}
		h, err := dev.CreateEvent()
		if err != nil {
			return err
		}
		*e = eventHandle(h)
		return nil
	})
}

//export XcclEventRecord
func XcclEventRecord(e C.C_Event, s C.C_Stream) C.C_Status {
	return onDevice("XcclEventRecord", func(dev rt.Device) error { return dev.RecordEvent(event(e), stream(s)) })
}

//export XcclEventQuery
func XcclEventQuery(e C.C_Event) C.C_Status {
	return queryOnDevice("XcclEventQuery", func(dev rt.Device) error { return dev.QueryEvent(event(e)) })
}

//export XcclEventSynchronize
func XcclEventSynchronize(e C.C_Event) C.C_Status {
	return onDevice("XcclEventSynchronize", func(dev rt.Device) error { return dev.SynchronizeEvent(event(e)) })
}

//export XcclEventDestroy
func XcclEventDestroy(e C.C_Event) C.C_Status {
	return onDevice("XcclEventDestroy", func(dev rt.Device) error { return dev.DestroyEvent(event(e)) })
}

// xcclFastResume goes on with a collective the host device's C fast path
// sent and could not finish at once (fast.c: a peer not there within its
// spin, or a fingerprint that differs), its lock held: in Go, from where
// the quick path waits for the peers.
//
//export xcclFastResume
func xcclFastResume(f unsafe.Pointer, kind C.int, send, recv unsafe.Pointer, count C.size_t, dt C.C_DataType, op C.C_CCLReduceOp, root C.size_t) C.C_Status {
	o := rt.Op{Kind: rt.OpKind(kind), Send: send, Recv: recv, Count: int(count), Type: dtype(dt), Red: redop(op), Root: int(root)}
	name := "Xccl" + o.Kind.String()
	return call(name, func() error {
		rank, n := host.FastRanks(f) // while the lock is held: f is this communicator's
		return refused(host.FastResume(f, &o), briefOf(&o), rank, n)
	})
}

// xcclFastResumeFused is xcclFastResume for XcclAllReduceFused's batch
// (its arrays as the C entry checked them: two buffers or more, none empty).
//
//export xcclFastResumeFused
func xcclFastResumeFused(f unsafe.Pointer, sendBufs, recvBufs *unsafe.Pointer, counts *C.size_t, nbufs C.size_t, dt C.C_DataType, op C.C_CCLReduceOp) C.C_Status {
	return call("XcclAllReduceFused", func() error {
		k := int(nbufs)
		sends, recvs, ns := unsafe.Slice(sendBufs, k), unsafe.Slice(recvBufs, k), unsafe.Slice(counts, k)
		vals, batch := make([]rt.Op, k), make([]*rt.Op, k)
		total := 0
		for i := range vals {
			vals[i] = rt.Op{Kind: rt.OpAllReduce, Send: sends[i], Recv: recvs[i], Count: int(ns[i]), Type: dtype(dt), Red: redop(op)}
			batch[i] = &vals[i]
			total += int(ns[i])
		}
		o := rt.Op{Kind: rt.OpAllReduce, Count: total, Type: dtype(dt), Red: redop(op), Batch: batch}
		return host.FastResumeFused(f, &o) // as xcclAllReduceFused's, undecorated
	})
}
