package xccl

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/host"
	rt "github.com/xccl-project/xccl/runtime"
)

// countingRunner counts the calls a device's fast path took.
type countingRunner struct {
	fastRunner
	taken *atomic.Int64
}

func (r countingRunner) FastRun(kind rt.OpKind, send, recv unsafe.Pointer, count int, dt rt.DataType, red rt.ReduceOp, root int) (bool, error) {
	ok, err := r.fastRunner.FastRun(kind, send, recv, count, dt, red, root)
	if ok {
		r.taken.Add(1)
	}
	return ok, err
}

// each runs f(r) on every rank at once.
func each(comms []*Comm, f func(r int, c *Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r, c) }()
	}
	wg.Wait()
	return errs
}

// The typed calls try the host device's fast path before Submit: the
// results are the reference's, bad arguments still get validation's
// errors (and send nothing: the ranks stay in step), and statistics, once
// on, see every call.
func TestTypedCallsTryTheFastPath(t *testing.T) {
	dev := host.New()
	id, err := GetUniqueID(dev)
	require.NoError(t, err)
	comms := make([]*Comm, 2)
	require.NoError(t, errors.Join(each(comms, func(r int, _ *Comm) (err error) {
		comms[r], err = CommInitRank(dev, 2, id, r)
		return err
	})...))
	defer each(comms, func(_ int, c *Comm) error { return c.Destroy() })
	taken := make([]atomic.Int64, 2)
	for r, c := range comms {
		require.NotNil(t, c.fast, "the host device's communicator has a fast path")
		c.fast = countingRunner{c.fast, &taken[r]}
	}
	bufs := [2][]int32{make([]int32, 8), make([]int32, 8)}
	at := func(r, i int) unsafe.Pointer { return unsafe.Pointer(&bufs[r][i]) }
	for k := 0; k < 300; k++ {
		errs := each(comms, func(r int, c *Comm) error {
			b := bufs[r]
			for i := range b {
				b[i] = int32(10*r + i + k)
			}
			switch k % 5 {
			case 0:
				return c.AllReduce(at(r, 0), at(r, 4), 3, rt.Int32, rt.Sum, 0)
			case 1:
				return c.Broadcast(at(r, 0), 3, rt.Int32, k%2, 0)
			case 2:
				return c.Reduce(at(r, 0), at(r, 4), 3, rt.Int32, rt.Max, k%2, 0)
			case 3:
				return c.AllGather(at(r, 0), at(r, 4), 2, rt.Int32, 0)
			}
			return c.ReduceScatter(at(r, 0), at(r, 4), 2, rt.Int32, rt.Sum, 0)
		})
		require.NoError(t, errors.Join(errs...), "call %d", k)
		root := k % 2
		for r := range comms {
			got := bufs[r]
			v := func(p, i int) int32 { return int32(10*p + i + k) }
			switch k % 5 {
			case 0:
				require.Equal(t, []int32{v(0, 0) + v(1, 0), v(0, 1) + v(1, 1), v(0, 2) + v(1, 2)}, got[4:7], "call %d rank %d", k, r)
			case 1:
				require.Equal(t, []int32{v(root, 0), v(root, 1), v(root, 2)}, got[0:3], "call %d rank %d", k, r)
			case 2:
				if r == root {
					require.Equal(t, []int32{v(1, 0), v(1, 1), v(1, 2)}, got[4:7], "call %d rank %d", k, r)
				}
			case 3:
				require.Equal(t, []int32{v(0, 0), v(0, 1), v(1, 0), v(1, 1)}, got[4:8], "call %d rank %d", k, r)
			case 4:
				require.Equal(t, []int32{v(0, 2*r) + v(1, 2*r), v(0, 2*r+1) + v(1, 2*r+1)}, got[4:6], "call %d rank %d", k, r)
			}
		}
	}
	for r := range comms {
		require.Greater(t, taken[r].Load(), int64(150), "rank %d: typed calls the fast path took", r)
	}

	// Bad arguments on rank 0 alone: validation's errors, nothing sent.
	c, p := comms[0], at(0, 0)
	bad := []struct {
		name string
		call func() error
		msg  string
	}{
		{"dtype", func() error { return c.AllReduce(p, p, 1, 99, rt.Sum, 0) }, "unknown data type 99"},
		{"op", func() error { return c.AllReduce(p, p, 1, rt.Int32, 42, 0) }, "unknown reduce op 42"},
		{"negative count", func() error { return c.AllReduce(p, p, -1, rt.Int32, rt.Sum, 0) }, "negative count"},
		{"null send", func() error { return c.ReduceScatter(nil, p, 1, rt.Int32, rt.Sum, 0) }, "send buffer is NULL"},
		{"null recv", func() error { return c.AllGather(p, nil, 1, rt.Int32, 0) }, "receive buffer is NULL"},
		{"root", func() error { return c.Broadcast(p, 1, rt.Int32, 2, 0) }, "root 2 out of range"},
		{"root past a C int", func() error { return c.Broadcast(p, 1, rt.Int32, 1<<32, 0) }, "out of range"}, // rank 0 as a C int
		{"negative root", func() error { return c.Reduce(p, p, 1, rt.Int32, rt.Sum, -1, 0) }, "root -1 out of range"},
	}
	for _, b := range bad {
		err := b.call()
		require.Error(t, err, b.name)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), b.name)
		require.ErrorContains(t, err, b.msg, b.name)
	}
	require.NoError(t, c.AsyncError())
	errs := each(comms, func(r int, c *Comm) error {
		bufs[r][0] = int32(r + 1)
		return c.AllReduce(at(r, 0), at(r, 0), 1, rt.Int32, rt.Sum, 0)
	})
	require.NoError(t, errors.Join(errs...), "the ranks are in step after the refused calls")
	require.Equal(t, int32(3), bufs[0][0])

	// Statistics on: every typed call is counted (Submit's path).
	for _, c := range comms {
		c.EnableStats(true)
	}
	require.NoError(t, errors.Join(each(comms, func(r int, c *Comm) error {
		for range 7 {
			if err := c.AllReduce(at(r, 0), at(r, 0), 1, rt.Int32, rt.Sum, 0); err != nil {
				return err
			}
		}
		return nil
	})...))
	require.Equal(t, uint64(7), comms[0].Stats().Ops[rt.OpAllReduce.String()].Calls)
}
