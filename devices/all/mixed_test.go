package all_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/ascend"
	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/devices/mlu"
	"github.com/xccl-project/xccl/devices/nvidia"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func counts() []int {
	if testing.Short() {
		return []int{0, 7, 40009}
	}
	return []int{0, 1, 7, 40009}
}

type vendors struct{ nvidia, ascend, mlu rt.Device }

func openVendors(t *testing.T) vendors {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_NCCL_LIBRARY", libs["fakenccl"])
	t.Setenv("XCCL_CUDART_LIBRARY", libs["fakecudart"])
	t.Setenv("XCCL_HCCL_LIBRARY", libs["fakehccl"])
	t.Setenv("XCCL_ACL_LIBRARY", libs["fakeascendcl"])
	t.Setenv("XCCL_CNCL_LIBRARY", libs["fakecncl"])
	t.Setenv("XCCL_CNRT_LIBRARY", libs["fakecnrt"])
	var v vendors
	v.nvidia, err = ncclshape.Open(nvidia.Spec)
	require.NoError(t, err)
	v.ascend, err = ascend.Open()
	require.NoError(t, err)
	v.mlu, err = mlu.Open()
	require.NoError(t, err)
	return v
}

func run(t *testing.T, devs []rt.Device, labels []string) []*xccl.Comm {
	comms := conformance.MixedComms(t, devs, labels)
	for _, c := range comms {
		require.True(t, c.Mixed(), "clusters %v / %v make a mixed communicator", labels, devs)
	}
	conformance.RunComms(t, host.New(), comms, counts())
	return comms
}

// hierOnHost makes mixed communicators of host clusters take the
// hierarchical path (XCCL_MIXED_ALGO=hier, read at each init): auto sends
// their all-reduces through the host engine in one collective, and these
// tests are about the hierarchical path without accelerators.
func hierOnHost(t *testing.T) { t.Setenv("XCCL_MIXED_ALGO", "hier") }

// Host ranks split by cluster label: 2+2, interleaved, and 1+3, forced
// hierarchical; and 2+2 and 1+3 on their own plan (auto: every all-reduce
// through the host engine, from the callers' buffers).
func TestHostClustersByLabel(t *testing.T) {
	h := host.New()
	for _, tc := range []struct {
		name, algo string
		labels     []string
	}{
		{"2+2", "hier", []string{"a", "a", "b", "b"}},
		{"interleaved", "hier", []string{"a", "b", "a", "b"}},
		{"1+3", "hier", []string{"a", "b", "b", "b"}},
		{"2+2", "auto", []string{"a", "a", "b", "b"}},
		{"1+3", "auto", []string{"a", "b", "b", "b"}},
	} {
		t.Run(tc.name+"/"+tc.algo, func(t *testing.T) {
			t.Setenv("XCCL_MIXED_ALGO", tc.algo)
			comms := run(t, []rt.Device{h, h, h, h}, tc.labels)
			s := comms[0].Stats().Engine
			if tc.algo == "hier" {
				require.NotZero(t, s["mixed.hierarchical_calls"], "%v", s)
			} else {
				require.Zero(t, s["mixed.hierarchical_calls"], "%v", s)
			}
			require.NotZero(t, s["mixed.flat_calls"], "%v", s)
		})
	}
}

// Two fake NCCL ranks and two host ranks, interleaved.
func TestFakeNCCLAndHost(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	comms := run(t, []rt.Device{v.nvidia, h, v.nvidia, h}, []string{"", "", "", ""})
	require.Contains(t, comms[0].Capabilities(), "nvidia[0 2] host[1 3]")
	s := comms[0].Stats().Engine
	require.NotZero(t, s["mixed.hierarchical_calls"], "auto: the NCCL cluster reduces inside itself")
	require.Equal(t, uint64(1), s["mixed.staging_registered"], "the NCCL leader stages in host-device memory its runtime pinned: %v", s)
}

