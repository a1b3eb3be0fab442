package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/internal/fakevendor"
)

// TestPaddleReplay runs tests/c/paddle_replay.c under xcclrun: libxccl.so
// loaded with dlopen + InitPlugin and driven through the C_DeviceInterface
// table exactly as Paddle's DeviceManager, CommContextManager,
// XCCLCommContext and ProcessGroupCustom drive it (unique id through a
// store, comm and calc streams synced by events, the barrier, every
// collective, all_to_all and its send/recv fallback, a sub-group made inside
// group calls beside the world, calc-stream AVG, the legacy scatter that
// sends to itself, Paddle's teardown order), every result checked. Each
// layout, 1 to 4 ranks, on the host device and through the fake NCCL.
func TestPaddleReplay(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	lib := filepath.Join(build, "libxccl.so")
	for _, d := range []struct {
		name string
		env  []string
	}{
		{"host", []string{"XCCL_DEVICE=host"}},
		{"nvidia", []string{"XCCL_DEVICE=nvidia", "XCCL_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_CUDART_LIBRARY=" + libs["fakecudart"]}},
	} {
		for _, layout := range []string{"904", "912", "1032"} {
			for n := 1; n <= 4; n++ {
				t.Run(fmt.Sprintf("%s/layout%s/n%d", d.name, layout, n), func(t *testing.T) {
					env := append([]string{"XCCL_TIMEOUT=30"}, d.env...)
					out, err := run(t, 2*time.Minute, env, filepath.Join(build, "xcclrun"), "-n", fmt.Sprint(n),
						filepath.Join(build, "paddle_replay"), lib, layout, t.TempDir())
					require.NoError(t, err, "%s", out)
					require.NotContains(t, out, "FAIL", "%s", out)
					want := fmt.Sprintf("paddle replay OK (%d ranks, layout %s, xccl_%s,", n, layout, d.name)
					require.Equal(t, n, strings.Count(out, want), "%s", out)
				})
			}
		}
	}
}
