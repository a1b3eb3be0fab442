package gcu_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/gcu"
	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
)

func open(t *testing.T) (*ncclshape.Device, fakevendor.Libs) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_ECCL_LIBRARY", libs["fakeeccl"])
	t.Setenv("XCCL_TOPSRT_LIBRARY", libs["faketopsrt"])
	d, err := ncclshape.Open(gcu.Spec)
	require.NoError(t, err)
	return d, libs
}

// ECCL has NCCL's shape behind eccl* names: the fake ECCL (which, like
// eccl.h says of ECCL, refuses 64-bit types in reductions) and the fake
// TOPS runtime (tops* names, pinned memory through topsHostMalloc with
// flags), through the real dlopen path.
func TestConformanceThroughFakeECCL(t *testing.T) {
	d, libs := open(t)
	require.Equal(t, "gcu", d.Name())
	fakecheck.Suite(t, d, libs["fakeeccl"])
}

// 64-bit types are refused in every reduction with C_ERROR naming the
// device and library, and still move (broadcast travels as bytes).
func TestSixtyFourBitTypesMoveButDoNotReduce(t *testing.T) {
	d, _ := open(t)
	comms := conformance.Comms(t, d, 1)
	v := []int64{1 << 40, -3}
	p := unsafe.Pointer(&v[0])
	for _, dt := range []rt.DataType{rt.Int64, rt.Uint64, rt.Float64} {
		for _, op := range rt.AllReduceOps() {
			require.Error(t, d.Supports(dt, op))
		}
		err := comms[0].AllReduce(p, p, 2, dt, rt.Sum, 0)
		require.Error(t, err)
		require.Equal(t, rt.StatusError, rt.StatusOf(err))
		require.Contains(t, err.Error(), "gcu")
		require.Contains(t, err.Error(), "ECCL")
		require.NoError(t, comms[0].Broadcast(p, 2, dt, 0, 0))
	}
	require.Equal(t, []int64{1 << 40, -3}, v)
	require.NoError(t, d.Supports(rt.BFloat16, rt.Avg))
	require.NoError(t, d.Supports(rt.Bool, rt.Max))
}