// Ranks on the host device of a mixed communicator run its collectives in
// their own buffers in stream order: work queued before the call (here a
// callback that writes the input late) is done before the host engine
// reads, and nothing goes through the staging (no copy back is timed).
func TestMixedHostRanksStreamOrder(t *testing.T) {
	for _, algo := range []string{"auto", "hier"} {
		t.Run(algo, func(t *testing.T) {
			t.Setenv("XCCL_MIXED_ALGO", algo)
			h := host.New()
			comms := conformance.MixedComms(t, []rt.Device{h, h, h, h}, []string{"a", "a", "b", "b"})
			defer func() {
				for _, c := range comms {
					require.NoError(t, c.Destroy())
				}
			}()
			const n = 40009 // several pieces of XCCL_MIXED_CHUNK_BYTES (TestMain)
			conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
				s, err := h.CreateStream()
				if err != nil {
					return err
				}
				defer func() { _ = h.DestroyStream(s) }()
				in, out := make([]int32, n), make([]int32, n)
				if err := h.AddCallback(s, func(error) {
					time.Sleep(50 * time.Millisecond)
					for i := range in {
						in[i] = int32(r + 1 + i)
					}
				}); err != nil {
					return err
				}
				if err := c.AllReduce(unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0]), n, rt.Int32, rt.Sum, rt.Stream(s)); err != nil {
					return err
				}
				if err := c.Broadcast(unsafe.Pointer(&out[0]), n, rt.Int32, 3, rt.Stream(s)); err != nil {
					return err
				}
				if err := h.SynchronizeStream(s); err != nil {
					return err
				}
				for i, v := range out {
					if want := int32(10 + 4*i); v != want {
						return fmt.Errorf("rank %d: out[%d] = %d, want %d", r, i, v, want)
					}
				}
				return nil
			})
			for r, c := range comms {
				s := c.Stats().Engine
				require.Zero(t, s["mixed.host_to_device_ns"], "rank %d: %v", r, s)
			}
		})
	}
}

// Statistics read from another goroutine while the staging grows and is
// registered (under -race: nothing they read is written unguarded).
func TestMixedStatsWhileRunning(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	comms := conformance.MixedComms(t, []rt.Device{v.nvidia, h, v.nvidia, h}, []string{"", "", "", ""})
	defer func() {
		for _, c := range comms {
			require.NoError(t, c.Destroy())
		}
	}()
	done := make(chan struct{})
	polled := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				polled <- n
				return
			default:
				for _, c := range comms {
					_ = c.Stats()
				}
				n++
			}
		}
	}()
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		for _, n := range []int{1 << 10, 1 << 18, 1 << 20} {
			b, out := make([]float32, n), make([]float32, n)
			if err := c.AllReduce(unsafe.Pointer(&b[0]), unsafe.Pointer(&b[0]), n, rt.Float32, rt.Sum, 0); err != nil {
				return err
			}
			if err := c.AllGather(unsafe.Pointer(&b[0]), unsafe.Pointer(&out[0]), n/4, rt.Float32, 0); err != nil {
				return err
			}
		}
		return nil
	})
	close(done)
	require.NotZero(t, <-polled)
	require.Equal(t, uint64(1), comms[0].Stats().Engine["mixed.staging_registered"])
}

