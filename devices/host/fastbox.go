package host

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"go.uber.org/zap"

	"github.com/xccl-project/xccl/internal/relstore"

	rt "github.com/xccl-project/xccl/runtime"
)

// Fast boxes carry every collective's fingerprint between ranks of one
// machine, and the data of a one-round ("direct") call with it: the reader
// polls the slot itself, whose first line holds the sequence number, the
// fingerprint and the first 40 data bytes (one miss for a small call, where
// a ring costs its head and then the data). Each (source, destination) pair
// has fastDepth slots in the destination's segment, collective k in slot
// k mod fastDepth:
//
//	0   sequence number of the collective (written last; 0 = empty)
//	8   fingerprint body: bytes 12-27 of its message (rt.Fingerprint.Put:
//	    kind, type, op, root, count; the magic and the sequence number
//	    are implied by the slot's)
//	24  data (up to fastCap(nranks) bytes)
//
// Beside the slots the destination keeps a count (fastDone): the source's
// collectives it is done with. A source writes collective k only once that
// count reaches k-fastDepth, so a slot is never overwritten while it is
// read; a reader uses data in place until its next collective, and tells
// the count in batches (boxFree). Most collectives wait for every peer's
// fingerprint, but a small broadcast's root and a small reduce's other
// ranks wait for none (a broadcast's other ranks wait for the root only):
// they send and return, up to fastDepth calls ahead, and check the
// fingerprints they did not wait for later (drainBox): at their next
// collective that waits for that peer, or when they need the peer's slot
// back, at most fastDepth calls on. A mismatch found that way is a C_ERROR
// of that later call, naming the op. The ranks that wait for them and send
// them no data (the broadcast's other ranks, the reduce's root) send them
// no fingerprint either when theirs is equal (quickExchange): such a slot
// stays empty, and counts as checked once its rank is done with the
// collective (doneWith). Ranks on other machines (TCP, UCX) use the rings
// and always wait.
const (
	fpBodyLo = 12 // the part of a fingerprint message a fast box carries
	fpBodyHi = 28
	fastHead = 8 + fpBodyHi - fpBodyLo
)

// unboxFP rebuilds in dst the fingerprint message of collective seq whose
// body is in slot fb.
func unboxFP(dst []byte, seq uint64, fb []byte) {
	rt.Fingerprint{Seq: seq}.Put(dst)
	copy(dst[fpBodyLo:fpBodyHi], fb[8:fastHead])
}

// fastDepth is the slots per pair: how many collectives a rank that does
// not wait may run ahead of a peer (a power of two). Measured, 4 ranks on 2
// cores, 8-byte broadcast: 3.8 us at 8 slots, 2-2.7 at 16, 1.5 at 32 and 64
// (OpenMPI 1-1.4): ranks that share a core catch up many calls per turn.
// Measured again after the C fast path (2026-11-27, alternated): 8-128 B
// broadcast 0.36-0.50 us at 32, 0.19-0.24 at 64 (one run in 4 0.38), 0.24-
// 0.35 at 128, OpenMPI 0.20-0.46; 8-byte reduce 0.38 -> 0.28 us at 64. It
// costs 64 slots of fastCap per peer (2 MiB up to 8 ranks).
const fastDepth = 64

// fastCap is the data a slot carries for a communicator of n ranks: 32 KiB
// up to 8 ranks (every direct form, algo.go and direct.go, and fused
// batches), less beyond so that a segment's boxes stay within about 16 MiB.
func fastCap(n int) int {
	c := (256 << 10) / max(n, 1)
	c = min(c, 32<<10)
	return max(c&^63, 88)
}

// fastSlotSize is the bytes of one slot: an odd number of cache lines, so
// that the slots' first lines, which readers poll, fall in different sets.
func fastSlotSize(n int) int { return ((fastHead+fastCap(n)+63)/64 | 1) * 64 }

// fastOK reports whether fingerprints to and from p go through fast boxes.
func (c *Comm) fastOK(p int) bool { return c.peerSegs[p] != nil }

// inBox reports whether n data bytes to or from p ride in its fast box with
// the fingerprint (else they follow it through the ring): the one rule the
// sender and the receiver both apply.
func (c *Comm) inBox(p, n int) bool { return c.fastOK(p) && n <= c.fastCap }

