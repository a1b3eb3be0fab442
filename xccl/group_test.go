package xccl_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/internal/conformance"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// A group that starts as sends and receives of one host communicator on
// the NULL stream (run apart, Group.runP2P) and then takes a collective,
// a stream, or another communicator moves to the general path with its
// calls in order; each result is checked, and the group is reused after.
func TestGroupOfSendsAndReceivesThenOtherCalls(t *testing.T) {
	dev := host.New()
	comms := conformance.Comms(t, dev, 3)
	more := conformance.Comms(t, dev, 3)
	streams := make([]rt.Stream, len(comms)) // a rank's own, as each GPU's
	for i := range streams {
		s, err := dev.CreateStream()
		require.NoError(t, err)
		streams[i] = s
		defer func() { require.NoError(t, dev.DestroyStream(s)) }()
	}
	for _, tail := range []string{"none", "all-reduce", "stream recv", "other communicator", "recv first"} {
		t.Run(tail, func(t *testing.T) {
			conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
				n, s := len(comms), streams[r]
				next, prev := (r+1)%n, (r+n-1)%n
				var g xccl.Group
				for round := 0; round < 3; round++ { // the Group reused
					send, got, got2 := []int32{int32(100*r + round), 7}, make([]int32, 2), make([]int32, 1)
					sum := []int32{int32(r + 1)}
					sendOp := rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&send[0]), Count: 2, Type: rt.Int32, Root: next}
					recvOp := rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&got[0]), Count: 2, Type: rt.Int32, Root: prev}
					g.Start()
					ops := []rt.Op{sendOp, recvOp}
					if tail == "recv first" {
						ops = []rt.Op{recvOp, sendOp}
					}
					for _, op := range ops {
						if err := c.Do(&g, op); err != nil {
							return err
						}
					}
					switch tail {
					case "all-reduce":
						if err := c.Do(&g, rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&sum[0]), Recv: unsafe.Pointer(&sum[0]),
							Count: 1, Type: rt.Int32, Red: rt.Sum}); err != nil {
							return err
						}
					case "stream recv":
						if err := c.Do(&g, rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&send[0]), Count: 1, Type: rt.Int32, Root: prev, Stream: s}); err != nil {
							return err
						}
						if err := c.Do(&g, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&got2[0]), Count: 1, Type: rt.Int32, Root: next, Stream: s}); err != nil {
							return err
						}
					case "other communicator":
						if err := more[r].Do(&g, rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&sum[0]), Recv: unsafe.Pointer(&sum[0]),
							Count: 1, Type: rt.Int32, Red: rt.Sum}); err != nil {
							return err
						}
					}
					if err := g.End(); err != nil {
						return err
					}
					if tail == "stream recv" {
						if err := dev.SynchronizeStream(s); err != nil {
							return err
						}
						if got2[0] != int32(100*next+round) {
							return fmt.Errorf("round %d: stream recv from %d: %d", round, next, got2[0])
						}
					}
					if got[0] != int32(100*prev+round) || got[1] != 7 {
						return fmt.Errorf("round %d: recv from %d: %v", round, prev, got)
					}
					want := int32(r + 1)
					if tail == "all-reduce" || tail == "other communicator" {
						want = int32(n * (n + 1) / 2)
					}
					if sum[0] != want {
						return fmt.Errorf("round %d: all-reduce %d, want %d", round, sum[0], want)
					}
				}
				return nil
			})
		})
	}
}

// A group of sends and receives on a destroyed communicator fails at its
// end, naming it, and runs nothing.
func TestGroupOfSendsAndReceivesOnADestroyedCommunicator(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 2)
	buf := make([]int32, 1)
	var g xccl.Group
	g.Start()
	require.NoError(t, comms[0].Do(&g, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&buf[0]), Count: 1, Type: rt.Int32, Root: 1}))
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error { return c.Destroy() })
	require.ErrorContains(t, g.End(), "GroupEnd: a communicator of the group")
}

