// Package runtime is the device contract of xccl: the data types and reduce
// operations every device understands, the error type that carries a C_Status,
// the interfaces a device implements, the device registry and the configuration
// read from XCCL_* environment variables.
package runtime

import "fmt"

// DataType mirrors Paddle's C_DataType; the numeric values are ABI.
type DataType int32

const (
	Undefined DataType = iota
	Bool
	Uint8
	Uint16
	Uint32
	Uint64
	Int8
	Int16
	Int32
	Int64
	Float16
	Float32
	Float64
	BFloat16
	Complex64
	Complex128
	numDataTypes
)

var dtypeNames = [...]string{"UNDEFINED", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
	"INT32", "INT64", "FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16", "COMPLEX64", "COMPLEX128"}

var dtypeSizes = [...]int{0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2, 8, 16}

// AllDataTypes lists every defined data type (UNDEFINED excluded).
func AllDataTypes() []DataType {
	out := make([]DataType, 0, numDataTypes-1)
	for d := Bool; d < numDataTypes; d++ {
		out = append(out, d)
	}
	return out
}

// Valid reports whether d is a defined data type other than UNDEFINED.
func (d DataType) Valid() bool { return d > Undefined && d < numDataTypes }

// Size is the element size in bytes (0 for an invalid type).
func (d DataType) Size() int {
	if d < 0 || d >= numDataTypes {
		return 0
	}
	return dtypeSizes[d]
}

func (d DataType) String() string {
	if d < 0 || d >= numDataTypes {
		return fmt.Sprintf("DataType(%d)", int32(d))
	}
	return dtypeNames[d]
}

// IsFloat reports floating types (real only).
func (d DataType) IsFloat() bool {
	return d == Float16 || d == Float32 || d == Float64 || d == BFloat16
}

// IsComplex reports complex types.
func (d DataType) IsComplex() bool { return d == Complex64 || d == Complex128 }

// ReduceOp mirrors Paddle's C_CCLReduceOp; the numeric values are ABI.
type ReduceOp int32

const (
	Sum ReduceOp = iota
	Avg
	Max
	Min
	Product
	numReduceOps
)

var opNames = [...]string{"SUM", "AVG", "MAX", "MIN", "PRODUCT"}

// AllReduceOps lists every reduce operation.
func AllReduceOps() []ReduceOp { return []ReduceOp{Sum, Avg, Max, Min, Product} }

// Valid reports whether o is a defined reduce operation (a communicator's
// pre-multiplied sums are not: see IsPreMulSum).
func (o ReduceOp) Valid() bool { return o >= Sum && o < numReduceOps }

// FirstPreMulSum is the first value a communicator gives its
// pre-multiplied sums (ncclRedOpCreatePreMulSum's ops); a communicator
// has at most MaxPreMulSums at once.
const (
	FirstPreMulSum ReduceOp = 64
	MaxPreMulSums           = 192
)

// IsPreMulSum reports whether o is in the range of pre-multiplied sums
// (whether some communicator made it is that communicator's to say).
func (o ReduceOp) IsPreMulSum() bool { return o >= FirstPreMulSum && o < FirstPreMulSum+MaxPreMulSums }

func (o ReduceOp) String() string {
	if o.IsPreMulSum() {
		return fmt.Sprintf("PREMUL_SUM(%d)", int32(o))
	}
	if !o.Valid() {
		return fmt.Sprintf("ReduceOp(%d)", int32(o))
	}
	return opNames[o]
}
