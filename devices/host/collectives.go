package host

import (
	"fmt"
	"strings"
	"unsafe"

	"go.uber.org/zap"

	rt "github.com/xccl-project/xccl/runtime"
)

// exec runs one validated operation synchronously on the calling
// goroutine: a small collective through the C fast path when it takes it
// (fast.c, as the C entries do; it refuses a call on a broken, destroyed,
// traced or busy communicator, and anything it does not do), else in Go.
// Measured in xccl-perf (2 ranks, 8 B all-reduce), the Go→C call costs
// less than what the Go path adds to the same messages.
func (c *Comm) exec(op *rt.Op) error {
	if op.PreMul != nil {
		return c.execPreMul(op)
	}
	if op.Kind <= rt.OpReduceScatter && op.Batch == nil && op.Count*op.Type.Size() <= c.fastCap {
		if taken, err := c.fastCall(op); taken {
			return err
		}
	}
	return c.execGo(op)
}

// execGo is exec in Go.
func (c *Comm) execGo(op *rt.Op) (err error) {
	if c.destroyed.Load() || c.broken.Load() != nil {
		return c.usable()
	}
	if c.trace { // not c.log.Check on every call: it costs ~4% of a small one
		seq := c.seq.Add(1) // a locked add: only when tracing
		ce := c.log.Check(zap.DebugLevel, "op")
		ce.Write(zap.Uint64("seq", seq), zap.Stringer("kind", op.Kind), zap.Int("count", op.Count),
			zap.Stringer("dtype", op.Type), zap.Stringer("redop", op.Red), zap.Int("root", op.Root))
	}
	es := op.Type.Size()
	n := op.Count * es
	switch op.Kind {
	case rt.OpSend:
		return c.failed(c.p2pSend(op.Root, bytesAt(op.Send, n)))
	case rt.OpRecv:
		return c.failed(c.p2pRecv(op.Root, bytesAt(op.Recv, n)))
	}
	if op.Batch != nil {
		return c.fusedAllReduce(op)
	}
	c.lockColl()
	defer c.unlockColl()    // one defer: exec's stay open-coded (a second made every call 50-100 ns slower)
	if c.destroyed.Load() { // destroyed (or aborted) while this call waited for the lock
		return c.usable()
	}
	c.collSeq++
	if c.quickable(op) {
		if err = c.quickRun(op); err == nil && c.lateErr == nil {
			return nil
		}
		return c.failed(c.takeBack(c.takeLate(err)))
	}
	var f rt.Fingerprint
	f.Set(op, c.collSeq)
	c.sharedTry = c.tryShared(f)
	if c.directPlan(f) { // directRound takes the pending call; cleared below if not
		c.pending.op, c.pending.seq = op, c.collSeq
		c.pending.fp.Set(op, c.collSeq) // in place, not a copy of f (Set)
	} else if err := c.agree(op, c.collSeq); err != nil {
		return c.failed(c.takeBack(err))
	}
	send, recv := c.buffers(op)
	switch op.Kind {
	case rt.OpAllReduce:
		err = c.allReduce(send, recv, op.Type, op.Red)
	case rt.OpBroadcast:
		err = c.broadcast(recv, op.Root)
	case rt.OpReduce:
		err = c.reduce(send, recv, op.Type, op.Red, op.Root)
	case rt.OpAllGather:
		err = c.allGather(send, recv)
	case rt.OpReduceScatter:
		err = c.reduceScatter(send, recv, op.Type, op.Red)
	case rt.OpAllToAll:
		err = c.allToAll(op)
	default:
		err = rt.Errorf("host: unknown operation %v", op.Kind)
	}
	if c.pending.op != nil {
		c.pending = pendingCall{}
	}
	return c.failed(c.takeBack(c.takeLate(err)))
}

// buffers is what collective op sends and receives in, as its algorithms
// see them: a broadcast works in its receive buffer (send is the same), a
// reduce off the root has none to receive in; nil for other kinds.
func (c *Comm) buffers(op *rt.Op) (send, recv []byte) {
	n := op.Count * op.Type.Size()
	switch op.Kind {
	case rt.OpAllReduce:
		return bytesAt(op.Send, n), bytesAt(op.Recv, n)
	case rt.OpBroadcast:
		return bytesAt(op.Recv, n), bytesAt(op.Recv, n)
	case rt.OpReduce:
		if c.rank == op.Root {
			recv = bytesAt(op.Recv, n)
		}
		return bytesAt(op.Send, n), recv
	case rt.OpAllGather:
		return bytesAt(op.Send, n), bytesAt(op.Recv, n*c.n)
	case rt.OpReduceScatter:
		return bytesAt(op.Send, n*c.n), bytesAt(op.Recv, n)
	}
	return nil, nil
}

func (c *Comm) failed(err error) error {
	if err != nil && rt.StatusOf(err) == rt.StatusFailed {
		return c.fail(err)
	}
	return err
}

func isHalf(dt rt.DataType) bool { return dt == rt.Float16 || dt == rt.BFloat16 }

func f32s(b []byte) []float32 { return view[float32](b) }
func u16s(b []byte) []uint16  { return view[uint16](b) }

// widened runs a reduction on FLOAT16/BFLOAT16 data in float32 so that every
// partial sum stays exact to float32 and the result is rounded once.
// in and out are half buffers of inN and outN elements.
func (c *Comm) widened(in []byte, inN int, out []byte, outN int, dt rt.DataType,
	run func(in32, out32 []byte) error) error {
	w := c.buf(0, 4*(inN+outN))
	in32, out32 := w[:4*inN], w[4*inN:]
	if in != nil {
		widen(f32s(in32), u16s(in), dt)
	}
	if err := run(in32, out32); err != nil {
		return err
	}
	if out != nil {
		narrow(u16s(out), f32s(out32), dt)
	}
	return nil
}

