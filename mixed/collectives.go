package mixed

import (
	"fmt"
	"strings"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// Run executes one operation, ordered on op.Stream: inputs written earlier
// on it are read, later work on it sees the result. The calling thread
// waits on the stream after its device-to-host copies (once per chunk) and
// runs the host engine's part itself.
func (c *Comm) Run(op *rt.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone.Load() {
		return rt.Errorf("mixed: the communicator was destroyed")
	}
	if err := c.AsyncError(); err != nil {
		return err
	}
	if op.Kind == rt.OpAllReduce && op.Batch != nil {
		for _, b := range op.Batch {
			if err := c.run(b); err != nil {
				return err
			}
		}
		return nil
	}
	return c.run(op)
}

// RunGroup runs a group's operations: sends first (the host engine's sends
// never wait for their receiver), then the rest in issue order.
func (c *Comm) RunGroup(ops []*rt.Op) error {
	for _, pass := range []bool{true, false} {
		for _, op := range ops {
			if (op.Kind == rt.OpSend) != pass {
				continue
			}
			mc, ok := op.Comm.(*Comm)
			if !ok {
				return rt.Errorf("mixed: a group mixes in a communicator of device %q", op.Comm.Device())
			}
			if err := mc.Run(op); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Comm) run(op *rt.Op) error {
	if op.Kind != rt.OpSend && op.Kind != rt.OpRecv {
		// Every rank counts every collective, whichever path it takes:
		// one rank's call may go flat where its peers' go hierarchical (a
		// mismatch, refused on every rank), and the numbers must not part.
		c.seq++
	}
	if op.Kind == rt.OpAllReduce && op.PreMul == nil && c.hierarchical(op.Type, op.Red) {
		c.plans[1].Add(1)
		return c.hierAllReduce(op)
	}
	c.plans[0].Add(1)
	err := c.flat(op)
	if rt.StatusOf(err) == rt.StatusFailed {
		// This rank's device or the host engine failed: the rank may skip
		// a host collective its peers wait in. Break every part now, so
		// that they fail at once instead of at their timeout.
		c.Abort()
	}
	return err
}

// flat runs op as host collectives over every rank: staged through host
// memory on an accelerator rank, in its own buffers on a host rank.
func (c *Comm) flat(op *rt.Op) error {
	if c.onHost() {
		return c.runOnHost(op)
	}
	es := op.Type.Size()
	n := op.Count * es
	s := op.Stream
	pm, err := c.hostPreMul(op)
	if err != nil {
		return err
	}
	switch op.Kind {
	case rt.OpAllReduce:
		return c.chunked(n, es, s, true, func(off, k int, st unsafe.Pointer) error {
			if err := c.d2h(st, unsafe.Add(op.Send, off), k, s); err != nil {
				return err
			}
			if err := c.wait(s); err != nil {
				return err
			}
			if err := c.inter(c.hc, &rt.Op{Kind: rt.OpAllReduce, Send: st, Recv: st, Count: k / es, Type: op.Type, Red: op.Red, PreMul: pm}); err != nil {
				return err
			}
			return c.h2d(unsafe.Add(op.Recv, off), st, k, s)
		})
	case rt.OpBroadcast:
		return c.chunked(n, es, s, c.rank == op.Root, func(off, k int, st unsafe.Pointer) error {
			if c.rank == op.Root {
				if err := c.d2h(st, unsafe.Add(op.Recv, off), k, s); err != nil {
					return err
				}
				if err := c.wait(s); err != nil {
					return err
				}
			}
			if err := c.inter(c.hc, &rt.Op{Kind: rt.OpBroadcast, Send: st, Recv: st, Count: k / es, Type: op.Type, Root: op.Root}); err != nil {
				return err
			}
			if c.rank == op.Root {
				return nil
			}
			return c.h2d(unsafe.Add(op.Recv, off), st, k, s)
		})
	case rt.OpReduce:
		return c.chunked(n, es, s, true, func(off, k int, st unsafe.Pointer) error {
			if err := c.d2h(st, unsafe.Add(op.Send, off), k, s); err != nil {
				return err
			}
			if err := c.wait(s); err != nil {
				return err
			}
			if err := c.inter(c.hc, &rt.Op{Kind: rt.OpReduce, Send: st, Recv: st, Count: k / es, Type: op.Type, Red: op.Red, Root: op.Root, PreMul: pm}); err != nil {
				return err
			}
			if c.rank != op.Root {
				return nil
			}
			return c.h2d(unsafe.Add(op.Recv, off), st, k, s)
		})
	case rt.OpAllGather:
		st, err := c.staging(n*c.n, s, true)
		if err != nil {
			return err
		}
		mine := unsafe.Add(st, c.rank*n)
		if err := c.d2h(mine, op.Send, n, s); err != nil {
			return err
		}
		if err := c.wait(s); err != nil {
			return err
		}
		if err := c.inter(c.hc, &rt.Op{Kind: rt.OpAllGather, Send: mine, Recv: st, Count: op.Count, Type: op.Type}); err != nil {
			return err
		}
		return c.h2d(op.Recv, st, n*c.n, s)
	case rt.OpReduceScatter:
		st, err := c.staging(n*c.n, s, true)
		if err != nil {
			return err
		}
		if err := c.d2h(st, op.Send, n*c.n, s); err != nil {
			return err
		}
		if err := c.wait(s); err != nil {
			return err
		}
		mine := unsafe.Add(st, c.rank*n)
		if err := c.inter(c.hc, &rt.Op{Kind: rt.OpReduceScatter, Send: st, Recv: mine, Count: op.Count, Type: op.Type, Red: op.Red, PreMul: pm}); err != nil {
			return err
		}
		return c.h2d(op.Recv, mine, n, s)
	case rt.OpSend:
		st, err := c.staging(n, s, true)
		if err != nil {
			return err
		}
		if err := c.d2h(st, op.Send, n, s); err != nil {
			return err
		}
		if err := c.wait(s); err != nil {
			return err
		}
		// The host engine has the bytes (in its ring, or copied) when Send returns.
		return c.inter(c.hc, &rt.Op{Kind: rt.OpSend, Send: st, Count: op.Count, Type: op.Type, Root: op.Root})
	case rt.OpRecv:
		st, err := c.staging(n, s, false)
		if err != nil {
			return err
		}
		if err := c.inter(c.hc, &rt.Op{Kind: rt.OpRecv, Recv: st, Count: op.Count, Type: op.Type, Root: op.Root}); err != nil {
			return err
		}
		return c.h2d(op.Recv, st, n, s)
	case rt.OpAllToAll:
		return c.allToAll(op)
	}
	return rt.Errorf("mixed: unknown operation %v", op.Kind)
}

// CreatePreMulSum (rt.PreMulSummer): a mixed communicator's pre-multiplied
// sums run flat, on the host engine, which scales each rank's input in host
// memory (hostPreMul); nothing to make in the clusters' libraries.
func (c *Comm) CreatePreMulSum(*rt.PreMul) (uintptr, error) { return 0, nil }

// DestroyPreMulSum has nothing to undo.
func (c *Comm) DestroyPreMulSum(uintptr) error { return nil }

// hostPreMul is op's pre-multiplied sum for the host engine on a staging
// rank: a device scalar copied to host memory now, after the work before
// op on its stream (as the library would read it when the call runs).
func (c *Comm) hostPreMul(op *rt.Op) (*rt.PreMul, error) {
	p := op.PreMul
	if p == nil || !p.Device {
		return p, nil
	}
	h := &rt.PreMul{Type: p.Type}
	if err := c.d2h(unsafe.Pointer(&h.Value[0]), p.Scalar, p.Type.Size(), op.Stream); err != nil {
		return nil, err
	}
	return h, c.wait(op.Stream)
}

// onHost reports whether this rank's device is the host device: its
// buffers are host memory, which the host engine works in directly.
func (c *Comm) onHost() bool { return c.dev.Name() == c.hostDev.Name() }

// runOnHost is run for a rank on the host device: its buffers are host
// memory, which the host engine works in, with no staging and no copies,
// once the work queued before the call on its stream is done. All-reduce,
// broadcast and reduce go in the pieces of the ranks that stage theirs
// (chunked), so that every rank runs the same host collectives. Measured,
// 4 host ranks on 2 cores as clusters 2+2, all-reduce of 2 MiB: 1.7 ms
// through staging, 0.5 without (the host engine alone: 0.4-0.6).
func (c *Comm) runOnHost(op *rt.Op) error {
	if err := c.wait(op.Stream); err != nil {
		return err
	}
	h := *op
	h.Stream = 0
	switch op.Kind {
	case rt.OpAllReduce, rt.OpBroadcast, rt.OpReduce:
		es := op.Type.Size()
		return c.pieces(op.Count*es, es, func(off, k int) error {
			h.Send, h.Recv, h.Count = at(op.Send, off), at(op.Recv, off), k/es
			return c.inter(c.hc, &h)
		})
	}
	return c.inter(c.hc, &h)
}

// at is p+off, or nil where p is (a reduce's receive buffer off the root).
func at(p unsafe.Pointer, off int) unsafe.Pointer {
	if p == nil {
		return nil
	}
	return unsafe.Add(p, off)
}

// pieces runs f over n bytes in pieces of at most the chunk size (whole
// elements of es bytes), the same on every rank.
func (c *Comm) pieces(n, es int, f func(off, k int) error) error {
	step := max(c.chunk/es*es, es)
	for off := 0; off < n; off += step {
		if err := f(off, min(step, n-off)); err != nil {
			return err
		}
	}
	return nil
}

// chunked runs f over pieces of n bytes, each with the staging at hand.
// copyFirst: f starts with a copy into the staging on s (see staging).
func (c *Comm) chunked(n, es int, s rt.Stream, copyFirst bool, f func(off, k int, st unsafe.Pointer) error) error {
	return c.pieces(n, es, func(off, k int) error {
		st, err := c.staging(min(n, max(c.chunk/es*es, es)), s, copyFirst)
		if err != nil {
			return err
		}
		return f(off, k, st)
	})
}

// allToAll copies every block to the staging, exchanges them on the host
// engine, and copies the received blocks back.
func (c *Comm) allToAll(op *rt.Op) error {
	s := op.Stream
	sendOff, recvOff := make([]int, c.n+1), make([]int, c.n+1)
	for p := 0; p < c.n; p++ {
		sendOff[p+1] = sendOff[p] + op.SendCounts[p]*op.SendTypes[p].Size()
		recvOff[p+1] = recvOff[p] + op.RecvCounts[p]*op.RecvTypes[p].Size()
	}
	st, err := c.staging(sendOff[c.n]+recvOff[c.n], s, true)
	if err != nil {
		return err
	}
	h := *op
	h.Stream = 0
	h.SendBufs, h.RecvBufs = make([]unsafe.Pointer, c.n), make([]unsafe.Pointer, c.n)
	for p := 0; p < c.n; p++ {
		h.SendBufs[p] = unsafe.Add(st, sendOff[p])
		h.RecvBufs[p] = unsafe.Add(st, sendOff[c.n]+recvOff[p])
		if err := c.d2h(h.SendBufs[p], op.SendBufs[p], sendOff[p+1]-sendOff[p], s); err != nil {
			return err
		}
	}
	if err := c.wait(s); err != nil {
		return err
	}
	if err := c.inter(c.hc, &h); err != nil {
		return err
	}
	for p := 0; p < c.n; p++ {
		if err := c.h2d(op.RecvBufs[p], h.RecvBufs[p], recvOff[p+1]-recvOff[p], s); err != nil {
			return err
		}
	}
	return nil
}

// hierAllReduce: reduce to the cluster's leader on the cluster's library,
// the leaders' all-reduce on the host engine through staging, broadcast
// from the leader on the library. AVG is a SUM, scaled on the host.
func (c *Comm) hierAllReduce(op *rt.Op) error {
	if err := c.agree(op); err != nil {
		return err
	}
	err := c.hierSteps(op)
	if rt.StatusOf(err) == rt.StatusFailed {
		// A step failed on this rank: break every part now, so ranks
		// waiting for this one in another step fail fast too.
		c.Abort()
	}
	return err
}

// agree checks, on the host engine, that every rank makes the same call
// before the hierarchical steps start (the flat path's host collective
// checks its own call): a mismatch is C_ERROR on every rank and nothing
// else runs.
func (c *Comm) agree(op *rt.Op) error {
	if len(c.fps) == 0 {
		c.fps = make([]byte, c.n*rt.FingerprintSize)
	}
	want := rt.FingerprintOf(op, c.seq)
	mine := c.fps[c.rank*rt.FingerprintSize : (c.rank+1)*rt.FingerprintSize]
	want.Put(mine)
	g := &rt.Op{Kind: rt.OpAllGather, Send: unsafe.Pointer(&mine[0]), Recv: unsafe.Pointer(&c.fps[0]), Count: rt.FingerprintSize, Type: rt.Uint8}
	if err := c.inter(c.hc, g); err != nil {
		return err
	}
	var diffs []string
	for p := 0; p < c.n; p++ {
		theirs, ok := rt.ParseFingerprint(c.fps[p*rt.FingerprintSize:])
		if !ok || theirs != want {
			diffs = append(diffs, fmt.Sprintf("rank %d called %s as op #%d", p, theirs, theirs.Seq))
		}
	}
	if len(diffs) > 0 {
		return rt.Errorf("mixed communicator: collective mismatch: %s; rank %d called %s as op #%d",
			strings.Join(diffs, ", "), c.rank, want, c.seq)
	}
	return nil
}

func (c *Comm) hierSteps(op *rt.Op) error {
	red := op.Red
	if red == rt.Avg {
		red = rt.Sum
	}
	s := op.Stream
	src := op.Send
	if c.sub != nil {
		err := c.timed(phIntra, func() error {
			return runOn(c.sub, &rt.Op{Kind: rt.OpReduce, Send: op.Send, Recv: op.Recv, Count: op.Count, Type: op.Type, Red: red, Root: 0, Stream: s})
		})
		if err != nil {
			return c.inSub(err)
		}
		src = op.Recv
	}
	if c.leaders != nil && c.onHost() {
		// A host leader all-reduces in the caller's buffers, in the staging
		// leaders' pieces (runOnHost).
		if err := c.wait(s); err != nil {
			return err
		}
		es := op.Type.Size()
		err := c.pieces(op.Count*es, es, func(off, k int) error {
			dst := unsafe.Add(op.Recv, off)
			if err := c.inter(c.leaders, &rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Add(src, off), Recv: dst, Count: k / es, Type: op.Type, Red: red}); err != nil {
				return c.inLeaders(err)
			}
			if op.Red == rt.Avg {
				scale(dst, k/es, op.Type, c.n)
			}
			return nil
		})
		if err != nil {
			return err
		}
	} else if c.leaders != nil {
		es := op.Type.Size()
		err := c.chunked(op.Count*es, es, s, true, func(off, k int, st unsafe.Pointer) error {
			if err := c.d2h(st, unsafe.Add(src, off), k, s); err != nil {
				return err
			}
			if err := c.wait(s); err != nil {
				return err
			}
			if err := c.inter(c.leaders, &rt.Op{Kind: rt.OpAllReduce, Send: st, Recv: st, Count: k / es, Type: op.Type, Red: red}); err != nil {
				return c.inLeaders(err)
			}
			if op.Red == rt.Avg {
				scale(st, k/es, op.Type, c.n)
			}
			return c.h2d(unsafe.Add(op.Recv, off), st, k, s)
		})
		if err != nil {
			return err
		}
	}
	if c.sub != nil {
		return c.inSub(c.timed(phIntra, func() error {
			return runOn(c.sub, &rt.Op{Kind: rt.OpBroadcast, Send: op.Recv, Recv: op.Recv, Count: op.Count, Type: op.Type, Root: 0, Stream: s})
		}))
	}
	return nil
}

// inSub and inLeaders say where a hierarchical step failed, and how that
// communicator's rank numbers (in the error) map to this one's.
func (c *Comm) inSub(err error) error {
	if err == nil {
		return nil
	}
	return rt.WrapFailed(err, "mixed rank %d: in the communicator of its cluster %q, whose ranks 0..%d are this communicator's %v",
		c.rank, c.mine.label, len(c.mine.ranks)-1, c.mine.ranks)
}

func (c *Comm) inLeaders(err error) error {
	if err == nil {
		return nil
	}
	leaders := make([]int, len(c.cs))
	for i, cl := range c.cs {
		leaders[i] = cl.leader()
	}
	return rt.WrapFailed(err, "mixed rank %d: in the clusters' leaders' communicator, whose ranks 0..%d are this communicator's %v",
		c.rank, len(leaders)-1, leaders)
}

// scale divides n real elements at p by d (the AVG of a SUM).
func scale(p unsafe.Pointer, n int, dt rt.DataType, d int) {
	switch dt {
	case rt.Float32:
		for i, v := range unsafe.Slice((*float32)(p), n) {
			unsafe.Slice((*float32)(p), n)[i] = v / float32(d)
		}
	case rt.Float64:
		for i, v := range unsafe.Slice((*float64)(p), n) {
			unsafe.Slice((*float64)(p), n)[i] = v / float64(d)
		}
	}
}
