package host

import (
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// BenchmarkAllReduce: float32 SUM all-reduce, ranks as goroutines of this
// process over the shared-memory transport. b.N all-reduces per rank.
func BenchmarkAllReduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, bytes := range []int{8, 512 << 10, 32 << 20} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", n, bytes), func(b *testing.B) {
				r, err := StartRoot(10 * time.Second)
				if err != nil {
					b.Fatal(err)
				}
				comms, errs := join(r.ID, n, seq(n), opts(60*time.Second))
				for _, e := range errs {
					if e != nil {
						b.Fatal(e)
					}
				}
				defer destroyAll(comms)
				count := bytes / 4
				bufs := make([][]float32, n)
				for i := range bufs {
					bufs[i] = make([]float32, count)
				}
				b.SetBytes(int64(bytes))
				b.ResetTimer()
				var wg sync.WaitGroup
				for i, c := range comms {
					wg.Add(1)
					go func(i int, c *Comm) {
						defer wg.Done()
						p := unsafe.Pointer(&bufs[i][0])
						op := &rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: count, Type: rt.Float32, Red: rt.Sum}
						for k := 0; k < b.N; k++ {
							if err := c.exec(op); err != nil {
								b.Error(err)
								return
							}
						}
					}(i, c)
				}
				wg.Wait()
			})
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// BenchmarkSoftwarePath: the software of a small call without the
// cross-core trip: one goroutine runs both ranks of a 2-rank communicator,
// the sender first (a broadcast's root, a reduce's other rank, neither
// waits), then the receiver, which finds the data there. b.N calls of each.
func BenchmarkSoftwarePath(b *testing.B) {
	for _, kind := range []rt.OpKind{rt.OpBroadcast, rt.OpReduce} {
		for _, bytes := range []int{8, 128} {
			b.Run(fmt.Sprintf("%v/bytes=%d", kind, bytes), func(b *testing.B) {
				r, err := StartRoot(10 * time.Second)
				if err != nil {
					b.Fatal(err)
				}
				comms, errs := join(r.ID, 2, seq(2), opts(60*time.Second))
				for _, e := range errs {
					if e != nil {
						b.Fatal(e)
					}
				}
				defer destroyAll(comms)
				count := bytes / 4
				bufs := [2][]float32{make([]float32, count), make([]float32, count)}
				root := 0
				if kind == rt.OpReduce {
					root = 1
				}
				ops := [2]*rt.Op{}
				for i := range ops {
					p := unsafe.Pointer(&bufs[i][0])
					ops[i] = &rt.Op{Kind: kind, Send: p, Recv: p, Count: count, Type: rt.Float32, Red: rt.Sum, Root: root}
				}
				sender := root // a broadcast's root; a reduce's other rank
				if kind == rt.OpReduce {
					sender = 1 - root
				}
				b.ResetTimer()
				for k := 0; k < b.N; k++ {
					if err := comms[sender].exec(ops[sender]); err != nil {
						b.Fatal(err)
					}
					if err := comms[1-sender].exec(ops[1-sender]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
