package commctx_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/commctx"
	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/xccl"
)

// Two ranks in one process on one device: concurrent creates of one ring
// make one communicator per rank, and rank → device id is many-to-one.
func TestManager(t *testing.T) {
	dev := host.New()
	id, err := xccl.GetUniqueID(dev)
	require.NoError(t, err)
	mgrs := []*commctx.Manager{commctx.New(dev), commctx.New(dev)}
	var bound [2]atomic.Int32
	for r, m := range mgrs {
		r := r
		m.Binder = func(dev int) error { bound[r].Store(int32(dev) + 1); return nil }
	}
	var wg sync.WaitGroup
	ctxs := make([][]*commctx.Context, 2)
	for r := 0; r < 2; r++ {
		ctxs[r] = make([]*commctx.Context, 4)
		for k := 0; k < 4; k++ { // four concurrent creates of ring 7 per rank
			wg.Add(1)
			go func(r, k int) {
				defer wg.Done()
				c, err := mgrs[r].Create(7, id, r, 2, 0)
				assert.NoError(t, err)
				ctxs[r][k] = c
			}(r, k)
		}
	}
	wg.Wait()
	for r := 0; r < 2; r++ {
		for k := 1; k < 4; k++ {
			require.Same(t, ctxs[r][0], ctxs[r][k], "one context per ring")
		}
		require.Equal(t, int32(1), bound[r].Load(), "bound to device 0 before comm init")
		require.Equal(t, 0, ctxs[r][0].DeviceID)
		require.Equal(t, r, ctxs[r][0].Comm.Rank())
		require.True(t, mgrs[r].Has(7))
	}
	// The same ring with another id is refused.
	other := append([]byte(nil), id...)
	other[40] ^= 1
	_, err = mgrs[0].Create(7, other, 0, 2, 0)
	require.ErrorContains(t, err, "another unique id")

	// Destroy while another goroutine Gets: the getter sees it or an error.
	var gets sync.WaitGroup
	stop := make(chan struct{})
	gets.Add(1)
	go func() {
		defer gets.Done()
		for {
			select {
			case <-stop:
				return
			default:
				if c, err := mgrs[0].Get(7); err == nil {
					assert.Equal(t, 7, c.RingID)
				}
			}
		}
	}()
	var derr [2]error
	var dw sync.WaitGroup
	for r := 0; r < 2; r++ {
		dw.Add(1)
		go func(r int) { defer dw.Done(); derr[r] = mgrs[r].Destroy(7) }(r)
	}
	dw.Wait()
	close(stop)
	gets.Wait()
	require.NoError(t, derr[0])
	require.NoError(t, derr[1])
	require.False(t, mgrs[0].Has(7))
	_, err = mgrs[0].Get(7)
	require.ErrorContains(t, err, "no communicator context")
	require.Error(t, mgrs[0].Destroy(7))
	require.NoError(t, mgrs[1].DestroyAll())
}
