package host

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// Ranks that do not wait (a small broadcast's root, a small reduce's other
// ranks) run up to fastDepth calls ahead of a slow peer and no further:
// every result is right although the slow rank naps now and then, and
// Destroy right after the last call loses nothing. Now and then a large
// all-gather (through the rings, whose waits do not tell a peer about
// slots) follows them: the slots told back in batches must never leave a
// peer waiting for one there.
func TestUnwaitedCallsRunAheadOfASlowPeer(t *testing.T) {
	const nranks, calls = 3, 6 * fastDepth
	comms := inProcessRanks(t, nranks, opts(10*time.Second))
	require.True(t, comms[0].allBoxed)
	var wg sync.WaitGroup
	fails := make([]error, nranks)
	for rank, c := range comms {
		wg.Add(1)
		go func(rank int, c *Comm) {
			defer wg.Done()
			fail := func(err error) {
				if fails[rank] == nil {
					fails[rank] = err
				}
			}
			buf := make([]int32, 7)
			out := make([]int32, 7)
			const big = 48 << 10 // int32s per rank: past the fast boxes
			mine, all := make([]int32, big), make([]int32, big*nranks)
			p := func(b []int32) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
			for k := 0; k < calls; k++ {
				if rank == 2 && k%(fastDepth/2) == 3 {
					time.Sleep(2 * time.Millisecond) // the others run ahead meanwhile
				}
				// Broadcasts from rank 0 and reduces to rank 2 first: nobody
				// waits for the slow rank 2 (its peers run ahead); then roots
				// in turn.
				root := k % nranks
				if k < calls/2 {
					root = 0
				}
				for i := range buf {
					buf[i] = int32(1000*k + 10*rank + i)
				}
				bc := &rt.Op{Kind: rt.OpBroadcast, Send: p(buf), Recv: p(buf), Count: len(buf), Type: rt.Int32, Root: root}
				if err := c.exec(bc); err != nil {
					fail(err)
					return
				}
				for i, v := range buf {
					if want := int32(1000*k + 10*root + i); v != want {
						fail(rt.Errorf("call %d: broadcast from %d: element %d is %d, want %d", k, root, i, v, want))
					}
				}
				for i := range buf {
					buf[i] = int32(1000*k + 10*rank + i)
				}
				if k < calls/2 {
					root = 2
				}
				red := &rt.Op{Kind: rt.OpReduce, Send: p(buf), Recv: p(out), Count: len(buf), Type: rt.Int32, Red: rt.Sum, Root: root}
				if err := c.exec(red); err != nil {
					fail(err)
					return
				}
				clear(buf) // the call returned: the buffer is the caller's again
				if rank == root {
					for i, v := range out {
						if want := int32(3*(1000*k+i) + 10*(0+1+2)); v != want {
							fail(rt.Errorf("call %d: reduce to %d: element %d is %d, want %d", k, root, i, v, want))
						}
					}
				}
				if k%(fastDepth/2+3) != fastDepth/2 {
					continue
				}
				for i := range mine {
					mine[i] = int32(k + rank + i)
				}
				ag := &rt.Op{Kind: rt.OpAllGather, Send: p(mine), Recv: p(all), Count: big, Type: rt.Int32}
				if err := c.exec(ag); err != nil {
					fail(err)
					return
				}
				for r := 0; r < nranks; r++ {
					if v, want := all[r*big+big-1], int32(k+r+big-1); v != want {
						fail(rt.Errorf("call %d: all-gather: rank %d's last element is %d, want %d", k, r, v, want))
					}
				}
			}
			fail(c.Destroy())
		}(rank, c)
	}
	wg.Wait()
	for rank, err := range fails {
		require.NoError(t, err, "rank %d", rank)
	}
}
