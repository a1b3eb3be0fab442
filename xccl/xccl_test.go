package xccl_test

import (
	"encoding/hex"
	"fmt"
	"math"
	goruntime "runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/internal/conformance"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func TestValidation(t *testing.T) {
	dev := host.New()
	comms := conformance.Comms(t, dev, 2)
	c := comms[0]
	f := make([]float32, 8)
	p := unsafe.Pointer(&f[0])
	cases := []struct {
		name string
		op   rt.Op
		msg  string
	}{
		{"dtype", rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: 99}, "unknown data type 99"},
		{"undefined", rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: rt.Undefined}, "unknown data type 0"},
		{"op", rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: rt.Float32, Red: 42}, "unknown reduce op 42"},
		{"negative", rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: -1, Type: rt.Float32}, "negative count"},
		{"overflow", rt.Op{Kind: rt.OpAllGather, Send: p, Recv: p, Count: math.MaxInt / 8, Type: rt.Float32}, "overflows"},
		{"overflow 64 bits", rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: math.MaxInt, Type: rt.Complex128}, "overflows"},
		{"past 2^48", rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1<<46 + 1, Type: rt.Float32}, "overflows"},
		{"past 2^48 gathered", rt.Op{Kind: rt.OpReduceScatter, Send: p, Recv: p, Count: 1<<45 + 1, Type: rt.Float32}, "overflows"},
		{"null send", rt.Op{Kind: rt.OpReduceScatter, Recv: p, Count: 1, Type: rt.Float32}, "send buffer is NULL"},
		{"null recv", rt.Op{Kind: rt.OpAllGather, Send: p, Count: 1, Type: rt.Float32}, "receive buffer is NULL"},
		{"bcast null", rt.Op{Kind: rt.OpBroadcast, Count: 1, Type: rt.Float32}, "buffer is NULL"},
		{"root", rt.Op{Kind: rt.OpBroadcast, Send: p, Recv: p, Count: 1, Type: rt.Float32, Root: 2}, "root 2 out of range"},
		{"neg root", rt.Op{Kind: rt.OpReduce, Send: p, Recv: p, Count: 1, Type: rt.Float32, Root: -1}, "root -1 out of range"},
		{"peer", rt.Op{Kind: rt.OpSend, Send: p, Count: 1, Type: rt.Float32, Root: 5}, "peer 5 out of range"},
		{"complex max", rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: rt.Complex64, Red: rt.Max}, "COMPLEX64"},
		{"alltoall arrays", rt.Op{Kind: rt.OpAllToAll}, "every array needs 2 entries"},
		{"alltoall self", rt.Op{Kind: rt.OpAllToAll,
			SendBufs: []unsafe.Pointer{p, p}, SendCounts: []int{2, 1}, SendTypes: []rt.DataType{rt.Float32, rt.Float32},
			RecvBufs: []unsafe.Pointer{p, p}, RecvCounts: []int{1, 1}, RecvTypes: []rt.DataType{rt.Float32, rt.Float32}}, "self block"},
		{"alltoall null", rt.Op{Kind: rt.OpAllToAll,
			SendBufs: []unsafe.Pointer{p, nil}, SendCounts: []int{1, 1}, SendTypes: []rt.DataType{rt.Float32, rt.Float32},
			RecvBufs: []unsafe.Pointer{p, p}, RecvCounts: []int{1, 1}, RecvTypes: []rt.DataType{rt.Float32, rt.Float32}}, "send buffer for rank 1 is NULL"},
	}
	for _, tc := range cases {
		err := c.Do(nil, tc.op)
		require.Error(t, err, tc.name)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), tc.name)
		require.Contains(t, err.Error(), tc.msg, tc.name)
	}
	// Validation failures leave the communicator healthy.
	require.NoError(t, c.AsyncError())
	// A send to self (NCCL allows it) is matched by a receive from self.
	in, out := []float32{1, 2, 3}, make([]float32, 3)
	require.NoError(t, c.Send(unsafe.Pointer(&in[0]), 3, rt.Float32, 0, 0))
	require.NoError(t, c.Recv(unsafe.Pointer(&out[0]), 3, rt.Float32, 0, 0))
	require.Equal(t, in, out)
	// Count 0 with NULL buffers is a no-op on one rank alone.
	require.NoError(t, c.AllReduce(nil, nil, 0, rt.Float32, rt.Sum, 0))
	var nilComm *xccl.Comm
	require.Error(t, nilComm.Do(nil, rt.Op{Kind: rt.OpAllReduce}))
	_, err := xccl.CommInitRank(dev, 2, make([]byte, 5), 0)
	require.ErrorContains(t, err, "unique id is 5 bytes")
	_, err = xccl.CommInitRank(dev, 2, make([]byte, host.UniqueIDSize), 2)
	require.ErrorContains(t, err, "rank 2 out of range")
	_, err = xccl.CommInitRank(dev, 0, make([]byte, host.UniqueIDSize), 0)
	require.ErrorContains(t, err, "nranks 0")
	var g xccl.Group
	require.Error(t, g.End(), "End without Start")
}

