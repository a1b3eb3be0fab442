package host

import (
	"encoding/binary"
	"strings"

	rt "github.com/xccl-project/xccl/runtime"
)

// Before every collective the ranks exchange a fingerprint of the call:
// its number on the communicator, kind, type, reduce op, root and count,
// and for all-to-all the bytes each rank sends to and expects from every
// peer. Every rank sees every other rank's fingerprint, and if not all are
// equal each rank differs from at least one other, so a mismatch is found
// by all ranks at once (for all-to-all every rank checks the whole matrix).
// Each returns C_ERROR naming both calls; only fingerprints were exchanged,
// so the communicator stays usable. A rank that never arrives is named in
// the timeout. (Small broadcasts and reduces between ranks of one machine
// wait for fewer peers, and check the others' fingerprints later: at their
// next collective that waits for those peers, or at most 32 calls on;
// fastbox.go.)

const fpHeader = rt.FingerprintSize

// fpSize is the fingerprint message size, the same for every kind of call
// (all-to-all sends its byte counts in a second round, see agreeMatrix).
func (c *Comm) fpSize() int { return fpHeader }

// wireBytes is what an all-reduce of count elements of dt moves per
// message: the half types travel widened to float32.
func wireBytes(dt rt.DataType, count int) int {
	if isHalf(dt) {
		return 4 * count
	}
	return count * dt.Size()
}

// agree exchanges fingerprint messages about op (the seq-th collective)
// with every peer and fails on any mismatch.
func (c *Comm) agree(op *rt.Op, seq uint64) error {
	if c.n == 1 {
		return nil
	}
	f := rt.FingerprintOf(op, seq)
	var addrs []byte // this rank's buffers, to every peer behind the fingerprint
	if send, recv := c.buffers(op); c.addrsRide(op, max(len(send), len(recv))) {
		addrs = c.addrOut[:]
		putAddrs(addrs, send, recv)
	}
	msgs, err := c.exchangeEach(f, func(int) []byte { return addrs }, nil, waitAll)
	if err != nil {
		return err
	}
	if err := c.verdict(f, msgs); err != nil {
		return err
	}
	if addrs != nil {
		c.learnAddrs(func(p int) []byte {
			if p == c.rank {
				return addrs
			}
			return c.fastData(p, seq, addrMsgSize)
		})
		c.addrsIn = seq
	}
	if op.Kind == rt.OpAllToAll {
		return c.agreeMatrix(op, seq)
	}
	return nil
}

// agreeMatrix: for all-to-all every rank sends every peer the bytes it
// will send to and expects from each rank, and every rank checks the whole
// matrix, so all find a mismatch alike.
func (c *Comm) agreeMatrix(op *rt.Op, seq uint64) error {
	size := 16 * c.n
	mine := c.buf(4, size)
	for p := 0; p < c.n; p++ {
		binary.LittleEndian.PutUint64(mine[8*p:], uint64(op.SendCounts[p]*op.SendTypes[p].Size()))
		binary.LittleEndian.PutUint64(mine[8*(c.n+p):], uint64(op.RecvCounts[p]*op.RecvTypes[p].Size()))
	}
	msgs, err := c.allExchange(mine, label{kind: op.Kind.String(), seq: seq, wait: true})
	if err != nil {
		return err
	}
	for i := 0; i < c.n; i++ {
		for j := 0; j < c.n; j++ {
			sends := binary.LittleEndian.Uint64(msgs[i*size+8*j:])
			expects := binary.LittleEndian.Uint64(msgs[j*size+8*(c.n+i):])
			if sends != expects {
				return rt.Errorf("collective mismatch in AllToAll op #%d: rank %d sends %d bytes to rank %d, which expects %d",
					seq, i, sends, j, expects)
			}
		}
	}
	return nil
}

// pendingCall is a fingerprint exec leaves for a direct form (direct.go)
// to send in front of its data.
type pendingCall struct {
	op  *rt.Op
	seq uint64
	fp  rt.Fingerprint
}

