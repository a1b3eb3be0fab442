package perf

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/internal/conformance"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func runAll(t *testing.T, comms []*xccl.Comm, cfg Config) [][]Result {
	t.Helper()
	rows := make([][]Result, len(comms))
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		return Run(c, cfg, func(res Result) { rows[r] = append(rows[r], res) })
	})
	return rows
}

// Every collective, checked, on 3 ranks (odd: blocks do not divide evenly
// into the sizes), gives no wrong element and the same rows on every rank.
func TestEveryCollectiveChecks(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 3)
	for _, name := range []string{"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"} {
		for _, dt := range []rt.DataType{rt.Float32, rt.BFloat16, rt.Int8} {
			coll, err := LookupColl(name)
			require.NoError(t, err)
			cfg := Config{Coll: coll, Type: dt, Red: rt.Max, Root: 2, MinBytes: 1, MaxBytes: 100 << 10, Factor: 7, Iters: 2, Warmup: 1, Check: true}
			rows := runAll(t, comms, cfg)
			require.NotEmpty(t, rows[0], name)
			for _, res := range rows[0] {
				require.Zero(t, res.OutPlace.Wrong, "%s %v %d bytes", name, dt, res.Bytes)
				require.Positive(t, res.OutPlace.TimeUs)
				if res.InPlace != nil {
					require.Zero(t, res.InPlace.Wrong, "%s %v %d bytes in place", name, dt, res.Bytes)
				}
				if coll.PerRank {
					require.Equal(t, res.Count*3*dt.Size(), res.Bytes)
				}
			}
			require.Equal(t, rows[0], rows[1], "every rank reports the same rows")
		}
	}
}

// The checker is not blind: a corrupted element is counted on its rank.
func TestVerifyCountsCorruption(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 2)
	coll, _ := LookupColl("allreduce")
	cfg := Config{Coll: coll, Type: rt.Float32, Red: rt.Sum, MaxBytes: 4096, Iters: 1, Check: true}
	wrong := make([]int64, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := &bench{cfg: &cfg, c: c, dev: c.Device(), rank: r, n: 2, cap: 4096, host: make([]byte, 4096)}
			send, recv := make([]byte, 4096), make([]byte, 4096)
			b.send, b.recv = unsafe.Pointer(&send[0]), unsafe.Pointer(&recv[0])
			require.NoError(t, b.fill(100, false))
			require.NoError(t, b.call(100, false))
			if r == 1 {
				f := unsafe.Slice((*float32)(unsafe.Pointer(&recv[0])), 100)
				f[17], f[99] = 12345, -0.001 // no sum of the small inputs
				f[50] += 1e-9                // below float32's precision: still right
			}
			w, err := b.verify(100, false)
			require.NoError(t, err)
			wrong[r] = w
		}()
	}
	wg.Wait()
	require.Equal(t, []int64{0, 2}, wrong)
}

func TestSizesAndNames(t *testing.T) {
	cfg := Config{MinBytes: 8, MaxBytes: 100, Factor: 4}
	require.Equal(t, []int{8, 32}, cfg.Sizes())
	cfg = Config{MinBytes: 0, MaxBytes: 30, Step: 10}
	require.Equal(t, []int{0, 10, 20, 30}, cfg.Sizes())
	for _, s := range []string{"all_reduce", "allreduce", "all_reduce_perf", "AllReduce"} {
		c, err := LookupColl(s)
		require.NoError(t, err, s)
		require.Equal(t, "all_reduce", c.Name)
	}
	_, err := LookupColl("gather")
	require.ErrorContains(t, err, "unknown collective")
	dt, err := LookupType("half")
	require.NoError(t, err)
	require.Equal(t, rt.Float16, dt)
	require.Equal(t, "bfloat16", TypeName(rt.BFloat16))
	require.InDelta(t, 1.5, Colls["all_reduce"].BusFactor(4), 1e-12)
	require.InDelta(t, 0.75, Colls["all_gather"].BusFactor(4), 1e-12)
}