func slotSeq(b []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[0])) }

// slotBodyIs reports whether the fingerprint body in slot b is w0, w1
// (rt.Fingerprint.Body).
func slotBodyIs(b []byte, w0, w1 uint64) bool {
	return binary.LittleEndian.Uint64(b[8:]) == w0 && binary.LittleEndian.Uint64(b[16:]) == w1
}

// fastSend writes the fingerprint body w0, w1 (rt.Fingerprint.Body), then
// data and parts one after another, for collective seq into p's slot, and
// publishes it.
func (c *Comm) fastSend(p int, seq, w0, w1 uint64, data []byte, parts [][]byte) {
	b := &c.box[p]
	fb := b.out[seq%fastDepth]
	h := (*[fastHead]byte)(fb) // one length check for the header's stores
	binary.LittleEndian.PutUint64(h[8:], w0)
	binary.LittleEndian.PutUint64(h[16:], w1)
	off := fastHead + copy(fb[fastHead:], data)
	for _, b := range parts {
		off += copy(fb[off:], b)
	}
	// A store-release, not waiting for the line the reader polls (measured:
	// 8-byte all-reduce 0.55 -> 0.47 us). The bell's check of its waiters
	// may then pass the store: a reader arming its bell at that moment can
	// miss both the number and the wake-up, which progress covers by
	// looking again shortly after arming (armWindow).
	relstore.Store((*uint64)(unsafe.Pointer(h)), seq)
	prefetchSlot(b.out[(seq+writeAhead)%fastDepth], off, true)
	c.peerBells[p].ring()
}

// A rank writes a slot that the peer read fastDepth calls before: the
// store waits for the line, a cross-core trip, and the stores after it
// queue behind it until the store buffer is full or a locked instruction
// (the unlock of collMu) waits for them all. Asking for the slot
// writeAhead calls early overlaps that trip with the calls between; the
// peer reads that slot no sooner than writeAhead calls on. A rank that
// found a peer's slot full at its first look (the peer is ahead) likewise
// asks for the peer's slot readAhead calls on; in lockstep (found empty)
// it does not, where the early read would pull a line its writer is about
// to write. Measured, 2 ranks, same runs: 8-byte broadcast 0.34 -> 0.25 us
// (OpenMPI 0.32); 32-byte reduce 0.43 -> 0.30 us (OpenMPI 0.24).
const (
	writeAhead = 4
	readAhead  = 2
)

// prefetchSlot asks for the first lines of slot b that a message of n bytes
// (header included) covers, at most two (a slot has at least three).
func prefetchSlot(b []byte, n int, write bool) {
	p := (*uint64)(unsafe.Pointer(unsafe.SliceData(b)))
	q := (*uint64)(unsafe.Add(unsafe.Pointer(p), 64))
	if write {
		relstore.PrefetchW(p)
		if n > 64 {
			relstore.PrefetchW(q)
		}
		return
	}
	relstore.Prefetch(p)
	if n > 64 {
		relstore.Prefetch(q)
	}
}

// fastPoll says whether p's fingerprint of collective seq is in its slot.
// first: this is the first look (found there, p is ahead: its slot
// readAhead calls on is asked for).
func (c *Comm) fastPoll(p int, seq uint64, first bool) bool {
	fb := c.box[p].in[seq%fastDepth]
	if slotSeq(fb).Load() != seq {
		return false
	}
	if first {
		prefetchSlot(c.box[p].in[(seq+readAhead)%fastDepth], 128, false)
	}
	return true
}

// fastRecvFrom reads p's fingerprint of collective seq into fp; the data
// that rides with it stays in the slot (fastData).
func (c *Comm) fastRecvFrom(p int, seq uint64, fp []byte) xfer {
	return xfer{peer: p, ch: chColl, mode: xFastRecv, buf: fp, seq: seq, fb: c.box[p].in[seq%fastDepth]}
}

// fastData is the first n data bytes p sent with its fingerprint of
// collective seq, in place in the slot: valid until this rank's next
// collective tells p it is done with it.
func (c *Comm) fastData(p int, seq uint64, n int) []byte {
	return c.box[p].in[seq%fastDepth][fastHead : fastHead+n]
}

