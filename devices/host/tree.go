package host

import rt "github.com/xccl-project/xccl/runtime"

// Binomial trees rooted at root, over ranks relative to it (vr = rank-root).

// broadcast: receive from the parent, then send to every child at once.
func (c *Comm) broadcast(buf []byte, root int) error {
	if len(buf) == 0 || c.n == 1 {
		return nil
	}
	if c.pending.op != nil {
		c.count(statDirect, 1)
		return c.broadcastDirect(buf, root)
	}
	if ran, err := c.singleCopy(len(buf), cmaMaxGather, buf, buf, c.opName("Broadcast", len(buf)),
		func() error { return c.broadcastCMA(buf, root) }); ran {
		return err
	}
	c.count(statBroadcastTree, 1)
	name := c.opName("Broadcast", len(buf))
	vr := c.mod(c.rank - root)
	mask := 1
	for mask < c.n {
		if vr&mask != 0 {
			if err := c.progress(name, recvFrom(c.mod(c.rank-mask), buf)); err != nil {
				return err
			}
			break
		}
		mask <<= 1
	}
	xs := c.xfers(0, 2*c.n)
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < c.n {
			xs = append(xs, sendTo(c.mod(c.rank+mask), buf))
		}
	}
	return c.progress(name, xs...)
}

// reduceTree: reduce the children's partial results into an accumulator,
// then pass it to the parent. Only the root writes recv.
func (c *Comm) reduceTree(send, recv []byte, dt rt.DataType, op rt.ReduceOp, root int) error {
	name := c.opName("Reduce", len(send))
	acc := recv
	if c.rank != root {
		acc = c.buf(2, len(send))
	}
	copyIfDistinct(acc, send)
	vr := c.mod(c.rank - root)
	for mask := 1; mask < c.n; mask <<= 1 {
		if vr&mask != 0 {
			return c.progress(name, sendTo(c.mod(c.rank-mask), acc))
		}
		if vr+mask < c.n {
			tmp := c.buf(1, len(send))
			if err := c.progress(name, recvFrom(c.mod(c.rank+mask), tmp)); err != nil {
				return err
			}
			reduceInto(acc, tmp, dt, op)
		}
	}
	if op == rt.Avg {
		finishAvg(acc, dt, c.n)
	}
	return nil
}
