package host

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

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

// blas_axpby (Paddle's gradient accumulation, y = alpha*x + beta*y): exact
// for integers at any magnitude with whole factors, wrapping as the type
// does; other factors and the float types through float64.
func TestAxpby(t *testing.T) {
	asBytes := func(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }
	x64 := []int64{1<<53 + 1, -(1<<63 - 1), 7, math.MaxInt64}
	y64 := []int64{1, -10, -3, 1}
	want64 := []int64{1<<53 + 2, 1<<63 - 9, 4, math.MinInt64} // -(2^63-1) - 10 wraps
	axpby(rt.Int64, 1, asBytes(unsafe.Pointer(&x64[0]), 32), 1, asBytes(unsafe.Pointer(&y64[0]), 32))
	require.Equal(t, want64, y64)

	x32 := []int32{math.MinInt32, 5, 1 << 30}
	y32 := []int32{-1, 6, 1 << 30}
	axpby(rt.Int32, 1, asBytes(unsafe.Pointer(&x32[0]), 12), 1, asBytes(unsafe.Pointer(&y32[0]), 12))
	require.Equal(t, []int32{math.MaxInt32, 11, math.MinInt32}, y32)

	xu := []uint8{200, 3}
	yu := []uint8{100, 10}
	axpby(rt.Uint8, -1, asBytes(unsafe.Pointer(&xu[0]), 2), 2, asBytes(unsafe.Pointer(&yu[0]), 2))
	require.Equal(t, []uint8{0, 17}, yu) // 2*100-200, 2*10-3

	xi := []int16{10, -7}
	yi := []int16{4, 4}
	axpby(rt.Int16, 0.5, asBytes(unsafe.Pointer(&xi[0]), 4), 1.5, asBytes(unsafe.Pointer(&yi[0]), 4))
	require.Equal(t, []int16{11, 2}, yi) // 5+6, -3.5+6 = 2.5 truncated

	xf := []float64{1.5, -2}
	yf := []float64{0.25, 8}
	axpby(rt.Float64, 2, asBytes(unsafe.Pointer(&xf[0]), 16), -1, asBytes(unsafe.Pointer(&yf[0]), 16))
	require.Equal(t, []float64{2.75, -12}, yf)
}
