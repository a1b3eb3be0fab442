package ascend_test

import (
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/ascend"
	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
)

func open(t *testing.T) *ascend.Device {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_HCCL_LIBRARY", libs["fakehccl"])
	t.Setenv("XCCL_ACL_LIBRARY", libs["fakeascendcl"])
	d, err := ascend.Open()
	require.NoError(t, err)
	return d
}

// The conformance suite through the fake HCCL: HCCL's enums and argument
// order, groups and all-to-all as HcclBatchSendRecv (no group API).
func TestConformanceThroughFakeHCCL(t *testing.T) {
	d := open(t)
	counts := []int{0, 1, 7, 4099}
	if testing.Short() {
		counts = []int{0, 7}
	}
	conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true})
	fakecheck.CheckStream(t, d, os.Getenv("XCCL_HCCL_LIBRARY"))
	fakecheck.CheckJoins(t, d)
}

func TestCapabilities(t *testing.T) {
	d := open(t)
	require.Equal(t, 4108, d.UniqueIDSize())
	for _, dt := range []rt.DataType{rt.Float32, rt.Int8, rt.Int64, rt.BFloat16} {
		require.NoError(t, d.Supports(dt, rt.Sum), dt)
		err := d.Supports(dt, rt.Avg)
		require.ErrorContains(t, err, "ascend (HCCL) has no reduce op for AVG")
		require.Equal(t, rt.StatusError, rt.StatusOf(err))
	}
	require.ErrorContains(t, d.Supports(rt.Complex64, rt.Sum), "no data type for COMPLEX64")
	require.NoError(t, d.Supports(rt.Bool, rt.Max))
	require.Error(t, d.Supports(rt.Bool, rt.Sum))
	// What CANN documents as unsupported on Atlas A2/A3 is refused before
	// HCCL sees it: unsigned and 64-bit float reductions, PROD of int16 and
	// bfp16.
	for _, dt := range []rt.DataType{rt.Uint8, rt.Uint64, rt.Float64} {
		require.ErrorContains(t, d.Supports(dt, rt.Sum), "no data type for "+dt.String())
	}
	for _, dt := range []rt.DataType{rt.Int16, rt.BFloat16} {
		require.ErrorContains(t, d.Supports(dt, rt.Product), "does not support PRODUCT of "+dt.String())
		require.NoError(t, d.Supports(dt, rt.Max))
	}
	comms := conformance.Comms(t, d, 1)
	s, err := d.CreateStream()
	require.NoError(t, err)
	v := []float32{1}
	require.NoError(t, comms[0].AllReduce(unsafe.Pointer(&v[0]), unsafe.Pointer(&v[0]), 1, rt.Float32, rt.Max, s))
	require.NoError(t, d.SynchronizeStream(s))
	require.NoError(t, d.DestroyStream(s))
	total, free, err := d.MemStats(0)
	require.NoError(t, err)
	require.Greater(t, total, free)
}

// CANN 8 moved the communicator calls (root info, init, destroy) from
// libhccl.so to libhcomm.so: xccl binds them from either. A libhccl.so
// without them and a libhcomm.so with them run the conformance suite; a
// named libhcomm.so that is not there is an error.
func TestCommunicatorCallsFromHcomm(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_HCCL_LIBRARY", libs["fakehcclsplit"])
	t.Setenv("XCCL_ACL_LIBRARY", libs["fakeascendcl"])
	t.Setenv("XCCL_HCOMM_LIBRARY", libs["fakehcclsplit"]+".none")
	_, err = ascend.Open()
	require.ErrorContains(t, err, ".none")
	t.Setenv("XCCL_HCOMM_LIBRARY", libs["fakehcomm"])
	d, err := ascend.Open()
	require.NoError(t, err)
	require.Contains(t, d.Libraries(), "libfakehcomm.so")
	conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2}, Counts: []int{0, 7}})
}
