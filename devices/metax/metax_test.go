package metax_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/devices/metax"
	"github.com/xccl-project/xccl/internal/fakevendor"
)

// MCCL has NCCL's shape behind mccl* names: the fake MCCL (mccl* names,
// NCCL's values) and the fake MACA runtime (mc* names) beside it, through
// the real dlopen path.
func TestConformanceThroughFakeMCCL(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_METAX_MCCL_LIBRARY", libs["fakemccl"])
	t.Setenv("XCCL_MACA_LIBRARY", libs["fakemcruntime"])
	d, err := ncclshape.Open(metax.Spec)
	require.NoError(t, err)
	require.Equal(t, "metax", d.Name())
	fakecheck.Suite(t, d, libs["fakemccl"])

	// A CUDA runtime beside MCCL is not MACA: the mc* names are missing.
	t.Setenv("XCCL_MACA_LIBRARY", libs["fakecudart"])
	_, err = ncclshape.Open(metax.Spec)
	require.ErrorContains(t, err, "lacks the symbol mc")
}
