package xccl

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// fusingComm is a communicator that can fuse (nothing of it runs here).
type fusingComm struct{ rt.Comm }

func (fusingComm) CanFuse() bool { return true }

// A run of grouped all-reduces is fused only while no call touches what an
// earlier one of the run writes, or writes what it reads: a group runs its
// calls in order, and a batch reads all its inputs before it writes.
func TestFuseKeepsDependentCallsApart(t *testing.T) {
	c := fusingComm{}
	buf := make([]float32, 64)
	at := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i]) }
	ar := func(send, recv unsafe.Pointer, n int) *rt.Op {
		return &rt.Op{Kind: rt.OpAllReduce, Comm: c, Send: send, Recv: recv, Count: n, Type: rt.Float32, Red: rt.Sum}
	}
	var g Group
	sizes := func(ops []*rt.Op) []int {
		var k []int
		for _, op := range g.fuse(ops, 1<<16) {
			k = append(k, max(1, len(op.Batch)))
		}
		return k
	}
	// Disjoint buffers, in place and not: one batch.
	require.Equal(t, []int{3}, sizes([]*rt.Op{ar(at(0), at(0), 4), ar(at(4), at(8), 4), ar(at(12), at(16), 4)}))
	// The same buffer twice in place: a * n * n, two calls.
	require.Equal(t, []int{1, 1}, sizes([]*rt.Op{ar(at(0), at(0), 4), ar(at(0), at(0), 4)}))
	// A chain x -> y -> z: the second reads what the first writes.
	require.Equal(t, []int{1, 1}, sizes([]*rt.Op{ar(at(0), at(8), 4), ar(at(8), at(16), 4)}))
	// The second writes what the first reads (one element in common).
	require.Equal(t, []int{1, 1}, sizes([]*rt.Op{ar(at(0), at(8), 4), ar(at(20), at(3), 4)}))
	// Both write one element in common.
	require.Equal(t, []int{1, 1}, sizes([]*rt.Op{ar(at(0), at(8), 4), ar(at(20), at(11), 4)}))
	// Reading the same input twice is no dependency.
	require.Equal(t, []int{2}, sizes([]*rt.Op{ar(at(0), at(8), 4), ar(at(0), at(16), 4)}))
	// A dependent call ends the run and starts the next: 2 + 2.
	require.Equal(t, []int{2, 2}, sizes([]*rt.Op{ar(at(0), at(0), 4), ar(at(4), at(4), 4), ar(at(0), at(0), 4), ar(at(8), at(8), 4)}))
	// Adjacent buffers are not overlapping ones.
	require.Equal(t, []int{2}, sizes([]*rt.Op{ar(at(0), at(4), 4), ar(at(8), at(12), 4)}))
}