// exchangeEach sends every peer this rank's fingerprint message f with
// out(p) right behind it (a direct form's data, see direct.go; or, to fast
// boxes only, the parts one after another), and receives the fingerprint
// messages of the peers it waits for (waitAll, waitNone or a rank; see
// waitPlan), whose data stays in the boxes and rings for the caller. It
// returns nil when every fingerprint it waited for equals f, else every
// rank's message for verdict, this rank's own in place of those it did not
// wait for: they are checked at a later collective (drainBox).
//
// A fingerprint in a fast box is compared in place, as two words against
// f's (rt.Fingerprint.Body), not copied out first: reading back bytes just
// stored in pieces waits until the stores reach the cache, and they queue
// behind this call's stores to the peers' boxes, each a cross-core trip
// (measured, 2 ranks, 32-byte reduce: a quarter of the root's time in the
// comparison of the copies).
func (c *Comm) exchangeEach(f rt.Fingerprint, out func(p int) []byte, parts [][]byte, wait int) ([]byte, error) {
	seq := f.Seq
	size := c.fpSize()
	if err := c.boxReady(seq); err != nil {
		return nil, err
	}
	// This rank's message is kept by slot (drainBox checks later
	// collectives' against it); msgs gets every rank's only where rings
	// carry them, or for verdict after a mismatch.
	msgs := c.buf(1, c.n*size)
	mine := c.keepSent(f, wait)[:size]
	w0, w1 := f.Body()
	// Fast boxes first: written at once, then polled a while before the
	// general loop (progress) takes what has not come yet.
	xs := c.xfers(1, 3*(c.n-1))
	for p := 0; p < c.n; p++ {
		if p == c.rank {
			continue
		}
		b := out(p)
		switch {
		case !c.fastOK(p):
			xs = append(xs, sendTo(p, mine))
			if len(b) > 0 {
				xs = append(xs, sendTo(p, b))
			}
			xs = append(xs, recvFrom(p, msgs[p*size:(p+1)*size]))
		case c.inBox(p, len(b)):
			c.fastSend(p, seq, w0, w1, b, parts)
		default:
			c.fastSend(p, seq, w0, w1, nil, nil)
			xs = append(xs, sendTo(p, b))
		}
	}
	return c.collect(f, w0, w1, xs, wait)
}

// collect is exchangeEach's second half, once this rank's messages are
// sent: it moves xs (sends and receives through rings) and receives the
// fingerprints of the peers wait names, from fast boxes, and compares
// them with f (whose body is w0, w1).
func (c *Comm) collect(f rt.Fingerprint, w0, w1 uint64, xs []xfer, wait int) ([]byte, error) {
	seq, size, all := f.Seq, c.fpSize(), wait == waitAll
	msgs := c.buf(1, c.n*size) // the same scratch exchangeEach's ring receives were given
	mine := c.sent[seq%fastDepth][:size]
	waiting := 0
	spins := min(fastSpin, c.spin)
	for spin := spins; spin > 0; spin-- {
		waiting = 0
		for p := 0; p < c.n; p++ {
			if p != c.rank && (all || wait == p) && c.fastOK(p) && !c.fastPoll(p, seq, spin == spins) {
				waiting++
			}
		}
		if waiting == 0 {
			break
		}
	}
	if waiting > 0 {
		for p := 0; p < c.n; p++ {
			if p != c.rank && (all || wait == p) && c.fastOK(p) && !c.fastPoll(p, seq, false) {
				xs = append(xs, c.fastRecvFrom(p, seq, msgs[p*size:(p+1)*size]))
			}
		}
	}
	if len(xs) > 0 {
		if c.behind() {
			xs = append(xs, xfer{mode: xDrain})
		}
		if err := c.progress(label{kind: f.Kind.String(), seq: seq, wait: true}, xs...); err != nil {
			return msgs, err
		}
	}
	same := true
	for p := 0; p < c.n; p++ {
		switch {
		case p == c.rank:
		case !c.fastOK(p):
			same = false // compared by check
		case !all && wait != p:
		default:
			same = same && slotBodyIs(c.box[p].in[seq%fastDepth], w0, w1)
			// Its fingerprints of earlier collectives came before this one.
			if b := &c.box[p]; b.got+1 < seq {
				c.drainBox(p, seq-1)
				if b.got+1 != seq {
					return msgs, rt.Failedf("rank %d: rank %d's fingerprints of op #%d to #%d did not come before op #%d: the ranks are out of step",
						c.rank, p, b.got+1, seq-1, seq)
				}
			}
			c.box[p].got = seq
		}
	}
	if same {
		return nil, nil
	}
	for p := 0; p < c.n; p++ {
		switch {
		case p == c.rank:
			copy(msgs[p*size:(p+1)*size], mine)
		case !c.fastOK(p): // came through the ring
		case !all && wait != p:
			copy(msgs[p*size:(p+1)*size], mine)
		default:
			unboxFP(msgs[p*size:(p+1)*size], seq, c.box[p].in[seq%fastDepth])
		}
	}
	return msgs, nil
}

