package host

import (
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// allGather: own block into place, then the ring all-gather. In place when
// send is recv's own block (NCCL's convention).
func (c *Comm) allGather(send, recv []byte) error {
	if len(send) == 0 {
		return nil
	}
	nb := len(send)
	copyIfDistinct(recv[c.rank*nb:(c.rank+1)*nb], send)
	if c.n == 1 {
		return nil
	}
	if c.pending.op != nil {
		c.count(statDirect, 1)
		return c.allGatherDirect(send, recv)
	}
	if ran, err := c.singleCopy(len(recv), cmaMaxGather, send, recv, c.opName("AllGather", nb),
		func() error { return c.allGatherCMA(send, recv) }); ran {
		return err
	}
	c.count(statAllGatherRing, 1)
	return c.ringAllGather(recv, nb, c.opName("AllGather", nb))
}

// reduceScatterRing reduces a scratch copy of send around the ring, then
// copies this rank's block out (in place when recv is send's own block).
func (c *Comm) reduceScatterRing(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	nb := len(recv)
	work := c.buf(2, len(send)) // the other ranks' blocks on their way
	if err := c.ringReduceScatter(send, work, recv, nb, dt, op, c.opName("ReduceScatter", nb)); err != nil {
		return err
	}
	if op == rt.Avg {
		finishAvg(recv, dt, c.n)
	}
	return nil
}

// allToAll exchanges with every peer at once; the rings keep it deadlock
// free. Counts and types may differ per peer; the self block is a copy.
func (c *Comm) allToAll(op *rt.Op) error {
	c.count(statAllToAllPairs, 1)
	xs := c.xfers(0, 2*c.n)
	total := 0
	for p := 0; p < c.n; p++ {
		sb := bytesAt(op.SendBufs[p], op.SendCounts[p]*op.SendTypes[p].Size())
		rb := bytesAt(op.RecvBufs[p], op.RecvCounts[p]*op.RecvTypes[p].Size())
		total += len(sb)
		if p == c.rank {
			if len(sb) > 0 && (len(rb) == 0 || unsafe.Pointer(&rb[0]) != unsafe.Pointer(&sb[0])) {
				copy(rb, sb)
			}
			continue
		}
		if len(sb) > 0 {
			xs = append(xs, sendTo(p, sb))
		}
		if len(rb) > 0 {
			xs = append(xs, recvFrom(p, rb))
		}
	}
	return c.progress(c.opName("AllToAll", total), xs...)
}
