package host

import (
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// Stress: quick calls only, random C/Go per rank and random jitter,
// so C ranks meet late Go peers, lone roots run ahead, quiet ranks resume.
func TestFastPathStress(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		comms := inProcessRanks(t, n, opts(20*time.Second))
		if comms[0].fx == nil {
			t.Skip("no fast boxes")
		}
		rng := rand.New(rand.NewSource(int64(n) * 77))
		const calls = 3000
		bufs := make([][]int32, n)
		for r := range bufs {
			bufs[r] = make([]int32, 64*(n+1))
		}
		taken := 0
		for k := 0; k < calls; k++ {
			kind := []rt.OpKind{rt.OpAllReduce, rt.OpBroadcast, rt.OpReduce, rt.OpAllGather, rt.OpReduceScatter, rt.OpBroadcast, rt.OpReduce}[rng.Intn(7)]
			count := 1 + rng.Intn(16)
			root := rng.Intn(n)
			fast := make([]bool, n)
			jit := make([]int, n)
			for r := range fast {
				fast[r] = rng.Intn(4) != 0
				jit[r] = rng.Intn(4)
			}
			ops := make([]*rt.Op, n)
			for r := range ops {
				b := bufs[r]
				for i := range b {
					b[i] = int32(r*1000 + i + k)
				}
				op := &rt.Op{Kind: kind, Type: rt.Int32, Red: rt.Sum, Count: count, Root: root}
				switch kind {
				case rt.OpAllReduce, rt.OpReduce, rt.OpBroadcast:
					op.Send, op.Recv = unsafe.Pointer(&b[0]), unsafe.Pointer(&b[0])
				case rt.OpAllGather:
					op.Recv, op.Send = unsafe.Pointer(&b[0]), unsafe.Pointer(&b[count*n])
				case rt.OpReduceScatter:
					op.Send, op.Recv = unsafe.Pointer(&b[0]), unsafe.Pointer(&b[count*n])
				}
				ops[r] = op
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			var mu sync.Mutex
			for r := range comms {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					for j := 0; j < jit[r]; j++ {
						runtime.Gosched()
					}
					ok, err := fastOrGo(comms[r], ops[r], fast[r])
					errs[r] = err
					if ok {
						mu.Lock()
						taken++
						mu.Unlock()
					}
				}(r)
			}
			wg.Wait()
			require.NoError(t, errors0(errs), "call %d %v", k, kind)
			for r := range comms {
				b := bufs[r]
				switch kind {
				case rt.OpBroadcast:
					for i := 0; i < count; i++ {
						require.Equal(t, int32(root*1000+i+k), b[i], "call %d bcast rank %d", k, r)
					}
				case rt.OpAllReduce, rt.OpReduce:
					if kind == rt.OpReduce && r != root {
						break
					}
					for i := 0; i < count; i++ {
						var w int32
						for p := 0; p < n; p++ {
							w += int32(p*1000 + i + k)
						}
						require.Equal(t, w, b[i], "call %d %v rank %d", k, kind, r)
					}
				case rt.OpAllGather:
					for p := 0; p < n; p++ {
						for i := 0; i < count; i++ {
							require.Equal(t, int32(p*1000+count*n+i+k), b[p*count+i], "call %d ag rank %d", k, r)
						}
					}
				case rt.OpReduceScatter:
					for i := 0; i < count; i++ {
						var w int32
						for p := 0; p < n; p++ {
							w += int32(p*1000 + r*count + i + k)
						}
						require.Equal(t, w, b[count*n+i], "call %d rs rank %d", k, r)
					}
				}
			}
		}
		t.Logf("n=%d: C path took %d of %d rank-calls", n, taken, calls*n)
	}
}

