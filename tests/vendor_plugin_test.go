package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/internal/fakevendor"
)

// A vendor's own plugin (its runtime: the fake CUDA runtime) adopts xccl's
// collectives with XcclPaddleFillCollectives; Paddle's loader drives them
// through its table, on the plugin's streams, over the vendor's library
// (the fake NCCL), for every layout and 1, 2 and 4 ranks.
func TestVendorPluginFillsCollectives(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	plugin := filepath.Join(t.TempDir(), "libvendorplugin.so")
	out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_DEFAULT_SOURCE", "-shared", "-fPIC",
		"-I../include", "c/vendor_plugin.c", "-o", plugin, "-L"+build, "-lxccl", "-ldl", "-Wl,-rpath,"+build).CombinedOutput()
	require.NoError(t, err, "%s", out)
	env := []string{"XCCL_TIMEOUT=60", "XCCL_DEVICE=nvidia", "VENDOR_RT_LIBRARY=" + libs["fakecudart"],
		"XCCL_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_CUDART_LIBRARY=" + libs["fakecudart"]}
	served := regexp.MustCompile(`vendor plugin: (\d+) runtime calls served by the plugin`)
	for _, layout := range []string{"904", "912", "1032"} {
		for _, n := range []int{1, 2, 4} {
			res, err := run(t, 2*time.Minute, env, filepath.Join(build, "xcclrun"), "-n", fmt.Sprint(n),
				filepath.Join(build, "paddle_loader"), plugin, layout, t.TempDir())
			require.NoError(t, err, "layout %s n=%d\n%s", layout, n, res)
			require.Equal(t, n, strings.Count(res, "paddle loader OK (layout "+layout+")"), "layout %s n=%d\n%s", layout, n, res)
			require.Contains(t, res, "as 'fakegpu' (vendor plugin + xccl)")
			m := served.FindAllStringSubmatch(res, -1)
			require.Len(t, m, n, "%s", res)
			for _, x := range m {
				k, _ := strconv.Atoi(x[1])
				require.Greater(t, k, 10, "the plugin's own runtime entries must serve Paddle's runtime calls")
			}
		}
	}
}
