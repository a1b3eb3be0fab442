package nvidia_test

import (
	"fmt"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/devices/nvidia"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

var libs fakevendor.Libs

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "xccl-fake-")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer os.RemoveAll(dir)
		if libs, err = fakevendor.Build(dir); err != nil {
			fmt.Println(err)
			return 1
		}
		os.Setenv("XCCL_NCCL_LIBRARY", libs["fakenccl"])
		os.Setenv("XCCL_CUDART_LIBRARY", libs["fakecudart"])
		return m.Run()
	}())
}

func open(t *testing.T) *ncclshape.Device {
	d, err := ncclshape.Open(nvidia.Spec)
	require.NoError(t, err)
	return d
}

// fakeHook is a test entry of the fake NCCL (fakeAllReduceLastOp, ...).
func fakeHook(t *testing.T, name string) func() uintptr {
	t.Helper()
	return fakecheck.Hook(t, libs["fakenccl"], name)
}

// A fake's wait comes back into Go now and then (fakevendor's hook, found
// in this binary's dynamic symbols): Go's stop-the-world can miss a
// goroutine entering a cgo call and wait for that call to return, and a
// rank waiting in the fake for another goroutine-rank waited its 60 s.
func TestFakeWaitsComeBackToGo(t *testing.T) {
	comms := conformance.Comms(t, open(t), 2)
	before := fakevendor.WaitHookCalls()
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		// Rank 1 comes once rank 0, waiting in the fake's barrier, has
		// called the hook (or after 20 s, and the test fails).
		for end := time.Now().Add(20 * time.Second); r == 1 && fakevendor.WaitHookCalls() == before && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		v := []float32{1, 2}
		return c.AllReduce(unsafe.Pointer(&v[0]), unsafe.Pointer(&v[0]), 2, rt.Float32, rt.Sum, 0)
	})
	require.Greater(t, fakevendor.WaitHookCalls(), before)
}

// The shared conformance suite, through the real dlopen path and the fake
// NCCL, for every supported dtype × op, in place and out of place.
func TestConformanceThroughFakeNCCL(t *testing.T) {
	counts := []int{0, 1, 7, 10007}
	if testing.Short() {
		counts = []int{0, 7, 1001}
	}
	conformance.Run(t, open(t), conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true})
}

// Every pair the table refuses is C_ERROR with vendor, dtype and op named,
// and never reaches the library.
func TestRefusedPairs(t *testing.T) {
	d := open(t)
	comms := conformance.Comms(t, d, 1)
	buf := make([]byte, 64)
	p := unsafe.Pointer(&buf[0])
	refused := 0
	for _, dt := range rt.AllDataTypes() {
		for _, op := range rt.AllReduceOps() {
			if d.Supports(dt, op) == nil {
				continue
			}
			refused++
			err := comms[0].AllReduce(p, p, 1, dt, op, 0)
			require.Error(t, err)
			require.Equal(t, rt.StatusError, rt.StatusOf(err))
			require.Contains(t, err.Error(), "nvidia")
			require.Contains(t, err.Error(), "NCCL")
		}
	}
	require.Positive(t, refused)
	require.NoError(t, d.Supports(rt.Float32, rt.Avg))
	for _, op := range rt.AllReduceOps() {
		require.Error(t, d.Supports(rt.Complex64, op))
	}
}

// The stream the caller passes is the stream the vendor call receives.
func TestStreamReachesTheVendorUnchanged(t *testing.T) {
	fakecheck.CheckStream(t, open(t), libs["fakenccl"])
	fakecheck.CheckJoins(t, open(t))
}

// Every runtime entry reaches the (fake) CUDA runtime.
func TestRuntimeEntries(t *testing.T) {
	fakecheck.CheckRuntime(t, open(t))
}

