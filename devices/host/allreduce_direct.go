package host

import rt "github.com/xccl-project/xccl/runtime"

// allReduceDirect: every rank sends its buffer to every peer, receives every
// peer's, and reduces the n contributions in rank order, so every rank gets
// bit-identical results. The call's fingerprint travels in front of the
// data (direct.go): one round in all.
func (c *Comm) allReduceDirect(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	nb := len(recv)
	tmp := c.buf(2, nb*c.n)
	copy(tmp[c.rank*nb:], send)
	err := c.directRound(c.opName("AllReduce", nb),
		func(int) []byte { return send },
		func(p int) []byte { return tmp[p*nb : (p+1)*nb] })
	if err != nil {
		return err
	}
	c.reduceInRankOrder(recv, tmp, dt, op)
	return nil
}