// fastPass moves a fast-box receive once its slot holds the collective
// (sends are written at once: fastSend). It returns the padded bytes moved.
func (c *Comm) fastPass(x *xfer) int {
	if slotSeq(x.fb).Load() != x.seq {
		return 0
	}
	unboxFP(x.buf, x.seq, x.fb)
	return padded(len(x.buf))
}

// peerBox is this rank's side of the fast boxes with one shm peer.
type peerBox struct {
	out, in [fastDepth][]byte // slots to the peer (in its segment) and from it (in this one)
	doneOut *atomic.Uint64    // the peer's count of this rank's collectives it is done with
	doneIn  *uint64           // this rank's count of the peer's collectives (read by the peer)
	seen    uint64            // *doneOut as last read
	told    uint64            // *doneIn as last stored
	got     uint64            // the peer's fingerprints up to this collective are checked
}

func (c *Comm) openBox(p int, ps *segment) {
	b := &c.box[p]
	for k := 0; k < fastDepth; k++ {
		b.out[k], b.in[k] = ps.fastSlotOf(c.rank, k), c.seg.fastSlotOf(p, k)
	}
	b.doneOut, b.doneIn = ps.fastDone(c.rank), (*uint64)(unsafe.Pointer(c.seg.fastDone(p)))
}

// Which peers' fingerprints a collective waits for (exchangeEach): every
// peer's, none, or one rank's (a broadcast's root).
const (
	waitAll  = -1
	waitNone = -2
)

// waitPlan is whom this rank waits for in the direct collective f: nobody
// where it only sends, small data to peers that are all linked by fast
// boxes (a broadcast's root, a reduce's other ranks), only the root where
// only the root's data matters to it (a broadcast's other ranks), else
// everybody.
func (c *Comm) waitPlan(f rt.Fingerprint) int {
	if !c.allBoxed || c.opts.Algo != "" || !f.Type.Valid() || wireBytes(f.Type, int(f.Count)) > c.fastCap {
		return waitAll
	}
	root := int(f.Root)
	switch {
	case f.Kind == rt.OpBroadcast && c.rank == root, f.Kind == rt.OpReduce && c.rank != root:
		return waitNone
	case f.Kind == rt.OpBroadcast:
		return root
	}
	return waitAll
}

// boxReady readies the fast boxes for collective seq (boxFree): it checks
// what came from peers this rank did not wait for as far as it must, tells
// peers what this rank is done with (in batches), and waits until every
// peer is done with the slots seq goes into and their fingerprints of
// seq-fastDepth are checked (the record of this rank's own, sent, is
// reused).
func (c *Comm) boxReady(seq uint64) error {
	if c.boxesFree(seq) {
		return nil
	}
	var xs []xfer // most calls find every slot free: no list
	for p := range c.box {
		if c.fastOK(p) && !c.boxFree(p, seq) {
			if xs == nil {
				xs = c.xfers(1, c.n+1)
			}
			xs = append(xs, xfer{peer: p, ch: chColl, mode: xBoxFree, seq: seq, buf: oneByte[:]})
		}
	}
	if xs == nil {
		return nil
	}
	xs = append(xs, xfer{mode: xDrain})
	return c.progress(label{seq: seq, free: true}, xs...)
}

var oneByte [1]byte // the buffer of transfers that move nothing (xBoxFree)

// boxFree reports whether p is done with this rank's slot of collective
// seq, and p's fingerprint that came in its slot last is checked. It reads
// p's slots only when that check needs them (a rank that runs ahead then
// reads many at once, its loads in flight together, instead of one line
// per call from a peer that is writing it), and tells p what it checked
// every tellBatch collectives, or once the last it told is half the slots
// old; the waits that drain (boxReady, exchangeEach while behind,
// settleBoxes) tell all (drainBoxes). A peer waiting for a slot in
// this collective is told at once: it needs seq-fastDepth, which got and
// so told reach here. Measured, 2 ranks, a reduce to a root whose other
// rank runs ahead: a tell per call moved the line the runner polls once
// per call.
func (c *Comm) boxFree(p int, seq uint64) bool {
	b := &c.box[p]
	var need uint64
	if seq > fastDepth {
		need = seq - fastDepth
	}
	if b.got < need {
		c.drainBox(p, seq-1)
	} else if b.tellDue(seq) {
		c.tell(p, seq-1)
	}
	if need == 0 {
		return true
	}
	return b.peerDone(need) && b.got >= need
}