func TestMissingLibraryAndSymbol(t *testing.T) {
	t.Setenv("XCCL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2")
	_, err := ncclshape.Open(nvidia.Spec)
	require.Error(t, err)
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err))
	require.Contains(t, err.Error(), "/nonexistent/libnccl.so.2")
	require.Contains(t, err.Error(), "XCCL_NCCL_LIBRARY")

	t.Setenv("XCCL_NCCL_LIBRARY", libs["fakecudart"]) // loads, but has no nccl* symbols
	_, err = ncclshape.Open(nvidia.Spec)
	require.ErrorContains(t, err, "lacks the symbol nccl")
}

// XCCL_CHECK on a vendor device: matching calls pass (the suite runs with
// it), mismatched ones fail on every rank with C_ERROR naming both calls.
func TestCheckFindsMismatchedCalls(t *testing.T) {
	d := open(t)
	comms := conformance.Comms(t, d, 2)
	for _, c := range comms {
		c.SetCheck(true)
	}
	conformance.RunComms(t, d, comms, []int{0, 5})
	errs := make([]error, 2)
	done := make(chan int)
	for r, c := range comms {
		go func() {
			buf := make([]float32, 16)
			errs[r] = c.AllReduce(unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[0]), 10+2*r, rt.Float32, rt.Sum, 0)
			done <- r
		}()
	}
	<-done
	<-done
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.Equal(t, rt.StatusError, rt.StatusOf(err))
		require.Contains(t, err.Error(), "collective mismatch")
		require.Contains(t, err.Error(), "AllReduce(count=10, FLOAT32, SUM)")
		require.Contains(t, err.Error(), "AllReduce(count=12, FLOAT32, SUM)")
	}
	// The communicator still works.
	conformance.RunComms(t, d, comms, []int{3})
}

// A one-rank AVG reaches NCCL as SUM (the same result; NCCL 2.28.9's
// one-rank AVG out of place leaves tail elements unwritten); with more
// ranks AVG is NCCL's own ncclAvg.
func TestOneRankAvgForwardedAsSum(t *testing.T) {
	d := open(t)
	lastOp := fakeHook(t, "fakeAllReduceLastOp")
	for _, n := range []int{1, 2} {
		comms := conformance.Comms(t, d, n)
		conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
			in, out := []float32{1, 2, 3}, make([]float32, 3)
			if err := c.AllReduce(unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0]), 3, rt.Float32, rt.Avg, 0); err != nil {
				return err
			}
			if out[0] != 1 || out[1] != 2 || out[2] != 3 {
				return fmt.Errorf("avg of equal inputs: %v", out)
			}
			return nil
		})
		want := uintptr(4) // ncclAvg
		if n == 1 {
			want = 0 // ncclSum
		}
		require.Equal(t, want, lastOp(), "%d ranks", n)
	}
	one := conformance.Comms(t, d, 1)[0]
	buf := make([]int16, 4)
	err := one.AllReduce(unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[0]), 4, rt.Int16, rt.Avg, 0)
	require.Error(t, err, "a pair NCCL refuses stays refused with one rank")
}

