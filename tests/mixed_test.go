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

// Mixed communicators as processes under xcclrun --devices, through the C
// examples: every collective checked element by element on every rank,
// with ranks on different (fake) vendors and the host, interleaved and of
// uneven cluster sizes, and host ranks split by cluster label.
func TestMixedUnderXcclrun(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	env := []string{"XCCL_TIMEOUT=60", "XCCL_MIXED_CHUNK_BYTES=65536",
		"XCCL_NCCL_LIBRARY=" + libs["fakenccl"], "XCCL_CUDART_LIBRARY=" + libs["fakecudart"],
		"XCCL_HCCL_LIBRARY=" + libs["fakehccl"], "XCCL_ACL_LIBRARY=" + libs["fakeascendcl"],
		"XCCL_CNCL_LIBRARY=" + libs["fakecncl"], "XCCL_CNRT_LIBRARY=" + libs["fakecnrt"]}
	for _, tc := range []struct{ devices, clusters, algo string }{
		{"nvidia,host,nvidia,host", "nvidia[0 2] host[1 3]", "auto"},
		{"ascend,mlu:2,host", "ascend[0] mlu[1 2] host[3]", "auto"},
		{"host@a:2,host@b:2", "a(host)[0 1] b(host)[2 3]", "auto"}, // all-reduce through the host engine
		{"host@a:2,host@b:2", "a(host)[0 1] b(host)[2 3]", "hier"},
		{"host@a,host@b:3", "a(host)[0] b(host)[1 2 3]", "hier"},
	} {
		t.Run(tc.devices+"/"+tc.algo, func(t *testing.T) {
			xr := filepath.Join(build, "xcclrun")
			env := append(env[:len(env):len(env)], "XCCL_MIXED_ALGO="+tc.algo)
			out, err := run(t, 2*time.Minute, env, xr, "-n", "4", "--devices", tc.devices, filepath.Join(build, "collectives"), "70001")
			require.NoError(t, err, "%s", out)
			require.Equal(t, 4, strings.Count(out, "collectives all correct"), "%s", out)
			require.Contains(t, out, "capabilities: mixed communicator, clusters "+tc.clusters, "%s", out)
			out, err = run(t, 2*time.Minute, env, xr, "-n", "4", "--devices", tc.devices, filepath.Join(build, "allreduce"), fmt.Sprint(4<<20))
			require.NoError(t, err, "%s", out)
			require.Equal(t, 4, strings.Count(out, "all results correct"), "%s", out)
		})
	}
	out, err := run(t, time.Minute, env, filepath.Join(build, "xcclrun"), "-n", "2", "--devices", "host:3", "true")
	require.Error(t, err)
	require.Contains(t, out, "names 3 ranks, -n is 2")
}