// peerDone reports whether the peer is done with this rank's collective k
// (its count, doneOut, read again only when the last reading falls short).
func (b *peerBox) peerDone(k uint64) bool {
	if b.seen < k {
		b.seen = b.doneOut.Load()
	}
	return b.seen >= k
}

// tellBatch is how many checked collectives boxFree lets pass before it
// tells a peer (fewer than fastDepth/2).
const tellBatch = 8

// tellDue says whether boxFree tells the peer at collective seq: tellBatch
// checked collectives since the last tell, or the last one half the slots
// old.
func (b *peerBox) tellDue(seq uint64) bool {
	return min(b.got, seq-1) >= b.told+tellBatch || b.told+fastDepth/2 < seq
}

// boxesFree says, on a communicator whose every pair has fast boxes,
// whether boxReady(seq) has nothing to do: every peer is done with the
// slots seq goes into, their fingerprints up to seq-fastDepth are
// checked, and none is due to be told (boxFree's conditions, read only).
// False elsewhere: boxReady then asks boxFree peer by peer.
func (c *Comm) boxesFree(seq uint64) bool {
	if !c.allBoxed || seq <= fastDepth {
		return false
	}
	need := seq - fastDepth
	for _, p := range c.boxPeers {
		b := &c.box[p]
		if b.got < need || b.seen < need || b.tellDue(seq) {
			return false
		}
	}
	return true
}

// drainBox checks p's fingerprints of collectives up to upto that came
// since, in order, and tells p this rank is done with them (the current
// collective's stay until the next: their data may be in use). It says
// whether it checked any.
func (c *Comm) drainBox(p int, upto uint64) bool {
	b := &c.box[p]
	moved := false
	for b.got < upto {
		j := b.got + 1
		fb := b.in[j%fastDepth]
		if slotSeq(fb).Load() != j {
			if c.lone[j%fastDepth] != j || !c.doneWith(p, j, upto) {
				break
			}
			if slotSeq(fb).Load() != j {
				b.got, moved = j, true // p found this rank's fingerprint equal and sent none (quickExchange)
				continue
			}
			// It came meanwhile: p sent it before it said it was done.
		}
		if string(fb[8:fastHead]) != string(c.sent[j%fastDepth][fpBodyLo:fpBodyHi]) && c.mismatched[j%fastDepth] != j {
			c.lateMismatch(p, j, fb)
		}
		b.got, moved = j, true
	}
	c.tell(p, upto)
	return moved
}

// keepSent keeps this rank's fingerprint message f, which it sends to
// peers (drainBox checks theirs against it later), and whether it waits
// for nobody in it (wait: waitPlan's), and returns the kept message.
func (c *Comm) keepSent(f rt.Fingerprint, wait int) []byte {
	mine := c.sent[f.Seq%fastDepth][:]
	f.Put(mine)
	if wait == waitNone {
		c.lone[f.Seq%fastDepth] = f.Seq
	}
	return mine
}

// doneWith reports whether p is done with collective j (j <= upto): it
// says so (its count, boxFree), or it sent a fingerprint of a later one,
// upto's or the next. A quiet rank (quickExchange) that found a mismatch
// sent its fingerprint before either.
func (c *Comm) doneWith(p int, j, upto uint64) bool {
	b := &c.box[p]
	return b.peerDone(j) || (upto > j && slotSeq(b.in[upto%fastDepth]).Load() == upto) ||
		slotSeq(b.in[(upto+1)%fastDepth]).Load() == upto+1
}

// tell tells p this rank is done with its collectives up to upto, as far
// as their fingerprints are checked.
func (c *Comm) tell(p int, upto uint64) {
	b := &c.box[p]
	if t := min(b.got, upto); t > b.told {
		b.told = t
		relstore.Store(b.doneIn, t)
		c.peerBells[p].ring()
	}
}