// A grouped exchange of messages far larger than the rings (each rank
// sends to the next and receives from the previous, as nccl-tests'
// sendrecv) streams both ways from the callers' buffers: a send is copied
// aside for a goroutine to push (the engine's fallback.p2p_send_copied)
// only when its receiver stopped taking for a while (a loaded machine), not
// every time, and every byte arrives; a send whose receiver is not
// receiving within the group is copied aside, never waited for.
func TestGroupOfLargeSendsStreamsWithoutCopies(t *testing.T) {
	o := host.DefaultOptions()
	o.RingBytes = 1 << 14
	comms := conformance.Comms(t, host.NewWithOptions(o), 3)
	const count, rounds = 300001, 6 // about 73 rings' worth
	copied := func(c *xccl.Comm) uint64 { return c.Stats().Engine["fallback.p2p_send_copied"] }
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		n := len(comms)
		next, prev := (r+1)%n, (r+n-1)%n
		send, got := make([]int32, count), make([]int32, count)
		var g xccl.Group
		for round := 0; round < rounds; round++ {
			for i := range send {
				send[i] = int32(r*1000003 + round*7 + i)
			}
			g.Start()
			if err := c.Do(&g, rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&send[0]), Count: count, Type: rt.Int32, Root: next}); err != nil {
				return err
			}
			if err := c.Do(&g, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&got[0]), Count: count, Type: rt.Int32, Root: prev}); err != nil {
				return err
			}
			if err := g.End(); err != nil {
				return err
			}
			for i, v := range got {
				if v != int32(prev*1000003+round*7+i) {
					return fmt.Errorf("round %d: element %d from rank %d is %d", round, i, prev, v)
				}
			}
		}
		if k := copied(c); k >= rounds {
			return fmt.Errorf("%d of %d sends were copied aside", k, rounds)
		}
		before := copied(c)
		// Rank 0 sends in a group of its own, before rank 1 receives: the
		// group returns (the rest copied aside), and the message arrives.
		if r == 0 {
			g.Start()
			if err := c.Do(&g, rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&send[0]), Count: count, Type: rt.Int32, Root: 1}); err != nil {
				return err
			}
			if err := g.End(); err != nil {
				return err
			}
			if copied(c) == before {
				return fmt.Errorf("a send nobody received within its group was not copied aside")
			}
		}
		if err := c.AllReduce(unsafe.Pointer(&send[0]), unsafe.Pointer(&send[0]), 1, rt.Int32, rt.Sum, 0); err != nil {
			return err
		}
		if r == 1 {
			if err := c.Do(nil, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&got[0]), Count: count, Type: rt.Int32, Root: 0}); err != nil {
				return err
			}
			if got[count-1] != int32(0*1000003+(rounds-1)*7+count-1) {
				return fmt.Errorf("the late receive got %d", got[count-1])
			}
		}
		return nil
	})
}

// An exchange in place (a group sends a buffer and receives into it),
// larger than the rings: the receive must not overwrite what the send has
// not pushed yet (NCCL leaves aliasing undefined; the copy-aside path it
// replaced got it right, and so must this one).
func TestGroupExchangeInPlaceLargerThanTheRing(t *testing.T) {
	o := host.DefaultOptions()
	o.RingBytes = 1 << 14
	comms := conformance.Comms(t, host.NewWithOptions(o), 2)
	const count = 100003
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		buf := make([]int32, count)
		for round := 0; round < 3; round++ {
			for i := range buf {
				buf[i] = int32(r*1000003 + round*7 + i)
			}
			var g xccl.Group
			g.Start()
			p := unsafe.Pointer(&buf[0])
			if err := c.Do(&g, rt.Op{Kind: rt.OpSend, Send: p, Count: count, Type: rt.Int32, Root: 1 - r}); err != nil {
				return err
			}
			if err := c.Do(&g, rt.Op{Kind: rt.OpRecv, Recv: p, Count: count, Type: rt.Int32, Root: 1 - r}); err != nil {
				return err
			}
			if err := g.End(); err != nil {
				return err
			}
			for i, v := range buf {
				if want := int32((1-r)*1000003 + round*7 + i); v != want {
					return fmt.Errorf("round %d: element %d is %d, want %d", round, i, v, want)
				}
			}
		}
		return nil
	})
}

// A call refused inside a group fails the group, as ncclGroupEnd does
// after a failed call: End returns that call's status and message and runs
// none of the group's operations, on the sends-and-receives path and on
// the general one (an all-reduce in the group); the next group is whole.
func TestGroupWithARefusedCallRunsNothing(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 2)
	for _, withCollective := range []bool{false, true} {
		t.Run(fmt.Sprintf("collective=%v", withCollective), func(t *testing.T) {
			conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
				peer := 1 - r
				send, got, sum := []int32{int32(r + 10)}, []int32{-1}, []int32{1}
				var g xccl.Group
				for round := 0; round < 2; round++ {
					g.Start()
					if err := c.Do(&g, rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&send[0]), Count: 1, Type: rt.Int32, Root: peer}); err != nil {
						return err
					}
					if withCollective {
						if err := c.Do(&g, rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&sum[0]), Recv: unsafe.Pointer(&sum[0]), Count: 1, Type: rt.Int32, Red: rt.Sum}); err != nil {
							return err
						}
					}
					refused := round == 0
					if refused {
						err := c.Do(&g, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&got[0]), Count: 1, Type: rt.Int32, Root: 7})
						if rt.StatusOf(err) != rt.StatusError {
							return fmt.Errorf("a receive from rank 7 of 2: %v", err)
						}
					}
					if err := c.Do(&g, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&got[0]), Count: 1, Type: rt.Int32, Root: peer}); err != nil {
						return err
					}
					err := g.End()
					switch {
					case refused && (rt.StatusOf(err) != rt.StatusError || got[0] != -1 || sum[0] != 1):
						return fmt.Errorf("a group with a refused call: %v, received %d, summed %d", err, got[0], sum[0])
					case !refused && (err != nil || got[0] != int32(peer+10) || (withCollective && sum[0] != 2)):
						return fmt.Errorf("the next group: %v, received %d, summed %d", err, got[0], sum[0])
					}
				}
				return nil
			})
		})
	}
}
