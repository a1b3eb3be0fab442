package xccl_test

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/internal/conformance"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// BenchmarkGroupSendRecv: a group of one send and one receive (a ring
// exchange of 8 bytes, as nccl-tests' sendrecv), 2 ranks as goroutines,
// each with one Group reused as a thread's XcclGroupStart reuses one. The
// allocations per op are what a group costs beside its messages.
func BenchmarkGroupSendRecv(b *testing.B) {
	comms := conformance.Comms(b, host.New(), 2)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var g xccl.Group
			send, recv := make([]float32, 2), make([]float32, 2)
			for k := 0; k < b.N; k++ {
				g.Start()
				_ = c.Do(&g, rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&send[0]), Count: 2, Type: rt.Float32, Root: 1 - r})
				_ = c.Do(&g, rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&recv[0]), Count: 2, Type: rt.Float32, Root: 1 - r})
				if err := g.End(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