// drainBoxes checks, for every peer, what came of the collectives before
// this one, and tells every peer all it checked; part of every wait of a
// collective, so that a peer that needs a slot back is never stuck behind
// this rank's wait.
func (c *Comm) drainBoxes() bool {
	moved := false
	for p := range c.box {
		switch {
		case c.lagging(p):
			moved = c.drainBox(p, c.collSeq-1) || moved
		case c.fastOK(p):
			c.tell(p, c.collSeq-1)
		}
	}
	return moved
}

// lateMismatch records that p's fingerprint of collective j, which this
// rank did not wait for, differs from its own: the next collective that
// succeeds returns it (lateErr). Data sent through a ring behind it would
// put the rings out of step: then the communicator fails.
func (c *Comm) lateMismatch(p int, j uint64, fb []byte) {
	var m [fpHeader]byte
	unboxFP(m[:], j, fb)
	theirs, ok := rt.ParseFingerprint(m[:])
	mine, _ := rt.ParseFingerprint(c.sent[j%fastDepth][:])
	var err error
	switch n := c.payloadFrom(theirs, p, c.rank); {
	case !ok:
		err = rt.Failedf("rank %d: rank %d sent no fingerprint before op #%d: the ranks are out of step", c.rank, p, j)
	case c.directPlan(theirs) && n > 0 && !c.inBox(p, n):
		err = rt.Failedf("rank %d: collective mismatch: rank %d called %s as op #%d, rank %d called %s: its data is in the way",
			c.rank, p, callName(theirs), j, c.rank, callName(mine))
	default:
		err = rt.Errorf("collective mismatch, found after op #%d returned (small broadcasts and reduces do not wait for every rank): rank %d called %s as op #%d, rank %d called %s as op #%d",
			j, p, callName(theirs), j, c.rank, callName(mine), j)
	}
	c.log.Error("collective mismatch found late", zap.Error(err))
	if c.lateErr == nil || rt.StatusOf(err) == rt.StatusFailed {
		c.lateErr = err
	}
}

// takeLate returns err, or, when the collective succeeded, a mismatch of an
// earlier one that this rank found since (once).
func (c *Comm) takeLate(err error) error {
	if c.lateErr != nil && (err == nil || rt.StatusOf(c.lateErr) == rt.StatusFailed) {
		err, c.lateErr = c.lateErr, nil
	}
	return err
}

// lagging reports whether a fingerprint of p's of a collective before this
// one is not checked yet; behind, whether that holds for some peer.
func (c *Comm) lagging(p int) bool { return c.fastOK(p) && c.box[p].got+1 < c.collSeq }

func (c *Comm) behind() bool {
	for p := range c.box {
		if c.lagging(p) {
			return true
		}
	}
	return false
}

// lastSent is the last collective p surely sent this rank a fingerprint
// of, and that is not checked yet (else what is checked): in those this
// rank waited for nobody in, p may have sent none (quickExchange).
func (c *Comm) lastSent(p int) uint64 {
	k := c.collSeq
	for k > c.box[p].got && c.lone[k%fastDepth] == k {
		k--
	}
	return k
}

// settleBoxes checks, before the boxes go away, the fingerprints of this
// rank's last collectives it did not wait for, telling the peers as it goes
// (they may need a slot back to send them). It waits as every collective
// does (progress) and gives up, logging why, on a peer that is gone, on
// abort and at the timeout; it returns a mismatch it found.
func (c *Comm) settleBoxes() error {
	var fp [fpHeader]byte // the last fingerprints land here; drainBox checks them in the boxes
	xs := c.xfers(1, c.n)
	for p := range c.box {
		if k := c.lastSent(p); c.fastOK(p) && c.box[p].got < k {
			xs = append(xs, c.fastRecvFrom(p, k, fp[:]))
		}
	}
	if len(xs) > 0 {
		xs = append(xs, xfer{mode: xDrain})
		if err := c.progress(label{kind: "Destroy", seq: c.collSeq, wait: true}, xs...); err != nil {
			c.log.Warn("destroy: peers did not finish every collective this rank finished", zap.Error(err))
		}
	}
	for p := range c.box {
		if c.fastOK(p) {
			c.drainBox(p, c.lastSent(p))
			c.drainBox(p, c.collSeq)
		}
	}
	return c.takeLate(nil)
}