func (c *Comm) allReduce(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	if len(recv) == 0 {
		return nil
	}
	if isHalf(dt) {
		c.count(statHalfWidened, 1)
		count := len(recv) / 2
		return c.widened(send, count, recv, count, dt, func(in32, out32 []byte) error {
			return c.allReduce(in32, out32, rt.Float32, op)
		})
	}
	if c.n == 1 {
		copyIfDistinct(recv, send)
		return nil
	}
	if c.pending.op != nil { // directPlan chose the direct form (exec): the only way to it
		c.count(statAllReduceDirect, 1)
		return c.allReduceDirect(send, recv, dt, op)
	}
	switch a := c.allReduceAlgo(len(recv)); {
	case a == algoCMA:
		c.count(statAllReduceCMA, 1)
		return c.allReduceCMA(send, recv, dt, op)
	default: // the ring, or single copy between shared buffers
		if c.opts.Algo == "" && c.cma && (len(recv) >= cmaAllReduceMin || c.sharedTry) {
			shared, err := c.sharedSingleCopy(send, recv, c.opName("AllReduce", len(recv)))
			if err != nil {
				return err
			}
			if shared {
				if !c.logged[algoCMA] {
					c.logChoice(algoCMA, len(recv), "every rank's buffers are shared device memory: read and written in place, one pass")
				}
				c.count(statAllReduceCMA, 1)
				return c.allReduceCMA(send, recv, dt, op)
			}
		}
		c.count(statAllReduceRing, 1)
		return c.allReduceRing(send, recv, dt, op)
	}
}

func copyIfDistinct(dst, src []byte) {
	if len(dst) > 0 && unsafe.Pointer(&dst[0]) != unsafe.Pointer(&src[0]) {
		copy(dst, src)
	}
}

// chunk splits count elements of es bytes into c.n near-equal chunks.
func (c *Comm) chunk(b []byte, es, k int) []byte {
	count := len(b) / es
	q, r := count/c.n, count%c.n
	lo := k*q + min(k, r)
	hi := lo + q
	if k < r {
		hi++
	}
	return b[lo*es : hi*es]
}

func (c *Comm) right() int { return (c.rank + 1) % c.n }
func (c *Comm) left() int  { return (c.rank + c.n - 1) % c.n }
func (c *Comm) mod(i int) int {
	return ((i % c.n) + c.n) % c.n
}

// label names an operation in error messages; it is formatted only then.
type label struct {
	kind  string
	peer  int // for point-to-point kinds ("Send to rank")
	bytes int
	seq   uint64
	wait  bool // the fingerprint round: waiting for every rank to arrive
	free  bool // waiting for peers to finish earlier collectives (boxReady)
	recv  bool // a point-to-point receive: Destroy from another thread ends its wait
}

func (l label) String() string {
	switch {
	case l.wait:
		return fmt.Sprintf("%s (op #%d), waiting for every rank to arrive", l.kind, l.seq)
	case l.free:
		return fmt.Sprintf("op #%d, waiting for peers to finish the collectives before it", l.seq)
	case strings.HasSuffix(l.kind, "rank"):
		return fmt.Sprintf("%s %d (%d bytes)", l.kind, l.peer, l.bytes)
	}
	return fmt.Sprintf("%s of %d bytes (op #%d)", l.kind, l.bytes, l.seq)
}

// opName labels collective kind of bytes for waits and errors; collectives
// only (it reads collSeq under collMu).
func (c *Comm) opName(kind string, bytes int) label {
	return label{kind: kind, bytes: bytes, seq: c.collSeq} // the number the fingerprints carry (collMu held)
}

func (c *Comm) reduce(send, recv []byte, dt rt.DataType, op rt.ReduceOp, root int) error {
	if len(send) == 0 {
		return nil
	}
	if isHalf(dt) {
		count := len(send) / 2
		outN := 0
		if recv != nil {
			outN = count
		}
		return c.widened(send, count, recv, outN, dt, func(in32, out32 []byte) error {
			if outN == 0 {
				out32 = nil
			}
			return c.reduce(in32, out32, rt.Float32, op, root)
		})
	}
	if c.n == 1 {
		copyIfDistinct(recv, send)
		return nil
	}
	if c.pending.op != nil {
		c.count(statDirect, 1)
		return c.reduceDirect(send, recv, dt, op, root)
	}
	if ran, err := c.singleCopy(len(send), cmaMaxRoot, send, recv, c.opName("Reduce", len(send)),
		func() error { return c.reduceCMA(send, recv, dt, op, root) }); ran {
		return err
	}
	c.count(statReduceTree, 1)
	return c.reduceTree(send, recv, dt, op, root)
}

func (c *Comm) reduceScatter(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	if len(recv) == 0 {
		return nil
	}
	if isHalf(dt) {
		count := len(recv) / 2
		return c.widened(send, count*c.n, recv, count, dt, func(in32, out32 []byte) error {
			return c.reduceScatter(in32, out32, rt.Float32, op)
		})
	}
	if c.n == 1 {
		copyIfDistinct(recv, send)
		return nil
	}
	if c.pending.op != nil {
		c.count(statDirect, 1)
		return c.reduceScatterDirect(send, recv, dt, op)
	}
	if ran, err := c.singleCopy(len(send), cmaMaxReduce, send, recv, c.opName("ReduceScatter", len(recv)),
		func() error { return c.reduceScatterCMA(send, recv, dt, op) }); ran {
		return err
	}
	c.count(statReduceScatterRing, 1)
	return c.reduceScatterRing(send, recv, dt, op)
}
