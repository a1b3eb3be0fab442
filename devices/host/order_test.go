package host

import (
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// onEveryRank runs f for every rank at once, each on its own devComm of d.
func onEveryRank(t *testing.T, d *Device, comms []*Comm, f func(r int, c *devComm) error) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, newDevComm(comms[r], d))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func allReduceOp(b []int32, s rt.Stream) *rt.Op {
	p := unsafe.Pointer(&b[0])
	return &rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: len(b), Type: rt.Int32, Red: rt.Sum, Stream: s}
}

// One communicator's operations run in issue order whatever their streams,
// as NCCL's do (Paddle issues on a calc and a comm stream): two
// all-reduces on two streams, the first one's stream held up on one rank,
// then one on the NULL stream; sends of one pair on two streams arrive in
// the order sent. Run on their streams as they came, the all-reduces mixed
// up their results and the messages swapped.
func TestIssueOrderAcrossStreams(t *testing.T) {
	const n, count = 3, 4099
	d := New()
	comms := inProcessRanks(t, n, DefaultOptions())
	onEveryRank(t, d, comms, func(r int, c *devComm) error {
		s1, err := d.CreateStream()
		if err != nil {
			return err
		}
		s2, err := d.CreateStream()
		if err != nil {
			return err
		}
		a, b, z := make([]int32, count), make([]int32, count), make([]int32, 1)
		for it := 0; it < 20; it++ {
			for i := range a {
				a[i], b[i] = 1, 1000
			}
			z[0] = int32(r)
			if r == 0 && it%2 == 1 { // s1 is late on this rank
				if err := d.submit(s1, func() error { time.Sleep(2 * time.Millisecond); return nil }); err != nil {
					return err
				}
			}
			if err := c.Run(allReduceOp(a, s1)); err != nil {
				return err
			}
			if err := c.Run(allReduceOp(b, s2)); err != nil {
				return err
			}
			if err := c.Run(allReduceOp(z, 0)); err != nil {
				return err
			}
			for _, s := range []rt.Stream{s1, s2} {
				if err := d.SynchronizeStream(s); err != nil {
					return err
				}
			}
			if a[0] != n || a[count-1] != n || b[0] != 1000*n || z[0] != n*(n-1)/2 {
				return fmt.Errorf("iteration %d: a %d, b %d, z %d; want %d, %d, %d", it, a[0], b[0], z[0], n, 1000*n, n*(n-1)/2)
			}
		}
		// Point to point: rank 0 sends 1 then 2 on two streams, rank 1
		// receives on the same two.
		for it := 0; it < 20; it++ {
			x, y := []int32{1}, []int32{2}
			var kind rt.OpKind
			switch r {
			case 0:
				kind = rt.OpSend
				if it%2 == 1 {
					if err := d.submit(s1, func() error { time.Sleep(2 * time.Millisecond); return nil }); err != nil {
						return err
					}
				}
			case 1:
				kind, x[0], y[0] = rt.OpRecv, 0, 0
			default:
				continue
			}
			for k, buf := range [][]int32{x, y} {
				p := unsafe.Pointer(&buf[0])
				op := &rt.Op{Kind: kind, Send: p, Recv: p, Count: 1, Type: rt.Int32, Root: 1 - r, Stream: []rt.Stream{s1, s2}[k]}
				if err := c.Run(op); err != nil {
					return err
				}
			}
			for _, s := range []rt.Stream{s1, s2} {
				if err := d.SynchronizeStream(s); err != nil {
					return err
				}
			}
			if x[0] != 1 || y[0] != 2 {
				return fmt.Errorf("send/recv %d: got %d then %d, want 1 then 2", it, x[0], y[0])
			}
		}
		return nil
	})
}

// Destroy runs what was issued on a stream first, as NCCL's does (it
// finalizes): the all-reduce queued behind slow work completes, with the
// right result, and nothing fails.
func TestDestroyFinishesQueuedWork(t *testing.T) {
	const n = 3
	d := New()
	comms := inProcessRanks(t, n, DefaultOptions())
	onEveryRank(t, d, comms, func(r int, c *devComm) error {
		s, err := d.CreateStream()
		if err != nil {
			return err
		}
		if err := d.submit(s, func() error { time.Sleep(time.Duration(10*(r+1)) * time.Millisecond); return nil }); err != nil {
			return err
		}
		a := []int32{int32(r + 1), 7}
		if err := c.Run(allReduceOp(a, s)); err != nil {
			return err
		}
		if err := c.Destroy(); err != nil {
			return err
		}
		if err := d.SynchronizeStream(s); err != nil {
			return fmt.Errorf("the queued all-reduce failed: %w", err)
		}
		if a[0] != n*(n+1)/2 || a[1] != 7*n {
			return fmt.Errorf("queued all-reduce gave %v", a)
		}
		return nil
	})
}

// An operation that can never have its turn (a callback on a stream issues
// a NULL-stream call while an earlier one waits behind that callback) fails
// the communicator at the timeout instead of hanging for ever, and what
// waits behind it fails too.
func TestTurnWaitIsBounded(t *testing.T) {
	d := New()
	o := DefaultOptions()
	o.Timeout = 500 * time.Millisecond
	comms := inProcessRanks(t, 1, o)
	c := newDevComm(comms[0], d)
	s, err := d.CreateStream()
	require.NoError(t, err)
	inner := make(chan error, 1)
	gate := make(chan struct{})
	require.NoError(t, d.submit(s, func() error {
		<-gate
		inner <- c.Run(allReduceOp([]int32{1}, 0)) // issued after the one below, which waits behind this callback
		return nil
	}))
	require.NoError(t, c.Run(allReduceOp([]int32{1}, s)))
	close(gate)
	select {
	case err := <-inner:
		require.Error(t, err)
		require.Contains(t, err.Error(), "waited")
	case <-time.After(10 * time.Second):
		t.Fatal("the NULL-stream call waited past its timeout")
	}
	err = d.SynchronizeStream(s)
	require.Error(t, err, "the queued one fails with the broken communicator")
}