// XCCL_MIXED_ALGO=auto takes the hierarchical path only where a cluster of
// two or more ranks is an accelerator's: host clusters, and accelerators
// one per cluster beside host ranks, all-reduce through the host engine in
// one collective; forced (hier), host clusters go hierarchical.
func TestMixedAutoPlan(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	for _, tc := range []struct {
		algo   string
		devs   []rt.Device
		labels []string
		hier   bool
	}{
		{"auto", []rt.Device{h, h, h, h}, []string{"a", "a", "b", "b"}, false},
		{"auto", []rt.Device{v.nvidia, h, h, h}, []string{"", "", "", ""}, false},
		{"auto", []rt.Device{v.nvidia, h, v.nvidia, h}, []string{"", "", "", ""}, true},
		{"hier", []rt.Device{h, h, h, h}, []string{"a", "a", "b", "b"}, true},
		{"flat", []rt.Device{v.nvidia, h, v.nvidia, h}, []string{"", "", "", ""}, false},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.algo, strings.Join(tc.labels, ",")), func(t *testing.T) {
			t.Setenv("XCCL_MIXED_ALGO", tc.algo)
			comms := conformance.MixedComms(t, tc.devs, tc.labels)
			defer func() {
				for _, c := range comms {
					require.NoError(t, c.Destroy())
				}
			}()
			require.Equal(t, tc.hier, strings.Contains(comms[0].Capabilities(), "FLOAT32    hierarchical: SUM"), "%s", comms[0].Capabilities())
			conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
				b := []float32{float32(r + 1), 2}
				if err := c.AllReduce(unsafe.Pointer(&b[0]), unsafe.Pointer(&b[0]), 2, rt.Float32, rt.Sum, 0); err != nil {
					return err
				}
				if b[0] != 10 || b[1] != 8 {
					return fmt.Errorf("rank %d: got %v, want [10 8]", r, b)
				}
				return nil
			})
			s := comms[0].Stats().Engine
			if tc.hier {
				require.NotZero(t, s["mixed.hierarchical_calls"], "%v", s)
				require.Equal(t, uint64(3), s["mixed.parts"], "rank 0 leads a cluster of two: all ranks', its cluster's and the leaders' communicators: %v", s)
			} else {
				require.Zero(t, s["mixed.hierarchical_calls"], "%v", s)
				require.NotZero(t, s["mixed.flat_calls"], "%v", s)
				require.Equal(t, uint64(1), s["mixed.parts"], "no hierarchical all-reduce: only the all-rank communicator: %v", s)
			}
		})
	}
}

// Three vendors and the host, uneven: one HCCL rank, two CNCL ranks, one
// host rank. AVG, which HCCL and CNCL cannot reduce, is a SUM on their
// libraries scaled on the host for real types, and goes through the host
// engine for the rest; FLOAT64, which CNCL lacks, goes through the host.
func TestThreeVendorsAndHost(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	comms := run(t, []rt.Device{v.mlu, v.ascend, h, v.mlu}, []string{"", "", "", ""})
	caps := comms[1].Capabilities()
	require.Contains(t, caps, "FLOAT32    hierarchical: SUM AVG MAX MIN PRODUCT; through the host engine: -", caps)
	require.Contains(t, caps, "INT32      hierarchical: SUM MAX MIN PRODUCT; through the host engine: AVG", caps)
	require.Contains(t, caps, "FLOAT64    hierarchical: -; through the host engine: SUM AVG MAX MIN PRODUCT", caps)
}

// One cluster through xccl's id is the device's own communicator: the
// vendor sees the whole call (the fake NCCL's call log).
func TestOneClusterIsPassThrough(t *testing.T) {
	v := openVendors(t)
	comms := conformance.MixedComms(t, []rt.Device{v.nvidia, v.nvidia}, []string{"", ""})
	for _, c := range comms {
		require.False(t, c.Mixed())
		require.Contains(t, c.Capabilities(), "FLOAT32")
	}
	calls := fakecheck.Hook(t, os.Getenv("XCCL_NCCL_LIBRARY"), "fakeAllReduceCalls")
	last := fakecheck.Hook(t, os.Getenv("XCCL_NCCL_LIBRARY"), "fakeAllReduceLastCount")
	before := calls()
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error { return allReduce(c, 1000003) })
	require.Equal(t, uintptr(2), calls()-before, "one vendor all-reduce per rank")
	require.Equal(t, uintptr(1000003), last(), "of the whole count")
	conformance.RunComms(t, v.nvidia, comms, []int{0, 7})
	h := host.New()
	hc := conformance.MixedComms(t, []rt.Device{h, h, h}, []string{"x", "x", "x"})
	require.False(t, hc[0].Mixed())
}

