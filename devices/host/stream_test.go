package host

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

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
