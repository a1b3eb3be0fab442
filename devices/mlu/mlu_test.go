package mlu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/mlu"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
)

// The conformance suite through the fake CNCL: CNCL's own dtype values,
// the 136-byte clique id, cnclInitComms on the current device.
func TestConformanceThroughFakeCNCL(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_CNCL_LIBRARY", libs["fakecncl"])
	t.Setenv("XCCL_CNRT_LIBRARY", libs["fakecnrt"])
	d, err := mlu.Open()
	require.NoError(t, err)
	require.Equal(t, 136, d.UniqueIDSize())
	require.ErrorContains(t, d.Supports(rt.Float64, rt.Sum), "mlu (CNCL) has no data type for FLOAT64")
	require.ErrorContains(t, d.Supports(rt.Float32, rt.Avg), "no reduce op for AVG")
	counts := []int{0, 1, 7, 4099}
	if testing.Short() {
		counts = []int{0, 7}
	}
	conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true})
	fakecheck.CheckStream(t, d, libs["fakecncl"])
	fakecheck.CheckJoins(t, d)
}
