package tests

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/internal/fakevendor"
)

// Iluvatar CoreX and T-Head PPU ship NCCL- and CUDA-named libraries that
// the nvidia device would load too: XCCL_DEVICE=auto tries them first, so
// where both load, the device is named after the vendor whose install it
// found, and the probe still says nvidia loads.
func TestProbeAutoPrefersInstallPathVendorsOverNvidia(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	nvidia := []string{"XCCL_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_CUDART_LIBRARY=" + libs["fakecudart"]}
	for _, v := range []struct {
		device string
		env    []string
	}{
		{"nvidia", nil},
		{"iluvatar", []string{"XCCL_COREX_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_COREX_CUDART_LIBRARY=" + libs["fakecudart"]}},
		{"ppu", []string{"XCCL_PPU_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_PPU_CUDART_LIBRARY=" + libs["fakecudart"]}},
	} {
		env := append(append([]string{"XCCL_DEVICE=auto"}, nvidia...), v.env...)
		out, err := run(t, time.Minute, env, filepath.Join(build, "xcclrun"), "--probe")
		require.NoError(t, err, "%s", out)
		require.Contains(t, out, "XCCL_DEVICE=auto picks: "+v.device+"\n", "%s", out)
		require.Regexp(t, regexp.MustCompile(`(?m)^nvidia +true `), out)
	}
}