// A cluster label over two device kinds is refused on every rank.
func TestClusterOfTwoDevicesRefused(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	id, err := xccl.GetUniqueID(h)
	require.NoError(t, err)
	errs := make(chan error, 2)
	for r, d := range []rt.Device{v.nvidia, h} {
		go func() {
			_, err := xccl.CommInitRankCluster(d, 2, id, r, "same")
			errs <- err
		}()
	}
	for i := 0; i < 2; i++ {
		err := <-errs
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), "one device kind"), "%v", err)
	}
}

func hostComms(t *testing.T, labels ...string) []*xccl.Comm {
	hierOnHost(t)
	h := host.New()
	devs := make([]rt.Device, len(labels))
	for i := range devs {
		devs[i] = h
	}
	comms := conformance.MixedComms(t, devs, labels)
	for _, c := range comms {
		require.NoError(t, c.SetTimeout(20*time.Second))
	}
	return comms
}

func allReduce(c *xccl.Comm, count int) error {
	b := make([]float32, max(count, 1))
	p := unsafe.Pointer(&b[0])
	return c.AllReduce(p, p, count, rt.Float32, rt.Sum, 0)
}

// Mismatched calls on a mixed communicator: C_ERROR on every rank, naming
// the calls, and the communicator stays usable.
func TestMixedMismatch(t *testing.T) {
	comms := hostComms(t, "a", "a", "b", "b")
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = allReduce(c, 10+2*min(r, 1))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), "rank %d: %v", r, err)
		require.Contains(t, err.Error(), "mismatch", "rank %d", r)
	}
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error { return allReduce(c, 1000) })

	// One rank's call takes the flat path where its peers' take the
	// hierarchical one: refused on every rank, and the ranks' call numbers
	// stay together (they parted, and every later call was a mismatch).
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		var err error
		if r == 3 {
			b := make([]float32, 40)
			err = c.AllGather(unsafe.Pointer(&b[0]), unsafe.Pointer(&b[0]), 10, rt.Float32, 0)
		} else {
			err = allReduce(c, 10)
		}
		if rt.StatusOf(err) != rt.StatusError {
			return fmt.Errorf("the mismatched call: %v", err)
		}
		for k := 0; k < 3; k++ {
			if err := allReduce(c, 100); err != nil {
				return fmt.Errorf("call %d after the mismatch: %w", k, err)
			}
		}
		return nil
	})
}

// A group over two mixed communicators (a parent and its child): every
// rank runs the group's calls in its issue order (they ran in the map
// order of their communicators, which differs between ranks: a deadlock
// until the timeout).
func TestMixedGroupOverTwoCommunicators(t *testing.T) {
	comms := hostComms(t, "a", "b", "a")
	children := make([]*xccl.Comm, len(comms))
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		var err error
		children[r], err = c.Split(0, len(comms)-r, xccl.Config{Timeout: 20 * time.Second})
		return err
	})
	t.Cleanup(func() {
		for _, c := range children {
			_ = c.Destroy()
		}
	})
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		for it := 0; it < 10; it++ {
			x, y := []float32{1}, []float32{float32(r)}
			var g xccl.Group
			g.Start()
			for _, call := range []struct {
				c *xccl.Comm
				v []float32
			}{{c, x}, {children[r], y}} {
				p := unsafe.Pointer(&call.v[0])
				if err := call.c.Do(&g, rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: rt.Float32, Red: rt.Sum}); err != nil {
					return err
				}
			}
			if err := g.End(); err != nil {
				return fmt.Errorf("iteration %d: %w", it, err)
			}
			if x[0] != 3 || y[0] != 3 {
				return fmt.Errorf("iteration %d: %v %v, want 3 3", it, x[0], y[0])
			}
		}
		return nil
	})
}

