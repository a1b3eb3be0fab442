// Package vendor holds what every vendor device shares: the translation
// table from xccl's data types and reduce ops to one vendor's enums, the
// communicator bookkeeping (rank, size, the error that broke it), the
// all-to-all split into grouped sends and receives, and group bracketing.
package vendor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"

	rt "github.com/xccl-project/xccl/runtime"
)

// Table maps xccl's enums to one vendor's, total over DataType × ReduceOp:
// a pair maps to exact vendor values or is refused with C_ERROR naming the
// device, the library, the data type and the op.
type Table struct {
	device, library string
	dtypes          [16]int16 // -1: no vendor type
	ops             [5]int16  // -1: no vendor op
	refused         [5]uint16 // per op, the data types (bits) the vendor refuses with it
}

// NewTable builds a table. BOOL, when mapped, travels as a 0/1 byte type
// and only MAX (or) and MIN (and) keep it 0/1.
func NewTable(device, library string, dtypes map[rt.DataType]int, ops map[rt.ReduceOp]int) *Table {
	t := &Table{device: device, library: library}
	for i := range t.dtypes {
		t.dtypes[i] = -1
		if v, ok := dtypes[rt.DataType(i)]; ok {
			t.dtypes[i] = int16(v)
		}
	}
	for i := range t.ops {
		t.ops[i] = -1
		if v, ok := ops[rt.ReduceOp(i)]; ok {
			t.ops[i] = int16(v)
		}
	}
	return t
}

// Refuse marks op as refused for the data types dts (each mapped on its
// own), where the vendor documents that pair as unsupported. It returns t.
func (t *Table) Refuse(op rt.ReduceOp, dts ...rt.DataType) *Table {
	for _, dt := range dts {
		t.refused[op] |= 1 << dt
	}
	return t
}

// Translate returns the vendor's data type and op values.
func (t *Table) Translate(dt rt.DataType, op rt.ReduceOp) (int, int, error) {
	if !dt.Valid() || t.dtypes[dt] < 0 {
		return 0, 0, rt.Errorf("%s (%s) has no data type for %v", t.device, t.library, dt)
	}
	if !op.Valid() || t.ops[op] < 0 {
		return 0, 0, rt.Errorf("%s (%s) has no reduce op for %v", t.device, t.library, op)
	}
	if t.refused[op]&(1<<dt) != 0 {
		return 0, 0, rt.Errorf("%s (%s) does not support %v of %v", t.device, t.library, op, dt)
	}
	if dt == rt.Bool && op != rt.Max && op != rt.Min {
		return 0, 0, rt.Errorf("%s (%s): %v of BOOL would not stay 0/1 (MAX and MIN are supported)", t.device, t.library, op)
	}
	return int(t.dtypes[dt]), int(t.ops[op]), nil
}

// Supports reports whether the pair maps.
func (t *Table) Supports(dt rt.DataType, op rt.ReduceOp) error {
	_, _, err := t.Translate(dt, op)
	return err
}

// CommBase is the bookkeeping of a vendor communicator: embed it.
type CommBase struct {
	device  string
	rank, n int
	mu      sync.Mutex
	broken  error
	freed   atomic.Bool // the vendor communicator is gone: its abort freed it, or Destroy did
}

// NewCommBase records rank of n on device.
func NewCommBase(device string, rank, n int) CommBase {
	return CommBase{device: device, rank: rank, n: n}
}

// Rank is this rank.
func (c *CommBase) Rank() int { return c.rank }

// Size is the rank count.
func (c *CommBase) Size() int { return c.n }

// Device names the device.
func (c *CommBase) Device() string { return c.device }

// Free claims the freeing of the vendor communicator: true for the one
// caller (Destroy, or an abort that frees it, as ncclCommAbort does) that
// must free it, false for every later one.
func (c *CommBase) Free() bool { return !c.freed.Swap(true) }

// Freed says whether the vendor communicator is gone: nothing may reach it.
func (c *CommBase) Freed() bool { return c.freed.Load() }

// Fail remembers the first C_FAILED error: the communicator is broken.
func (c *CommBase) Fail(err error) error {
	if err != nil && rt.StatusOf(err) == rt.StatusFailed {
		c.mu.Lock()
		if c.broken == nil {
			c.broken = err
		}
		c.mu.Unlock()
	}
	return err
}

// Broken is the error that broke the communicator, if any.
func (c *CommBase) Broken() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// SplitAllToAll turns a per-peer all-to-all into byte sends and receives
// on comm (self entry included), for libraries without such a call.
func SplitAllToAll(comm rt.Comm, op *rt.Op) []*rt.Op {
	var p2p []*rt.Op
	for p := range op.SendCounts {
		if k := op.SendCounts[p] * op.SendTypes[p].Size(); k > 0 {
			p2p = append(p2p, &rt.Op{Kind: rt.OpSend, Comm: comm, Send: op.SendBufs[p], Count: k, Type: rt.Uint8, Root: p, Stream: op.Stream})
		}
		if k := op.RecvCounts[p] * op.RecvTypes[p].Size(); k > 0 {
			p2p = append(p2p, &rt.Op{Kind: rt.OpRecv, Comm: comm, Recv: op.RecvBufs[p], Count: k, Type: rt.Uint8, Root: p, Stream: op.Stream})
		}
	}
	return p2p
}

// Group runs body between the vendor's group start and end, ending the
// group even when body fails; it returns the first error. Vendor groups
// are per OS thread, so the goroutine stays on its thread throughout.
func Group(start, end func() error, body func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := start(); err != nil {
		return err
	}
	first := body()
	if err := end(); err != nil && first == nil {
		first = err
	}
	return first
}

// RunOps runs ops inside one vendor group. Vendors may defer grouped work
// to the group's end, holding only the addresses: ops (and so any Go
// memory they point to) stay alive until then.
func RunOps(start, end func() error, ops []*rt.Op, run func(*rt.Op) error) error {
	err := Group(start, end, func() error { return Each(ops, run) })
	runtime.KeepAlive(ops)
	return err
}

// Each runs ops in order until one fails.
func Each(ops []*rt.Op, run func(*rt.Op) error) error {
	for _, op := range ops {
		if err := run(op); err != nil {
			return err
		}
	}
	return nil
}

// AsyncError is the error that broke the communicator, else what the
// vendor's (comm, int* result) async-error query reports, when the library
// has one (f nil: none) and the communicator is not freed. check turns a
// vendor code into an error.
func (c *CommBase) AsyncError(f ccall.Fn, comm uintptr, check func(what string, rc int) error) error {
	if err := c.Broken(); err != nil || f == nil || c.Freed() {
		return err
	}
	var res int32
	if rc := ccall.PtrPtr(f, comm, uintptr(unsafe.Pointer(&res))); rc != 0 {
		return check("CommGetAsyncError", rc)
	}
	return check("CommGetAsyncError(async)", int(res))
}
