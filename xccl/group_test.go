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
