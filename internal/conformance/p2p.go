package conformance

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/xccl-project/xccl/internal/refdata"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// Point-to-point patterns real callers use, sends to self included (NCCL
// allows them, Paddle and vendor plugins rely on them).

// p2pSuite runs every point-to-point case for one data type and count.
func p2pSuite(t *testing.T, dev rt.Device, comms []*xccl.Comm, dt rt.DataType, count int) {
	selfAcrossStreams(t, dev, comms, dt, count)
	sendRecvRing(t, comms, dt, count, false)
	sendRecvRing(t, comms, dt, count, true)
	allToAllAsSendRecv(t, comms, dt, count)
	legacyScatter(t, comms, dt, count)
	neighbours(t, comms, dt, count)
	zeroCountP2P(t, comms, dt)
	heldThenGrouped(t, comms, dt, count)
}

// heldThenGrouped: a send to self outside a group, then a group that sends
// to self again and receives both with one receive (and a ring beside).
func heldThenGrouped(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int) {
	n := len(comms)
	es := dt.Size()
	out, ring := make([][]byte, n), make([][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		first, second := fillAt(dt, r, 0, count), fillAt(dt, r, count, count)
		mine := fillAt(dt, r, 5*count, count)
		out[r], ring[r] = make([]byte, 2*count*es), make([]byte, count*es)
		if err := c.Send(ptr(first), count, dt, r, 0); err != nil {
			return err
		}
		ops := []rt.Op{
			{Kind: rt.OpSend, Send: ptr(second), Count: count, Type: dt, Root: r},
			{Kind: rt.OpRecv, Recv: ptr(out[r]), Count: 2 * count, Type: dt, Root: r},
		}
		if n > 1 { // a ring beside (with one rank it would be more of the same stream)
			ops = append([]rt.Op{{Kind: rt.OpRecv, Recv: ptr(ring[r]), Count: count, Type: dt, Root: (r + n - 1) % n}}, ops...)
			ops = append(ops, rt.Op{Kind: rt.OpSend, Send: ptr(mine), Count: count, Type: dt, Root: (r + 1) % n})
		}
		err := runGroup(c, true, ops)
		runtime.KeepAlive(first)
		return err
	})
	for r := 0; r < n; r++ {
		check(t, dt, fmt.Sprintf("held then grouped self count=%d rank %d", count, r), out[r],
			fillAt(dt, r, 0, 2*count))
		if n > 1 {
			left := (r + n - 1) % n
			check(t, dt, fmt.Sprintf("held then grouped ring count=%d rank %d", count, r), ring[r],
				fillAt(dt, left, 5*count, count))
		}
	}
}

// runGroup issues ops in order, inside one group when grouped.
func runGroup(c *xccl.Comm, grouped bool, ops []rt.Op) error {
	var g *xccl.Group
	if grouped {
		g = &xccl.Group{}
		g.Start()
	}
	for _, op := range ops {
		if err := c.Do(g, op); err != nil {
			if g != nil {
				_ = g.End()
			}
			return err
		}
	}
	if g != nil {
		return g.End()
	}
	return nil
}

// allToAllAsSendRecv: an all-to-all written as one group of sends and
// receives to every rank, self included, receives first, with uneven
// counts (count+p+r elements from r to p; none at all when count is 0).
func allToAllAsSendRecv(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int) {
	n := len(comms)
	es := dt.Size()
	blocks := func(from, to int) int {
		if count == 0 {
			return 0
		}
		return count + from + 2*to
	}
	recv := make([][][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		recv[r] = make([][]byte, n)
		var ops []rt.Op
		for p := 0; p < n; p++ {
			recv[r][p] = make([]byte, blocks(p, r)*es)
			ops = append(ops, rt.Op{Kind: rt.OpRecv, Recv: ptr(recv[r][p]), Count: blocks(p, r), Type: dt, Root: p})
		}
		for p := n - 1; p >= 0; p-- {
			send := fillAt(dt, r, 100*p, blocks(r, p))
			ops = append(ops, rt.Op{Kind: rt.OpSend, Send: ptr(send), Count: blocks(r, p), Type: dt, Root: p})
		}
		return runGroup(c, true, ops)
	})
	for r := 0; r < n; r++ {
		for p := 0; p < n; p++ {
			want := expected(dt, blocks(p, r), func(i int) refdata.Value { return refdata.Gen(dt, p, 100*r+i) })
			check(t, dt, fmt.Sprintf("grouped send/recv all-to-all count=%d rank %d from %d", count, r, p), recv[r][p], want)
		}
	}
}

// legacyScatter is Paddle's legacy ProcessGroupCustom::Scatter: the root
// sends slice p to every rank p, itself included, and receives its own
// slice, all in one group; the others receive. Every rank is root once.
func legacyScatter(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int) {
	n := len(comms)
	es := dt.Size()
	for root := 0; root < n; root++ {
		out := make([][]byte, n)
		OnAll(t, comms, func(r int, c *xccl.Comm) error {
			out[r] = make([]byte, count*es)
			recv := rt.Op{Kind: rt.OpRecv, Recv: ptr(out[r]), Count: count, Type: dt, Root: root}
			if r != root {
				return runGroup(c, true, []rt.Op{recv})
			}
			all := fill(dt, root, count*n)
			var ops []rt.Op
			for p := 0; p < n; p++ {
				ops = append(ops, rt.Op{Kind: rt.OpSend, Send: ptr(all[p*count*es:]), Count: count, Type: dt, Root: p})
			}
			return runGroup(c, true, append(ops, recv))
		})
		for r := 0; r < n; r++ {
			want := fillAt(dt, root, r*count, count)
			check(t, dt, fmt.Sprintf("legacy scatter count=%d root %d rank %d", count, root, r), out[r], want)
		}
	}
}

