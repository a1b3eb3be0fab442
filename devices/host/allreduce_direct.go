package host

import rt "github.com/xccl-project/xccl/runtime"

// allReduceDirect: every rank sends its buffer to every peer, receives every
// peer's, and reduces the n contributions in rank order, so every rank gets
// bit-identical results (reduceDirectRound). The call's fingerprint travels in front of the
// data (direct.go): one round in all.
func (c *Comm) allReduceDirect(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	return c.reduceDirectRound(c.opName("AllReduce", len(recv)), recv, send, func(int) []byte { return send }, dt, op)
}
