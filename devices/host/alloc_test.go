package host

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// A group of a send and a receive of 8 bytes between two ranks allocates
// nothing: the send's header stays on the stack (cgo's memcpy must not make
// the ring's copy arguments escape, kernels_c.go), and so does the rest.
func TestP2PGroupAllocatesNothing(t *testing.T) {
	comms := inProcessRanks(t, 2, DefaultOptions())
	const runs = 200
	group := func(c *Comm, out, in *[2]float32) []*rt.Op {
		peer := 1 - c.rank
		return []*rt.Op{
			{Kind: rt.OpSend, Send: unsafe.Pointer(&out[0]), Count: 2, Type: rt.Float32, Root: peer},
			{Kind: rt.OpRecv, Recv: unsafe.Pointer(&in[0]), Count: 2, Type: rt.Float32, Root: peer},
		}
	}
	done := make(chan error, 1)
	go func() {
		var out, in [2]float32
		ops := group(comms[1], &out, &in)
		for range runs + 1 { // AllocsPerRun's warm-up call, then runs
			if err := comms[1].p2pGroup(ops); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var out, in [2]float32
	ops := group(comms[0], &out, &in)
	var err error
	allocs := testing.AllocsPerRun(runs, func() {
		if e := comms[0].p2pGroup(ops); e != nil && err == nil {
			err = e
		}
	})
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Zero(t, allocs, "allocations per group of a send and a receive")
}
