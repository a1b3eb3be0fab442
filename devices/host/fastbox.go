package host

import (
	"sync/atomic"
	"unsafe"

	"github.com/xccl-project/xccl/internal/relstore"
)

// Fast boxes carry every collective's fingerprint between ranks of one
// machine, and the data of a one-round ("direct") call with it: the reader
// polls the slot itself, whose first line holds the sequence number, the
// fingerprint and the first 24 data bytes (one miss for a small call, where
// a ring costs its head and then the data). Each (source, destination) pair
// has two slots in the destination's segment, for even and odd collectives:
//
//	0   sequence number of the collective (written last; 0 = empty)
//	8   fingerprint (fpHeader bytes)
//	40  data (up to fastCap(nranks) bytes)
//
// A slot is never overwritten before it was read: a rank writes collective
// k+2's fingerprint only after it got the reader's fingerprint of k+1, which
// the reader sends only after it finished k (and with it every read of the
// slot of k, whose data it may use in place until then). Ranks on other
// machines (TCP, UCX) use the rings.
const fastHead = 8 + fpHeader

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

func slotSeq(b []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[0])) }

// fastSendTo writes fingerprint fp (and data, if it fits) for collective
// seq into p's slot.
func (c *Comm) fastSendTo(p int, seq uint64, fp, data []byte) xfer {
	return xfer{peer: p, ch: chColl, mode: xFastSend, buf: fp, extra: data, seq: seq,
		fb: c.peerSegs[p].fastSlotOf(c.rank, int(seq&1))}
}

// fastRecvFrom reads p's fingerprint of collective seq into fp; the data
// that rides with it stays in the slot (fastData).
func (c *Comm) fastRecvFrom(p int, seq uint64, fp []byte) xfer {
	return xfer{peer: p, ch: chColl, mode: xFastRecv, buf: fp, seq: seq,
		fb: c.seg.fastSlotOf(p, int(seq&1))}
}

// fastData is the first n data bytes p sent with its fingerprint of
// collective seq, in place in the slot: valid until this rank sends its
// fingerprint of seq+1.
func (c *Comm) fastData(p int, seq uint64, n int) []byte {
	return c.seg.fastSlotOf(p, int(seq&1))[fastHead : fastHead+n]
}

// fastPass moves a fast-box transfer: a send at once, a receive once its
// slot holds the collective. It returns the padded bytes moved.
func (c *Comm) fastPass(x *xfer) int {
	if x.mode == xFastSend {
		copy(x.fb[8:fastHead], x.buf)
		off := fastHead + copy(x.fb[fastHead:], x.extra)
		for _, b := range x.parts {
			off += copy(x.fb[off:], b)
		}
		relstore.Store((*uint64)(unsafe.Pointer(&x.fb[0])), x.seq) // not waiting for the line the reader polls
		c.peerBells[x.peer].ring()
		return padded(len(x.buf))
	}
	if slotSeq(x.fb).Load() != x.seq {
		return 0
	}
	copy(x.buf, x.fb[8:fastHead])
	return padded(len(x.buf))
}
