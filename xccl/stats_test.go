package xccl_test

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/internal/conformance"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// Stats count what ran (and nothing while off), the fused calls, and the
// host engine's algorithm choices; the JSON parses.
func TestStatsAndFusionCounts(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 3)
	big := 1 << 14 // 64 KiB of float32: the ring
	conformance.OnAll(t, comms, func(r int, c *xccl.Comm) error {
		buf := make([]float32, big)
		p := unsafe.Pointer(&buf[0])
		if err := c.AllReduce(p, p, 4, rt.Float32, rt.Sum, 0); err != nil { // stats off: not counted
			return err
		}
		c.EnableStats(true)
		for i := 0; i < 3; i++ {
			if err := c.AllReduce(p, p, 4, rt.Float32, rt.Sum, 0); err != nil {
				return err
			}
		}
		if err := c.AllReduce(p, p, big, rt.Float32, rt.Max, 0); err != nil {
			return err
		}
		if err := c.Broadcast(p, 10, rt.Float32, 1, 0); err != nil {
			return err
		}
		a, b := make([]float32, 5), make([]float32, 7)
		if err := c.AllReduceFused([]unsafe.Pointer{unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0])},
			[]unsafe.Pointer{unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0])}, []int{5, 7}, rt.Float32, rt.Sum, 0); err != nil {
			return err
		}
		var g xccl.Group
		g.Start()
		for i := 0; i < 4; i++ {
			if err := c.Do(&g, rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 8, Type: rt.Float32, Red: rt.Sum}); err != nil {
				return err
			}
		}
		return g.End()
	})
	s := comms[0].Stats()
	require.True(t, s.Enabled)
	ar := s.Ops["AllReduce"]
	// 3 small + 1 big + 1 fused batch + 4 queued in the group.
	require.Equal(t, uint64(9), ar.Calls)
	require.Equal(t, uint64(3*16+4*big+12*4+4*32), ar.Bytes)
	var hist uint64
	for _, v := range ar.Latency {
		hist += v
	}
	require.Equal(t, uint64(5), hist, "every timed call lands in one latency bucket")
	require.Equal(t, uint64(1), s.Ops["Broadcast"].Calls)
	require.Equal(t, uint64(40), s.Ops["Broadcast"].Bytes)
	require.Equal(t, uint64(1), s.Fused["fused_calls"])
	require.Equal(t, uint64(2), s.Fused["fused_buffers"])
	// The group's all-reduces are not fused: XCCL_FUSION_BYTES is unset
	// (and they read and write one buffer, so they would not be anyway).
	require.Equal(t, uint64(0), s.Fused["group_allreduces_fused"])
	// The engine counts every all-reduce, stats on or off: 4 small + fused
	// batch + the group's 4 direct; the big one by ring or single copy.
	require.Equal(t, uint64(9), s.Engine["allreduce.direct"])
	require.Equal(t, uint64(1), s.Engine["allreduce.ring"]+s.Engine["allreduce.single_copy"])
	require.Equal(t, uint64(1), s.Engine["fusion.batches"])
	require.Equal(t, uint64(2), s.Engine["fusion.buffers"])
	var parsed map[string]any
	require.NoError(t, json.Unmarshal([]byte(comms[0].StatsJSON()), &parsed))
	require.Equal(t, "host", parsed["device"])
}

// Fused calls are validated buffer by buffer and refuse mismatched arrays.
func TestFusedValidation(t *testing.T) {
	comms := conformance.Comms(t, host.New(), 1)
	c := comms[0]
	f := make([]float32, 4)
	p := unsafe.Pointer(&f[0])
	err := c.AllReduceFused([]unsafe.Pointer{p}, []unsafe.Pointer{p, p}, []int{1, 1}, rt.Float32, rt.Sum, 0)
	require.ErrorContains(t, err, "1 send buffers, 2 receive buffers and 2 counts")
	err = c.AllReduceFused([]unsafe.Pointer{p, nil}, []unsafe.Pointer{p, p}, []int{1, 1}, rt.Float32, rt.Sum, 0)
	require.ErrorContains(t, err, "buffer 1: AllReduce: send buffer is NULL")
	require.Equal(t, rt.StatusError, rt.StatusOf(err))
	require.NoError(t, c.AllReduceFused(nil, nil, nil, rt.Float32, rt.Sum, 0))
	f[0] = 3
	require.NoError(t, c.AllReduceFused([]unsafe.Pointer{p, p}, []unsafe.Pointer{p, p}, []int{1, 0}, rt.Float32, rt.Sum, 0))
	require.Equal(t, float32(3), f[0])
}