// Abort from another goroutine while ranks loop through the C path: every
// loop ends with an error, and Destroy returns.
func TestFastPathAbortRace(t *testing.T) {
	for it := 0; it < 15; it++ {
		comms := inProcessRanks(t, 3, opts(5*time.Second))
		if comms[0].fx == nil {
			t.Skip("no fast boxes")
		}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for r := range comms {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				b := make([]int64, 4)
				for k := 0; ; k++ {
					kind := rt.OpAllReduce
					if k%3 == 1 {
						kind = rt.OpBroadcast
					}
					op := &rt.Op{Kind: kind, Send: unsafe.Pointer(&b[0]), Recv: unsafe.Pointer(&b[0]), Count: 4, Type: rt.Int64, Red: rt.Sum, Root: k % 3}
					if _, err := fastOrGo(comms[r], op, true); err != nil {
						errs[r] = err
						return
					}
				}
			}(r)
		}
		time.Sleep(time.Duration(1+it) * time.Millisecond)
		comms[it%3].Abort()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("iteration %d: loops did not end after abort", it)
		}
		for r, c := range comms {
			require.Error(t, errs[r], "rank %d", r)
			d := make(chan error, 1)
			go func() { d <- c.Destroy() }()
			select {
			case <-d:
			case <-time.After(20 * time.Second):
				t.Fatalf("iteration %d: destroy of rank %d hangs", it, r)
			}
		}
	}
}

func fastWarm(t *testing.T, comms []*Comm) {
	bufs := make([][]int64, len(comms))
	for i := range bufs {
		bufs[i] = make([]int64, 2)
	}
	for k := 0; k < 2*fastDepth; k++ {
		_, errs := fastAll(comms, func(i int) *rt.Op {
			p := unsafe.Pointer(&bufs[i][0])
			return &rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 2, Type: rt.Int64, Red: rt.Sum}
		}, always)
		require.NoError(t, errors0(errs))
	}
}

// StopFastPath returns only once off is set, even while another thread is
// inside it: else the caller (devComm.Run before it queues on a stream)
// could see its next NULL-stream call taken by fast.c, ahead of the stream.
func TestStopFastPathReturnsOnlyOnceOff(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(5*time.Second))
	if comms[0].fx == nil {
		t.Skip("no fast boxes")
	}
	fastWarm(t, comms)
	c := comms[0]
	off := (*uint32)(unsafe.Pointer(&c.fx.off))
	c.fxMu.Lock() // another thread's StopFastPath (fail, EnableStats, a Run on another stream) is in flight
	go c.StopFastPath()
	time.Sleep(20 * time.Millisecond)
	done := make(chan struct{})
	go func() { c.StopFastPath(); close(done) }() // this thread's, before it queues on a stream
	select {
	case <-done:
		offNow := atomic.LoadUint32(off)
		c.fxMu.Unlock()
		require.NotZero(t, offNow, "StopFastPath returned while off was still 0: fast.c takes the next NULL-stream call")
	case <-time.After(200 * time.Millisecond):
		c.fxMu.Unlock()
		<-done
		require.NotZero(t, atomic.LoadUint32(off))
	}
}

// fail sets off before it makes the communicator broken (AsyncError
// reports it): else a lone call (broadcast root) in that window would
// succeed in C, where exec returns the communicator's error.
func TestFastPathOffBeforeBroken(t *testing.T) {
	comms := inProcessRanks(t, 3, opts(5*time.Second))
	if comms[0].fx == nil {
		t.Skip("no fast boxes")
	}
	fastWarm(t, comms)
	c := comms[0]
	c.fxMu.Lock() // fail's StopFastPath is slowed down here, as a busy thread may be
	go func() { _ = c.fail(rt.Failedf("rank 0: injected")) }()
	deadline := time.Now().Add(200 * time.Millisecond)
	for c.AsyncError() == nil && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if c.AsyncError() == nil { // fixed: off first, broken after
		c.fxMu.Unlock()
		return
	}
	buf := make([]int64, 2)
	p := unsafe.Pointer(&buf[0])
	taken, err := c.fastCall(&rt.Op{Kind: rt.OpBroadcast, Send: p, Recv: p, Count: 2, Type: rt.Int64, Root: 0})
	c.fxMu.Unlock()
	require.Error(t, c.execGo(&rt.Op{Kind: rt.OpBroadcast, Send: p, Recv: p, Count: 2, Type: rt.Int64, Root: 0}), "Go refuses: broken")
	require.False(t, taken && err == nil, "fast.c ran a broadcast on a broken communicator and returned success")
}