// Comm.Split (ncclCommSplit) on the host device: 2, 3, 5 and 6 ranks.
func TestSplit(t *testing.T) {
	dev := host.New()
	for _, n := range []int{1, 2, 3, 5, 6} {
		conformance.Split(t, dev, conformance.Comms(t, dev, n), []int{0, 7})
	}
}

// Ranks that are goroutines of one process share its host device. A rank's
// CommSplit waits for its own exchange only: the other ranks, already gone
// on, have queued a collective on another communicator, which waits for
// this rank. CommSplit once synchronized the whole device, so waited for
// them while they waited for it, until the timeout.
func TestSplitWaitsForItsOwnExchangeOnly(t *testing.T) {
	dev := host.New()
	const n = 3
	cfg := xccl.Config{Timeout: 10 * time.Second}
	var a, b []*xccl.Comm
	for _, cs := range []*[]*xccl.Comm{&a, &b} {
		id, err := xccl.GetUniqueID(dev)
		require.NoError(t, err)
		*cs = make([]*xccl.Comm, n)
		conformance.OnAll(t, make([]*xccl.Comm, n), func(r int, _ *xccl.Comm) error {
			var err error
			(*cs)[r], err = xccl.CommInitRankConfig(dev, n, id, r, cfg)
			return err
		})
	}
	t.Cleanup(func() {
		for _, c := range append(a, b...) {
			_ = c.Destroy()
		}
	})
	bufs := make([][]int32, n)
	conformance.OnAll(t, a, func(r int, c *xccl.Comm) error {
		s, err := dev.CreateStream()
		if err != nil {
			return err
		}
		defer dev.DestroyStream(s)
		bufs[r] = []int32{int32(r + 1)}
		p := unsafe.Pointer(&bufs[r][0])
		last := r == n-1
		if !last {
			if err := b[r].AllReduce(p, p, 1, rt.Int32, rt.Sum, s); err != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond) // the stream's worker runs it, waiting for the last rank
		}
		child, err := c.Split(xccl.SplitNoColor, 0, xccl.Config{})
		if err != nil || child != nil {
			return fmt.Errorf("split: %v %v", child, err)
		}
		if last {
			if err := b[r].AllReduce(p, p, 1, rt.Int32, rt.Sum, s); err != nil {
				return err
			}
		}
		return dev.SynchronizeStream(s)
	})
	for r := range n {
		require.Equal(t, []int32{6}, bufs[r], "rank %d", r)
	}
}

