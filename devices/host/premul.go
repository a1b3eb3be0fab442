package host

import (
	"unsafe"

	"github.com/xccl-project/xccl/internal/half"

	rt "github.com/xccl-project/xccl/runtime"
)

// CreatePreMulSum (rt.PreMulSummer): the host device needs nothing made;
// each operation scales its input when it runs (execPreMul).
func (c *Comm) CreatePreMulSum(*rt.PreMul) (uintptr, error) { return 0, nil }

// DestroyPreMulSum has nothing to undo.
func (c *Comm) DestroyPreMulSum(uintptr) error { return nil }

// execPreMul runs a pre-multiplied sum: this rank's input times its
// scalar (read now: a device scalar is host memory here, written by the
// work before this operation) into staging, then a SUM of that.
func (c *Comm) execPreMul(op *rt.Op) error {
	p := op.PreMul
	n := op.Count
	if op.Kind == rt.OpReduceScatter {
		n *= c.n
	}
	nb := n * op.Type.Size()
	c.preMu.Lock()
	defer c.preMu.Unlock()
	if cap(c.preBuf) < nb {
		c.preBuf = make([]byte, nb)
	}
	stage := c.preBuf[:nb]
	if nb > preKeep {
		defer func() { c.preBuf = nil }()
	}
	scale(stage, bytesAt(op.Send, nb), p.ScalarBytes(), op.Type)
	sum := *op
	sum.Send, sum.Red, sum.PreMul = unsafe.Pointer(unsafe.SliceData(stage)), rt.Sum, nil
	return c.exec(&sum)
}

// preKeep is the most staging a communicator keeps between pre-multiplied
// sums.
const preKeep = 4 << 20

// scale writes src times the scalar s (one element of dt) to dst.
func scale(dst, src, s []byte, dt rt.DataType) {
	switch dt {
	case rt.Uint8:
		scaleTyped[uint8](dst, src, s)
	case rt.Uint16:
		scaleTyped[uint16](dst, src, s)
	case rt.Uint32:
		scaleTyped[uint32](dst, src, s)
	case rt.Uint64:
		scaleTyped[uint64](dst, src, s)
	case rt.Int8:
		scaleTyped[int8](dst, src, s)
	case rt.Int16:
		scaleTyped[int16](dst, src, s)
	case rt.Int32:
		scaleTyped[int32](dst, src, s)
	case rt.Int64:
		scaleTyped[int64](dst, src, s)
	case rt.Float32:
		scaleTyped[float32](dst, src, s)
	case rt.Float64:
		scaleTyped[float64](dst, src, s)
	case rt.Float16, rt.BFloat16: // in float32, rounded once
		toF32, fromF32 := half.F16ToF32, half.F32ToF16
		if dt == rt.BFloat16 {
			toF32, fromF32 = half.BF16ToF32, half.F32ToBF16
		}
		k := toF32(view[uint16](s)[0])
		d, v := view[uint16](dst), view[uint16](src)
		for i := range d {
			d[i] = fromF32(toF32(v[i]) * k)
		}
	default:
		panic("host: pre-multiplied sum of " + dt.String()) // xccl refuses it first
	}
}

func scaleTyped[T number](dst, src, s []byte) {
	k := view[T](s)[0]
	d, v := view[T](dst), view[T](src)
	for i := range d {
		d[i] = v[i] * k
	}
}
