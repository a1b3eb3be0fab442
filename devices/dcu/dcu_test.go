package dcu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/dcu"
	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
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
	fakecheck.Suite(t, d, libs["fakenccl"])
}
