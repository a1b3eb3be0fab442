package host

import (
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// CanFuse: the host device runs fused all-reduces (rt.Op.Batch) itself.
func (c *devComm) CanFuse() bool { return true }

// fusedRoot marks the fingerprint of a fused all-reduce that runs in its
// direct form with the buffers where they are (fusedDirect): every rank
// that sees it knows the data of the whole batch is in the fast boxes.
// (All-reduce fingerprints otherwise carry root 0.)
const fusedRoot = 1

// fusedAllReduce runs a batch of all-reduces as one call: one fingerprint,
// one round. When the whole batch fits a fast box it goes in place
// (fusedDirect); otherwise it packs the send buffers into one staging
// buffer, all-reduces that (one algorithm choice for the whole size) and
// unpacks the result into the receive buffers.
func (c *Comm) fusedAllReduce(op *rt.Op) error {
	es := op.Type.Size()
	if c.fusedInPlace(op) {
		if taken, err := c.fastFused(op); taken { // in C when it can (fast.c)
			return err
		}
		return c.failed(c.fusedDirect(op))
	}
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

// fusedInPlace says whether a batch runs as fusedDirect: every pair linked
// by fast boxes, the whole batch fits one, no widening, no forced algorithm.
func (c *Comm) fusedInPlace(op *rt.Op) bool {
	return c.n > 1 && c.allBoxed && c.opts.Algo == "" && !isHalf(op.Type) && op.Count*op.Type.Size() <= c.fastCap
}

// fusedDirect: every rank writes its fingerprint and its send buffers, one
// after another, into every peer's fast box; then each receive buffer is
// reduced, in rank order, from the peers' boxes and this rank's send
// buffer. Nothing is packed into staging or unpacked from it.
func (c *Comm) fusedDirect(op *rt.Op) error {
	c.lockColl()
	defer c.unlockColl()
	if c.destroyed.Load() {
		return c.usable()
	}
	c.collSeq++
	f := fusedPrint(op, c.collSeq)
	parts := c.fusedParts(op)
	defer clear(parts)
	msgs, err := c.exchangeEach(f, func(int) []byte { return nil }, parts, waitAll)
	if err != nil {
		return err
	}
	return c.fusedFinish(op, f, msgs, parts)
}

// fusedPrint is the fingerprint of fused all-reduce op as collective seq.
func fusedPrint(op *rt.Op, seq uint64) rt.Fingerprint {
	return rt.Fingerprint{Seq: seq, Kind: rt.OpAllReduce, Type: op.Type, Red: op.Red, Root: fusedRoot, Count: uint64(op.Count)}
}

// fusedParts is op's send buffers (in c.parts: clear it after).
func (c *Comm) fusedParts(op *rt.Op) [][]byte {
	es := op.Type.Size()
	parts := c.parts[:0]
	for _, o := range op.Batch {
		parts = append(parts, bytesAt(o.Send, o.Count*es))
	}
	c.parts = parts
	return parts
}

// fusedFinish is fusedDirect once every peer's batch came (msgs, from
// exchangeEach or collect): the verdict, then each receive buffer reduced
// in rank order from the peers' slots and this rank's send buffer.
func (c *Comm) fusedFinish(op *rt.Op, f rt.Fingerprint, msgs []byte, parts [][]byte) error {
	if err := c.verdict(f, msgs); err != nil {
		return err
	}
	es, seq := op.Type.Size(), f.Seq
	tmp := c.buf(2, c.fastCap)
	jobs := c.jobs[:0]
	off := 0
	for i, o := range op.Batch {
		n := o.Count * es
		recv, mine := bytesAt(o.Recv, n), parts[i]
		if c.rank != 0 && overlap(recv, mine) {
			mine = append(tmp[off:off], mine...) // recv gets rank 0's first
		}
		jobs = c.addReductions(jobs, recv, func(p int) []byte {
			if p == c.rank {
				return mine
			}
			return c.fastData(p, seq, off+n)[off:]
		})
		off += n
	}
	c.jobs = jobs
	c.reduceJobs(jobs, op.Type, op.Red) // one call into C for the whole batch
	clear(jobs)
	if op.Red == rt.Avg {
		for _, o := range op.Batch {
			finishAvg(bytesAt(o.Recv, o.Count*es), op.Type, c.n)
		}
	}
	c.count(statAllReduceDirect, 1)
	c.count(statFusedBatches, 1)
	c.count(statFusedBuffers, uint64(len(op.Batch)))
	return c.takeLate(nil)
}

// fusedResume goes on with a fused all-reduce that fast.c sent and could
// not finish (the lock held): fusedDirect from its wait for the peers.
func (c *Comm) fusedResume(op *rt.Op) error {
	c.fastIn(true)
	defer c.fastUnlock()
	f := fusedPrint(op, c.collSeq)
	w0, w1 := f.Body()
	parts := c.fusedParts(op)
	defer clear(parts)
	msgs, err := c.collect(f, w0, w1, nil, waitAll)
	if err == nil {
		err = c.fusedFinish(op, f, msgs, parts)
	}
	return c.failed(err) // as fusedAllReduce returns fusedDirect's
}
