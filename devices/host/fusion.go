package host

import (
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// CanFuse: the host device runs fused all-reduces (rt.Op.Batch) itself.
func (c *devComm) CanFuse() bool { return true }

// fusedAllReduce packs the batch's send buffers into one staging buffer,
// all-reduces it as one call (one fingerprint, one algorithm choice for
// the whole size) and unpacks the result into the receive buffers.
func (c *Comm) fusedAllReduce(op *rt.Op) error {
	es := op.Type.Size()
	c.fuseMu.Lock()
	defer c.fuseMu.Unlock()
	if cap(c.fuseBuf) < op.Count*es {
		c.fuseBuf = make([]byte, op.Count*es+op.Count*es/4)
	}
	stage := c.fuseBuf[:op.Count*es]
	off := 0
	for _, o := range op.Batch {
		n := o.Count * es
		copy(stage[off:off+n], bytesAt(o.Send, n))
		off += n
	}
	p := unsafe.Pointer(&stage[0])
	whole := rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: op.Count, Type: op.Type, Red: op.Red}
	if err := c.exec(&whole); err != nil {
		return err
	}
	c.count(statFusedBatches, 1)
	c.count(statFusedBuffers, uint64(len(op.Batch)))
	off = 0
	for _, o := range op.Batch {
		n := o.Count * es
		copy(bytesAt(o.Recv, n), stage[off:off+n])
		off += n
	}
	return nil
}
