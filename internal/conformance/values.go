// Package conformance is the shared conformance suite: every collective ×
// every data type × every reduce op a device supports × in-place and
// out-of-place × rank counts × element counts, checked against a reference
// computed independently in float64/complex128/int64. Every device runs it.
package conformance

import (
	"encoding/binary"
	"math"
	"math/cmplx"

	"github.com/xccl-project/xccl/devices/host"
	rt "github.com/xccl-project/xccl/runtime"
)

// value is one element in reference precision.
type value struct {
	i int64      // BOOL and integer types
	c complex128 // real types use the real part
}

var halves = [...]float64{-2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2}

// gen is the input of rank at element i: small non-zero values whose sums
// and products are exact in every type but the half types.
func gen(dt rt.DataType, rank, i int) value {
	h := rank*7 + i*13 + 3
	switch {
	case dt == rt.Bool:
		if (rank+i)%3 == 0 {
			return value{i: 1}
		}
		return value{}
	case dt.IsComplex():
		return value{c: complex(halves[h%8], halves[(h/8+rank)%8])}
	case dt.IsFloat():
		return value{c: complex(halves[h%8], 0)}
	case isSigned(dt):
		v := int64(h%7) - 3
		if v == 0 {
			v = 2
		}
		return value{i: v}
	default:
		return value{i: int64(h%5) + 1}
	}
}

func isSigned(dt rt.DataType) bool {
	return dt == rt.Int8 || dt == rt.Int16 || dt == rt.Int32 || dt == rt.Int64
}

// wrap truncates x to the width of an integer type (two's complement).
func wrap(dt rt.DataType, x int64) int64 {
	switch dt {
	case rt.Int8:
		return int64(int8(x))
	case rt.Int16:
		return int64(int16(x))
	case rt.Int32:
		return int64(int32(x))
	case rt.Uint8:
		return int64(uint8(x))
	case rt.Uint16:
		return int64(uint16(x))
	case rt.Uint32:
		return int64(uint32(x))
	}
	return x
}

func put(dt rt.DataType, b []byte, i int, v value) {
	le := binary.LittleEndian
	switch dt {
	case rt.Bool, rt.Uint8, rt.Int8:
		b[i] = byte(v.i)
	case rt.Uint16, rt.Int16:
		le.PutUint16(b[2*i:], uint16(v.i))
	case rt.Uint32, rt.Int32:
		le.PutUint32(b[4*i:], uint32(v.i))
	case rt.Uint64, rt.Int64:
		le.PutUint64(b[8*i:], uint64(v.i))
	case rt.Float16:
		le.PutUint16(b[2*i:], host.F32ToF16(float32(real(v.c))))
	case rt.BFloat16:
		le.PutUint16(b[2*i:], host.F32ToBF16(float32(real(v.c))))
	case rt.Float32:
		le.PutUint32(b[4*i:], math.Float32bits(float32(real(v.c))))
	case rt.Float64:
		le.PutUint64(b[8*i:], math.Float64bits(real(v.c)))
	case rt.Complex64:
		le.PutUint32(b[8*i:], math.Float32bits(float32(real(v.c))))
		le.PutUint32(b[8*i+4:], math.Float32bits(float32(imag(v.c))))
	case rt.Complex128:
		le.PutUint64(b[16*i:], math.Float64bits(real(v.c)))
		le.PutUint64(b[16*i+8:], math.Float64bits(imag(v.c)))
	}
}