// XcclMemAlloc on an NCCL-shaped device is the library's ncclMemAlloc, and
// XcclMemFree its ncclMemFree (the fake refuses a pointer it did not
// allocate). Memory for any tensor (Paddle's device_memory_allocate) stays
// the runtime's: ncclMemAlloc's take the driver's granularity each. A
// library without ncclMemAlloc (MCCL here) gets the runtime's memory.
func TestMemAllocIsNCCLMemAlloc(t *testing.T) {
	d := open(t)
	liveHook := fakeHook(t, "fakeMemAllocLive")
	live := func() int { return int(liveHook()) }
	before := live()

	const n = 1001
	p, err := xccl.MemAllocOn(d, 0, n*4)
	require.NoError(t, err)
	require.Equal(t, before+1, live(), "XcclMemAlloc did not reach ncclMemAlloc")
	q, err := xccl.MemAllocOn(d, 0, n*4)
	require.NoError(t, err)
	in, out := unsafe.Slice((*float32)(p), n), unsafe.Slice((*float32)(q), n)
	for i := range in {
		in[i] = float32(i)
	}
	c := conformance.Comms(t, d, 1)[0]
	require.NoError(t, c.AllReduce(p, q, n, rt.Float32, rt.Sum, 0))
	require.NoError(t, d.SynchronizeDevice(0))
	for i := range out {
		require.Equal(t, float32(i), out[i])
	}
	require.NoError(t, xccl.MemFree(p))
	require.NoError(t, xccl.MemFree(q))
	require.Equal(t, before, live(), "XcclMemFree did not reach ncclMemFree")
	require.Error(t, xccl.MemFree(p), "a second free")

	// The runtime's memory is freed by the runtime, not ncclMemFree.
	r, err := d.MemAlloc(0, 64)
	require.NoError(t, err)
	require.NoError(t, d.MemFree(0, r, 64))
	r, err = rt.TensorMemAlloc(d, 0, 64)
	require.NoError(t, err)
	require.Equal(t, before, live(), "a tensor's memory came from ncclMemAlloc")
	require.NoError(t, d.MemFree(0, r, 64))

	mccl := nvidia.Spec
	mccl.CCL, mccl.CCLEnv = "mccl", "XCCL_TEST_MCCL_LIBRARY"
	t.Setenv(mccl.CCLEnv, libs["fakemccl"])
	m, err := ncclshape.Open(mccl)
	require.NoError(t, err)
	p, err = xccl.MemAllocOn(m, 0, 256)
	require.NoError(t, err)
	require.Equal(t, before, live())
	require.NoError(t, xccl.MemFree(p))
}

// Comm.Split through the fake NCCL: the colors and ids cross in device
// memory over the parent's all-gathers, the new ranks are NCCL's.
func TestSplitThroughFakeNCCL(t *testing.T) {
	d := open(t)
	conformance.Split(t, d, conformance.Comms(t, d, 4), []int{0, 7})
}

// XcclCommFinalize reaches ncclCommFinalize; the communicator then takes
// no calls, and ncclCommDestroy frees it.
func TestFinalizeIsNCCLCommFinalize(t *testing.T) {
	d := open(t)
	calls := fakeHook(t, "fakeFinalizeCalls")
	before := int(calls())
	c := conformance.Comms(t, d, 1)[0]
	require.NoError(t, c.Finalize())
	require.Equal(t, before+1, int(calls()), "Finalize did not reach ncclCommFinalize")
	require.NoError(t, c.Finalize())
	require.Equal(t, before+1, int(calls()), "a second Finalize reached the library")
	p, err := d.MemAlloc(0, 4)
	require.NoError(t, err)
	defer d.MemFree(0, p, 4)
	require.ErrorContains(t, c.AllReduce(p, p, 1, rt.Float32, rt.Sum, 0), "finalized")
	require.NoError(t, c.Destroy())
}

// XcclCommRegister reaches ncclCommRegister and XcclCommDeregister its
// deregistration with the library's handle; what is left goes with the
// library's destroy (or abort), after the work issued, as NCCL's does.
func TestRegisterIsNCCLCommRegister(t *testing.T) {
	d := open(t)
	liveHook := fakeHook(t, "fakeRegisteredLive")
	live := func() int { return int(liveHook()) }
	before := live()
	c := conformance.Comms(t, d, 1)[0]
	p, err := d.MemAlloc(0, 4096)
	require.NoError(t, err)
	defer d.MemFree(0, p, 4096)
	h1, err := c.Register(p, 4096)
	require.NoError(t, err)
	_, err = c.Register(p, 1024) // left for Destroy
	require.NoError(t, err)
	require.Equal(t, before+2, live(), "Register did not reach ncclCommRegister")
	require.NoError(t, c.Deregister(h1))
	require.Equal(t, before+1, live(), "Deregister did not reach ncclCommDeregister")
	require.Error(t, c.Deregister(h1))
	require.NoError(t, c.AllReduce(p, p, 256, rt.Float32, rt.Sum, 0), "calls on a registered buffer")
	require.NoError(t, c.Destroy())
	require.Equal(t, before, live(), "the library's destroy left a registration")

	// Abort (ncclCommAbort frees the communicator and its registrations):
	// nothing registers after it, nothing is left.
	a := conformance.Comms(t, d, 1)[0]
	_, err = a.Register(p, 4096)
	require.NoError(t, err)
	a.Abort()
	require.Equal(t, before, live(), "the library's abort left a registration")
	_, err = a.Register(p, 4096)
	require.ErrorContains(t, err, "destroyed or aborted")
	require.Equal(t, before, live())
}

