package runtime

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// Body gives the very bytes 12-27 that Put writes, and Parse reads back
// every field Put wrote, for fields at their widest.
func TestFingerprintBodyIsPutsBytes(t *testing.T) {
	for _, f := range []Fingerprint{
		{Seq: 1, Kind: OpAllReduce, Type: Float32, Red: Sum, Count: 7},
		{Seq: 1<<64 - 1, Kind: OpBroadcast, Type: BFloat16, Root: -1, Count: 1<<64 - 1},
		{Seq: 42, Kind: OpReduce, Type: Int8, Red: Avg, Root: 1<<31 - 1, Count: 1 << 40},
	} {
		b := make([]byte, FingerprintSize)
		f.Put(b)
		w0, w1 := f.Body()
		require.Equal(t, binary.LittleEndian.Uint64(b[12:]), w0, "%v", f)
		require.Equal(t, binary.LittleEndian.Uint64(b[20:]), w1, "%v", f)
		g, ok := ParseFingerprint(b)
		require.True(t, ok)
		require.Equal(t, f, g)
	}
}
