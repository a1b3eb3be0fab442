package host

import rt "github.com/xccl-project/xccl/runtime"

// allReduceRing: reduce-scatter around the ring (after n-1 steps rank r holds
// the reduced chunk r), then all-gather those chunks around the ring. The
// send buffer is read where it is: no copy into recv first.
func (c *Comm) allReduceRing(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	es := dt.Size()
	name := c.opName("AllReduce", len(recv))
	if err := c.ringReduceScatter(send, recv, nil, es, dt, op, name); err != nil {
		return err
	}
	if op == rt.Avg {
		finishAvg(c.chunk(recv, es, c.rank), dt, c.n)
	}
	return c.ringAllGather(recv, es, name)
}

// ringReduceScatter leaves in chunk r of dst, on rank r, chunk r of every
// rank's src reduced: at step s it sends chunk r-s-1 (at step 0 from src,
// later from dst, where the step before reduced it) and receives chunk
// r-s-2 into dst reduced with its src chunk. src and dst may be one buffer.
// mine, if not nil, gets chunk r instead of dst (es-sized units: chunks of
// whole elements, or of whole blocks for a reduce-scatter).
func (c *Comm) ringReduceScatter(src, dst, mine []byte, es int, dt rt.DataType, op rt.ReduceOp, name label) error {
	into := func(k int) []byte {
		if k == c.rank && mine != nil {
			return mine
		}
		return c.chunk(dst, es, k)
	}
	for s := 0; s < c.n-1; s++ {
		k := c.mod(c.rank - s - 1)
		out := into(k)
		if s == 0 {
			out = c.chunk(src, es, k)
		}
		k = c.mod(c.rank - s - 2)
		in := recvReduceFrom(c.left(), into(k), c.chunk(src, es, k), dt, op)
		if err := c.progress(name, sendTo(c.right(), out), in); err != nil {
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
