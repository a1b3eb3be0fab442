package host

import (
	"errors"
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

func TestStreamOrderEventsAndErrors(t *testing.T) {
	d := New()
	s, err := d.CreateStream()
	require.NoError(t, err)
	ev, err := d.CreateEvent()
	require.NoError(t, err)
	require.NoError(t, d.QueryEvent(ev), "an event never recorded is complete")

	gate := make(chan struct{})
	var order []int
	var n atomic.Int32
	require.NoError(t, d.submit(s, func() error { <-gate; order = append(order, 1); n.Add(1); return nil }))
	require.NoError(t, d.RecordEvent(ev, s))
	require.NoError(t, d.submit(s, func() error { order = append(order, 2); return errors.New("boom") }))
	evAfter, err := d.CreateEvent()
	require.NoError(t, err)
	require.NoError(t, d.RecordEvent(evAfter, s))
	require.NoError(t, d.submit(s, func() error { order = append(order, 3); return nil }))
	require.ErrorIs(t, d.QueryStream(s), rt.ErrNotReady)
	require.ErrorIs(t, d.QueryEvent(ev), rt.ErrNotReady)

	// A second stream waits for the event before its own work.
	s2, err := d.CreateStream()
	require.NoError(t, err)
	require.NoError(t, d.StreamWaitEvent(s2, ev))
	var sawFirst atomic.Bool
	require.NoError(t, d.submit(s2, func() error { sawFirst.Store(n.Load() == 1); return nil }))
	time.Sleep(20 * time.Millisecond)
	require.ErrorIs(t, d.QueryStream(s2), rt.ErrNotReady)

	close(gate)
	require.NoError(t, d.SynchronizeEvent(ev))
	require.NoError(t, d.QueryEvent(ev))
	require.EqualError(t, d.SynchronizeEvent(evAfter), "boom", "an event after a failed item reports it")
	require.NoError(t, d.DestroyEvent(evAfter))
	require.EqualError(t, d.SynchronizeStream(s), "boom", "the stream reports its first error")
	require.NoError(t, d.SynchronizeStream(s), "and clears it")
	require.Equal(t, []int{1, 2, 3}, order)
	require.NoError(t, d.SynchronizeStream(s2))
	require.True(t, sawFirst.Load())
	require.NoError(t, d.QueryStream(s))
	require.NoError(t, d.DestroyStream(s))
	require.NoError(t, d.DestroyStream(s2))
	require.NoError(t, d.DestroyEvent(ev))
	require.Error(t, d.SynchronizeStream(s), "destroyed stream is unknown")
	require.Error(t, d.DestroyEvent(ev))
	require.NoError(t, d.SynchronizeStream(0), "the NULL stream is always idle")
	// An event recorded on the NULL stream (synchronous) is done at once
	// (it crashed once).
	ev0, err := d.CreateEvent()
	require.NoError(t, err)
	require.NoError(t, d.RecordEvent(ev0, 0))
	require.NoError(t, d.QueryEvent(ev0))
	require.NoError(t, d.SynchronizeEvent(ev0))
	require.NoError(t, d.DestroyEvent(ev0))
}

// Waiting threads run the items they wait for (no hand-off to the worker),
// one item at a time with the worker, in order; an event's wait stops at
// its position; items nobody waits for still run (the worker starts
// workerDelay after them).
func TestStreamWaitersRunItems(t *testing.T) {
	s := newStream()

	// Nobody waits: the worker runs it.
	done := make(chan struct{})
	s.enqueue(func() error { close(done); return nil })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("an item nobody waits for never ran")
	}
	require.NoError(t, s.synchronize())

	// An event's wait runs up to its position and no further: the item
	// after it blocks until released.
	gate := make(chan struct{})
	var first atomic.Bool
	s.enqueue(func() error { first.Store(true); return nil })
	pos := s.position()
	s.enqueue(func() error { <-gate; return nil })
	s.waitFor(pos)
	require.True(t, first.Load())
	close(gate)
	require.NoError(t, s.synchronize())

	// Many waiters and the worker: one item at a time, in order.
	const items = 2000
	var inItem atomic.Int32
	var order []int
	for i := range items {
		s.enqueue(func() error {
			if inItem.Add(1) != 1 {
				return errors.New("two items ran at once")
			}
			runtime.Gosched() // widen the window for another to start
			order = append(order, i)
			inItem.Add(-1)
			return nil
		})
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- s.synchronize() }()
	}
	var firstErr error
	for range 4 {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	require.NoError(t, firstErr)
	require.Len(t, order, items)
	for i, v := range order {
		require.Equal(t, i, v)
	}
}

