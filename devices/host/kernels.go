package host

import (
	"math"
	"unsafe"

	"github.com/xccl-project/xccl/internal/half"
	rt "github.com/xccl-project/xccl/runtime"
)

// This file holds the reduction kernels: dst[i] = dst[i] op src[i] over raw
// bytes of one data type. FLOAT16 and BFLOAT16 never reach them: the
// collectives widen those to float32, reduce, and round once at the end.
// AVG reduces as SUM; finishAvg divides by the rank count afterwards.

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

func sumInto[T number | complex64 | complex128](d, s []T) {
	s = s[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		d[i] += s[i]
		d[i+1] += s[i+1]
		d[i+2] += s[i+2]
		d[i+3] += s[i+3]
	}
	for ; i < len(d); i++ {
		d[i] += s[i]
	}
}

func prodInto[T number | complex64 | complex128](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		d[i] *= s[i]
	}
}

// maxInto/minInto: a NaN in either operand yields NaN (like NCCL and IEEE maxNum is not used).
func maxInto[T number](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		if s[i] > d[i] || s[i] != s[i] {
			d[i] = s[i]
		}
	}
}

func minInto[T number](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		if s[i] < d[i] || s[i] != s[i] {
			d[i] = s[i]
		}
	}
}

// reduce3Typed computes d = a op b in one pass (a or b may be d itself),
// with the same results as a copy of a into d and then reduceTyped.
func reduce3Typed[T number](d, a, b []byte, op rt.ReduceOp) {
	dv := view[T](d)
	av, bv := view[T](a)[:len(dv)], view[T](b)[:len(dv)]
	switch op {
	case rt.Sum, rt.Avg:
		i := 0
		for ; i+4 <= len(dv); i += 4 { // four at a time: one bounds check each, independent adds
			d, x, y := dv[i:i+4:i+4], av[i:i+4:i+4], bv[i:i+4:i+4]
			d[0], d[1], d[2], d[3] = x[0]+y[0], x[1]+y[1], x[2]+y[2], x[3]+y[3]
		}
		for ; i < len(dv); i++ {
			dv[i] = av[i] + bv[i]
		}
	case rt.Product:
		for i := range dv {
			dv[i] = av[i] * bv[i]
		}
	case rt.Max:
		for i := range dv {
			x, y := av[i], bv[i]
			if y > x || y != y {
				x = y
			}
			dv[i] = x
		}
	case rt.Min:
		for i := range dv {
			x, y := av[i], bv[i]
			if y < x || y != y {
				x = y
			}
			dv[i] = x
		}
	default: // validated away; as the copy-then-reduce did: dst = a
		copy(dv, av)
	}
}

// reduce3Go is dst = a op b with the Go loops, in one pass for the number
// types; false for the others (bool, complex: the caller copies and reduces).
func reduce3Go(dst, a, b []byte, dt rt.DataType, op rt.ReduceOp) bool {
	switch dt {
	case rt.Float32:
		reduce3Typed[float32](dst, a, b, op)
	case rt.Float64:
		reduce3Typed[float64](dst, a, b, op)
	case rt.Int32:
		reduce3Typed[int32](dst, a, b, op)
	case rt.Int64:
		reduce3Typed[int64](dst, a, b, op)
	case rt.Uint8:
		reduce3Typed[uint8](dst, a, b, op)
	case rt.Int8:
		reduce3Typed[int8](dst, a, b, op)
	case rt.Uint16:
		reduce3Typed[uint16](dst, a, b, op)
	case rt.Int16:
		reduce3Typed[int16](dst, a, b, op)
	case rt.Uint32:
		reduce3Typed[uint32](dst, a, b, op)
	case rt.Uint64:
		reduce3Typed[uint64](dst, a, b, op)
	default:
		return false
	}
	return true
}

func reduceTyped[T number](d, s []byte, op rt.ReduceOp) {
	switch op {
	case rt.Sum, rt.Avg:
		sumInto(view[T](d), view[T](s))
	case rt.Product:
		prodInto(view[T](d), view[T](s))
	case rt.Max:
		maxInto(view[T](d), view[T](s))
	case rt.Min:
		minInto(view[T](d), view[T](s))
	}
}

