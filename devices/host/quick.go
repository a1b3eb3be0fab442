package host

import (
	rt "github.com/xccl-project/xccl/runtime"
)

// The quick path: exec's way for a small collective on a communicator whose
// every pair of ranks has fast boxes. It is the direct form (direct.go) with
// the data in the boxes, the very messages the general path sends and
// expects, so ranks may take either for the same call; it only skips the
// general path's layers (the algorithm choice, the pending call, the
// per-kind functions and their closures). Measured, a 2-rank 8-byte
// broadcast with both ranks run by one goroutine (BenchmarkSoftwarePath):
// 242 ns a pair of calls, 181 without those layers, 158 with
// quickExchange; between processes, 8-byte all-reduce 0.63 -> 0.39 us.
//
// A call takes it when its per-peer data fits a box and its buffer stays
// below the size from which tryShared tries single copy (sharedReduceMin
// for an all-reduce, sharedOthersMin for the others, counting every block
// of an all-gather's or reduce-scatter's): there directPlan, with boxes
// between every pair, always picks the direct form, so both paths send
// the same. The half types (widened) and fused batches keep the general
// path.
//
// quickable reports whether op (a collective, not a batch) takes it; set
// is quick, decided at init (allBoxed, no forced algorithm, more than one
// rank).
func (c *Comm) quickable(op *rt.Op) bool {
	if !c.quick || isHalf(op.Type) {
		return false
	}
	per := op.Count * op.Type.Size()
	switch op.Kind {
	case rt.OpAllReduce:
		return per < sharedReduceMin && per <= c.fastCap
	case rt.OpBroadcast, rt.OpReduce:
		return per < sharedOthersMin && per <= c.fastCap
	case rt.OpAllGather, rt.OpReduceScatter:
		return per*c.n < sharedOthersMin && per <= c.fastCap
	}
	return false
}

// quickRun runs op, the collSeq-th collective, quickable, with collMu held.
func (c *Comm) quickRun(op *rt.Op) error { return c.quickDo(op, false) }

// quickDo runs op as quickRun does; resumed: the C fast path (fast.c)
// sent this rank's part already and a peer's did not come at once, so it
// goes on from collect, as quickExchange does then.
func (c *Comm) quickDo(op *rt.Op, resumed bool) error {
	seq := c.collSeq
	c.sharedTry = false
	var f rt.Fingerprint
	f.Set(op, seq)
	nb := op.Count * op.Type.Size()
	send, recv := bytesAt(op.Send, nb), bytesAt(op.Recv, nb)
	root := op.Root
	// Every peer p gets out[p*step:][:nb] (nothing where out is nil, or
	// where to is set and is not p); wait names whose fingerprints count.
	out, step, to, wait := send, 0, -1, waitAll
	switch op.Kind {
	case rt.OpAllGather:
		recv = bytesAt(op.Recv, nb*c.n)
	case rt.OpReduceScatter:
		send = bytesAt(op.Send, nb*c.n)
		out, step = send, nb
	case rt.OpBroadcast:
		send, out, wait = recv, nil, root // the root sends its buffer (buffers)
		if c.rank == root {
			out, wait = recv, waitNone
		}
	case rt.OpReduce:
		out, to = nil, root
		if c.rank != root {
			out, wait = send, waitNone
		}
	}
	var msgs []byte
	var err error
	if resumed {
		w0, w1 := f.Body()
		msgs, err = c.collect(f, w0, w1, nil, wait)
	} else {
		msgs, err = c.quickExchange(f, out, step, nb, to, wait)
	}
	if err == nil && msgs != nil {
		err = c.verdict(f, msgs)
	}
	if err != nil {
		return err
	}
	switch op.Kind {
	case rt.OpAllReduce:
		if !c.logged[algoDirect] {
			c.logChoice(algoDirect, nb, c.why(algoDirect, nb))
		}
		c.count(statAllReduceDirect, 1)
		c.quickReduce(recv, send, seq, nb, op.Type, op.Red)
	case rt.OpReduceScatter:
		c.count(statDirect, 1)
		c.quickReduce(recv, send[c.rank*nb:(c.rank+1)*nb], seq, nb, op.Type, op.Red)
	case rt.OpReduce:
		c.count(statDirect, 1)
		if c.rank == root {
			c.quickReduce(recv, send, seq, nb, op.Type, op.Red)
		}
	case rt.OpBroadcast:
		c.count(statDirect, 1)
		if c.rank != root {
			copy(recv, c.fastData(root, seq, nb))
		}
	case rt.OpAllGather:
		c.count(statDirect, 1)
		for p := 0; p < c.n; p++ {
			if p == c.rank {
				copyIfDistinct(recv[p*nb:(p+1)*nb], send)
			} else {
				copy(recv[p*nb:(p+1)*nb], c.fastData(p, seq, nb))
			}
		}
	}
	return nil
}

