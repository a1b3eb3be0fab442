package host

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

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
	for _, dt := range numberTypes {
		for _, op := range rt.AllReduceOps() {
			for _, n := range []int{1, 255, 1031, 40001} {
				size := n * dt.Size()
				d, s := randomPair(rng, size)
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

// The one-pass three-operand Go loops (reduce3Go) give the results of a
// copy and the two-operand loops, bit for bit, for every number type and
// op: random bits (NaNs, wrapping integers), fresh output and either input
// as the output.
func TestReduce3GoMatchesCopyAndReduce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range numberTypes {
		for _, op := range rt.AllReduceOps() {
			for _, n := range []int{1, 2, 7, 255} {
				size := n * dt.Size()
				a, b := randomPair(rng, size)
				want := append([]byte(nil), a...)
				reduceTyped2(want, b, dt, op)
				out := make([]byte, size)
				require.True(t, reduce3Go(out, a, b, dt, op))
				require.Equal(t, want, out, "%v %v n=%d fresh", dt, op, n)
				inA := append([]byte(nil), a...)
				reduce3Go(inA, inA, b, dt, op)
				require.Equal(t, want, inA, "%v %v n=%d into a", dt, op, n)
				inB := append([]byte(nil), b...)
				reduce3Go(inB, a, inB, dt, op)
				require.Equal(t, want, inB, "%v %v n=%d into b", dt, op, n)
			}
		}
	}
	require.False(t, reduce3Go(make([]byte, 8), make([]byte, 8), make([]byte, 8), rt.Complex64, rt.Sum))
	require.False(t, reduce3Go(make([]byte, 8), make([]byte, 8), make([]byte, 8), rt.Bool, rt.Max))
}

// reduceTyped2 is want = want op b through the two-operand Go loops alone.
func reduceTyped2(want, b []byte, dt rt.DataType, op rt.ReduceOp) {
	useCKernels = false
	defer func() { useCKernels = true }()
	reduceInto(want, b, dt, op)
}

// numberTypes are the types the C kernels and the one-pass Go loops cover.
var numberTypes = []rt.DataType{rt.Uint8, rt.Uint16, rt.Uint32, rt.Uint64, rt.Int8, rt.Int16, rt.Int32, rt.Int64, rt.Float32, rt.Float64}

// randomPair is two buffers of size random bytes.
func randomPair(rng *rand.Rand, size int) (a, b []byte) {
	a, b = make([]byte, size), make([]byte, size)
	for i := range a {
		a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
	}
	return a, b
}