// Abort from another thread ends this rank's mixed call that waits for a
// rank that never comes, at once; the other waiting ranks fail within their
// timeout, naming a rank they wait for.
func TestMixedAbort(t *testing.T) {
	comms := hostComms(t, "a", "a", "b", "b")
	for _, c := range comms {
		require.NoError(t, c.SetTimeout(3*time.Second))
	}
	errs := make([]chan error, 3)
	for r := 0; r < 3; r++ {
		errs[r] = make(chan error, 1)
		go func() { errs[r] <- allReduce(comms[r], 1<<16) }()
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	comms[0].Abort()
	select {
	case err := <-errs[0]:
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
		require.Contains(t, err.Error(), "aborted")
	case <-time.After(2 * time.Second):
		t.Fatalf("the aborted rank's call did not end within 2 s")
	}
	require.Less(t, time.Since(start), 2*time.Second)
	for r := 1; r < 3; r++ {
		select {
		case err := <-errs[r]:
			require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
			require.Regexp(t, "rank [03]", err.Error())
		case <-time.After(10 * time.Second):
			t.Fatalf("rank %d did not fail within its timeout", r)
		}
	}
	require.Error(t, comms[0].AsyncError())
}

// failing is a device whose stream and event waits fail while fail is set
// (a device lost mid-job), and which counts what it frees.
type failing struct {
	rt.Device
	fail  atomic.Bool
	frees atomic.Int32
}

func (f *failing) lost() error { return rt.Failedf("%s: device lost", f.Name()) }

func (f *failing) SynchronizeStream(s rt.Stream) error {
	if f.fail.Load() {
		return f.lost()
	}
	return f.Device.SynchronizeStream(s)
}

func (f *failing) SynchronizeEvent(e rt.Event) error {
	if f.fail.Load() {
		return f.lost()
	}
	return f.Device.SynchronizeEvent(e)
}

func (f *failing) HostFree(p unsafe.Pointer, size int) error {
	f.frees.Add(1)
	return f.Device.HostFree(p, size)
}

// A rank whose device fails in a flat collective, before its host part:
// the ranks waiting for it there fail at once, not at their timeout. The
// copy out of its staging it could not wait for keeps the staging busy:
// Destroy reports the failure and leaves the staging allocated rather
// than free it under the copy. The failing wait is the stream's after the
// copy in (same size), or the staging's own before it grows.
func TestMixedDeviceLost(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	allGather := func(c *xccl.Comm) error { // 128 KiB of staging: it grows
		in, out := make([]float32, 1<<13), make([]float32, 4<<13)
		return c.AllGather(unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0]), len(in), rt.Float32, 0)
	}
	for _, tc := range []struct {
		name string
		call func(*xccl.Comm) error
	}{
		{"stream", func(c *xccl.Comm) error { return allReduce(c, 1<<12) }},
		{"growth", allGather},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &failing{Device: v.nvidia}
			comms := conformance.MixedComms(t, []rt.Device{g, h, h, h}, []string{"", "", "", ""})
			for _, c := range comms {
				require.NoError(t, c.SetTimeout(30*time.Second))
			}
			defer func() {
				for _, c := range comms[1:] {
					_ = c.Destroy()
				}
			}()
			conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error { return allReduce(c, 1<<12) })
			require.Zero(t, comms[0].Stats().Engine["mixed.hierarchical_calls"])

			g.fail.Store(true)
			start := time.Now()
			errs := make([]error, 4)
			var wg sync.WaitGroup
			for r, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = tc.call(c)
				}()
			}
			wg.Wait()
			require.Less(t, time.Since(start), 10*time.Second, "the ranks waited for their timeout: %v", errs)
			require.Contains(t, errs[0].Error(), "device lost")
			for r, err := range errs {
				require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "rank %d: %v", r, err)
			}
			require.Regexp(t, "rank 0", errs[1].Error())

			err := comms[0].Destroy()
			require.Error(t, err, "the copy out of the staging was never waited for")
			require.Contains(t, err.Error(), "device lost")
			require.Zero(t, g.frees.Load(), "the staging was freed under a copy that may still read it")
		})
	}
}

