package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A variable set to a value that cannot be used keeps its default, and
// says so (the logger warns of each once); good values say nothing.
func TestConfigNamesWhatItIgnores(t *testing.T) {
	for k, v := range map[string]string{
		"XCCL_TIMEOUT": "abc", "XCCL_SHM_RING_BYTES": "1", "XCCL_DEBUG": "bogus", "XCCL_ALGO": "fastest",
		"XCCL_HOST_DEVICES": "0", "XCCL_SPIN_POLLS": "-3", "XCCL_FUSION_BYTES": "x",
		"XCCL_MIXED_CHUNK_BYTES": "12",
	} {
		t.Setenv(k, v)
	}
	c := ReadConfig()
	require.Equal(t, 300*time.Second, c.Timeout)
	require.Equal(t, 2<<20, c.ShmRing)
	require.Equal(t, "", c.Algo, "the automatic choice")
	require.Equal(t, "WARN", c.Debug)
	all := strings.Join(c.Ignored, "\n")
	for _, want := range []string{`XCCL_TIMEOUT="abc" is not seconds above 0: 5m0s is used`,
		`XCCL_SHM_RING_BYTES="1" is not at least 4096`, `XCCL_DEBUG="bogus" is not one of WARN, INFO`,
		`XCCL_ALGO="fastest" is not one of auto, direct, ring, cma, single-copy: automatic is used`,
		`XCCL_HOST_DEVICES="0"`, `XCCL_SPIN_POLLS="-3"`, `XCCL_FUSION_BYTES="x"`, `XCCL_MIXED_CHUNK_BYTES="12"`} {
		require.Contains(t, all, want)
	}
	require.Len(t, c.Ignored, 8, all)

	t.Setenv("XCCL_SHM_RING_BYTES", "100000")
	for k, v := range map[string]string{"XCCL_TIMEOUT": "1.5", "XCCL_DEBUG": "info", "XCCL_ALGO": "Single-Copy",
		"XCCL_HOST_DEVICES": "4", "XCCL_SPIN_POLLS": "10", "XCCL_FUSION_BYTES": "0",
		"XCCL_MIXED_CHUNK_BYTES": "8192"} {
		t.Setenv(k, v)
	}
	c = ReadConfig()
	require.Equal(t, 1500*time.Millisecond, c.Timeout)
	require.Equal(t, "single-copy", c.Algo)
	t.Setenv("XCCL_ALGO", "auto")
	require.Equal(t, "", ReadConfig().Algo, "auto is the automatic choice")
	require.Equal(t, []string{"XCCL_SHM_RING_BYTES=100000 is no power of two: the next one above is used"}, c.Ignored)
}
