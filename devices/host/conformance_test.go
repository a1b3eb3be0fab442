package host_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/internal/conformance"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, host.New(), conformance.Config{})
}

// The TCP transport (used between machines) through the same suite, with
// small rings so messages wrap and stream through them many times.
func TestConformanceTCP(t *testing.T) {
	o := host.DefaultOptions()
	o.Transport, o.RingBytes = "tcp", 1<<14
	counts := []int{0, 7, 70001}
	if testing.Short() {
		counts = []int{0, 7, 1001}
	}
	conformance.Run(t, host.NewWithOptions(o), conformance.Config{Ranks: []int{2, 3}, Counts: counts})
}

// Tiny shared-memory rings and the ring algorithm at every size.
func TestConformanceSmallRingsRingAlgo(t *testing.T) {
	o := host.DefaultOptions()
	o.RingBytes, o.Algo = 4096, "ring"
	counts := []int{1, 7, 10007}
	if testing.Short() {
		counts = []int{1, 1001}
	}
	conformance.Run(t, host.NewWithOptions(o), conformance.Config{Ranks: []int{3, 4}, Counts: counts})
}

// The direct forms forced (XCCL_ALGO=direct) at every size, with small
// rings: where a message does not fit a ring, the call takes the ring
// algorithm instead (it deadlocked until the timeout: every rank sent
// before any received).
func TestConformanceForcedDirect(t *testing.T) {
	o := host.DefaultOptions()
	o.RingBytes, o.Algo, o.Timeout = 1<<14, "direct", 20*time.Second
	counts := []int{1, 7, 10007}
	if testing.Short() {
		counts = []int{7, 10007}
	}
	conformance.Run(t, host.NewWithOptions(o), conformance.Config{Ranks: []int{2, 3}, Counts: counts})
}

// Single-copy transfers (process_vm_readv) at every size, with pieces
// smaller than the buffers; the engine must have taken that path.
func TestConformanceSingleCopy(t *testing.T) {
	if err := host.SingleCopyUnavailable(); err != nil {
		t.Skipf("single-copy reads are unavailable here (%v): the rings carry everything", err)
	}
	o := host.DefaultOptions()
	o.Algo = "cma"
	counts := []int{1, 7, 300007}
	if testing.Short() {
		counts = []int{1, 1001, 40009}
	}
	dev := host.NewWithOptions(o)
	for _, n := range []int{2, 3} {
		comms := conformance.Comms(t, dev, n)
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { conformance.RunComms(t, dev, comms, counts) })
		s := comms[0].Stats().Engine
		if s["allreduce.single_copy"] == 0 || s["allgather_reducescatter_broadcast.single_copy"] == 0 {
			t.Fatalf("single copy was not used: %v", s)
		}
	}
}

// One thread drives two ranks in one group, each rank on its own stream:
// the group waits for work already on every stream of the group, and a
// stream's later work waits for the group.
func TestGroupOrdersEveryStream(t *testing.T) {
	d := host.New()
	comms := conformance.Comms(t, d, 2)
	s0, err := d.CreateStream()
	require.NoError(t, err)
	s1, err := d.CreateStream()
	require.NoError(t, err)
	src, dst := []int32{0}, []int32{0}
	// Earlier work on s0 writes the send buffer, late.
	require.NoError(t, d.AddCallback(s0, func(error) { time.Sleep(100 * time.Millisecond); src[0] = 42 }))
	var g xccl.Group
	g.Start()
	require.NoError(t, comms[1].Do(&g, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&dst[0]), Count: 1, Type: rt.Int32, Root: 0, Stream: s1}))
	require.NoError(t, comms[0].Do(&g, rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&src[0]), Count: 1, Type: rt.Int32, Root: 1, Stream: s0}))
	require.NoError(t, g.End())
	require.NoError(t, d.SynchronizeStream(s0))
	require.NoError(t, d.SynchronizeStream(s1))
	require.Equal(t, int32(42), dst[0])
	require.NoError(t, d.DestroyStream(s0))
	require.NoError(t, d.DestroyStream(s1))
}