func reduceComplex[T complex64 | complex128](d, s []byte, op rt.ReduceOp) {
	if op == rt.Product {
		prodInto(view[T](d), view[T](s))
		return
	}
	sumInto(view[T](d), view[T](s))
}

// boolInto: SUM and MAX are logical OR, PRODUCT and MIN logical AND; any
// non-zero byte counts as true and results are 0 or 1.
func boolInto(d, s []byte, op rt.ReduceOp) {
	s = s[:len(d)]
	and := op == rt.Min || op == rt.Product
	for i := range d {
		a, b := d[i] != 0, s[i] != 0
		r := a || b
		if and {
			r = a && b
		}
		if r {
			d[i] = 1
		} else {
			d[i] = 0
		}
	}
}

// reduceInto computes dst = dst op src for len(dst) bytes of dtype dt.
func reduceInto(dst, src []byte, dt rt.DataType, op rt.ReduceOp) {
	if reduceC(dst, src, dt, op) {
		return
	}
	// A complex sum is a sum of its real and imaginary parts.
	if dt == rt.Complex64 && op != rt.Product && reduceC(dst, src, rt.Float32, rt.Sum) {
		return
	}
	if dt == rt.Complex128 && op != rt.Product && reduceC(dst, src, rt.Float64, rt.Sum) {
		return
	}
	switch dt {
	case rt.Bool:
		boolInto(dst, src, op)
	case rt.Uint8:
		reduceTyped[uint8](dst, src, op)
	case rt.Uint16:
		reduceTyped[uint16](dst, src, op)
	case rt.Uint32:
		reduceTyped[uint32](dst, src, op)
	case rt.Uint64:
		reduceTyped[uint64](dst, src, op)
	case rt.Int8:
		reduceTyped[int8](dst, src, op)
	case rt.Int16:
		reduceTyped[int16](dst, src, op)
	case rt.Int32:
		reduceTyped[int32](dst, src, op)
	case rt.Int64:
		reduceTyped[int64](dst, src, op)
	case rt.Float32:
		reduceTyped[float32](dst, src, op)
	case rt.Float64:
		reduceTyped[float64](dst, src, op)
	case rt.Complex64:
		reduceComplex[complex64](dst, src, op)
	case rt.Complex128:
		reduceComplex[complex128](dst, src, op)
	default:
		panic("host: reduceInto on " + dt.String())
	}
}

func divTyped[T number | complex64 | complex128](b []byte, n T) {
	v := view[T](b)
	for i := range v {
		v[i] /= n
	}
}

// finishAvg divides a SUM by n in place. Integers truncate toward zero.
func finishAvg(b []byte, dt rt.DataType, n int) {
	if n == 1 {
		return
	}
	switch dt {
	case rt.Uint8:
		divTyped(b, uint8(n))
	case rt.Uint16:
		divTyped(b, uint16(n))
	case rt.Uint32:
		divTyped(b, uint32(n))
	case rt.Uint64:
		divTyped(b, uint64(n))
	case rt.Int8:
		divTyped(b, int8(n))
	case rt.Int16:
		divTyped(b, int16(n))
	case rt.Int32:
		divTyped(b, int32(n))
	case rt.Int64:
		divTyped(b, int64(n))
	case rt.Float32:
		divTyped(b, float32(n))
	case rt.Float64:
		divTyped(b, float64(n))
	case rt.Complex64:
		divTyped(b, complex(float32(n), 0))
	case rt.Complex128:
		divTyped(b, complex(float64(n), 0))
	default:
		panic("host: finishAvg on " + dt.String())
	}
}

// supports is the host device's capability matrix.
func supports(dt rt.DataType, op rt.ReduceOp) error {
	switch {
	case !dt.Valid():
		return rt.Errorf("host: unknown data type %d", int32(dt))
	case !op.Valid():
		return rt.Errorf("host: unknown reduce op %d", int32(op))
	case dt.IsComplex() && (op == rt.Max || op == rt.Min):
		return rt.Errorf("host: %s is not ordered, %s is not defined for it", dt, op)
	case dt == rt.Bool && op == rt.Avg:
		return rt.Errorf("host: AVG is not defined for BOOL (SUM and MAX are OR, PRODUCT and MIN are AND)")
	}
	return nil
}

