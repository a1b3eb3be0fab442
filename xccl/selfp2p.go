package xccl

import (
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
	return (op.Kind == rt.OpSend || op.Kind == rt.OpRecv) && op.Root == c.c.Rank()
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
			"(post the send to self first, or both in one group)", c.c.Rank(), need, have)
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
			me := c.c.Rank()
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
	me := c.c.Rank()
	n := op.SendCounts[me] * op.SendTypes[me].Size()
	sc := append([]int(nil), op.SendCounts...)
	rc := append([]int(nil), op.RecvCounts...)
	sc[me], rc[me] = 0, 0
	rest := *op
	rest.SendCounts, rest.RecvCounts = sc, rc
	if err := c.c.Run(&rest); err != nil {
		return err
	}
	dev, err := c.dev.GetDevice()
	if err != nil {
		return err
	}
	return c.dev.Memcpy(dev, op.RecvBufs[me], op.SendBufs[me], n, rt.DeviceToDevice, op.Stream)
}

// groupSelf takes a group's sends to and receives from self out of ops,
// for communicators whose device does not match them inside a group.
func (g *Group) groupSelf(ops []*rt.Op) (rest, sends, recvs []*rt.Op) {
	rest = ops[:0:0]
	for _, op := range ops {
		c := g.comms[op.Comm]
		if c == nil || c.selfMode != rt.SelfCopy || !c.isSelf(op) {
			rest = append(rest, op)
		} else if op.Kind == rt.OpSend {
			sends = append(sends, op)
		} else {
			recvs = append(recvs, op)
		}
	}
	return rest, sends, recvs
}