// fastSpin is how many times exchangeEach polls the fast boxes itself
// before the general loop (with its yields, sleeps and peer checks) waits;
// fewer where ranks outnumber the CPUs (c.spin: there the peer may be
// waiting for this CPU).
const fastSpin = 256

// verdict checks the fingerprint messages (nil: exchangeEach found them
// all equal); on a mismatch it first drains the data that peers sent
// behind theirs (direct forms), so the rings stay in step.
func (c *Comm) verdict(want rt.Fingerprint, msgs []byte) error {
	if msgs == nil {
		return nil // all the same (exchangeEach)
	}
	err := c.check(want, msgs)
	if err == nil || rt.StatusOf(err) != rt.StatusError {
		return err
	}
	// Reported: not again when a peer's fingerprint of it that this rank
	// did not wait for is checked later (drainBox, at most fastDepth calls
	// on, so the slot of want.Seq still holds it then).
	c.mismatched[want.Seq%fastDepth] = want.Seq
	size := c.fpSize()
	for p := 0; p < c.n; p++ {
		theirs, _ := rt.ParseFingerprint(msgs[p*size:])
		n := c.payloadFrom(theirs, p, c.rank)
		if p == c.rank || !c.directPlan(theirs) || n == 0 || c.inBox(p, n) {
			continue // nothing came, or it came in the fast box
		}
		x := xfer{peer: p, ch: chColl, mode: xDiscard, buf: make([]byte, c.payloadFrom(theirs, p, c.rank)), elem: 1}
		if derr := c.progress(label{kind: "draining a mismatched call"}, x); derr != nil {
			return derr
		}
	}
	return err
}

func (c *Comm) check(want rt.Fingerprint, msgs []byte) error {
	size, seq := c.fpSize(), want.Seq
	mine := msgs[c.rank*size : (c.rank+1)*size]
	same := true
	for p := 0; p < c.n && same; p++ {
		same = string(msgs[p*size:(p+1)*size]) == string(mine) // no parsing while all agree
	}
	if same {
		return nil
	}
	for p := 0; p < c.n; p++ {
		theirs, ok := rt.ParseFingerprint(msgs[p*size:])
		if !ok {
			return rt.Failedf("rank %d: rank %d sent no fingerprint before op #%d: the ranks are out of step", c.rank, p, seq)
		}
		if theirs != want {
			return rt.Errorf("collective mismatch: rank %d called %s as op #%d, rank %d called %s as op #%d",
				p, callName(theirs), theirs.Seq, c.rank, callName(want), seq)
		}
	}
	return nil
}

// callName names the call of fingerprint f in error messages, as
// rt.Fingerprint.String does, and a fused all-reduce (fusedRoot,
// fusedSharedRoot) as one.
func callName(f rt.Fingerprint) string {
	s := f.String()
	if f.Kind == rt.OpAllReduce && (f.Root == fusedRoot || f.Root == fusedSharedRoot) {
		return "AllReduceFused" + strings.TrimPrefix(s, f.Kind.String())
	}
	return s
}
