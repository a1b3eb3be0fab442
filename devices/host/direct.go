package host

import (
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// The one-round ("direct") forms of small collectives. Each rank sends
// every peer, in one message each, the call's fingerprint and the data that
// peer needs from it, then checks every peer's fingerprint and takes their
// data: the fingerprint exchange and the collective are one round, where a
// separate fingerprint round plus a ring or tree would take two to n.
//
//	all-reduce:     everyone's buffer to everyone, reduced in rank order
//	all-gather:     own block to everyone
//	reduce-scatter: block p to rank p, reduced in rank order
//	broadcast:      the root's buffer to everyone, fingerprints only back
//	reduce:         everyone's buffer to the root, fingerprints only back
//
// All-reduce keeps its own limit (algo.go); the others use their direct
// form while a rank sends at most directOthersMax bytes in all (measured:
// above it, 4 ranks on 2 cores do better with the ring or tree), or, with
// fast boxes between every pair, while the data fits them (directOthers).
const directOthersMax = 4 << 10

// directPlan reports whether a call with fingerprint f uses its direct form.
// Every rank decides from the fingerprint alone, so a rank can tell from a
// peer's fingerprint what data follows it (see payloadFrom).
func (c *Comm) directPlan(f rt.Fingerprint) bool {
	if c.n == 1 || !f.Type.Valid() || f.Count == 0 {
		return false
	}
	switch c.opts.Algo {
	case "ring", "cma", "single-copy":
		return false
	}
	if f.Kind == rt.OpAllReduce {
		switch f.Root {
		case fusedRoot:
			return true // fusedDirect: the batch is in the fast boxes
		case fusedSharedRoot:
			return false // fusedShared: only addresses, in the fast boxes
		}
		return !c.sharedTry && c.allReduceAlgo(wireBytes(f.Type, int(f.Count))) == algoDirect
	}
	per, blocks, ok := c.othersShape(f)
	return ok && (c.opts.Algo == "direct" && c.ringHolds(per) || c.directOthers(per, blocks))
}

// othersShape is, for an all-gather, reduce-scatter, broadcast or reduce
// with fingerprint f, the bytes a rank sends each peer in its direct form
// and how many such blocks its buffer holds; false for other kinds.
func (c *Comm) othersShape(f rt.Fingerprint) (per, blocks int, ok bool) {
	count := int(f.Count)
	switch f.Kind {
	case rt.OpReduceScatter:
		return wireBytes(f.Type, count), c.n, true
	case rt.OpAllGather:
		return count * f.Type.Size(), c.n, true
	case rt.OpReduce:
		return wireBytes(f.Type, count), 1, true
	case rt.OpBroadcast:
		return count * f.Type.Size(), 1, true
	}
	return 0, 0, false
}

// directOthers says whether a direct all-gather, reduce-scatter, broadcast
// or reduce whose ranks send per peer bytes each (blocks of a buffer of
// blocks times that) pays: while a rank sends at most directOthersMax in
// all, or, when every pair has fast boxes (the data goes in them), while a
// box holds it and the buffer stays below the point where single copy
// takes over (measured: 2 ranks at 8 to 32 KiB, the direct forms took a
// third to half the time of the ring and the tree), unless this call tries
// single copy between shared buffers (tryShared).
func (c *Comm) directOthers(per, blocks int) bool {
	if per*(c.n-1) <= directOthersMax {
		return true
	}
	return c.allBoxed && per <= c.fastCap && per*blocks < cmaMinBytes && !c.sharedTry
}

// payloadFrom is how many data bytes rank `from` sends rank `to` behind its
// fingerprint f in the direct form (0 when it sends none).
func (c *Comm) payloadFrom(f rt.Fingerprint, from, to int) int {
	count := int(f.Count)
	switch f.Kind {
	case rt.OpAllReduce, rt.OpReduceScatter:
		return wireBytes(f.Type, count)
	case rt.OpAllGather:
		return count * f.Type.Size()
	case rt.OpBroadcast:
		if from == int(f.Root) {
			return count * f.Type.Size()
		}
	case rt.OpReduce:
		if to == int(f.Root) {
			return wireBytes(f.Type, count)
		}
	}
	return 0
}

// directRound sends every peer the pending fingerprint and then out(p),
// checks every peer's fingerprint, and receives their data into in(p) (nil:
// nothing comes from p). exec leaves the fingerprint pending exactly when
// directPlan chose the direct form, so it is always there.
func (c *Comm) directRound(name label, out, in func(p int) []byte) error {
	call := c.pending
	if call.op == nil {
		return rt.Errorf("host: internal error: %s in its direct form without a pending fingerprint", name)
	}
	c.pending = pendingCall{}
	msgs, err := c.exchangeEach(call.fp, out, nil, c.waitPlan(call.fp))
	if err != nil {
		return err
	}
	if err := c.verdict(call.fp, msgs); err != nil {
		return err
	}
	xs := c.xfers(0, c.n)
	for p := 0; p < c.n; p++ {
		b := in(p)
		switch {
		case p == c.rank || len(b) == 0:
		case c.inBox(p, len(b)): // it came in the fast box
			copy(b, c.fastData(p, call.seq, len(b)))
		default:
			xs = append(xs, recvFrom(p, b))
		}
	}
	if len(xs) == 0 {
		return nil // everything came in the fast boxes
	}
	return c.progress(name, xs...)
}

// allGatherDirect: every rank's block straight into every recv.
func (c *Comm) allGatherDirect(send, recv []byte) error {
	nb := len(send)
	return c.directRound(c.opName("AllGather", nb),
		func(int) []byte { return send },
		func(p int) []byte { return recv[p*nb : (p+1)*nb] })
}

// reduceScatterDirect: block p of every rank to rank p, reduced there in
// rank order.
func (c *Comm) reduceScatterDirect(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	nb := len(recv)
	return c.reduceDirectRound(c.opName("ReduceScatter", nb), recv, send[c.rank*nb:(c.rank+1)*nb],
		func(p int) []byte { return send[p*nb : (p+1)*nb] }, dt, op)
}

// broadcastDirect: the root's buffer to everyone.
func (c *Comm) broadcastDirect(buf []byte, root int) error {
	return c.directRound(c.opName("Broadcast", len(buf)),
		func(int) []byte {
			if c.rank == root {
				return buf
			}
			return nil
		},
		func(p int) []byte {
			if p == root {
				return buf
			}
			return nil
		})
}

// reduceDirect: everyone's buffer to the root, reduced there in rank order.
func (c *Comm) reduceDirect(send, recv []byte, dt rt.DataType, op rt.ReduceOp, root int) error {
	if c.rank != root {
		return c.directRound(c.opName("Reduce", len(send)),
			func(p int) []byte {
				if p == root {
					return send
				}
				return nil
			},
			func(int) []byte { return nil })
	}
	return c.reduceDirectRound(c.opName("Reduce", len(send)), recv, send, func(int) []byte { return nil }, dt, op)
}

// reduceDirectRound runs a direct round that sends out(p) to every peer and
// reduces into recv, in rank order, what every rank sent this one, mine
// being this rank's own contribution. Data that came in a fast box is
// reduced from the box in place; only what came through a ring is staged.
// Every rank that reduces the same contributions gets bit-identical results.
func (c *Comm) reduceDirectRound(name label, recv, mine []byte, out func(p int) []byte, dt rt.DataType, op rt.ReduceOp) error {
	nb, seq := len(recv), c.pending.seq
	tmp := c.buf(2, nb*c.n)
	err := c.directRound(name, out, func(p int) []byte {
		if c.inBox(p, nb) {
			return nil // reduced from the box below
		}
		return tmp[p*nb : (p+1)*nb]
	})
	if err != nil {
		return err
	}
	if c.rank != 0 && overlap(recv, mine) {
		mine = append(tmp[c.rank*nb:c.rank*nb], mine...) // recv gets rank 0's first
	}
	from := func(p int) []byte {
		switch {
		case p == c.rank:
			return mine
		case c.inBox(p, nb):
			return c.fastData(p, seq, nb)
		}
		return tmp[p*nb : (p+1)*nb]
	}
	c.reduceRankOrder(recv, from, dt, op)
	return nil
}

// reduceRankOrder reduces into recv the n contributions from(p) in rank
// order (recv = from(0) op from(1), then recv op= from(p)), averaging at
// the end for Avg: every rank that reduces the same contributions gets
// bit-identical results. recv may be from(0) itself, not a later one.
func (c *Comm) reduceRankOrder(recv []byte, from func(p int) []byte, dt rt.DataType, op rt.ReduceOp) {
	if len(recv)*(c.n-1) < cKernelMin { // the Go loops, straight (no list for C)
		reduce3Into(recv, from(0), from(1), dt, op)
		for p := 2; p < c.n; p++ {
			reduce3Into(recv, recv, from(p), dt, op)
		}
	} else {
		c.jobs = c.addReductions(c.jobs[:0], recv, from)
		c.reduceJobs(c.jobs, dt, op)
		clear(c.jobs) // keeps no user buffer or box alive
	}
	if op == rt.Avg {
		finishAvg(recv, dt, c.n)
	}
}

// overlap reports whether a and b share a byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// addReductions appends the jobs that reduce into recv, in rank order, the
// n contributions from(p): recv = from(0) op from(1), then recv op= from(p).
func (c *Comm) addReductions(jobs []redJob, recv []byte, from func(p int) []byte) []redJob {
	jobs = append(jobs, redJob{dst: recv, a: from(0), b: from(1)})
	for p := 2; p < c.n; p++ {
		jobs = append(jobs, redJob{dst: recv, a: recv, b: from(p)})
	}
	return jobs
}
