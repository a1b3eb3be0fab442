package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The C examples with every link forced onto UCX (its tcp transport):
// collectives.c on 2, 3 and 4 processes, the all-reduce sweep to 4 MiB.
// Without libucp, forced UCX fails at init naming the library tried.
func TestCExamplesOverUCX(t *testing.T) {
	if !haveUCX() {
		out, err := run(t, time.Minute, []string{"XCCL_TIMEOUT=20", "XCCL_TRANSPORT=ucx"}, filepath.Join(build, "xcclrun"), "-n", "2",
			filepath.Join(build, "collectives"), "7")
		require.Error(t, err)
		require.Contains(t, out, "UCX does not load: tried libucp.so.0", out)
		t.Skip("UCX runs skipped: libucp.so.0 is not installed (apt-get install libucx0); the refusal was checked")
	}
	env := []string{"XCCL_TIMEOUT=60", "XCCL_TRANSPORT=ucx", "UCX_TLS=tcp", "XCCL_DEBUG=INFO"}
	for _, n := range []int{2, 3, 4} {
		out, err := run(t, 2*time.Minute, env, filepath.Join(build, "xcclrun"), "-n", fmt.Sprint(n),
			filepath.Join(build, "collectives"), "10007")
		require.NoError(t, err, "n=%d\n%s", n, out)
		require.Equal(t, n, strings.Count(out, "collectives all correct"), "n=%d\n%s", n, out)
		require.Equal(t, n, strings.Count(out, "UCX links up"), "n=%d\n%s", n, out)
		require.NotContains(t, out, ":shm", "n=%d: every link must be UCX", n)
	}
	out, err := run(t, 2*time.Minute, env, filepath.Join(build, "xcclrun"), "-n", "3", filepath.Join(build, "allreduce"), "4194304", "3")
	require.NoError(t, err, "%s", out)
	require.Equal(t, 3, strings.Count(out, "all results correct"), "%s", out)
	out, err = run(t, time.Minute, []string{"XCCL_TIMEOUT=20", "XCCL_TRANSPORT=ucx", "XCCL_UCX_LIBRARY=/nonexistent/libucp.so.0"},
		filepath.Join(build, "xcclrun"), "-n", "2", filepath.Join(build, "collectives"), "7")
	require.Error(t, err)
	require.Contains(t, out, "UCX does not load: tried /nonexistent/libucp.so.0", out)
}
