package host

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
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

func TestCapabilityMatrix(t *testing.T) {
	for _, dt := range rt.AllDataTypes() {
		for _, op := range rt.AllReduceOps() {
			err := supports(dt, op)
			refused := (dt.IsComplex() && (op == rt.Max || op == rt.Min)) || (dt == rt.Bool && op == rt.Avg)
			require.Equal(t, refused, err != nil, "%v %v", dt, op)
			if err != nil {
				require.Equal(t, rt.StatusError, rt.StatusOf(err))
				require.Contains(t, err.Error(), dt.String())
			}
		}
	}
	require.Error(t, supports(rt.DataType(99), rt.Sum))
	require.Error(t, supports(rt.Float32, rt.ReduceOp(42)))
	require.Error(t, supports(rt.Undefined, rt.Sum))
}

// The C kernels give bit-identical results to the Go loops for every type
// and op they cover: random bits (NaNs, infinities, ±0, wrapping integers
// included), odd lengths above and below the hand-over size.
func TestCKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []rt.DataType{rt.Uint8, rt.Uint16, rt.Uint32, rt.Uint64, rt.Int8, rt.Int16, rt.Int32, rt.Int64, rt.Float32, rt.Float64} {
		for _, op := range rt.AllReduceOps() {
			for _, n := range []int{1, 255, 1031, 40001} {
				size := n * dt.Size()
				d, s := make([]byte, size), make([]byte, size)
				for i := range d {
					d[i], s[i] = byte(rng.Uint32()), byte(rng.Uint32())
				}
				if dt == rt.Float32 { // plenty of special values
					f, g := view[float32](d), view[float32](s)
					for i := 0; i < n; i += 7 {
						f[i] = []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(-1)), 1}[i%5]
						g[i] = []float32{float32(math.Copysign(0, -1)), 0, 2, float32(math.NaN()), float32(math.Inf(1))}[(i/7)%5]
					}
				}
				want, got := append([]byte(nil), d...), append([]byte(nil), d...)
				useCKernels = false
				reduceInto(want, s, dt, op)
				useCKernels = true
				reduceInto(got, s, dt, op)
				require.Equal(t, want, got, "%v %v n=%d", dt, op, n)
				// The three-operand list (one call into C): out = d op s
				// into fresh memory, and in place on a copy of d, then s
				// reduced once more into both.
				var c Comm
				out, in := make([]byte, size), append([]byte(nil), d...)
				twice := append([]byte(nil), want...)
				reduceInto(twice, s, dt, op)
				c.reduceJobs([]redJob{{dst: out, a: d, b: s}, {dst: in, a: in, b: s}, {dst: out, a: out, b: s}}, dt, op)
				require.Equal(t, twice, out, "%v %v n=%d: out = d op s op s", dt, op, n)
				require.Equal(t, want, in, "%v %v n=%d: in op= s", dt, op, n)
			}
		}
	}
}