// Pre-multiplied sums reach ncclRedOpCreatePreMulSum and ncclRedOpDestroy
// (the suite runs them through the fake, which scales and sums as NCCL
// does); the library's destroy releases what is left, and nothing is made
// after an abort.
func TestPreMulSumIsNCCLRedOpCreatePreMulSum(t *testing.T) {
	d := open(t)
	liveHook := fakeHook(t, "fakePreMulLive")
	live := func() int { return int(liveHook()) }
	before := live()
	comms := conformance.Comms(t, d, 2)
	require.True(t, conformance.PreMulSupported(t, comms, rt.Float32))
	require.Equal(t, before, live(), "PreMulSupported destroys what it made")
	s := float32(3)
	op, err := comms[0].CreatePreMulSum(unsafe.Pointer(&s), rt.Float32, xccl.ScalarHostImmediate)
	require.NoError(t, err)
	_, err = comms[0].CreatePreMulSum(unsafe.Pointer(&s), rt.Int32, xccl.ScalarDevice) // left for Destroy
	require.NoError(t, err)
	require.Equal(t, before+2, live(), "CreatePreMulSum did not reach ncclRedOpCreatePreMulSum")
	require.NoError(t, comms[0].DestroyPreMulSum(op))
	require.Equal(t, before+1, live(), "DestroyPreMulSum did not reach ncclRedOpDestroy")
	require.NoError(t, comms[0].Destroy())
	require.Equal(t, before, live(), "the library's destroy left an op")
	comms[1].Abort()
	_, err = comms[1].CreatePreMulSum(unsafe.Pointer(&s), rt.Float32, xccl.ScalarHostImmediate)
	require.ErrorContains(t, err, "destroyed or aborted")
	require.Equal(t, before, live())
}

// NCCL_COMM_BLOCKING=0 makes every NCCL communicator non-blocking: init,
// the collectives and GroupEnd answer ncclInProgress, and
// ncclCommGetAsyncError says when the work is queued. xccl polls it, so
// the whole suite runs as with blocking communicators.
func TestNonBlockingCommunicators(t *testing.T) {
	t.Setenv("NCCL_COMM_BLOCKING", "0")
	d := open(t)
	conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2, 3}, Counts: []int{0, 7, 1001}})
	// A send and a receive outside a group, and finalize, answer "in
	// progress" too; the async error says "in progress" while work is
	// queued, which is no error.
	comms := conformance.Comms(t, d, 2)
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		v := []float32{float32(r + 1)}
		p := unsafe.Pointer(&v[0])
		if r == 0 {
			if err := c.Send(p, 1, rt.Float32, 1, 0); err != nil {
				return err
			}
		} else if err := c.Recv(p, 1, rt.Float32, 0, 0); err != nil {
			return err
		} else if v[0] != 1 {
			return fmt.Errorf("received %v", v[0])
		}
		if err := c.AllReduce(p, p, 1, rt.Float32, rt.Sum, 0); err != nil {
			return err
		}
		if err := c.AsyncError(); err != nil {
			return err
		}
		return c.Finalize()
	})
}
