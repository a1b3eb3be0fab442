package ppu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/devices/ppu"
	"github.com/xccl-project/xccl/internal/fakevendor"
)

// The PPU SDK's NCCL and runtime carry NCCL's and CUDA's names and values:
// the NCCL and CUDA fakes serve, named by the PPU variables.
func TestConformanceThroughFakePPU(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_PPU_NCCL_LIBRARY", libs["fakenccl"])
	t.Setenv("XCCL_PPU_CUDART_LIBRARY", libs["fakecudart"])
	d, err := ncclshape.Open(ppu.Spec)
	require.NoError(t, err)
	require.Equal(t, "ppu", d.Name())
	fakecheck.Suite(t, d, libs["fakenccl"])
}

// Without the variables only the SDK's paths are tried, never a plain
// soname that NVIDIA's NCCL would answer to.
func TestOnlyTheSDKPathsAreTried(t *testing.T) {
	for _, l := range append(append([]string{}, ppu.Spec.CCLLibs...), ppu.Spec.RTLibs...) {
		require.Regexp(t, `^/usr/local/PPU_SDK/`, l)
	}
}