// A rank process of one cluster killed in the middle of all-reduces: every
// other rank's call fails, naming it, well before the timeout.
func TestMixedKilledRank(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	hierOnHost(t)
	child, comms := withChildRank(t, "mixed-forever")
	defer func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	}()
	go func() { time.Sleep(500 * time.Millisecond); _ = child.Process.Kill() }()
	start := time.Now()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for errs[r] == nil {
				errs[r] = allReduce(c, 1<<18)
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "rank %d: %v", r, err)
		t.Logf("rank %d: %v", r, err)
	}
	require.Less(t, time.Since(start), 15*time.Second)
}

// Small staging pieces, so the larger counts are cut into chunks; the
// test binary doubles as a rank process.
func TestMain(m *testing.M) {
	if os.Getenv("XCCL_MIXED_CHUNK_BYTES") == "" { // a child may be given another (TestMixedPiecesAgree)
		os.Setenv("XCCL_MIXED_CHUNK_BYTES", "65536")
	}
	switch os.Getenv("XCCL_TEST_CHILD") {
	case "mixed-forever":
		os.Exit(childForever())
	case "mixed-pieces":
		os.Exit(childPieces())
	}
	os.Exit(m.Run())
}

// piecesCount is the all-reduce of TestMixedPiecesAgree: several pieces.
const piecesCount = 40009

// checkedAllReduce all-reduces piecesCount int32 (rank r gives r+1+i at
// i) over n ranks and checks the sum.
func checkedAllReduce(c *xccl.Comm, r, n int) error {
	in, out := make([]int32, piecesCount), make([]int32, piecesCount)
	for i := range in {
		in[i] = int32(r + 1 + i)
	}
	if err := c.AllReduce(unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0]), piecesCount, rt.Int32, rt.Sum, 0); err != nil {
		return err
	}
	for i, v := range out {
		if want := int32(n*(n+1)/2 + n*i); v != want {
			return fmt.Errorf("rank %d: out[%d] = %d, want %d", r, i, v, want)
		}
	}
	return nil
}

