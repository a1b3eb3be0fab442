package xccl

import (
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// ScalarResidence says where a pre-multiplied sum's scalar lives, as
// ncclScalarResidence_t (the values are ABI).
type ScalarResidence int32

const (
	// ScalarDevice: device memory, read when each operation runs.
	ScalarDevice ScalarResidence = 0
	// ScalarHostImmediate: host memory, read once, by CreatePreMulSum.
	ScalarHostImmediate ScalarResidence = 1
)

// CreatePreMulSum makes a reduce op for this communicator, as
// ncclRedOpCreatePreMulSum: each rank multiplies its input by its own
// scalar (of type dt), then the products are summed. The op is valid in
// AllReduce, Reduce and ReduceScatter of dt on this communicator until
// DestroyPreMulSum. On the host device every type but BOOL and the complex
// ones; on a vendor library, where it has <ccl>RedOpCreatePreMulSum.
func (c *Comm) CreatePreMulSum(scalar unsafe.Pointer, dt rt.DataType, res ScalarResidence) (rt.ReduceOp, error) {
	if err := c.closed("RedOpCreatePreMulSum"); err != nil {
		return 0, err
	}
	switch {
	case scalar == nil:
		return 0, rt.Errorf("RedOpCreatePreMulSum: scalar is NULL")
	case !dt.Valid():
		return 0, rt.Errorf("RedOpCreatePreMulSum: unknown data type %d", int32(dt))
	case dt == rt.Bool || dt.IsComplex():
		return 0, rt.Errorf("RedOpCreatePreMulSum: %v has no pre-multiplied sum (integer and floating types do)", dt)
	case res != ScalarDevice && res != ScalarHostImmediate:
		return 0, rt.Errorf("RedOpCreatePreMulSum: unknown scalar residence %d (0: device memory, 1: host immediate)", int32(res))
	}
	if err := c.supports(dt, rt.Sum); err != nil {
		return 0, rt.Errorf("RedOpCreatePreMulSum(%v): %v", dt, err)
	}
	ps, ok := c.c.(rt.PreMulSummer)
	if !ok {
		return 0, rt.Errorf("RedOpCreatePreMulSum: the %s communicator has no pre-multiplied sum", c.c.Device())
	}
	p := &rt.PreMul{Type: dt, Device: res == ScalarDevice, Scalar: scalar}
	if !p.Device {
		copy(p.Value[:], unsafe.Slice((*byte)(scalar), dt.Size()))
		p.Scalar = nil
	}
	c.pmMu.Lock()
	defer c.pmMu.Unlock()
	if c.pmGone {
		return 0, rt.Errorf("RedOpCreatePreMulSum: the communicator was destroyed or aborted")
	}
	i := 0
	for i < len(c.pms) && c.pms[i] != nil {
		i++
	}
	if i == len(c.pms) {
		return 0, rt.Errorf("RedOpCreatePreMulSum: this communicator has %d pre-multiplied sums already (destroy one first)", len(c.pms))
	}
	h, err := ps.CreatePreMulSum(p)
	if err != nil {
		return 0, err
	}
	p.Handle = h
	c.pms[i] = p
	return rt.FirstPreMulSum + rt.ReduceOp(i), nil
}

// DestroyPreMulSum undoes CreatePreMulSum, as ncclRedOpDestroy: the
// operations already issued with op keep it (those queued in an open group
// too); later ones are refused.
func (c *Comm) DestroyPreMulSum(op rt.ReduceOp) error {
	c.pmMu.Lock()
	defer c.pmMu.Unlock()
	if c.pmGone || c.released.Load() {
		return rt.Errorf("RedOpDestroy: the communicator was destroyed or aborted")
	}
	p := c.preMulLocked(op)
	if p == nil {
		return rt.Errorf("RedOpDestroy: reduce op %d is not a pre-multiplied sum of this communicator", int32(op))
	}
	c.pms[op-rt.FirstPreMulSum] = nil
	if c.pmUses[p] > 0 { // a group holds a call with it: the library's op goes when that ran
		if c.pmDoomed == nil {
			c.pmDoomed = map[*rt.PreMul]bool{}
		}
		c.pmDoomed[p] = true
		return nil
	}
	return c.destroyLibOp(p)
}

// destroyLibOp undoes the library's op of p (under pmMu; nothing once the
// communicator went: its destroy took the library's ops).
func (c *Comm) destroyLibOp(p *rt.PreMul) error {
	if p.Handle == 0 || c.pmGone {
		return nil
	}
	return c.c.(rt.PreMulSummer).DestroyPreMulSum(p.Handle)
}

// holdPreMul counts a use of p queued in a group, which calls the library
// at its End: NCCL reads an op when the call is made, so a DestroyPreMulSum
// meanwhile (allowed once the call returned, as ncclRedOpDestroy is) leaves
// the library's op until releasePreMul.
func (c *Comm) holdPreMul(p *rt.PreMul) {
	c.pmMu.Lock()
	if c.pmUses == nil {
		c.pmUses = map[*rt.PreMul]int{}
	}
	c.pmUses[p]++
	c.pmMu.Unlock()
}

// releasePreMul ends a use holdPreMul counted, destroying the library's op
// after the last one where DestroyPreMulSum came meanwhile.
func (c *Comm) releasePreMul(p *rt.PreMul) {
	c.pmMu.Lock()
	defer c.pmMu.Unlock()
	if c.pmUses[p]--; c.pmUses[p] > 0 {
		return
	}
	delete(c.pmUses, p)
	if c.pmDoomed[p] {
		delete(c.pmDoomed, p)
		_ = c.destroyLibOp(p) // nobody to tell: the call that destroyed it returned
	}
}

func (c *Comm) preMulLocked(op rt.ReduceOp) *rt.PreMul {
	if !op.IsPreMulSum() {
		return nil
	}
	return c.pms[op-rt.FirstPreMulSum]
}

// preMul is the pre-multiplied sum op names for a call of dt, or why not.
func (c *Comm) preMul(k rt.OpKind, op rt.ReduceOp, dt rt.DataType) (*rt.PreMul, error) {
	c.pmMu.Lock()
	p := c.preMulLocked(op)
	c.pmMu.Unlock()
	switch {
	case p == nil:
		return nil, rt.Errorf("%v: unknown reduce op %d (not a pre-multiplied sum of this communicator)", k, int32(op))
	case p.Type != dt:
		return nil, rt.Errorf("%v: reduce op %v is a pre-multiplied sum of %v, the call is of %v", k, op, p.Type, dt)
	}
	return p, nil
}

// closePreMulSums forgets every pre-multiplied sum (Destroy, Abort): the
// library's destroy frees its own.
func (c *Comm) closePreMulSums() {
	c.pmMu.Lock()
	c.pmGone = true
	clear(c.pms[:])
	clear(c.pmDoomed)
	c.pmMu.Unlock()
}
