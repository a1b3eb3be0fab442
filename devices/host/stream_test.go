package host

import (
	"errors"
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
