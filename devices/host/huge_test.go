package host

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// Large collectives reach peers directly when every rank's buffer is large
// device memory (hostAlloc: shared, or huge-page where private), and take
// the rings or the tree otherwise; the results agree either way.
func TestHugeBuffersSingleCopy(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(30*time.Second))
	if !comms[0].cma {
		t.Skip("single-copy reads are not allowed here")
	}
	const count = 4 << 20 // floats: 16 MiB, past every ordinary single-copy limit
	for _, huge := range []bool{true, false} {
		bufs := make([][2][]float32, 2)
		for i := range bufs {
			for k := range bufs[i] {
				if huge || i == 0 { // not huge: rank 1's buffers are Go memory
					p, err := hostAlloc(4 * 2 * count)
					require.NoError(t, err)
					defer hostFree(p, 4*2*count)
					bufs[i][k] = unsafe.Slice((*float32)(p), 2*count)
				} else {
					bufs[i][k] = make([]float32, 2*count)
				}
			}
		}
		run := func(op func(i int, send, recv unsafe.Pointer) *rt.Op) {
			for i, err := range execAll(comms, func(i int) *rt.Op {
				return op(i, unsafe.Pointer(&bufs[i][0][0]), unsafe.Pointer(&bufs[i][1][0]))
			}) {
				require.NoError(t, err, "rank %d", i)
			}
		}
		fill := func() {
			for i := range bufs {
				for j := range bufs[i][0] {
					bufs[i][0][j], bufs[i][1][j] = float32(i+1)+float32(j%7), -1
				}
			}
		}
		before := comms[0].stats[statSingleCopy].Load()
		fill()
		run(func(i int, s, _ unsafe.Pointer) *rt.Op {
			return &rt.Op{Kind: rt.OpBroadcast, Send: s, Recv: s, Count: count, Type: rt.Float32, Root: 0}
		})
		require.Equal(t, bufs[0][0][:count], bufs[1][0][:count], "broadcast, huge=%v", huge)
		fill()
		run(func(i int, s, d unsafe.Pointer) *rt.Op {
			return &rt.Op{Kind: rt.OpAllGather, Send: s, Recv: d, Count: count, Type: rt.Float32}
		})
		for i := range bufs {
			require.Equal(t, float32(1), bufs[i][1][0], "all-gather, huge=%v", huge)
			require.Equal(t, float32(2+5%7), bufs[i][1][count+5], "all-gather, huge=%v", huge)
		}
		fill()
		run(func(i int, s, d unsafe.Pointer) *rt.Op {
			return &rt.Op{Kind: rt.OpReduceScatter, Send: s, Recv: d, Count: count, Type: rt.Float32, Red: rt.Sum}
		})
		for i := range bufs {
			j := i*count + 3
			require.Equal(t, float32(3+2*(j%7)), bufs[i][1][3], "reduce-scatter, huge=%v", huge)
		}
		fill()
		run(func(i int, s, d unsafe.Pointer) *rt.Op {
			return &rt.Op{Kind: rt.OpReduce, Send: s, Recv: d, Count: count, Type: rt.Float32, Red: rt.Max, Root: 0}
		})
		require.Equal(t, float32(2+(count-1)%7), bufs[0][1][count-1], "reduce, huge=%v", huge)
		ar := comms[0].stats[statAllReduceCMA].Load()
		fill()
		run(func(i int, s, d unsafe.Pointer) *rt.Op {
			return &rt.Op{Kind: rt.OpAllReduce, Send: s, Recv: d, Count: 2*count - 1, Type: rt.Float32, Red: rt.Sum}
		})
		for i := range bufs {
			for _, j := range []int{0, count - 1, count, 2*count - 2} {
				require.Equal(t, float32(3+2*(j%7)), bufs[i][1][j], "all-reduce rank %d element %d, huge=%v", i, j, huge)
			}
			require.Equal(t, float32(-1), bufs[i][1][2*count-1], "all-reduce wrote past its count")
		}
		if ar = comms[0].stats[statAllReduceCMA].Load() - ar; huge && sharedMemory() {
			require.Equal(t, uint64(1), ar, "the all-reduce went through the peer's mapped memory")
		} else {
			require.Zero(t, ar, "private memory: the ring")
		}
		used := comms[0].stats[statSingleCopy].Load() - before
		if huge {
			require.Equal(t, uint64(4), used, "every collective read its peer directly")
		} else {
			require.Zero(t, used, "a rank without huge pages: rings and tree")
		}
	}
	_, ok := blocks.find(nil)
	require.False(t, ok)
}
