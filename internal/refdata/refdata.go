// Package refdata makes exactly predictable collective inputs and computes
// the expected results independently (float64/complex128/int64), for the
// conformance suite and xccl-perf -c.
package refdata

import (
	"encoding/binary"
	"math"
	"math/cmplx"

	"github.com/xccl-project/xccl/internal/half"
	rt "github.com/xccl-project/xccl/runtime"
)

// Value is one element in Reference precision.
type Value struct {
	I int64      // BOOL and integer types
	C complex128 // real types use the real part
}

var halves = [...]float64{-2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2}

// Gen is the input of rank at element i: small non-zero values whose sums
// and products are exact in every type but the half types.
func Gen(dt rt.DataType, rank, i int) Value {
	h := rank*7 + i*13 + 3
	switch {
	case dt == rt.Bool:
		if (rank+i)%3 == 0 {
			return Value{I: 1}
		}
		return Value{}
	case dt.IsComplex():
		return Value{C: complex(halves[h%8], halves[(h/8+rank)%8])}
	case dt.IsFloat():
		return Value{C: complex(halves[h%8], 0)}
	case IsSigned(dt):
		v := int64(h%7) - 3
		if v == 0 {
			v = 2
		}
		return Value{I: v}
	default:
		return Value{I: int64(h%5) + 1}
	}
}

// IsSigned reports the signed integer types.
func IsSigned(dt rt.DataType) bool {
	return dt == rt.Int8 || dt == rt.Int16 || dt == rt.Int32 || dt == rt.Int64
}

// Wrap truncates x to the width of an integer type (two's complement).
func Wrap(dt rt.DataType, x int64) int64 {
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

// Put stores v as element i of b.
func Put(dt rt.DataType, b []byte, i int, v Value) {
	le := binary.LittleEndian
	switch dt {
	case rt.Bool, rt.Uint8, rt.Int8:
		b[i] = byte(v.I)
	case rt.Uint16, rt.Int16:
		le.PutUint16(b[2*i:], uint16(v.I))
	case rt.Uint32, rt.Int32:
		le.PutUint32(b[4*i:], uint32(v.I))
	case rt.Uint64, rt.Int64:
		le.PutUint64(b[8*i:], uint64(v.I))
	case rt.Float16:
		le.PutUint16(b[2*i:], half.F32ToF16(float32(real(v.C))))
	case rt.BFloat16:
		le.PutUint16(b[2*i:], half.F32ToBF16(float32(real(v.C))))
	case rt.Float32:
		le.PutUint32(b[4*i:], math.Float32bits(float32(real(v.C))))
	case rt.Float64:
		le.PutUint64(b[8*i:], math.Float64bits(real(v.C)))
	case rt.Complex64:
		le.PutUint32(b[8*i:], math.Float32bits(float32(real(v.C))))
		le.PutUint32(b[8*i+4:], math.Float32bits(float32(imag(v.C))))
	case rt.Complex128:
		le.PutUint64(b[16*i:], math.Float64bits(real(v.C)))
		le.PutUint64(b[16*i+8:], math.Float64bits(imag(v.C)))
	}
}

// Get loads element i of b.
func Get(dt rt.DataType, b []byte, i int) Value {
	le := binary.LittleEndian
	switch dt {
	case rt.Bool, rt.Uint8:
		return Value{I: int64(b[i])}
	case rt.Int8:
		return Value{I: int64(int8(b[i]))}
	case rt.Uint16:
		return Value{I: int64(le.Uint16(b[2*i:]))}
	case rt.Int16:
		return Value{I: int64(int16(le.Uint16(b[2*i:])))}
	case rt.Uint32:
		return Value{I: int64(le.Uint32(b[4*i:]))}
	case rt.Int32:
		return Value{I: int64(int32(le.Uint32(b[4*i:])))}
	case rt.Uint64, rt.Int64:
		return Value{I: int64(le.Uint64(b[8*i:]))}
	case rt.Float16:
		return Value{C: complex(float64(half.F16ToF32(le.Uint16(b[2*i:]))), 0)}
	case rt.BFloat16:
		return Value{C: complex(float64(half.BF16ToF32(le.Uint16(b[2*i:]))), 0)}
	case rt.Float32:
		return Value{C: complex(float64(math.Float32frombits(le.Uint32(b[4*i:]))), 0)}
	case rt.Float64:
		return Value{C: complex(math.Float64frombits(le.Uint64(b[8*i:])), 0)}
	case rt.Complex64:
		return Value{C: complex(float64(math.Float32frombits(le.Uint32(b[8*i:]))), float64(math.Float32frombits(le.Uint32(b[8*i+4:]))))}
	case rt.Complex128:
		return Value{C: complex(math.Float64frombits(le.Uint64(b[16*i:])), math.Float64frombits(le.Uint64(b[16*i+8:])))}
	}
	return Value{}
}

// Reference reduces the inputs of ranks 0..n-1 at element i.
func Reference(dt rt.DataType, op rt.ReduceOp, n int, in func(rank int) Value) Value {
	acc := in(0)
	for r := 1; r < n; r++ {
		v := in(r)
		switch {
		case dt == rt.Bool:
			if op == rt.Min || op == rt.Product {
				acc.I &= v.I
			} else {
				acc.I |= v.I
			}
		case dt.IsFloat() || dt.IsComplex():
			switch op {
			case rt.Sum, rt.Avg:
				acc.C += v.C
			case rt.Product:
				acc.C *= v.C
			case rt.Max:
				acc.C = complex(math.Max(real(acc.C), real(v.C)), 0)
			case rt.Min:
				acc.C = complex(math.Min(real(acc.C), real(v.C)), 0)
			}
		default:
			switch op {
			case rt.Sum, rt.Avg:
				acc.I += v.I
			case rt.Product:
				acc.I *= v.I
			case rt.Max:
				acc.I = max(acc.I, v.I)
			case rt.Min:
				acc.I = min(acc.I, v.I)
			}
		}
	}
	if dt != rt.Bool && !dt.IsFloat() && !dt.IsComplex() {
		acc.I = Wrap(dt, acc.I)
		if op == rt.Avg {
			if dt == rt.Uint64 {
				acc.I = int64(uint64(acc.I) / uint64(n))
			} else {
				acc.I /= int64(n) // wrapped sum, truncated toward zero
			}
		}
	}
	if op == rt.Avg && (dt.IsFloat() || dt.IsComplex()) {
		acc.C /= complex(float64(n), 0)
	}
	return acc
}

// CloseTo reports whether got matches want: integers exactly; float32 and
// float64 to their precision; FLOAT16/BFLOAT16 within one rounding of the
// exact result (one unit in the last place).
func CloseTo(dt rt.DataType, got, want Value) bool {
	switch {
	case dt == rt.Bool || (!dt.IsFloat() && !dt.IsComplex()):
		return got.I == want.I
	case dt == rt.Float16 || dt == rt.BFloat16:
		bits := 10.0
		if dt == rt.BFloat16 {
			bits = 7
		}
		w := real(want.C)
		_, e := math.Frexp(w)
		ulp := math.Ldexp(1, e-1-int(bits))
		if e-1 < -14 && dt == rt.Float16 {
			ulp = math.Ldexp(1, -24)
		}
		return math.Abs(real(got.C)-w) <= ulp
	case dt == rt.Float32 || dt == rt.Complex64:
		return cmplx.Abs(got.C-want.C) <= 1e-6*math.Max(1, cmplx.Abs(want.C))
	default:
		return cmplx.Abs(got.C-want.C) <= 1e-12*math.Max(1, cmplx.Abs(want.C))
	}
}