func childPieces() int {
	c, rank, n, err := childComm()
	if err == nil {
		err = checkedAllReduce(c, rank, n)
		if derr := c.Destroy(); err == nil {
			err = derr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A rank process whose XCCL_MIXED_CHUNK_BYTES differs cuts the pieces
// rank 0 says, as the others do: the all-reduce comes out right.
func TestMixedPiecesAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	child, comms := withChildRank(t, "mixed-pieces", "XCCL_MIXED_CHUNK_BYTES=4096")
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error { return checkedAllReduce(c, r, 4) })
	for _, c := range comms {
		require.NoError(t, c.Destroy())
	}
	require.NoError(t, child.Wait())
}

// withChildRank starts this test binary as rank 3 of 4 (cluster b) in
// child mode mode, with env added, and joins ranks 0-2 (clusters a, a, b)
// here. The child is killed, if still running, when the test ends.
func withChildRank(t *testing.T, mode string, env ...string) (*exec.Cmd, []*xccl.Comm) {
	h := host.New()
	id, err := xccl.GetUniqueID(h)
	require.NoError(t, err)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(append(os.Environ(), "XCCL_TEST_CHILD="+mode, "XCCL_RANK=3", "XCCL_NRANKS=4",
		"XCCL_UNIQUE_ID="+hex.EncodeToString(id), "XCCL_CLUSTER=b"), env...)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	comms := make([]*xccl.Comm, 3)
	conformance.OnAll(t, make([]*xccl.Comm, 3), func(r int, _ *xccl.Comm) error {
		var err error
		comms[r], err = xccl.CommInitRankCluster(h, 4, id, r, []string{"a", "a", "b"}[r])
		return err
	})
	return child, comms
}

// childComm joins the communicator withChildRank's environment names.
func childComm() (c *xccl.Comm, rank, n int, err error) {
	id, err := hex.DecodeString(os.Getenv("XCCL_UNIQUE_ID"))
	if err != nil {
		return nil, 0, 0, err
	}
	rank, _ = strconv.Atoi(os.Getenv("XCCL_RANK"))
	n, _ = strconv.Atoi(os.Getenv("XCCL_NRANKS"))
	c, err = xccl.CommInitRankCluster(host.New(), n, id, rank, os.Getenv("XCCL_CLUSTER"))
	return c, rank, n, err
}

func childForever() int {
	c, _, _, err := childComm()
	if err != nil {
		return 1
	}
	for allReduce(c, 1<<18) == nil {
	}
	return 1
}

// A few thousand mixed calls of every kind on host clusters 1+3, then
// destroy: goroutines and open files come back to where they were, and
// nothing of the job is left in /dev/shm.
func TestMixedSoakLeavesNothing(t *testing.T) {
	ops := 2000
	if testing.Short() {
		ops = 400
	}
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	// The job's segments: those this process has mapped while its ranks
	// live (other packages' tests run beside this one and make their own).
	mapped := func() []string {
		b, err := os.ReadFile("/proc/self/maps")
		require.NoError(t, err)
		seen := map[string]bool{}
		var out []string
		for _, line := range strings.Split(string(b), "\n") {
			i := strings.Index(line, "/dev/shm/xccl-")
			if i < 0 {
				continue
			}
			f := strings.TrimSuffix(line[i:], " (deleted)")
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
		return out
	}
	hierOnHost(t)
	goroutines, files := runtime.NumGoroutine(), fds()
	h := host.New()
	comms := conformance.MixedComms(t, []rt.Device{h, h, h, h}, []string{"a", "b", "b", "b"})
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		buf := make([]int32, 4*257)
		out := make([]int32, 4*257)
		p, q := unsafe.Pointer(&buf[0]), unsafe.Pointer(&out[0])
		for i := 0; i < ops; i++ {
			n := 1 + i%257
			var err error
			switch i % 5 {
			case 0:
				err = c.AllReduce(p, q, n, rt.Int32, rt.Sum, 0)
			case 1:
				err = c.AllReduce(p, q, n, rt.Int32, rt.Avg, 0) // through the host engine
			case 2:
				err = c.AllGather(p, q, n, rt.Int32, 0)
			case 3:
				err = c.Broadcast(p, n, rt.Int32, i%4, 0)
			case 4:
				err = c.ReduceScatter(p, q, n, rt.Int32, rt.Max, 0)
			}
			if err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
		}
		return nil
	})
	s := comms[0].Stats().Engine
	require.NotZero(t, s["mixed.hierarchical_calls"])
	segs := mapped()
	require.NotEmpty(t, segs, "the ranks map shared-memory segments")
	for _, c := range comms {
		require.NoError(t, c.Destroy())
	}
	deadline := time.Now().Add(5 * time.Second)
	for (runtime.NumGoroutine() > goroutines || fds() > files) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutines leaked")
	require.LessOrEqual(t, fds(), files, "file descriptors leaked")
	for _, f := range segs {
		_, err := os.Stat(f)
		require.True(t, os.IsNotExist(err), "left in /dev/shm: %s", f)
		m, _ := filepath.Glob(f + ".new")
		require.Empty(t, m, "a half-made segment is left: %s.new", f)
	}
}

// Abort frees what a communicator holds, as ncclCommAbort does: a program
// that aborts and never destroys leaks no descriptors; later calls fail,
// the async error still tells why, and Destroy after it is a no-op. Host
// and mixed communicators, and a fake NCCL one (whose abort frees it:
// destroying it after would be a use after free).
func TestAbortFrees(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	for _, tc := range []struct {
		name string
		devs []rt.Device
	}{
		{"host", []rt.Device{h, h}},
		{"nvidia", []rt.Device{v.nvidia, v.nvidia}},
		{"mixed", []rt.Device{v.nvidia, h}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := -1
			for round := 0; round < 4; round++ {
				comms := conformance.MixedComms(t, tc.devs, []string{"", ""})
				conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error { return allReduce(c, 1000) })
				for _, c := range comms {
					c.Abort()
				}
				for r, c := range comms {
					require.Error(t, c.AsyncError(), "rank %d", r)
					err := allReduce(c, 10)
					require.Error(t, err, "rank %d", r)
					require.Contains(t, err.Error(), "aborted", "rank %d", r)
				}
				if round == 0 {
					before = fds() // the first round opens what stays open (libraries, the root)
				}
			}
			require.LessOrEqual(t, fds(), before, "descriptors leaked by aborted communicators")
		})
	}
}