// An event reports, until a synchronize does, a failure (C_FAILED: the
// communicator is broken) queued at or before it, else a refused call
// (C_ERROR) among the work it covers alone, since the record before it;
// not an error of earlier work that succeeding work followed (reviewers'
// cases: later events repeated a refused call; a refused call before a
// failure hid the failure; Python's Work waits on one event per call).
func TestEventReportsItsOwnErrors(t *testing.T) {
	d := New()
	s, err := d.CreateStream()
	require.NoError(t, err)
	e1, _ := d.CreateEvent()
	e2, _ := d.CreateEvent()
	e3, _ := d.CreateEvent()
	require.NoError(t, d.submit(s, func() error { return rt.Errorf("op1: collective mismatch") }))
	require.NoError(t, d.RecordEvent(e1, s))
	require.ErrorContains(t, d.SynchronizeEvent(e1), "op1: collective mismatch")
	require.NoError(t, d.submit(s, func() error { return nil }))
	require.NoError(t, d.RecordEvent(e2, s))
	require.NoError(t, d.SynchronizeEvent(e2), "op2 succeeded")
	require.ErrorContains(t, d.SynchronizeEvent(e1), "op1", "an event says it again")

	require.NoError(t, d.submit(s, func() error { return rt.Errorf("op3: collective mismatch") }))
	require.NoError(t, d.submit(s, func() error { return rt.Failedf("rank 1 died") }))
	require.NoError(t, d.RecordEvent(e3, s))
	require.ErrorContains(t, d.SynchronizeEvent(e3), "rank 1 died", "the failure, not the refusal before it")
	require.NoError(t, d.submit(s, func() error { return nil }))
	require.NoError(t, d.RecordEvent(e2, s))
	require.ErrorContains(t, d.SynchronizeEvent(e2), "rank 1 died", "a broken communicator fails what follows too")
	require.ErrorContains(t, d.SynchronizeStream(s), "op1", "the synchronize reports the first error")
	require.NoError(t, d.SynchronizeEvent(e2), "reported")
	require.NoError(t, d.SynchronizeEvent(e3), "reported")
	require.NoError(t, d.DestroyStream(s))
}