// CommInitAll (ncclCommInitAll): the ranks of one communicator in this
// process, each made on its device, then driven from one goroutine with a
// group; the thread's own device is left as it was; bad lists refused.
func TestCommInitAll(t *testing.T) {
	goruntime.LockOSThread() // the current device is the thread's
	defer goruntime.UnlockOSThread()
	dev := host.New()
	require.NoError(t, dev.SetDevice(3))
	_, err := xccl.CommInitAll(dev, nil, xccl.Config{})
	require.ErrorContains(t, err, "ndev 0")
	_, err = xccl.CommInitAll(dev, []int{0, dev.DeviceCount()}, xccl.Config{})
	require.ErrorContains(t, err, "devlist[1]")
	comms, err := xccl.CommInitAll(dev, []int{2, 0, 1}, xccl.Config{})
	require.NoError(t, err)
	bufs := make([][]float32, len(comms))
	g := &xccl.Group{}
	g.Start()
	for r, c := range comms {
		require.Equal(t, r, c.Rank())
		require.Equal(t, 3, c.Size())
		bufs[r] = []float32{float32(r + 1), 10}
		require.NoError(t, c.Do(g, rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&bufs[r][0]), Recv: unsafe.Pointer(&bufs[r][0]), Count: 2, Type: rt.Float32, Red: rt.Sum}))
	}
	require.NoError(t, g.End())
	for r, c := range comms {
		require.Equal(t, []float32{6, 30}, bufs[r])
		require.Equal(t, []int{2, 0, 1}[r], c.DeviceID())
	}
	// Split from threads on other devices: each child on its parent's device.
	children := make([]*xccl.Comm, len(comms))
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		var err error
		children[r], err = c.Split(0, r, xccl.Config{})
		return err
	})
	for r, c := range children {
		require.Equal(t, comms[r].DeviceID(), c.DeviceID(), "rank %d", r)
		require.NoError(t, c.Destroy())
		require.NoError(t, comms[r].Destroy())
	}
	id, err := dev.GetDevice()
	require.NoError(t, err)
	require.Equal(t, 3, id, "the caller's device")
}

// Gather and Scatter whose ranks name different roots fail on every rank
// with C_ERROR (they run as all-to-alls: the host engine compares the
// ranks' byte matrices) and leave the communicator usable.
func TestGatherScatterRootMismatch(t *testing.T) {
	dev := host.New()
	comms := conformance.Comms(t, dev, 2)
	errs := make([]error, 2)
	for _, scatter := range []bool{false, true} {
		conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
			mine, whole := make([]float32, 3), make([]float32, 6)
			f := c.Gather
			if scatter {
				f = c.Scatter
				mine, whole = whole, mine
			}
			errs[r] = f(nil, unsafe.Pointer(&mine[0]), unsafe.Pointer(&whole[0]), 3, rt.Float32, r, 0)
			return nil
		})
		for r, err := range errs {
			require.Error(t, err, "rank %d scatter %v", r, scatter)
			require.Equal(t, rt.StatusError, rt.StatusOf(err), "rank %d: %v", r, err)
			require.ErrorContains(t, err, "collective mismatch")
			want := "Gather (run as an all-to-all): "
			if scatter {
				want = "Scatter (run as an all-to-all): "
			}
			require.ErrorContains(t, err, want)
		}
	}
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		a := []float32{float32(r + 1)}
		if err := c.AllReduce(unsafe.Pointer(&a[0]), unsafe.Pointer(&a[0]), 1, rt.Float32, rt.Sum, 0); err != nil {
			return err
		}
		if a[0] != 3 {
			t.Errorf("rank %d: all-reduce after the mismatches = %v, want 3", r, a[0])
		}
		return nil
	})
}

// Finalize (ncclCommFinalize): work issued on a stream is done when it
// returns; every later call fails with C_ERROR naming it, the fast path
// included; a second Finalize does nothing; Destroy frees.
func TestFinalize(t *testing.T) {
	dev := host.New()
	comms := conformance.Comms(t, dev, 2)
	bufs := make([][]float32, 2)
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		s, err := dev.CreateStream()
		if err != nil {
			return err
		}
		defer dev.DestroyStream(s)
		bufs[r] = make([]float32, 1<<16)
		for i := range bufs[r] {
			bufs[r][i] = float32(r + 1)
		}
		p := unsafe.Pointer(&bufs[r][0])
		for range 20 {
			if err := c.AllReduce(p, p, len(bufs[r]), rt.Float32, rt.Sum, s); err != nil {
				return err
			}
		}
		if err := c.Finalize(); err != nil { // no SynchronizeStream: Finalize waits
			return err
		}
		for i, v := range bufs[r] {
			if v != 3<<19 { // (1+2) doubled by each of the 19 after the first
				t.Errorf("rank %d: element %d is %v after Finalize, want 3·2^19", r, i, v)
				break
			}
		}
		return c.Finalize()
	})
	for r, c := range comms {
		two := []float32{1, 1}
		p := unsafe.Pointer(&two[0])
		err := c.AllReduce(p, p, 1, rt.Float32, rt.Sum, 0)
		require.ErrorContains(t, err, "finalized", "rank %d", r)
		require.Equal(t, rt.StatusError, rt.StatusOf(err))
		require.ErrorContains(t, c.Gather(nil, p, p, 1, rt.Float32, 0, 0), "finalized")
		require.ErrorContains(t, c.AllReduceFused([]unsafe.Pointer{p}, []unsafe.Pointer{p}, []int{1}, rt.Float32, rt.Sum, 0), "finalized")
		_, err = c.Split(0, 0, xccl.Config{})
		require.ErrorContains(t, err, "finalized")
		require.NoError(t, c.Destroy())
		require.ErrorContains(t, c.Finalize(), "destroyed")
	}
}

