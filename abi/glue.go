package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -O2
#include <stdlib.h>
#include <stdint.h>
#include "xccl_paddle.h"

void xccl_set_last_error(const char* msg);
static inline C_Event xccl_event_handle(uintptr_t id) { return (C_Event)id; }
static inline C_CCLComm xccl_comm_handle(uintptr_t id) { return (C_CCLComm)id; }
static inline C_Stream xccl_stream_handle(uintptr_t id) { return (C_Stream)id; }
#include "handles.h"
#include "group.h"
void xccl_abi_set_fast(uintptr_t h, void* f);
int32_t* xccl_abi_open_groups(void);
int xccl_abi_tid(void);
*/
import "C"

import (
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"go.uber.org/zap"

	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func init() {
	// Read XCCL_* through C getenv: os.Getenv misses what a host set after exec.
	rt.Getenv = func(k string) string {
		ck := C.CString(k)
		defer C.free(unsafe.Pointer(ck))
		if v := C.getenv(ck); v != nil {
			return C.GoString(v)
		}
		return ""
	}
}

// call runs one entry point: it maps the error to a C_Status, records the
// message for XcclGetLastError, logs it, and turns a panic into
// C_INTERNAL_ERROR instead of letting it kill the host.
func call(name string, f func() error) (st C.C_Status) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("%s: internal error: %v", name, r)
			rt.Log().Error(msg, zap.ByteString("stack", debug.Stack()))
			setLastError(msg)
			st = C.C_INTERNAL_ERROR
		}
	}()
	if err := f(); err != nil {
		s := rt.StatusOf(err)
		report(name+": "+err.Error(), s)
		return C.C_Status(s)
	}
	return C.C_SUCCESS
}

// report logs a failure's message once (C_FAILED at ERROR, the rest at
// WARN; the same as the last one at DEBUG: a broken communicator's calls
// fail alike) and leaves it for XcclGetLastError.
func report(msg string, s rt.Status) {
	switch {
	case !logOnce(msg):
		rt.Log().Debug(msg)
	case s == rt.StatusFailed:
		rt.Log().Error(msg)
	default:
		rt.Log().Warn(msg)
	}
	setLastError(msg)
}

// lastLogged is the last error message logged at WARN or ERROR.
var lastLogged atomic.Pointer[string]

// logOnce says whether msg differs from the last error logged (and makes
// it the last): every call on a broken communicator fails with the same
// message, which is logged once.
func logOnce(msg string) bool {
	prev := lastLogged.Swap(&msg)
	return prev == nil || *prev != msg
}

func setLastError(msg string) {
	cs := C.CString(msg)
	C.xccl_set_last_error(cs)
	C.free(unsafe.Pointer(cs))
}

// Communicators live in a Go map; C holds integer handles, never Go pointers.
// Lookups are on every call's path: the first commSlots handles made are
// found in an array of atomic pointers, the rest (and the pending and
// failed ones) in a sync.Map.
var (
	commMu   sync.Mutex // serialises handle allocation
	comms    commTable  // uintptr → *xccl.Comm, pendingComm, failedComm
	nextComm uintptr    = commBase
)

const (
	commBase  = C.XCCL_COMM_BASE // handles.h: the C entries (fast.c) count alike
	commSlots = C.XCCL_COMM_SLOTS
)

type commTable struct {
	m    sync.Map
	fast [commSlots]atomic.Pointer[xccl.Comm]
}

func (t *commTable) slot(h uintptr) *atomic.Pointer[xccl.Comm] {
	if h-commBase-1 < commSlots {
		return &t.fast[h-commBase-1]
	}
	return nil
}

func (t *commTable) Store(h uintptr, v any) {
	t.m.Store(h, v)
	if s := t.slot(h); s != nil {
		c, _ := v.(*xccl.Comm)
		s.Store(c)
		if c != nil {
			C.xccl_abi_set_fast(C.uintptr_t(h), c.FastPath()) // the C entries' (fast.c)
		}
	}
}

