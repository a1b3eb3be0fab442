package half

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every finite half value round-trips, and every midpoint between two
// neighbours rounds to the even one, with its float32 neighbours rounding
// to the near side: round-to-nearest-even, checked exhaustively.
func testHalfRounding(t *testing.T, name string, toF32 func(uint16) float32, fromF32 func(float32) uint16, maxFinite uint16) {
	for h := uint16(0); h <= maxFinite; h++ {
		for _, sign := range []uint16{0, 0x8000} {
			v := h | sign
			require.Equal(t, v, fromF32(toF32(v)), "%s %#04x round trip", name, v)
		}
		if h == maxFinite {
			break
		}
		a, b := toF32(h), toF32(h+1)
		mid := float32((float64(a) + float64(b)) / 2)
		want := h
		if h&1 == 1 {
			want = h + 1
		}
		require.Equal(t, want, fromF32(mid), "%s midpoint of %#04x and %#04x", name, h, h+1)
		require.Equal(t, h, fromF32(math.Nextafter32(mid, 0)), "%s below midpoint of %#04x", name, h)
		require.Equal(t, h+1, fromF32(math.Nextafter32(mid, float32(math.Inf(1)))), "%s above midpoint of %#04x", name, h)
	}
	require.True(t, math.IsInf(float64(toF32(fromF32(float32(math.Inf(1))))), 1))
	nan := toF32(fromF32(float32(math.NaN())))
	require.True(t, nan != nan, "%s NaN stays NaN", name)
}

func TestFloat16Rounding(t *testing.T) { testHalfRounding(t, "float16", F16ToF32, F32ToF16, 0x7bff) }

func TestBFloat16Rounding(t *testing.T) {
	testHalfRounding(t, "bfloat16", BF16ToF32, F32ToBF16, 0x7f7f)
}

func TestFloat16Overflow(t *testing.T) {
	require.Equal(t, uint16(0x7c00), F32ToF16(70000))  // beyond 65504: infinity
	require.Equal(t, uint16(0x7bff), F32ToF16(65519))  // rounds down to the largest finite
	require.Equal(t, uint16(0x0001), F32ToF16(6e-8))   // smallest subnormal
	require.Equal(t, uint16(0x0000), F32ToF16(2.9e-8)) // below half of it: zero
	require.Equal(t, uint16(0x8000), F32ToF16(-1e-12)) // negative zero
}