// Abort from other threads while every rank is in the middle of calls
// (collectives and sends/receives, host and mixed communicators): each
// call returns an error, nothing touches what Abort freed (run it under
// -race; it crashed when a call got the lock after the rings were gone).
func TestAbortWhileCalling(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	for _, tc := range []struct {
		name string
		devs []rt.Device
	}{
		{"host", []rt.Device{h, h, h}},
		{"mixed", []rt.Device{v.nvidia, h, h}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := conformance.MixedComms(t, tc.devs, []string{"", "", ""})
			n := len(comms)
			for _, c := range comms {
				require.NoError(t, c.SetTimeout(20*time.Second))
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					b := make([]float32, 4096)
					p := unsafe.Pointer(&b[0])
					for {
						if err := c.AllReduce(p, p, len(b), rt.Float32, rt.Sum, 0); err != nil {
							errs[r] = err
							return
						}
						g := &xccl.Group{}
						g.Start()
						_ = c.Do(g, rt.Op{Kind: rt.OpSend, Send: p, Count: 1024, Type: rt.Float32, Root: (r + 1) % n})
						_ = c.Do(g, rt.Op{Kind: rt.OpRecv, Recv: p, Count: 1024, Type: rt.Float32, Root: (r + n - 1) % n})
						if err := g.End(); err != nil {
							errs[r] = err
							return
						}
					}
				}()
			}
			time.Sleep(100 * time.Millisecond)
			var ab sync.WaitGroup
			for _, c := range comms {
				ab.Add(1)
				go func() { defer ab.Done(); c.Abort() }()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); ab.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("calls or aborts did not return within 15 s")
			}
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
			}
		})
	}
}

// CommInitRankConfig's timeout bounds the init (a rank that never comes)
// and, on the host engine, every later operation, whatever XCCL_TIMEOUT
// says (the torch backend passes its group's timeout through it).
func TestInitTimeoutFromConfig(t *testing.T) {
	h := host.New()
	id, err := xccl.GetUniqueID(h)
	require.NoError(t, err)
	start := time.Now()
	_, err = xccl.CommInitRankConfig(h, 2, id, 0, xccl.Config{Timeout: time.Second})
	require.Error(t, err)
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
	require.Less(t, time.Since(start), 10*time.Second, "the init waited past its timeout: %v", err)

	id, err = xccl.GetUniqueID(h)
	require.NoError(t, err)
	comms := make([]*xccl.Comm, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = xccl.CommInitRankConfig(h, 3, id, r, xccl.Config{Timeout: time.Second})
		}()
	}
	wg.Wait()
	for r := range comms {
		require.NoError(t, errs[r], "rank %d", r)
		defer comms[r].Destroy()
	}
	start = time.Now()
	err = allReduce(comms[0], 10) // the others never call
	require.Error(t, err)
	require.Contains(t, err.Error(), "timed out after 1s")
	require.Less(t, time.Since(start), 10*time.Second)
}

// Comm.Split of a mixed communicator: each color's ranks are on both the
// fake NCCL and the host device, so both new communicators are mixed.
func TestMixedSplit(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	comms := conformance.MixedComms(t, []rt.Device{v.nvidia, h, h, v.nvidia, h}, []string{"", "", "", "", ""})
	for _, g := range conformance.Split(t, h, comms, []int{0, 7}) {
		require.True(t, g[0].Mixed(), "a split of nvidia and host ranks")
		require.Contains(t, g[0].Capabilities(), "nvidia[")
	}
}
