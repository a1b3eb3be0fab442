package xccl

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/xccl-project/xccl/devices/host"
	rt "github.com/xccl-project/xccl/runtime"
)

var (
	fuzzOnce sync.Once
	fuzzComm *Comm
	fuzzErr  error
)

// oneRank is a 1-rank host communicator shared by the fuzz inputs.
func oneRank(t testing.TB) *Comm {
	fuzzOnce.Do(func() {
		dev := host.New()
		var id []byte
		if id, fuzzErr = GetUniqueID(dev); fuzzErr == nil {
			fuzzComm, fuzzErr = CommInitRank(dev, 1, id, 0)
		}
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzComm
}

// FuzzCallArguments: the argument checks behind every C entry point
// (kind, type, op, count, root or peer, NULL buffers, all-to-all arrays)
// never panic; a refusal is C_ERROR with a message; what they accept is
// well formed, and runs (when it fits the fuzz buffers) without error.
func FuzzCallArguments(f *testing.F) {
	f.Add(uint8(0), int32(11), int32(0), int64(4), int64(0), uint8(0))
	f.Add(uint8(1), int32(11), int32(0), int64(4), int64(1), uint8(1))
	f.Add(uint8(3), int32(15), int32(2), int64(-1), int64(0), uint8(2))
	f.Add(uint8(7), int32(4), int32(9), int64(1<<62), int64(-5), uint8(3))
	f.Add(uint8(5), int32(0), int32(0), int64(2), int64(0), uint8(0))
	f.Fuzz(func(t *testing.T, kind uint8, dtype, red int32, count, root int64, nulls uint8) {
		c := oneRank(t)
		buf := make([]byte, 4096)
		p := unsafe.Pointer(&buf[0])
		ptr := func(bit uint8) unsafe.Pointer {
			if nulls&bit != 0 {
				return nil
			}
			return p
		}
		op := rt.Op{Kind: rt.OpKind(kind % 9), Send: ptr(1), Recv: ptr(2), Count: int(count), Type: rt.DataType(dtype),
			Red: rt.ReduceOp(red), Root: int(root), Comm: c.c}
		if op.Kind == rt.OpAllToAll {
			op.SendBufs, op.RecvBufs = []unsafe.Pointer{ptr(4)}, []unsafe.Pointer{ptr(8)}
			op.SendCounts, op.RecvCounts = []int{int(count)}, []int{int(root)}
			op.SendTypes, op.RecvTypes = []rt.DataType{rt.DataType(dtype)}, []rt.DataType{rt.DataType(red)}
			if nulls&16 != 0 {
				op.RecvTypes = nil
			}
		}
		err := c.validate(&op)
		if err != nil {
			if rt.StatusOf(err) != rt.StatusError || err.Error() == "" {
				t.Fatalf("refusal must be C_ERROR with a message: %v", err)
			}
			return
		}
		if op.Kind > rt.OpAllToAll {
			t.Fatalf("unknown kind %d accepted", op.Kind)
		}
		if op.Kind != rt.OpAllToAll {
			if !op.Type.Valid() || op.Count < 0 {
				t.Fatalf("accepted %+v", op)
			}
			if op.Count > 0 && op.Count*op.Type.Size() <= len(buf) {
				if err := c.Do(nil, op); err != nil {
					t.Fatalf("an accepted call failed: %v", err)
				}
			}
			return
		}
		if op.SendCounts[0]*op.SendTypes[0].Size() <= len(buf) {
			if err := c.Do(nil, op); err != nil {
				t.Fatalf("an accepted all-to-all failed: %v", err)
			}
		}
	})
}