// The UCX transport (between machines when libucp loads; forced here for
// every link) through the same suite, over UCX's TCP transport and, where
// it works, its shared-memory ones; small rings so messages stream through.
func TestConformanceUCX(t *testing.T) {
	for _, tls := range []string{"tcp", "sm,self"} {
		t.Run("UCX_TLS="+tls, func(t *testing.T) {
			host.SkipWithoutUCX(t)
			t.Setenv("UCX_TLS", tls)
			t.Cleanup(host.WaitUCXWorkers)
			if err := probeUCX(); err != nil && strings.Contains(err.Error(), "unreachable") {
				// UCX 1.13's posix/sysv/self have no peer-failure handling,
				// which xccl's endpoints ask for (a dead peer must be named).
				t.Skipf("UCX_TLS=%s cannot link two ranks with peer-failure handling here: %v", tls, err)
			}
			o := host.DefaultOptions()
			o.Transport, o.RingBytes = "ucx", 1<<14
			counts, ranks := []int{0, 7, 70001}, []int{2, 3, 4}
			if testing.Short() {
				counts, ranks = []int{0, 7, 1001}, []int{2, 3}
			}
			conformance.Run(t, host.NewWithOptions(o), conformance.Config{Ranks: ranks, Counts: counts})
		})
	}
}

// probeUCX links two ranks over forced UCX once and reports the error.
func probeUCX() error {
	r, err := host.StartRoot(10 * time.Second)
	if err != nil {
		return err
	}
	o := host.DefaultOptions()
	o.Transport, o.Timeout = "ucx", 10*time.Second
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := host.NewComm(r.ID, 2, i, o)
			if err == nil {
				_ = c.Destroy()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if errs[0] != nil {
		return errs[0]
	}
	return errs[1]
}

// A receive of another size than its send (NCCL requires the same count
// and type size) fails on the receiver naming both sizes, the message is
// discarded whole, and the next matched pair arrives intact: small and
// queued (larger than the ring) messages, over shared memory and TCP,
// alone and inside a group, where the group's other receives still run
// (their messages must not reach later receives). Count 0 is a message
// of no bytes, matched as NCCL matches it: against a send of data it is
// a mismatch both ways.
func TestP2PSizeMismatch(t *testing.T) {
	type recv struct{ sent, want int }
	// Each step is a receive alone, or a group of them; rank 0 sends every
	// message in order, message k filled with k*1000 + i.
	steps := []struct {
		grouped bool
		recvs   []recv
	}{
		{false, []recv{{10, 12}}},
		{false, []recv{{5, 5}}},
		{false, []recv{{300000, 8}}},
		{true, []recv{{7, 7}}},
		{true, []recv{{12, 300000}}},
		{true, []recv{{12, 10}, {5, 5}}},
		{true, []recv{{3, 3}, {9, 4}, {6, 6}}},
		{false, []recv{{5, 5}}},
		{false, []recv{{0, 0}}},
		{false, []recv{{0, 6}}},
		{false, []recv{{6, 0}}},
		{false, []recv{{300000, 0}}},
		{true, []recv{{0, 0}, {4, 4}, {0, 0}}},
		{true, []recv{{0, 3}, {3, 0}, {0, 0}}},
		{false, []recv{{5, 5}}},
	}
	at := func(b []float32) unsafe.Pointer {
		if len(b) == 0 {
			return nil
		}
		return unsafe.Pointer(&b[0])
	}
	for _, transport := range []string{"shm", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			o := host.DefaultOptions()
			o.RingBytes = 1 << 14
			if transport == "tcp" {
				o.Transport = "tcp"
			}
			comms := conformance.Comms(t, host.NewWithOptions(o), 2)
			conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
				k := 0
				for si, st := range steps {
					if r == 0 {
						for _, m := range st.recvs {
							buf := make([]float32, m.sent)
							for i := range buf {
								buf[i] = float32(k*1000 + i)
							}
							if err := c.Send(at(buf), m.sent, rt.Float32, 1, 0); err != nil {
								return fmt.Errorf("send %d: %w", k, err)
							}
							k++
						}
						continue
					}
					bufs := make([][]float32, len(st.recvs))
					var err error
					g := &xccl.Group{}
					if st.grouped {
						g.Start()
					} else {
						g = nil
					}
					for i, m := range st.recvs {
						bufs[i] = make([]float32, m.want)
						op := rt.Op{Kind: rt.OpRecv, Recv: at(bufs[i]), Count: m.want, Type: rt.Float32, Root: 0}
						if e := c.Do(g, op); e != nil && err == nil {
							err = e
						}
					}
					if g != nil {
						if e := g.End(); e != nil && err == nil {
							err = e
						}
					}
					var want string
					for _, m := range st.recvs {
						if m.sent != m.want && want == "" {
							want = fmt.Sprintf("Recv from rank 0 of %d bytes, but rank 0 sent %d", 4*m.want, 4*m.sent)
						}
					}
					if want != "" && (err == nil || rt.StatusOf(err) != rt.StatusError || !strings.Contains(err.Error(), want)) {
						return fmt.Errorf("step %d: %v, want an error saying %q", si, err, want)
					}
					if want == "" && err != nil {
						return fmt.Errorf("step %d: %w", si, err)
					}
					for i, m := range st.recvs {
						if m.sent == m.want {
							for j, v := range bufs[i] {
								if v != float32(k*1000+j) {
									return fmt.Errorf("step %d receive %d: element %d is %v, want %v", si, i, j, v, k*1000+j)
								}
							}
						}
						k++
					}
				}
				return nil
			})
			conformance.RunComms(t, host.New(), comms, []int{7})
		})
	}
}

