package xccl

import (
	"slices"
	"sync"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// Sends to this rank and receives from it, on devices that do not match
// them themselves outside a group (runtime.SelfMode). A send to self is
// held until a receive from self takes its bytes; sends and receives to
// self form one byte stream, in order, as between two ranks. Then:
//   - SelfInGroup: the held sends and the receive go to the vendor as one
//     group of matched byte sends and receives (the vendor's own self p2p);
//   - SelfCopy: a device-to-device copy on the receive's stream, after
//     waiting for an event recorded on the send's stream when it was posted.
//
// A send to self never waits; its buffer must stay unchanged until the
// matching receive is posted.
type selfQueue struct {
	mu sync.Mutex
	q  []selfSend
}

type selfSend struct {
	buf    unsafe.Pointer
	n, off int // bytes, and bytes already received
	stream rt.Stream
	ev     rt.Event // SelfCopy only
}

// isSelf reports a send or receive whose peer is this rank.
func (c *Comm) isSelf(op *rt.Op) bool {
	return (op.Kind == rt.OpSend || op.Kind == rt.OpRecv) && op.Root == c.rank
}

// runSelf runs an ungrouped send to or receive from self.
func (c *Comm) runSelf(op *rt.Op) error {
	if op.Kind == rt.OpSend {
		return c.postSelfSend(op)
	}
	return c.takeSelfRecv(op)
}

func (c *Comm) postSelfSend(op *rt.Op) error {
	if err := c.c.AsyncError(); err != nil {
		return err
	}
	s := selfSend{buf: op.Send, n: op.Count * op.Type.Size(), stream: op.Stream}
	if c.selfMode == rt.SelfCopy {
		ev, err := c.dev.CreateEvent()
		if err != nil {
			return err
		}
		if err := c.dev.RecordEvent(ev, op.Stream); err != nil {
			_ = c.dev.DestroyEvent(ev)
			return err
		}
		s.ev = ev
	}
	c.self.mu.Lock()
	c.self.q = append(c.self.q, s)
	c.self.mu.Unlock()
	return nil
}

func (c *Comm) takeSelfRecv(op *rt.Op) error {
	if err := c.c.AsyncError(); err != nil {
		return err
	}
	need := op.Count * op.Type.Size()
	c.self.mu.Lock()
	defer c.self.mu.Unlock()
	have := 0
	for _, s := range c.self.q {
		have += s.n - s.off
	}
	if have < need {
		return rt.Errorf("Recv from this rank (%d): %d bytes wanted, %d sent to self and not yet received "+
			"(post the send to self first, or both in one group)", c.rank, need, have)
	}
	dev := 0
	if c.selfMode == rt.SelfCopy {
		var err error
		if dev, err = c.dev.GetDevice(); err != nil {
			return err
		}
	}
	var pairs []*rt.Op // SelfInGroup: matched byte sends and receives
	taken := 0         // sends fully taken
	for off, i := 0, 0; off < need; i++ {
		s := &c.self.q[i]
		k := min(s.n-s.off, need-off)
		dst, src := unsafe.Add(op.Recv, off), unsafe.Add(s.buf, s.off)
		if c.selfMode == rt.SelfCopy {
			if err := c.dev.StreamWaitEvent(op.Stream, s.ev); err != nil {
				return err
			}
			if err := c.dev.Memcpy(dev, dst, src, k, rt.DeviceToDevice, op.Stream); err != nil {
				return err
			}
		} else {
			me := c.rank
			pairs = append(pairs,
				&rt.Op{Kind: rt.OpSend, Comm: c.c, Send: src, Count: k, Type: rt.Uint8, Root: me, Stream: s.stream},
				&rt.Op{Kind: rt.OpRecv, Comm: c.c, Recv: dst, Count: k, Type: rt.Uint8, Root: me, Stream: op.Stream})
		}
		off += k
		if s.off+k == s.n {
			taken++
		}
	}
	if pairs != nil {
		if err := c.dev.RunGroup(pairs); err != nil {
			return err
		}
	}
	// Only now, with the bytes moved, are the sends consumed.
	for off, i := 0, 0; off < need; i++ {
		s := &c.self.q[i]
		k := min(s.n-s.off, need-off)
		s.off += k
		off += k
	}
	for _, s := range c.self.q[:taken] {
		if s.ev != 0 {
			_ = c.dev.DestroyEvent(s.ev)
		}
	}
	c.self.q = c.self.q[taken:]
	return nil
}

// dropSelf forgets unmatched sends to self (the communicator is going).
func (c *Comm) dropSelf() {
	c.self.mu.Lock()
	defer c.self.mu.Unlock()
	for _, s := range c.self.q {
		if s.ev != 0 {
			_ = c.dev.DestroyEvent(s.ev)
		}
	}
	c.self.q = nil
}

// selfAllToAll runs an all-to-all whose self block the library is not
// trusted with: the other blocks through the device, the self block as a
// device-to-device copy on the same stream.
func (c *Comm) selfAllToAll(op *rt.Op) error {
	if err := c.c.Run(withoutSelfBlock(op, c.rank)); err != nil {
		return err
	}
	return c.selfBlock(op)
}

// groupSelf takes out of a group's ops what xccl matches itself: on
// SelfCopy devices every send to and receive from self, and the self
// block of every all-to-all (the rest of it stays in the group); on
// SelfInGroup devices the sends and receives to self of a communicator
// that holds ungrouped sends to self (the library cannot see those).
func (g *Group) groupSelf(ops []*rt.Op) (rest []*rt.Op, self selfOps) {
	if !slices.ContainsFunc(ops, g.takesSelf) {
		return ops, self // the common group: nothing to take out, nothing copied
	}
	rest = ops[:0:0]
	for _, op := range ops {
		c := g.comms[op.Comm]
		switch {
		case c == nil || c.selfMode == rt.SelfNative:
			rest = append(rest, op)
		case c.isSelf(op) && (c.selfMode == rt.SelfCopy || c.selfHeld() > 0):
			if op.Kind == rt.OpSend {
				self.sends = append(self.sends, op)
			} else {
				self.recvs = append(self.recvs, op)
			}
		case op.Kind == rt.OpAllToAll && c.selfMode == rt.SelfCopy && op.SendCounts[c.rank] > 0:
			self.blocks = append(self.blocks, op)
			rest = append(rest, withoutSelfBlock(op, c.rank))
		default:
			rest = append(rest, op)
		}
	}
	return rest, self
}

// takesSelf is whether groupSelf takes op (or a part of it) out.
func (g *Group) takesSelf(op *rt.Op) bool {
	c := g.comms[op.Comm]
	switch {
	case c == nil || c.selfMode == rt.SelfNative:
		return false
	case c.isSelf(op):
		return c.selfMode == rt.SelfCopy || c.selfHeld() > 0
	default:
		return op.Kind == rt.OpAllToAll && c.selfMode == rt.SelfCopy && op.SendCounts[c.rank] > 0
	}
}

type selfOps struct{ sends, recvs, blocks []*rt.Op }

// checkSelf refuses, before anything runs, a group whose receives from
// self want more bytes than its communicator's sends to self give.
func (g *Group) checkSelf(self selfOps) error {
	sent, wanted := map[*Comm]int{}, map[*Comm]int{}
	for _, op := range self.sends {
		sent[g.comms[op.Comm]] += op.Count * op.Type.Size()
	}
	for _, op := range self.recvs {
		wanted[g.comms[op.Comm]] += op.Count * op.Type.Size()
	}
	for _, ops := range [][]*rt.Op{self.sends, self.recvs, self.blocks} {
		for _, op := range ops {
			if err := g.comms[op.Comm].c.AsyncError(); err != nil {
				return err
			}
		}
	}
	for c, w := range wanted {
		if have := c.selfHeld() + sent[c]; have < w {
			return rt.Errorf("group: rank %d receives %d bytes from itself, but only %d were sent to itself", c.rank, w, have)
		}
	}
	return nil
}

// selfHeld is how many bytes of sends to self wait for a receive.
func (c *Comm) selfHeld() int {
	c.self.mu.Lock()
	defer c.self.mu.Unlock()
	n := 0
	for _, s := range c.self.q {
		n += s.n - s.off
	}
	return n
}

// unpostSelf takes back the last k sends to self (their group failed).
func (c *Comm) unpostSelf(k int) {
	c.self.mu.Lock()
	defer c.self.mu.Unlock()
	k = min(k, len(c.self.q))
	for _, s := range c.self.q[len(c.self.q)-k:] {
		if s.ev != 0 {
			_ = c.dev.DestroyEvent(s.ev)
		}
	}
	c.self.q = c.self.q[:len(c.self.q)-k]
}

// withoutSelfBlock is op with its self block emptied.
func withoutSelfBlock(op *rt.Op, me int) *rt.Op {
	o := *op
	o.SendCounts = append([]int(nil), op.SendCounts...)
	o.RecvCounts = append([]int(nil), op.RecvCounts...)
	o.SendCounts[me], o.RecvCounts[me] = 0, 0
	return &o
}

// selfBlock copies an all-to-all's self block device to device on its
// stream; nothing where it is in place (an in-place Gather's or Scatter's
// root).
func (c *Comm) selfBlock(op *rt.Op) error {
	me := c.rank
	if op.RecvBufs[me] == op.SendBufs[me] {
		return nil
	}
	dev, err := c.dev.GetDevice()
	if err != nil {
		return err
	}
	return c.dev.Memcpy(dev, op.RecvBufs[me], op.SendBufs[me], op.SendCounts[me]*op.SendTypes[me].Size(), rt.DeviceToDevice, op.Stream)
}