// Register and Deregister (ncclCommRegister) on the host device: the range
// is recorded; bad arguments and foreign handles are C_ERROR; Deregister
// works after Finalize, Register does not; Destroy drops what is left.
func TestRegister(t *testing.T) {
	c := conformance.Comms(t, host.New(), 1)[0]
	other := conformance.Comms(t, host.New(), 1)[0]
	buf := make([]byte, 4096)
	p := unsafe.Pointer(&buf[0])
	_, err := c.Register(nil, 64)
	require.ErrorContains(t, err, "buffer is NULL")
	_, err = c.Register(p, 0)
	require.ErrorContains(t, err, "size 0 out of range")
	h1, err := c.Register(p, len(buf))
	require.NoError(t, err)
	h2, err := c.Register(p, 64)
	require.NoError(t, err)
	require.NotEqual(t, h1, h2)
	require.Equal(t, 2, c.Registered())
	require.ErrorContains(t, other.Deregister(h1), "not registered with this communicator")
	require.ErrorContains(t, c.Deregister(0), "not registered")
	require.NoError(t, c.Deregister(h1))
	require.ErrorContains(t, c.Deregister(h1), "not registered", "a second deregistration")
	require.NoError(t, c.Finalize())
	_, err = c.Register(p, 64)
	require.ErrorContains(t, err, "finalized")
	require.NoError(t, c.Deregister(h2), "deregistration after Finalize")
	_, err = c.Register(p, 64)
	require.Error(t, err)
	require.Equal(t, 0, c.Registered())
	h3, err := other.Register(p, 64)
	require.NoError(t, err)
	require.NoError(t, other.Destroy())
	require.ErrorContains(t, other.Deregister(h3), "destroyed")
}

// The launcher's id (XCCL_UNIQUE_ID, from xcclrun) serves one
// communicator: a second CommInitFromEnv in the process is refused at
// once, not after the timeout waiting for a bootstrap that is gone.
func TestCommInitFromEnvLauncherIDOnce(t *testing.T) {
	d := host.New()
	id, err := xccl.GetUniqueID(d)
	require.NoError(t, err)
	t.Setenv("XCCL_UNIQUE_ID", hex.EncodeToString(id))
	t.Setenv("XCCL_RANK", "0")
	t.Setenv("XCCL_NRANKS", "1")
	t.Setenv("XCCL_LOCAL_RANK", "0")
	c, _, err := xccl.CommInitFromEnv(d)
	require.NoError(t, err)
	defer c.Destroy()
	_, _, err = xccl.CommInitFromEnv(d)
	require.ErrorContains(t, err, "the communicator of XCCL_UNIQUE_ID (the launcher's id) already")
	require.Equal(t, rt.StatusError, rt.StatusOf(err))
}

// A peer's abort reaches XcclCommGetAsyncError on the others at once, not
// at their next wait; a peer's Destroy is no error.
func TestAsyncErrorSeesAPeersAbort(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 3)
	require.NoError(t, comms[2].Destroy())
	require.NoError(t, comms[0].AsyncError(), "a peer that destroyed its communicator")
	comms[1].Abort()
	err := comms[0].AsyncError()
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
	require.ErrorContains(t, err, "rank 1 aborted")
	one := float32(1)
	err = comms[0].AllReduce(unsafe.Pointer(&one), unsafe.Pointer(&one), 1, rt.Float32, rt.Sum, 0)
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "and the communicator is broken: %v", err)
}
