package host

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// twoMachines makes the ranks below split look like one machine and the
// others like another, for the test's duration.
func twoMachines(t *testing.T, split int) {
	old := testHostID
	testHostID = func(rank int) string {
		if rank < split {
			return "machine-a/boot/ns"
		}
		return "machine-b/boot/ns"
	}
	t.Cleanup(func() { testHostID = old })
}

func ucxComms(t *testing.T, n int, o Options) []*Comm {
	t.Helper()
	r, err := StartRoot(o.Timeout)
	require.NoError(t, err)
	comms, errs := join(r.ID, n, seq(n), o)
	t.Cleanup(func() { destroyAll(comms); WaitUCXWorkers() })
	require.NoError(t, errors0(errs))
	return comms
}

func allReduceAll(comms []*Comm, count int) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, count)
			for j := range buf {
				buf[j] = float32(i + 1)
			}
			p := unsafe.Pointer(&buf[0])
			errs[i] = c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: count, Type: rt.Float32, Red: rt.Sum})
			want := float32(len(comms) * (len(comms) + 1) / 2)
			if errs[i] == nil && (buf[0] != want || buf[count-1] != want) {
				errs[i] = fmt.Errorf("rank %d: got %v, want %v", i, buf[0], want)
			}
		}()
	}
	wg.Wait()
	return errs
}

// auto: shared memory within a machine, UCX between machines when libucp
// loads, else TCP; forced ucx without libucp fails naming the library.
func TestUCXAutoAcrossMachines(t *testing.T) {
	twoMachines(t, 2)
	o := opts(20 * time.Second)
	t.Run("ucx", func(t *testing.T) {
		SkipWithoutUCX(t)
		t.Setenv("UCX_TLS", "tcp")
		comms := ucxComms(t, 4, o)
		require.Equal(t, "self 1:shm 2:ucx 3:ucx", comms[0].describeLinks())
		require.Equal(t, "0:ucx 1:ucx self 3:shm", comms[2].describeLinks())
		for _, err := range allReduceAll(comms, 300007) {
			require.NoError(t, err)
		}
	})
	t.Run("no-libucp", func(t *testing.T) {
		t.Setenv("XCCL_UCX_LIBRARY", "/nonexistent/libucp.so.0")
		comms := ucxComms(t, 4, o)
		require.Equal(t, "self 1:shm 2:tcp 3:tcp", comms[0].describeLinks())
		for _, err := range allReduceAll(comms, 1001) {
			require.NoError(t, err)
		}
		o := o
		o.Transport = "ucx"
		r, err := StartRoot(2 * time.Second)
		require.NoError(t, err)
		defer r.Close()
		_, errs := join(r.ID, 2, seq(2), o)
		for _, err := range errs {
			require.ErrorContains(t, err, "XCCL_TRANSPORT=ucx: UCX does not load: tried /nonexistent/libucp.so.0")
		}
	})
}

// Over UCX: a pending call ends on Abort and the peer then fails naming
// the rank; a call whose peer never comes times out naming it; a peer that
// destroyed its communicator is named; mismatched calls are found.
func TestUCXAbortTimeoutDestroyMismatch(t *testing.T) {
	SkipWithoutUCX(t)
	t.Setenv("UCX_TLS", "tcp")
	o := opts(30 * time.Second)
	o.Transport = "ucx"
	one := new(float32)
	op := rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(one), Recv: unsafe.Pointer(one), Count: 1, Type: rt.Float32, Red: rt.Sum}

	t.Run("abort", func(t *testing.T) { abortEndsAPendingCall(t, ucxComms(t, 2, o), "rank 0", false) })
	t.Run("timeout", func(t *testing.T) {
		comms := ucxComms(t, 2, o)
		require.NoError(t, comms[0].SetTimeout(300*time.Millisecond))
		start := time.Now()
		err := comms[0].exec(&op)
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
		require.Contains(t, err.Error(), "timed out after 300ms")
		require.Contains(t, err.Error(), "rank 1")
		require.Less(t, time.Since(start), 3*time.Second)
	})
	t.Run("destroyed", func(t *testing.T) {
		comms := ucxComms(t, 2, o)
		for _, err := range allReduceAll(comms, 1001) {
			require.NoError(t, err)
		}
		require.NoError(t, comms[1].Destroy())
		start := time.Now()
		err := comms[0].exec(&op)
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
		require.Contains(t, err.Error(), "rank 1")
		require.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("mismatch", func(t *testing.T) {
		comms := ucxComms(t, 2, o)
		bufs := [2][16]float32{}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, c := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := unsafe.Pointer(&bufs[i][0])
				errs[i] = c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 10 + 2*i, Type: rt.Float32, Red: rt.Sum})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			require.Equal(t, rt.StatusError, rt.StatusOf(err), "rank %d: %v", i, err)
			require.Contains(t, err.Error(), "AllReduce(count=12")
		}
		for _, err := range allReduceAll(comms, 7) {
			require.NoError(t, err)
		}
	})
}

// Communicators over UCX come and go: goroutines and file descriptors come
// back to where they were (after a first one loaded libucp and whatever it
// keeps for the process).
func TestUCXNoLeaks(t *testing.T) {
	SkipWithoutUCX(t)
	t.Setenv("UCX_TLS", "tcp")
	o := opts(20 * time.Second)
	o.Transport = "ucx"
	round := func() {
		r, err := StartRoot(o.Timeout)
		require.NoError(t, err)
		comms, errs := join(r.ID, 3, seq(3), o)
		require.NoError(t, errors0(errs))
		for _, err := range allReduceAll(comms, 70001) {
			require.NoError(t, err)
		}
		destroyAll(comms)
		WaitUCXWorkers()
	}
	round()
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	for i := 0; i < 3; i++ {
		round()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutines leaked")
	// Fewer is fine: a descriptor of an earlier test may close meanwhile.
	require.LessOrEqual(t, openFDs(t), fds, "file descriptors leaked")
}
