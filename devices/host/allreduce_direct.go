package host

import rt "github.com/xccl-project/xccl/runtime"

// allReduceDirect: every rank sends its buffer to every peer, receives every
// peer's, and reduces the n contributions in rank order, so every rank gets
// bit-identical results. When exec left the call's fingerprint pending, it
// travels in front of the data (see agree.go): one round in all.
func (c *Comm) allReduceDirect(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	nb := len(recv)
	tmp := c.buf(2, nb*c.n)
	copy(tmp[c.rank*nb:], send)
	xs := c.xfers(0, 2*(c.n-1))
	if call := c.pending; call != nil {
		c.pending = nil
		msgs, err := c.exchange(call.op, call.seq, send)
		if err != nil {
			return err
		}
		if err := c.verdict(call.op, call.seq, msgs); err != nil {
			return err
		}
	} else {
		for p := 0; p < c.n; p++ {
			if p != c.rank {
				xs = append(xs, sendTo(p, send))
			}
		}
	}
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			xs = append(xs, recvFrom(p, tmp[p*nb:(p+1)*nb]))
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