func (t *commTable) Load(h uintptr) (any, bool) {
	if s := t.slot(h); s != nil {
		if c := s.Load(); c != nil {
			return c, true
		}
	}
	return t.m.Load(h)
}

// CompareAndDelete deletes h if it still holds c, and says whether it did:
// one caller claims it.
func (t *commTable) CompareAndDelete(h uintptr, c *xccl.Comm) bool {
	if s := t.slot(h); s != nil {
		if !s.CompareAndSwap(c, nil) {
			return false
		}
		C.xccl_abi_set_fast(C.uintptr_t(h), nil)
		t.m.Delete(h)
		return true
	}
	return t.m.CompareAndDelete(h, c)
}

func (t *commTable) Delete(h uintptr) {
	if s := t.slot(h); s != nil {
		C.xccl_abi_set_fast(C.uintptr_t(h), nil)
		s.Store(nil)
	}
	t.m.Delete(h)
}

func newCommHandle(c *xccl.Comm) C.C_CCLComm {
	commMu.Lock()
	defer commMu.Unlock()
	nextComm++
	comms.Store(nextComm, c)
	return C.xccl_comm_handle(C.uintptr_t(nextComm))
}

// pendingComm holds the handle of a communicator whose XcclCommInitRank
// was called inside a group: it is made at the group's end.
type pendingComm struct{}

// newPendingHandle reserves a handle for a communicator made later.
func newPendingHandle() C.C_CCLComm {
	commMu.Lock()
	defer commMu.Unlock()
	nextComm++
	comms.Store(nextComm, pendingComm{})
	return C.xccl_comm_handle(C.uintptr_t(nextComm))
}

func lookupComm(h C.C_CCLComm) (*xccl.Comm, error) {
	if h == nil {
		return nil, rt.Errorf("communicator is NULL")
	}
	c, ok := comms.Load(uintptr(unsafe.Pointer(h)))
	if !ok {
		return nil, unknownComm(h)
	}
	switch c := c.(type) {
	case pendingComm:
		return nil, rt.Errorf("communicator %p is not made yet: its XcclCommInitRank or XcclCommSplit was called inside a group, so it is made by the outermost XcclGroupEnd", h)
	case failedComm:
		return nil, rt.Errorf("communicator %p was never made: %v", h, c.err)
	}
	return c.(*xccl.Comm), nil
}

func unknownComm(h C.C_CCLComm) error {
	return rt.Errorf("unknown communicator %p (destroyed, or not made by XcclCommInitRank)", h)
}

// failedComm holds the handle of a deferred init that failed, so that
// destroying it (as Paddle does on every handle) is not an error.
type failedComm struct{ err error }

// dropComm takes the handle's communicator out of the table for its
// destruction: of two threads that destroy one handle at once, one gets it
// and the other an unknown communicator, never both the communicator.
func dropComm(h C.C_CCLComm) (*xccl.Comm, error) {
	key := uintptr(unsafe.Pointer(h))
	if v, ok := comms.Load(key); ok {
		if _, failed := v.(failedComm); failed {
			comms.Delete(key)
			return nil, nil
		}
	}
	c, err := lookupComm(h)
	if err == nil && !comms.CompareAndDelete(key, c) {
		return nil, unknownComm(h)
	}
	return c, err
}

// Groups are per calling OS thread, like NCCL's: an exported call runs on
// the caller's thread. openGroups lets the common case (no group open
// anywhere) skip the thread-id lookup; it lives in C (fast.c), where the
// C entries read it too.
var (
	groupMu    sync.Mutex
	groups     = map[int]*xccl.Group{}
	groupPool  = sync.Pool{New: func() any { return new(xccl.Group) }}
	openGroups = (*atomic.Int32)(unsafe.Pointer(C.xccl_abi_open_groups()))
)

// threadGroup is the calling thread's open group (nil: none).
func threadGroup() *xccl.Group {
	if openGroups.Load() == 0 {
		return nil
	}
	return groupOf(threadID())
}

