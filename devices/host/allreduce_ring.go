package host

import rt "github.com/xccl-project/xccl/runtime"

// allReduceRing: reduce-scatter around the ring (after n-1 steps rank r holds
// the reduced chunk r), then all-gather those chunks around the ring.
func (c *Comm) allReduceRing(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	copyIfDistinct(recv, send)
	es := dt.Size()
	name := c.opName("AllReduce", len(recv))
	if err := c.ringReduceScatter(recv, es, dt, op, name); err != nil {
		return err
	}
	if op == rt.Avg {
		finishAvg(c.chunk(recv, es, c.rank), dt, c.n)
	}
	return c.ringAllGather(recv, es, name)
}

// ringReduceScatter reduces buf in place so that rank r ends up holding the
// fully reduced chunk r: at step s it sends chunk r-s-1 and reduces the
// incoming chunk r-s-2 into its own copy.
func (c *Comm) ringReduceScatter(buf []byte, es int, dt rt.DataType, op rt.ReduceOp, name label) error {
	for s := 0; s < c.n-1; s++ {
		out := c.chunk(buf, es, c.mod(c.rank-s-1))
		in := c.chunk(buf, es, c.mod(c.rank-s-2))
		if err := c.progress(name, sendTo(c.right(), out), recvReduce(c.left(), in, dt, op)); err != nil {
			return err
		}
	}
	return nil
}

// ringAllGather spreads chunk r of every rank r to all: at step s it sends
// chunk r-s and receives chunk r-s-1.
func (c *Comm) ringAllGather(buf []byte, es int, name label) error {
	for s := 0; s < c.n-1; s++ {
		out := c.chunk(buf, es, c.mod(c.rank-s))
		in := c.chunk(buf, es, c.mod(c.rank-s-1))
		if err := c.progress(name, sendTo(c.right(), out), recvFrom(c.left(), in)); err != nil {
			return err
		}
	}
	return nil
}