// Several streams, producers, waiters (synchronize, waitFor) and
// cross-stream waits at random (a reviewer's): one item at a time per
// stream, in order, and nothing stranded once nobody waits.
func TestStreamStress(t *testing.T) {
	const ns = 3
	ss := make([]*stream, ns)
	for i := range ss {
		ss[i] = newStream()
	}
	var in [ns]atomic.Int32
	var next [ns]atomic.Int64
	var seq [ns]atomic.Int64
	var bad atomic.Value
	var mu [ns]sync.Mutex
	item := func(i int) {
		mu[i].Lock()
		k := seq[i].Add(1) - 1
		ss[i].enqueue(func() error {
			if in[i].Add(1) != 1 {
				bad.Store("two at once")
			}
			if next[i].Load() != k {
				bad.Store("out of order")
			}
			next[i].Add(1)
			if rand.Intn(50) == 0 {
				time.Sleep(time.Duration(rand.Intn(200)) * time.Microsecond)
			}
			in[i].Add(-1)
			return nil
		})
		mu[i].Unlock()
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for time.Now().Before(deadline) {
				i := r.Intn(ns)
				switch r.Intn(6) {
				case 0, 1, 2:
					item(i)
				case 3:
					_ = ss[i].synchronize()
				case 4:
					ss[i].waitFor(ss[i].position() - uint64(r.Intn(3)))
				case 5: // cross-stream wait item
					j := (i + 1) % ns
					p := ss[j].position()
					mu[i].Lock()
					k := seq[i].Add(1) - 1
					ss[i].enqueue(func() error {
						if next[i].Load() != k {
							bad.Store("out of order")
						}
						next[i].Add(1)
						ss[j].waitFor(p)
						return nil
					})
					mu[i].Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// Nobody waits now: everything must still finish.
	for i := range ss {
		end := time.Now().Add(5 * time.Second)
		for !ss[i].reached(ss[i].position()) {
			if time.Now().After(end) {
				t.Fatalf("stream %d stranded: finished %d of %d", i, ss[i].finished, ss[i].enqueued)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
}

// Copies on a stream with host memory that is not pinned behave as CUDA's
// with pageable memory: one from it has read it when it returns (Paddle's
// TensorFromVector frees its array straight after), one to it has written
// it. Pinned memory (HostAlloc) is read and written in stream order.
func TestPageableCopiesTakeAndGiveAtOnce(t *testing.T) {
	d := New()
	s, err := d.CreateStream()
	require.NoError(t, err)
	defer d.DestroyStream(s)
	const n = 4096
	dev, err := d.MemAlloc(0, n)
	require.NoError(t, err)
	defer d.MemFree(0, dev, n)
	pin, err := d.HostAlloc(n)
	require.NoError(t, err)
	defer d.HostFree(pin, n)
	pinB := bytesAt(pin, n)

	for _, idle := range []bool{true, false} {
		gate := make(chan struct{})
		if !idle {
			require.NoError(t, d.submit(s, func() error { <-gate; return nil }))
		}
		src := make([]byte, n)
		for i := range src {
			src[i] = 7
		}
		require.NoError(t, d.Memcpy(0, dev, unsafe.Pointer(&src[0]), n, rt.HostToDevice, s))
		for i := range src {
			src[i] = 9 // what the caller does with its array next
		}
		close(gate)
		require.NoError(t, d.SynchronizeStream(s))
		require.Equal(t, byte(7), bytesAt(dev, n)[0], "idle %v", idle)
		require.Equal(t, byte(7), bytesAt(dev, n)[n-1], "idle %v", idle)
	}

	// From pinned memory the copy reads it when its turn comes.
	gate := make(chan struct{})
	require.NoError(t, d.submit(s, func() error { <-gate; return nil }))
	pinB[0] = 1
	require.NoError(t, d.Memcpy(0, dev, pin, n, rt.HostToDevice, s))
	pinB[0] = 2
	close(gate)
	require.NoError(t, d.SynchronizeStream(s))
	require.Equal(t, byte(2), bytesAt(dev, n)[0])

	// To pageable memory: written, after the stream's earlier work, when
	// Memcpy returns.
	require.NoError(t, d.submit(s, func() error {
		time.Sleep(20 * time.Millisecond)
		bytesAt(dev, n)[5] = 42
		return nil
	}))
	dst := make([]byte, n)
	require.NoError(t, d.Memcpy(0, unsafe.Pointer(&dst[0]), dev, n, rt.DeviceToHost, s))
	require.Equal(t, byte(42), dst[5])

	// To pinned memory: in stream order, done by the synchronize.
	gate = make(chan struct{})
	require.NoError(t, d.submit(s, func() error { <-gate; bytesAt(dev, n)[5] = 43; return nil }))
	require.NoError(t, d.Memcpy(0, pin, dev, n, rt.DeviceToHost, s))
	require.ErrorIs(t, d.QueryStream(s), rt.ErrNotReady, "the copy to pinned memory is queued")
	close(gate)
	require.NoError(t, d.SynchronizeStream(s))
	require.Equal(t, byte(43), pinB[5])
}

// MemFree and HostFree of memory that queued work still uses free it once
// that work is done (as cudaFree): the shared mapping of a large block is
// gone after its free, so writing it early would crash.
func TestFreeWaitsForQueuedWork(t *testing.T) {
	d := New()
	s, err := d.CreateStream()
	require.NoError(t, err)
	defer d.DestroyStream(s)
	const n = 4 << 20
	SettleFrees()
	before := Allocated()
	dev, err := d.MemAlloc(0, n)
	require.NoError(t, err)
	host, err := d.HostAlloc(n)
	require.NoError(t, err)
	held := Allocated()
	gate := make(chan struct{})
	require.NoError(t, d.submit(s, func() error { <-gate; return nil }))
	require.NoError(t, d.Memset(0, dev, 3, n, s))
	require.NoError(t, d.Memcpy(0, host, dev, n, rt.DeviceToHost, s))
	require.NoError(t, d.MemFree(0, dev, n))
	require.NoError(t, d.HostFree(host, n))
	early := Allocated()
	close(gate)
	require.Equal(t, held, early, "nothing freed while work on it is queued")
	require.NoError(t, d.SynchronizeStream(s))
	SettleFrees()
	require.Equal(t, before, Allocated())

	// With no work queued the free is immediate.
	p, err := d.MemAlloc(0, n)
	require.NoError(t, err)
	require.NoError(t, d.MemFree(0, p, n))
	require.Equal(t, before, Allocated())
}

// A stream that waits for an event after a failed call (a broken
// communicator) fails too: Paddle's task wait makes its compute stream wait
// for the collective's event, then synchronizes only the compute stream.
// The event itself queries as done (Paddle reads anything else as not
// ready, for ever).
func TestWaitingForAFailedStreamFails(t *testing.T) {
	d := New()
	comm, err := d.CreateStream()
	require.NoError(t, err)
	defer d.DestroyStream(comm)
	calc, err := d.CreateStream()
	require.NoError(t, err)
	defer d.DestroyStream(calc)
	ev, err := d.CreateEvent()
	require.NoError(t, err)
	defer d.DestroyEvent(ev)

	require.NoError(t, d.submit(comm, func() error { return rt.Failedf("rank 1 is gone") }))
	require.NoError(t, d.RecordEvent(ev, comm))
	require.NoError(t, d.StreamWaitEvent(calc, ev))
	err = d.SynchronizeStream(calc)
	require.Error(t, err)
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err))
	require.Contains(t, err.Error(), "rank 1 is gone")
	require.NoError(t, d.QueryEvent(ev))
	require.Error(t, d.SynchronizeStream(comm), "the failed stream still reports its own")

	// Once reported, a new wait does not fail again.
	require.NoError(t, d.RecordEvent(ev, comm))
	require.NoError(t, d.StreamWaitEvent(calc, ev))
	require.NoError(t, d.SynchronizeStream(calc))

	// The device's synchronize (Paddle's barrier; maybe another thread's,
	// ranks being threads) reports the first error once, and leaves the
	// events theirs: the stream's thread still learns of its failure.
	require.NoError(t, d.submit(comm, func() error { return rt.Failedf("rank 2 is gone") }))
	require.NoError(t, d.RecordEvent(ev, comm))
	require.ErrorContains(t, d.SynchronizeDevice(0), "rank 2 is gone")
	require.NoError(t, d.SynchronizeDevice(0))
	require.ErrorContains(t, d.SynchronizeEvent(ev), "rank 2 is gone")
	require.NoError(t, d.SynchronizeStream(comm), "the device's synchronize reported it")
	require.NoError(t, d.SynchronizeEvent(ev), "the stream's cleared it")
}