// groupOf is thread tid's open group (tid 0, or none open: nil), called
// on that thread. A group C recorded so far (fast.c) becomes Go's here.
func groupOf(tid int) *xccl.Group {
	if tid == 0 || openGroups.Load() == 0 {
		return nil
	}
	groupMu.Lock()
	g := groups[tid]
	groupMu.Unlock()
	if g == nil {
		g = adopt(tid)
	}
	return g
}

// adopt makes the group C recorded on the calling thread, tid, the
// thread's group in Go, as if its calls had come to Go (nil: none). A call
// of them refused now (C checks them as Go does, but the communicator may
// have gone since) fails the group, as it would have failed it then.
func adopt(tid int) *xccl.Group {
	var depth, n C.int
	recs := C.xccl_abi_take_recorded(&depth, &n)
	if depth == 0 {
		return nil
	}
	g := newGroup(tid)
	for range int(depth) {
		g.Start()
	}
	replay(g, recs, n) // a refused call fails the group (doIn)
	return g
}

// newGroup opens thread tid's group in Go (not yet started).
func newGroup(tid int) *xccl.Group {
	g := groupPool.Get().(*xccl.Group)
	groupMu.Lock()
	groups[tid] = g
	groupMu.Unlock()
	openGroups.Add(1)
	C.xccl_abi_go_group(1)
	return g
}

// replay queues recorded sends and receives on g, as XcclSend and XcclRecv
// would have: a call refused now fails g (doIn, Submit), so its End runs
// none of it.
func replay(g *xccl.Group, recs *C.xccl_rec, n C.int) {
	for _, r := range unsafe.Slice(recs, int(n)) {
		o := xccl.NewOpIn(g)
		o.Kind, o.Send, o.Type, o.Root = rt.OpSend, r.buf, dtype(r.dt), int(r.peer)
		if r.recv != 0 {
			o.Kind, o.Send, o.Recv = rt.OpRecv, nil, r.buf
		}
		_ = doIn(r.comm, r.count, o, g)
	}
}

// threadID is the calling thread's id (gettid), cached per thread in C.
func threadID() int { return int(C.xccl_abi_tid()) }

func device() (rt.Device, error) { return rt.Open("") }

// initDevice is device() for a new communicator: it also fails when
// XCCL_DEVICE was changed since the process chose its device.
func initDevice() (rt.Device, error) {
	if err := rt.CheckDeviceChoice(); err != nil {
		return nil, err
	}
	return device()
}

func toInt(name string, v C.size_t) (int, error) {
	if uint64(v) > math.MaxInt64 {
		return 0, rt.Errorf("%s %d is too large", name, uint64(v))
	}
	return int(v), nil
}

func stream(s C.C_Stream) rt.Stream { return rt.Stream(uintptr(unsafe.Pointer(s))) }

func streamHandle(s rt.Stream) C.C_Stream { return C.xccl_stream_handle(C.uintptr_t(s)) }

func event(e C.C_Event) rt.Event { return rt.Event(uintptr(unsafe.Pointer(e))) }

func eventHandle(e rt.Event) C.C_Event { return C.xccl_event_handle(C.uintptr_t(e)) }

func dtype(d C.C_DataType) rt.DataType { return rt.DataType(d) }

func redop(o C.C_CCLReduceOp) rt.ReduceOp { return rt.ReduceOp(o) }

// The header's XCCL_PREMUL_SUM_FIRST and _MAX are rt's (else this does not
// compile: a negative constant has no uint).
const (
	_ = uint(rt.FirstPreMulSum - C.XCCL_PREMUL_SUM_FIRST)
	_ = uint(C.XCCL_PREMUL_SUM_FIRST - rt.FirstPreMulSum)
	_ = uint(rt.MaxPreMulSums - C.XCCL_PREMUL_SUM_MAX)
	_ = uint(C.XCCL_PREMUL_SUM_MAX - rt.MaxPreMulSums)
)

func main() {}
