package host

import rt "github.com/xccl-project/xccl/runtime"

// allReduceDirect: every rank sends its buffer to every peer, receives every
// peer's, and reduces the n contributions in rank order, so every rank gets
// bit-identical results.
func (c *Comm) allReduceDirect(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	nb := len(recv)
	tmp := c.buf(2, nb*c.n)
	copy(tmp[c.rank*nb:], send)
	xs := make([]*xfer, 0, 2*(c.n-1))
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			xs = append(xs, sendTo(p, send), recvFrom(p, tmp[p*nb:(p+1)*nb]))
		}
	}
	if err := c.progress(c.opName("AllReduce", nb), xs...); err != nil {
		return err
	}
	copy(recv, tmp[:nb])
	for p := 1; p < c.n; p++ {
		reduceInto(recv, tmp[p*nb:(p+1)*nb], dt, op)
	}
	if op == rt.Avg {
		finishAvg(recv, dt, c.n)
	}
	return nil
}