// widen converts count half values at src into float32 at dst.
func widen(dst []float32, src []uint16, dt rt.DataType) {
	src = src[:len(dst)]
	if dt == rt.BFloat16 {
		for i, h := range src {
			dst[i] = half.BF16ToF32(h)
		}
		return
	}
	for i, h := range src {
		dst[i] = half.F16ToF32(h)
	}
}

// narrow rounds float32 values to half values once.
func narrow(dst []uint16, src []float32, dt rt.DataType) {
	src = src[:len(dst)]
	if dt == rt.BFloat16 {
		for i, f := range src {
			dst[i] = half.F32ToBF16(f)
		}
		return
	}
	for i, f := range src {
		dst[i] = half.F32ToF16(f)
	}
}

func axpbyTyped[T number](alpha, beta float32, x, y []byte) {
	xs, ys := view[T](x), view[T](y)
	a, b := float64(alpha), float64(beta)
	for i := range ys {
		ys[i] = T(a*float64(xs[i]) + b*float64(ys[i]))
	}
}

// axpbyInt is axpbyTyped for an integer type: with whole factors (Paddle's
// TensorAdd passes 1 and 1) computed in the type itself, exact at any
// magnitude and wrapping on overflow as the type's own arithmetic does;
// other factors through float64.
func axpbyInt[T ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64](alpha, beta float32, x, y []byte) {
	whole := func(f float32) bool { return f == float32(math.Trunc(float64(f))) && math.Abs(float64(f)) < 1<<62 }
	if !whole(alpha) || !whole(beta) {
		axpbyTyped[T](alpha, beta, x, y)
		return
	}
	xs, ys := view[T](x), view[T](y)
	a, b := T(int64(alpha)), T(int64(beta)) // a negative factor wraps into an unsigned type, as its arithmetic needs
	for i := range ys {
		ys[i] = a*xs[i] + b*ys[i]
	}
}

func axpbyComplex[T complex64 | complex128](alpha, beta float32, x, y []byte) {
	xs, ys := view[T](x), view[T](y)
	a, b := T(complex(alpha, 0)), T(complex(beta, 0))
	for i := range ys {
		ys[i] = a*xs[i] + b*ys[i]
	}
}

// axpby: y = alpha*x + beta*y (Paddle's gradient accumulation), computed in
// float64 (float32 for the half types) and stored in the element type;
// integers with whole factors in their own type (axpbyInt).
func axpby(dt rt.DataType, alpha float32, x []byte, beta float32, y []byte) {
	switch dt {
	case rt.Float16, rt.BFloat16:
		xs, ys := view[uint16](x), view[uint16](y)
		for i := range ys {
			var xf, yf float32
			if dt == rt.Float16 {
				xf, yf = half.F16ToF32(xs[i]), half.F16ToF32(ys[i])
			} else {
				xf, yf = half.BF16ToF32(xs[i]), half.BF16ToF32(ys[i])
			}
			r := alpha*xf + beta*yf
			if dt == rt.Float16 {
				ys[i] = half.F32ToF16(r)
			} else {
				ys[i] = half.F32ToBF16(r)
			}
		}
	case rt.Float32:
		axpbyTyped[float32](alpha, beta, x, y)
	case rt.Float64:
		axpbyTyped[float64](alpha, beta, x, y)
	case rt.Uint8:
		axpbyInt[uint8](alpha, beta, x, y)
	case rt.Uint16:
		axpbyInt[uint16](alpha, beta, x, y)
	case rt.Uint32:
		axpbyInt[uint32](alpha, beta, x, y)
	case rt.Uint64:
		axpbyInt[uint64](alpha, beta, x, y)
	case rt.Int8:
		axpbyInt[int8](alpha, beta, x, y)
	case rt.Int16:
		axpbyInt[int16](alpha, beta, x, y)
	case rt.Int32:
		axpbyInt[int32](alpha, beta, x, y)
	case rt.Int64:
		axpbyInt[int64](alpha, beta, x, y)
	case rt.Complex64:
		axpbyComplex[complex64](alpha, beta, x, y)
	case rt.Complex128:
		axpbyComplex[complex128](alpha, beta, x, y)
	}
}
