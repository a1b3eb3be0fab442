package dcu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/dcu"
	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
)

// RCCL shares NCCL's API and enums: the same fake serves it, with the HIP
// runtime fake (hip* names) beside it.
func TestConformanceThroughFakeRCCL(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_RCCL_LIBRARY", libs["fakenccl"])
	t.Setenv("XCCL_HIP_LIBRARY", libs["fakehip"])
	d, err := ncclshape.Open(dcu.Spec)
	require.NoError(t, err)
	require.Equal(t, "dcu", d.Name())
	counts := []int{0, 1, 7, 4099}
	if testing.Short() {
		counts = []int{0, 7}
	}
	conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true})
	fakecheck.CheckStream(t, d, libs["fakenccl"])
	fakecheck.CheckRuntime(t, d)
}
