package host

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

func TestQuickAllReduce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7} {
		for _, transport := range []string{"shm", "tcp"} {
			r, err := StartRoot(10 * time.Second)
			require.NoError(t, err)
			comms := make([]*Comm, n)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					comms[i], errs[i] = NewComm(r.ID, n, i, Options{Timeout: 10 * time.Second, Transport: transport, RingBytes: 1 << 16})
				}(i)
			}
			wg.Wait()
			for _, e := range errs {
				require.NoError(t, e)
			}
			for _, count := range []int{0, 1, 7, 1000, 100003} {
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						buf := make([]float32, count)
						for k := range buf {
							buf[k] = float32(i + 1)
						}
						var p unsafe.Pointer
						if count > 0 {
							p = unsafe.Pointer(&buf[0])
						}
						errs[i] = comms[i].exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: count, Type: rt.Float32, Red: rt.Sum})
						want := float32(n * (n + 1) / 2)
						for k := range buf {
							if buf[k] != want {
								t.Errorf("n=%d %s count=%d rank %d elem %d = %v want %v", n, transport, count, i, k, buf[k], want)
								return
							}
						}
					}(i)
				}
				wg.Wait()
				for _, e := range errs {
					require.NoError(t, e)
				}
			}
			for _, c := range comms {
				require.NoError(t, c.Destroy())
			}
		}
	}
}
