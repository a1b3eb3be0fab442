package conformance

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/xccl-project/xccl/internal/refdata"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// preMulScalar is rank r's scalar: exact products and sums in every type.
func preMulScalar(dt rt.DataType, r int) refdata.Value {
	if dt.IsFloat() {
		return refdata.Value{C: complex(0.5*float64(r+1), 0)}
	}
	return refdata.Value{I: int64(r + 2)}
}

// preMulRef is the sum over n ranks of scalar(q) times q's input from
// element base on.
func preMulRef(dt rt.DataType, n, base, count int, scalar func(q int) refdata.Value) []byte {
	return expected(dt, count, func(i int) refdata.Value {
		return refdata.Reference(dt, rt.Sum, n, func(q int) refdata.Value {
			s, v := scalar(q), refdata.Gen(dt, q, base+i)
			if dt.IsFloat() {
				return refdata.Value{C: s.C * v.C}
			}
			return refdata.Value{I: s.I * v.I}
		})
	})
}

// PreMulSupported says whether comms make pre-multiplied sums of dt: every
// rank says the same, and a refusal is C_ERROR.
func PreMulSupported(t *testing.T, comms []*xccl.Comm, dt rt.DataType) bool {
	t.Helper()
	errs := make([]error, len(comms))
	for r, c := range comms {
		s := make([]byte, 16)
		refdata.Put(dt, s, 0, preMulScalar(dt, r))
		op, err := c.CreatePreMulSum(unsafe.Pointer(&s[0]), dt, xccl.ScalarHostImmediate)
		if err == nil {
			err = c.DestroyPreMulSum(op)
		} else if rt.StatusOf(err) != rt.StatusError {
			t.Fatalf("rank %d: CreatePreMulSum(%v) = %v, want C_ERROR where refused", r, dt, err)
		}
		errs[r] = err
	}
	for r := range comms {
		if (errs[r] == nil) != (errs[0] == nil) {
			t.Fatalf("CreatePreMulSum(%v): rank 0 %v, rank %d %v", dt, errs[0], r, errs[r])
		}
	}
	return errs[0] == nil
}

