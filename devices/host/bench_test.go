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
