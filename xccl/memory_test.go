package xccl_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/host"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// plainDevice hides the host device's CommMemAlloc: MemAlloc serves.
type plainDevice struct{ rt.Device }

// MemAlloc and MemFree as ncclMemAlloc and ncclMemFree: the device's
// communication memory where it has some, else MemAlloc's; freed by
// pointer alone; size 0 is nil; a pointer MemAlloc did not give, or gave
// and took back, is refused and nothing is freed.
func TestMemAllocAndFree(t *testing.T) {
	for name, dev := range map[string]rt.Device{"host": host.New(), "plain": plainDevice{host.New()}} {
		t.Run(name, func(t *testing.T) {
			host.SettleFrees() // other tests' frees that waited for their streams
			before := host.Allocated()
			var ps []unsafe.Pointer
			for _, size := range []int{1, 255, 4096, 3 << 20} {
				p, err := xccl.MemAlloc(dev, size)
				require.NoError(t, err)
				require.NotNil(t, p)
				b := unsafe.Slice((*byte)(p), size)
				for i := range b {
					b[i] = byte(size)
				}
				ps = append(ps, p)
			}
			require.Greater(t, host.Allocated(), before)
			for _, p := range ps {
				require.NoError(t, xccl.MemFree(p))
			}
			require.Equal(t, before, host.Allocated(), "every byte given back")
			err := xccl.MemFree(ps[0])
			require.ErrorContains(t, err, "not allocated by XcclMemAlloc")
			require.Equal(t, rt.StatusError, rt.StatusOf(err))

			p, err := xccl.MemAlloc(dev, 0)
			require.NoError(t, err)
			require.Nil(t, p)
			require.NoError(t, xccl.MemFree(nil))
			_, err = xccl.MemAlloc(dev, -1)
			require.Error(t, err)
			x := 5
			require.ErrorContains(t, xccl.MemFree(unsafe.Pointer(&x)), "not allocated by XcclMemAlloc")
			require.Equal(t, 5, x)
		})
	}
	_, err := xccl.MemAlloc(nil, 8)
	require.Error(t, err)
}
