package host

import (
	"sync/atomic"
	"unsafe"

	"github.com/xccl-project/xccl/internal/relstore"

	rt "github.com/xccl-project/xccl/runtime"
)

// Fast boxes carry every collective's fingerprint between ranks of one
// machine, and the data of a one-round ("direct") call with it: the reader
// polls the slot itself, whose first line holds the sequence number, the
// fingerprint and the first 40 data bytes (one miss for a small call, where
// a ring costs its head and then the data). Each (source, destination) pair
// has two slots in the destination's segment, for even and odd collectives:
//
//	0   sequence number of the collective (written last; 0 = empty)
//	8   fingerprint body: bytes 12-27 of its message (rt.Fingerprint.Put:
//	    kind, type, op, root, count; the magic and the sequence number
//	    are implied by the slot's)
//	24  data (up to fastCap(nranks) bytes)
//
// A slot is never overwritten before it was read: a rank writes collective
// k+2's fingerprint only after it got the reader's fingerprint of k+1, which
// the reader sends only after it finished k (and with it every read of the
// slot of k, whose data it may use in place until then). Ranks on other
// machines (TCP, UCX) use the rings.
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

// fastCap is the data a slot carries for a communicator of n ranks: 32 KiB
// up to 8 ranks (every direct form, algo.go and direct.go, and fused
// batches), less beyond so that a segment's boxes stay within about 512 KiB.
func fastCap(n int) int {
	c := (256 << 10) / max(n, 1)
	c = min(c, 32<<10)
	return max(c&^63, 88)
}

// fastSlotSize is the bytes of one slot, whole cache lines.
func fastSlotSize(n int) int { return (fastHead + fastCap(n) + 63) &^ 63 }

// fastOK reports whether fingerprints to and from p go through fast boxes.
func (c *Comm) fastOK(p int) bool { return c.peerSegs[p] != nil }

// inBox reports whether n data bytes to or from p ride in its fast box with
// the fingerprint (else they follow it through the ring): the one rule the
// sender and the receiver both apply.
func (c *Comm) inBox(p, n int) bool { return c.fastOK(p) && n <= c.fastCap }

func slotSeq(b []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[0])) }

// fastSend writes fingerprint fp, then data and parts one after another,
// for collective seq into p's slot, and publishes it.
func (c *Comm) fastSend(p int, seq uint64, fp, data []byte, parts [][]byte) {
	fb := c.boxOut[p][seq&1]
	copy(fb[8:fastHead], fp[fpBodyLo:fpBodyHi])
	off := fastHead + copy(fb[fastHead:], data)
	for _, b := range parts {
		off += copy(fb[off:], b)
	}
	// A store-release, not waiting for the line the reader polls (measured:
	// 8-byte all-reduce 0.55 -> 0.47 us). The bell's check of its waiters
	// may then pass the store: a reader arming its bell at that moment can
	// miss both the number and the wake-up, which progress covers by
	// looking again shortly after arming (armWindow).
	relstore.Store((*uint64)(unsafe.Pointer(&fb[0])), seq)
	c.peerBells[p].ring()
}

// fastPoll copies p's fingerprint of collective seq into fp if it is
// there, and says whether it was.
func (c *Comm) fastPoll(p int, seq uint64, fp []byte) bool {
	fb := c.boxIn[p][seq&1]
	if slotSeq(fb).Load() != seq {
		return false
	}
	unboxFP(fp, seq, fb)
	return true
}

// fastRecvFrom reads p's fingerprint of collective seq into fp; the data
// that rides with it stays in the slot (fastData).
func (c *Comm) fastRecvFrom(p int, seq uint64, fp []byte) xfer {
	return xfer{peer: p, ch: chColl, mode: xFastRecv, buf: fp, seq: seq, fb: c.boxIn[p][seq&1]}
}

// fastData is the first n data bytes p sent with its fingerprint of
// collective seq, in place in the slot: valid until this rank sends its
// fingerprint of seq+1.
func (c *Comm) fastData(p int, seq uint64, n int) []byte {
	return c.boxIn[p][seq&1][fastHead : fastHead+n]
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