// neighbours: ungrouped, every rank sends to its right and then its left
// neighbour before it receives from its left and then its right one (with
// one rank both are itself; with two, the same peer twice).
func neighbours(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int) {
	n := len(comms)
	es := dt.Size()
	fromLeft, fromRight := make([][]byte, n), make([][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		right, left := (r+1)%n, (r+n-1)%n
		toRight, toLeft := fillAt(dt, r, 0, count), fillAt(dt, r, 7*count+3, count)
		fromLeft[r], fromRight[r] = make([]byte, count*es), make([]byte, count*es)
		return runGroup(c, false, []rt.Op{
			{Kind: rt.OpSend, Send: ptr(toRight), Count: count, Type: dt, Root: right},
			{Kind: rt.OpSend, Send: ptr(toLeft), Count: count, Type: dt, Root: left},
			{Kind: rt.OpRecv, Recv: ptr(fromLeft[r]), Count: count, Type: dt, Root: left},
			{Kind: rt.OpRecv, Recv: ptr(fromRight[r]), Count: count, Type: dt, Root: right},
		})
	})
	for r := 0; r < n; r++ {
		right, left := (r+1)%n, (r+n-1)%n
		check(t, dt, fmt.Sprintf("neighbours count=%d rank %d from left", count, r), fromLeft[r],
			fillAt(dt, left, 0, count))
		check(t, dt, fmt.Sprintf("neighbours count=%d rank %d from right", count, r), fromRight[r],
			fillAt(dt, right, 7*count+3, count))
	}
}

// zeroCountP2P: sends and receives of count 0 with NULL buffers, to self
// and to the ranks on either side in one group, and outside groups to
// self and between pairs of ranks (the lower one sends first, as NCCL's
// blocking order needs); the communicator works after. A device that
// matches them (rt.ZeroP2Per) makes each pair a message of no bytes, the
// others no-ops: NCCL-valid programs work either way.
func zeroCountP2P(t *testing.T, comms []*xccl.Comm, dt rt.DataType) {
	n := len(comms)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		var ops []rt.Op
		for _, p := range []int{r, (r + 1) % n, (r + n - 1) % n} {
			ops = append(ops, rt.Op{Kind: rt.OpSend, Send: nil, Count: 0, Type: dt, Root: p},
				rt.Op{Kind: rt.OpRecv, Recv: nil, Count: 0, Type: dt, Root: p})
		}
		if err := runGroup(c, true, ops); err != nil {
			return fmt.Errorf("count-0 send/recv grouped: %w", err)
		}
		pair := []rt.Op{{Kind: rt.OpSend, Send: nil, Count: 0, Type: dt, Root: r},
			{Kind: rt.OpRecv, Recv: nil, Count: 0, Type: dt, Root: r}}
		if p := r ^ 1; p < n {
			send := rt.Op{Kind: rt.OpSend, Send: nil, Count: 0, Type: dt, Root: p}
			recv := rt.Op{Kind: rt.OpRecv, Recv: nil, Count: 0, Type: dt, Root: p}
			if r < p {
				pair = append(pair, send, recv)
			} else {
				pair = append(pair, recv, send)
			}
		}
		if err := runGroup(c, false, pair); err != nil {
			return fmt.Errorf("count-0 send/recv ungrouped: %w", err)
		}
		return nil
	})
	sendRecvRing(t, comms, dt, 3, false)
}

// selfAcrossStreams: ungrouped, each rank sends to itself twice on one
// stream and receives both with one receive on another stream; the
// receive's stream sees the bytes once synchronized. (Devices whose
// streams xccl cannot make, oneCCL's SYCL queues, skip it.)
func selfAcrossStreams(t *testing.T, dev rt.Device, comms []*xccl.Comm, dt rt.DataType, count int) {
	es := dt.Size()
	out := make([][]byte, len(comms))
	for _, c := range comms {
		probe, err := c.Device().CreateStream()
		if err != nil {
			t.Logf("self send/recv across streams skipped: %v", err)
			return
		}
		_ = c.Device().DestroyStream(probe)
	}
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		dev := c.Device()
		a, err := dev.CreateStream()
		if err != nil {
			return err
		}
		defer func() { _ = dev.DestroyStream(a) }()
		b, err := dev.CreateStream()
		if err != nil {
			return err
		}
		defer func() { _ = dev.DestroyStream(b) }()
		first, second := fillAt(dt, r, 0, count), fillAt(dt, r, count, count)
		out[r] = make([]byte, 2*count*es)
		if err := c.Send(ptr(first), count, dt, r, a); err != nil {
			return err
		}
		if err := c.Send(ptr(second), count, dt, r, a); err != nil {
			return err
		}
		if err := c.Recv(ptr(out[r]), 2*count, dt, r, b); err != nil {
			return err
		}
		if err := dev.SynchronizeStream(b); err != nil {
			return err
		}
		err = dev.SynchronizeStream(a)
		runtime.KeepAlive(first)
		runtime.KeepAlive(second)
		return err
	})
	for r := range comms {
		want := fillAt(dt, r, 0, 2*count)
		check(t, dt, fmt.Sprintf("self send/recv across streams count=%d rank %d", count, r), out[r], want)
	}
}