// A receive of count 0 from another rank waits for that rank's send of
// count 0, as NCCL's does, so the pair orders the two ranks (a program
// may use it as a barrier): alone and in a group, over shared memory and
// TCP.
func TestZeroCountRecvWaitsForItsSend(t *testing.T) {
	for _, transport := range []string{"shm", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			o := host.DefaultOptions()
			o.Transport = transport
			comms := conformance.Comms(t, host.NewWithOptions(o), 2)
			for _, grouped := range []bool{false, true} {
				var sent atomic.Bool
				conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
					var g *xccl.Group
					if grouped {
						g = &xccl.Group{}
						g.Start()
					}
					op := rt.Op{Kind: rt.OpRecv, Count: 0, Type: rt.Float32, Root: 1}
					if r == 1 {
						time.Sleep(50 * time.Millisecond)
						sent.Store(true)
						op = rt.Op{Kind: rt.OpSend, Count: 0, Type: rt.Float32, Root: 0}
					}
					err := c.Do(g, op)
					if g != nil {
						err = g.End()
					}
					if err == nil && r == 0 && !sent.Load() {
						return fmt.Errorf("grouped=%v: the receive of count 0 returned before its send", grouped)
					}
					return err
				})
			}
		})
	}
}

// The host device makes pre-multiplied sums of every integer and floating
// type (the suite above runs them wherever they are made), and refuses
// BOOL and the complex types with C_ERROR.
func TestPreMulSumTypes(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 2)
	for _, dt := range rt.AllDataTypes() {
		want := dt != rt.Bool && !dt.IsComplex()
		require.Equal(t, want, conformance.PreMulSupported(t, comms, dt), "%v", dt)
	}
	s := float32(2)
	_, err := comms[0].CreatePreMulSum(nil, rt.Float32, xccl.ScalarDevice)
	require.ErrorContains(t, err, "scalar is NULL")
	_, err = comms[0].CreatePreMulSum(unsafe.Pointer(&s), rt.Float32, 7)
	require.ErrorContains(t, err, "unknown scalar residence 7")
	_, err = comms[0].CreatePreMulSum(unsafe.Pointer(&s), rt.DataType(99), xccl.ScalarDevice)
	require.ErrorContains(t, err, "unknown data type 99")
	ops := map[rt.ReduceOp]bool{}
	for range rt.MaxPreMulSums {
		op, err := comms[0].CreatePreMulSum(unsafe.Pointer(&s), rt.Float32, xccl.ScalarHostImmediate)
		require.NoError(t, err)
		require.True(t, op.IsPreMulSum() && !ops[op], "op %d", op)
		ops[op] = true
	}
	_, err = comms[0].CreatePreMulSum(unsafe.Pointer(&s), rt.Float32, xccl.ScalarHostImmediate)
	require.ErrorContains(t, err, "destroy one first")
	require.NoError(t, comms[0].DestroyPreMulSum(rt.FirstPreMulSum+5))
	op, err := comms[0].CreatePreMulSum(unsafe.Pointer(&s), rt.Float32, xccl.ScalarHostImmediate)
	require.NoError(t, err)
	require.Equal(t, rt.FirstPreMulSum+5, op, "the freed value is given again")
	require.ErrorContains(t, comms[1].DestroyPreMulSum(op), "not a pre-multiplied sum of this communicator")
}