// preMulSums: AllReduce, Reduce, ReduceScatter, a group and a fused batch
// with pre-multiplied sums (ncclRedOpCreatePreMulSum), each rank its own
// scalar. A device scalar is read when the call runs (it changes after
// the op is made); a host-immediate one when the op is made (the variable
// changes after, unseen). Then the misuses: another type, a destroyed op.
func preMulSums(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int) {
	n, es := len(comms), dt.Size()
	made := func(q int) refdata.Value { return preMulScalar(dt, q) }
	later := func(q int) refdata.Value { return preMulScalar(dt, q+n) } // what a device scalar holds at run time
	type result struct{ ar, rd, rs, g0, g1, g2, f0, f1 []byte }
	res := make([]result, n)
	ops := make([][2]rt.ReduceOp, n)
	root := n - 1
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		dev, imm := make([]byte, 16), make([]byte, 16)
		refdata.Put(dt, dev, 0, made(r))
		refdata.Put(dt, imm, 0, made(r))
		opDev, err := c.CreatePreMulSum(unsafe.Pointer(&dev[0]), dt, xccl.ScalarDevice)
		if err != nil {
			return err
		}
		opImm, err := c.CreatePreMulSum(unsafe.Pointer(&imm[0]), dt, xccl.ScalarHostImmediate)
		if err != nil {
			return err
		}
		ops[r] = [2]rt.ReduceOp{opDev, opImm}
		refdata.Put(dt, dev, 0, later(r))
		refdata.Put(dt, imm, 0, later(r)) // unseen: read when the op was made
		x := &res[r]

		in := fill(dt, r, count)
		x.ar = make([]byte, count*es)
		if err := c.AllReduce(ptr(in), ptr(x.ar), count, dt, opDev, 0); err != nil {
			return fmt.Errorf("AllReduce: %w", err)
		}
		x.rd = fill(dt, r, count) // in place
		if err := c.Reduce(ptr(x.rd), ptr(x.rd), count, dt, opImm, root, 0); err != nil {
			return fmt.Errorf("Reduce: %w", err)
		}
		whole := fill(dt, r, count*n)
		x.rs = whole[r*count*es : (r+1)*count*es] // in place
		if err := c.ReduceScatter(ptr(whole), ptr(x.rs), count, dt, opDev, 0); err != nil {
			return fmt.Errorf("ReduceScatter: %w", err)
		}
		var g xccl.Group
		g.Start()
		x.g0, x.g1 = fillAt(dt, r, 100, count), fillAt(dt, r, 200, 3)
		if err := c.Do(&g, rt.Op{Kind: rt.OpAllReduce, Send: ptr(x.g0), Recv: ptr(x.g0), Count: count, Type: dt, Red: opImm}); err != nil {
			return err
		}
		if err := c.Do(&g, rt.Op{Kind: rt.OpAllReduce, Send: ptr(x.g1), Recv: ptr(x.g1), Count: 3, Type: dt, Red: opDev}); err != nil {
			return err
		}
		if err := g.End(); err != nil {
			return fmt.Errorf("group: %w", err)
		}
		// an op destroyed while an open group holds a call with it (as
		// torch's NCCL backend destroys its ops once the call returned)
		gs := make([]byte, 16)
		refdata.Put(dt, gs, 0, made(r))
		opG, err := c.CreatePreMulSum(unsafe.Pointer(&gs[0]), dt, xccl.ScalarHostImmediate)
		if err != nil {
			return err
		}
		var g2 xccl.Group
		g2.Start()
		x.g2 = fillAt(dt, r, 500, count)
		if err := c.Do(&g2, rt.Op{Kind: rt.OpAllReduce, Send: ptr(x.g2), Recv: ptr(x.g2), Count: count, Type: dt, Red: opG}); err != nil {
			return err
		}
		if err := c.DestroyPreMulSum(opG); err != nil {
			return fmt.Errorf("DestroyPreMulSum inside a group: %w", err)
		}
		if err := g2.End(); err != nil {
			return fmt.Errorf("group with the op destroyed: %w", err)
		}
		x.f0, x.f1 = fillAt(dt, r, 300, count), fillAt(dt, r, 400, 5)
		if err := c.AllReduceFused([]unsafe.Pointer{ptr(x.f0), ptr(x.f1)}, []unsafe.Pointer{ptr(x.f0), ptr(x.f1)},
			[]int{count, 5}, dt, opImm, 0); err != nil {
			return fmt.Errorf("AllReduceFused: %w", err)
		}
		return nil
	})
	name := fmt.Sprintf("pre-multiplied sum %v/count=%d", dt, count)
	for r := 0; r < n; r++ {
		x := res[r]
		check(t, dt, fmt.Sprintf("AllReduce %s (device scalar) rank %d", name, r), x.ar, preMulRef(dt, n, 0, count, later))
		if r == root {
			check(t, dt, fmt.Sprintf("Reduce %s (host scalar) root %d", name, r), x.rd, preMulRef(dt, n, 0, count, made))
		}
		check(t, dt, fmt.Sprintf("ReduceScatter %s rank %d", name, r), x.rs, preMulRef(dt, n, r*count, count, later))
		check(t, dt, fmt.Sprintf("grouped %s call 0 rank %d", name, r), x.g0, preMulRef(dt, n, 100, count, made))
		check(t, dt, fmt.Sprintf("grouped %s call 1 rank %d", name, r), x.g1, preMulRef(dt, n, 200, 3, later))
		check(t, dt, fmt.Sprintf("grouped %s, op destroyed before the group's end, rank %d", name, r), x.g2, preMulRef(dt, n, 500, count, made))
		check(t, dt, fmt.Sprintf("AllReduceFused %s buffer 0 rank %d", name, r), x.f0, preMulRef(dt, n, 300, count, made))
		check(t, dt, fmt.Sprintf("AllReduceFused %s buffer 1 rank %d", name, r), x.f1, preMulRef(dt, n, 400, 5, made))
	}
	// Misuses, refused before anything runs (every rank alike, so no rank waits).
	other := rt.Float64
	if dt == rt.Float64 {
		other = rt.Int32
	}
	for r, c := range comms {
		b := make([]byte, 64)
		if err := c.AllReduce(ptr(b), ptr(b), 1, other, ops[r][0], 0); rt.StatusOf(err) != rt.StatusError {
			t.Fatalf("rank %d: a %v pre-multiplied sum on %v = %v, want C_ERROR", r, dt, other, err)
		}
		for _, op := range ops[r] {
			if err := c.DestroyPreMulSum(op); err != nil {
				t.Fatalf("rank %d: DestroyPreMulSum(%v) = %v", r, op, err)
			}
		}
		if err := c.AllReduce(ptr(b), ptr(b), 1, dt, ops[r][1], 0); rt.StatusOf(err) != rt.StatusError {
			t.Fatalf("rank %d: an all-reduce with a destroyed op = %v, want C_ERROR", r, err)
		}
		if err := c.DestroyPreMulSum(ops[r][1]); rt.StatusOf(err) != rt.StatusError {
			t.Fatalf("rank %d: a second DestroyPreMulSum = %v, want C_ERROR", r, err)
		}
	}
}
