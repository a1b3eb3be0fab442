package iluvatar_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/iluvatar"
	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/internal/fakevendor"
)

// CoreX's NCCL and runtime carry NCCL's and CUDA's names and values: the
// NCCL and CUDA fakes serve, named by the CoreX variables.
func TestConformanceThroughFakeCoreX(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_COREX_NCCL_LIBRARY", libs["fakenccl"])
	t.Setenv("XCCL_COREX_CUDART_LIBRARY", libs["fakecudart"])
	d, err := ncclshape.Open(iluvatar.Spec)
	require.NoError(t, err)
	require.Equal(t, "iluvatar", d.Name())
	fakecheck.Suite(t, d, libs["fakenccl"])
}

// Without the variables only the CoreX install paths are tried, never a
// plain soname that NVIDIA's NCCL would answer to.
func TestOnlyTheCoreXPathsAreTried(t *testing.T) {
	for _, l := range append(append([]string{}, iluvatar.Spec.CCLLibs...), iluvatar.Spec.RTLibs...) {
		require.Regexp(t, `^/usr/local/corex/lib(64)?/`, l)
	}
	t.Setenv("XCCL_COREX_NCCL_LIBRARY", "")
	if _, err := ncclshape.Open(iluvatar.Spec); err != nil {
		require.ErrorContains(t, err, "/usr/local/corex/")
		require.ErrorContains(t, err, "XCCL_COREX_NCCL_LIBRARY")
	}
}