// quickReduce reduces into recv, in rank order, mine and the nb bytes every
// peer sent in its box for collective seq, as reduceDirectRound does.
func (c *Comm) quickReduce(recv, mine []byte, seq uint64, nb int, dt rt.DataType, op rt.ReduceOp) {
	if c.rank != 0 && overlap(recv, mine) {
		mine = append(c.buf(2, nb)[:0], mine...) // recv gets rank 0's first
	}
	c.reduceRankOrder(recv, func(p int) []byte {
		if p == c.rank {
			return mine
		}
		return c.fastData(p, seq, nb)
	}, dt, op)
}

// quickExchange is exchangeEach for a quick call: every peer has a fast
// box and the data fits it. It sends each peer p its fingerprint and
// out[p*step:][:nb] (nothing where out is nil, or where to is set and is
// not p), and takes the fingerprints of the peers wait names as they come
// in a short poll. Anything else (a peer not there yet, a fingerprint that
// differs, a gap before it that the box cannot fill) goes on in collect,
// as for every call.
//
// A rank that waits for peers and sends them nothing (a broadcast's other
// ranks, a reduce's root) waits for peers that do not wait for it
// (waitPlan): it sends them its fingerprint only when theirs does not come
// at once or differs (quiet). Those peers check it later, at most
// fastDepth calls on (drainBox); an empty slot then means it was equal,
// once the quiet rank says it is done with that collective. Measured, 2
// ranks: one store to a line the other core reads and one read of a line
// it wrote fewer per call.
func (c *Comm) quickExchange(f rt.Fingerprint, out []byte, step, nb, to, wait int) ([]byte, error) {
	seq := f.Seq
	if err := c.boxReady(seq); err != nil {
		return nil, err
	}
	c.keepSent(f, wait)
	w0, w1 := f.Body()
	lone := wait == waitNone
	root := int(f.Root)
	quiet := !lone && (f.Kind == rt.OpBroadcast && c.rank != root || f.Kind == rt.OpReduce && c.rank == root)
	for _, p := range c.boxPeers {
		var b []byte
		switch {
		case quiet && (wait == waitAll || wait == p):
			continue
		case out != nil && (to < 0 || to == p):
			b = out[p*step : p*step+nb]
		}
		c.fastSend(p, seq, w0, w1, b, nil)
	}
	if lone {
		return nil, nil
	}
	for _, p := range c.boxPeers {
		if wait >= 0 && wait != p {
			continue
		}
		b := &c.box[p]
		ok := c.quickPoll(p, seq) && slotBodyIs(b.in[seq%fastDepth], w0, w1)
		if ok && b.got+1 != seq {
			c.drainBox(p, seq-1) // earlier ones this rank did not wait for
			ok = b.got+1 == seq
		}
		if !ok {
			if quiet {
				for _, p := range c.boxPeers {
					if wait == waitAll || wait == p {
						c.fastSend(p, seq, w0, w1, nil, nil)
					}
				}
			}
			return c.collect(f, w0, w1, nil, wait)
		}
	}
	for _, p := range c.boxPeers {
		if wait < 0 || wait == p {
			c.box[p].got = seq
		}
	}
	return nil, nil
}

// quickPoll polls p's slot of collective seq a while, as collect does
// first (fastSpin), and says whether its fingerprint came.
func (c *Comm) quickPoll(p int, seq uint64) bool {
	if c.fastPoll(p, seq, true) {
		return true
	}
	for spin := min(fastSpin, c.spin); spin > 0; spin-- {
		if c.fastPoll(p, seq, false) {
			return true
		}
	}
	return false
}