func get(dt rt.DataType, b []byte, i int) value {
	le := binary.LittleEndian
	switch dt {
	case rt.Bool, rt.Uint8:
		return value{i: int64(b[i])}
	case rt.Int8:
		return value{i: int64(int8(b[i]))}
	case rt.Uint16:
		return value{i: int64(le.Uint16(b[2*i:]))}
	case rt.Int16:
		return value{i: int64(int16(le.Uint16(b[2*i:])))}
	case rt.Uint32:
		return value{i: int64(le.Uint32(b[4*i:]))}
	case rt.Int32:
		return value{i: int64(int32(le.Uint32(b[4*i:])))}
	case rt.Uint64, rt.Int64:
		return value{i: int64(le.Uint64(b[8*i:]))}
	case rt.Float16:
		return value{c: complex(float64(host.F16ToF32(le.Uint16(b[2*i:]))), 0)}
	case rt.BFloat16:
		return value{c: complex(float64(host.BF16ToF32(le.Uint16(b[2*i:]))), 0)}
	case rt.Float32:
		return value{c: complex(float64(math.Float32frombits(le.Uint32(b[4*i:]))), 0)}
	case rt.Float64:
		return value{c: complex(math.Float64frombits(le.Uint64(b[8*i:])), 0)}
	case rt.Complex64:
		return value{c: complex(float64(math.Float32frombits(le.Uint32(b[8*i:]))), float64(math.Float32frombits(le.Uint32(b[8*i+4:]))))}
	case rt.Complex128:
		return value{c: complex(math.Float64frombits(le.Uint64(b[16*i:])), math.Float64frombits(le.Uint64(b[16*i+8:])))}
	}
	return value{}
}

// reference reduces the inputs of ranks 0..n-1 at element i.
func reference(dt rt.DataType, op rt.ReduceOp, n int, in func(rank int) value) value {
	acc := in(0)
	for r := 1; r < n; r++ {
		v := in(r)
		switch {
		case dt == rt.Bool:
			if op == rt.Min || op == rt.Product {
				acc.i &= v.i
			} else {
				acc.i |= v.i
			}
		case dt.IsFloat() || dt.IsComplex():
			switch op {
			case rt.Sum, rt.Avg:
				acc.c += v.c
			case rt.Product:
				acc.c *= v.c
			case rt.Max:
				acc.c = complex(math.Max(real(acc.c), real(v.c)), 0)
			case rt.Min:
				acc.c = complex(math.Min(real(acc.c), real(v.c)), 0)
			}
		default:
			switch op {
			case rt.Sum, rt.Avg:
				acc.i += v.i
			case rt.Product:
				acc.i *= v.i
			case rt.Max:
				acc.i = max(acc.i, v.i)
			case rt.Min:
				acc.i = min(acc.i, v.i)
			}
		}
	}
	if dt != rt.Bool && !dt.IsFloat() && !dt.IsComplex() {
		acc.i = wrap(dt, acc.i)
		if op == rt.Avg {
			if dt == rt.Uint64 {
				acc.i = int64(uint64(acc.i) / uint64(n))
			} else {
				acc.i /= int64(n) // wrapped sum, truncated toward zero
			}
		}
	}
	if op == rt.Avg && (dt.IsFloat() || dt.IsComplex()) {
		acc.c /= complex(float64(n), 0)
	}
	return acc
}

// close reports whether got matches want: integers exactly; float32 and
// float64 to their precision; FLOAT16/BFLOAT16 within one rounding of the
// exact result (one unit in the last place).
func closeTo(dt rt.DataType, got, want value) bool {
	switch {
	case dt == rt.Bool || (!dt.IsFloat() && !dt.IsComplex()):
		return got.i == want.i
	case dt == rt.Float16 || dt == rt.BFloat16:
		bits := 10.0
		if dt == rt.BFloat16 {
			bits = 7
		}
		w := real(want.c)
		_, e := math.Frexp(w)
		ulp := math.Ldexp(1, e-1-int(bits))
		if e-1 < -14 && dt == rt.Float16 {
			ulp = math.Ldexp(1, -24)
		}
		return math.Abs(real(got.c)-w) <= ulp
	case dt == rt.Float32 || dt == rt.Complex64:
		return cmplx.Abs(got.c-want.c) <= 1e-6*math.Max(1, cmplx.Abs(want.c))
	default:
		return cmplx.Abs(got.c-want.c) <= 1e-12*math.Max(1, cmplx.Abs(want.c))
	}
}
