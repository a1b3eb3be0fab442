package host

import (
	"sync/atomic"
	"unsafe"
)

// Fast boxes carry every collective's fingerprint between ranks of one
// machine, and up to fastPayload bytes of data with it: the reader polls the
// slot itself, whose first line holds the sequence number, the fingerprint
// and the first 24 data bytes (one miss for a small call, where a ring costs
// its head and then the data). Each (source, destination) pair has two
// 128-byte slots in the destination's segment, for even and odd collectives:
//
//	0   sequence number of the collective (written last; 0 = empty)
//	8   fingerprint (fpHeader bytes)
//	40  data (fastPayload bytes)
//
// A slot is never overwritten before it was read: a rank writes collective
// k+2's fingerprint only after it got the reader's fingerprint of k+1, which
// the reader sends only after it read k's. Ranks on other machines (TCP)
// use the rings as before.
const (
	fastSlot    = 128
	fastPayload = fastSlot - 8 - fpHeader
)

// fastOK reports whether fingerprints to and from p go through fast boxes.
func (c *Comm) fastOK(p int) bool { return c.peerSegs[p] != nil }

func slotSeq(b []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[0])) }

// fastSendTo writes fingerprint fp (and data, if it fits) for collective
// seq into p's slot.
func (c *Comm) fastSendTo(p int, seq uint64, fp, data []byte) xfer {
	return xfer{peer: p, ch: chColl, mode: xFastSend, buf: fp, extra: data, seq: seq,
		fb: c.peerSegs[p].fastSlotOf(c.rank, int(seq&1))}
}

// fastRecvFrom reads p's fingerprint of collective seq into fp, and the data
// that rides with it into c.fastIn[p].
func (c *Comm) fastRecvFrom(p int, seq uint64, fp []byte) xfer {
	return xfer{peer: p, ch: chColl, mode: xFastRecv, buf: fp, extra: c.fastIn[p][:], seq: seq,
		fb: c.seg.fastSlotOf(p, int(seq&1))}
}

// fastPass moves a fast-box transfer: a send at once, a receive once its
// slot holds the collective. It returns the padded bytes moved.
func (c *Comm) fastPass(x *xfer) int {
	if x.mode == xFastSend {
		copy(x.fb[8:8+fpHeader], x.buf)
		copy(x.fb[8+fpHeader:], x.extra)
		slotSeq(x.fb).Store(x.seq)
		c.peerBells[x.peer].ring()
		return padded(len(x.buf))
	}
	if slotSeq(x.fb).Load() != x.seq {
		return 0
	}
	copy(x.buf, x.fb[8:8+fpHeader])
	copy(x.extra, x.fb[8+fpHeader:])
	return padded(len(x.buf))
}
