package host

/*
#include <stdlib.h>
#include "fast.h"

// fast.c's entries for Go, their pointers as integers: cgo checks every
// pointer argument of a call from Go (cgocheck), which took half of a
// small call's Go time in a profile; these are C memory and buffers the Go
// caller keeps alive (its op) on a stack that cannot move during the call.

// xccl_fast_fused with its array of sends, recvs and counts as one integer.
static int xccl_fast_fused_go(uintptr_t f, uint64_t owner, size_t nbufs, uintptr_t args, int dtype, int op) {
  const uintptr_t* a = (const uintptr_t*)args; // sends, recvs, counts: nbufs each
  return xccl_fast_fused((xccl_fast*)f, owner, nbufs, (const void* const*)a, (void* const*)(a + nbufs),
                         (const size_t*)(a + 2 * nbufs), dtype, op);
}

static int xccl_fast_run_go(uintptr_t f, uint64_t owner, int kind, uintptr_t send, uintptr_t recv, size_t count,
                            int dtype, int op, int root) {
  return xccl_fast_run((xccl_fast*)f, owner, kind, (const void*)send, (void*)recv, count, dtype, op, root);
}
*/
import "C"

import (
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xccl-project/xccl/internal/relstore"
	rt "github.com/xccl-project/xccl/runtime"
)

// The C fast path (fast.h, fast.c). Measured from C, a C→Go call costs
// about 130 ns on the 2-core VM, as much as the one-way trip between two
// ranks: a small all-reduce from C took 0.2-0.6 us more than the same call
// from Go. fast.c runs the quick path's steady state without entering Go:
// a quickable collective (all-reduce, broadcast, reduce, all-gather,
// reduce-scatter) on the NULL stream of a host communicator whose every
// pair has fast boxes, outside any group, while nothing else is pending
// (nothing to drain from the peers it waits for, no late mismatch, past the
// first fastDepth calls). It sends what quickExchange sends (quiet and lone
// ranks alike) and reduces as quickReduce does; when a peer is not there
// within the spin, or its fingerprint differs, it has sent, and Go goes on
// from collect (FastResume) as quickExchange would.

const (
	fastC    = C.XCCL_FAST_C
	fastGo   = C.XCCL_FAST_GO
	fastLate = C.XCCL_FAST_LATE
)

type fastState = C.xccl_fast

// fastComms finds a communicator by its C state (FastResume).
var fastComms sync.Map // *C.xccl_fast → *Comm

// newFast makes the C state of a communicator that may take the fast path
// (set quick, every pair boxed, not traced), once its boxes are open.
func (c *Comm) newFast() {
	if !c.quick || !c.allBoxed || c.trace {
		return
	}
	slot := uintptr(fastSlotSize(c.n))
	for _, p := range c.boxPeers {
		b := &c.box[p]
		for k := range fastDepth { // fast.c finds slot k at k*slot from slot 0
			if uintptr(unsafe.Pointer(&b.out[k][0])) != uintptr(unsafe.Pointer(&b.out[0][0]))+uintptr(k)*slot ||
				uintptr(unsafe.Pointer(&b.in[k][0])) != uintptr(unsafe.Pointer(&b.in[0][0]))+uintptr(k)*slot {
				return
			}
		}
		if c.peerBells[p] == nil || c.peerBells[p].efd != 0 {
			return
		}
	}
	f := C.xccl_fast_get()
	c.fxOwner = fastTokens.Add(1)
	f.owner = C.uint64_t(c.fxOwner)
	f.peer = (*C.xccl_fast_peer)(C.calloc(C.size_t(c.n), C.sizeof_xccl_fast_peer))
	f.scratch = (*C.char)(C.aligned_alloc(64, C.size_t((c.fastCap+63)&^63))) // whole lines: a staged batch is copied out as one string (fast.c)
	if f.scratch == nil {
		panic("host: out of memory for the fast path's scratch") // as cgo's C.malloc does
	}
	f.rank, f.n = C.int32_t(c.rank), C.int32_t(c.n)
	// The C path polls a late peer as long as collect would before it
	// yields (c.spin), not quickPoll's fastSpin: a resume costs a C→Go
	// call, and with 2 ranks a short spin fell into turns where each rank
	// resumed every other call (8-byte all-reduce 1.15 us, 2911 of 3000
	// calls resumed, against 0.17-0.32 us and at most 400 with c.spin;
	// alternating runs of both).
	f.spin = C.int32_t(c.spin)
	f.slot, f.cap = C.uint64_t(slot), C.uint64_t(c.fastCap)
	f.reduce_max, f.others_max, f.fused_max = sharedReduceMin, sharedOthersMin, C.uint64_t(c.fastCap)+1
	if c.fusedShareable() {
		f.fused_max = sharedReduceMin
	}
	for _, dt := range rt.AllDataTypes() {
		if isHalf(dt) {
			continue
		}
		f.size[dt] = C.uint8_t(dt.Size())
		for _, op := range []rt.ReduceOp{rt.Sum, rt.Max, rt.Min, rt.Product} { // Avg divides after: Go's
			if cReduces(dt) && supports(dt, op) == nil {
				f.red[dt] |= 1 << op
			}
		}
	}
	peers := unsafe.Slice(f.peer, c.n)
	for _, p := range c.boxPeers {
		b, fp := &c.box[p], &peers[p]
		fp.out = (*C.char)(unsafe.Pointer(&b.out[0][0]))
		fp.in = (*C.char)(unsafe.Pointer(&b.in[0][0]))
		fp.done_out = (*C.uint64_t)(unsafe.Pointer(b.doneOut))
		fp.done_in = (*C.uint64_t)(unsafe.Pointer(b.doneIn))
		fp.bell_seq = (*C.uint32_t)(unsafe.Pointer(c.peerBells[p].seq))
		fp.bell_waiters = (*C.uint32_t)(unsafe.Pointer(c.peerBells[p].waiters))
	}
	sent := (*[fastDepth][fpHeader]byte)(unsafe.Pointer(&f.sent))
	lone := (*[fastDepth]uint64)(unsafe.Pointer(&f.lone))
	*sent, *lone = *c.sent, *c.lone
	c.sent, c.lone = sent, lone // these live in C memory, written by either side
	c.fx = f
	c.fastOut()
	fastComms.Store(f, c)
	c.fxRun.Store(f)
}

// setFusedMemo sets fusedMemo's entry for size class to m, and fast.c's
// copy of it (fused_probe: 0 try, else from which collective; collMu and
// the C state's lock held). A new C state's copy is all 0, as a new memo.
func (c *Comm) setFusedMemo(class int, m sharedMemo) {
	c.fusedMemo[class] = m
	if c.fx == nil {
		return
	}
	probe := m.probe
	if m.shared {
		probe = 0
	}
	c.fx.fused_probe[class] = C.uint64_t(probe)
}

// fastTokens numbers the communicators that have a C state (owner).
var fastTokens atomic.Uint64

// cReduces reports whether fast.c's kernels (xccl_reduce3) take dt.
func cReduces(dt rt.DataType) bool {
	switch dt {
	case rt.Uint8, rt.Uint16, rt.Uint32, rt.Uint64, rt.Int8, rt.Int16, rt.Int32, rt.Int64, rt.Float32, rt.Float64:
		return true
	}
	return false
}

// FastPath is the communicator's C state for the C entries (nil: none).
func (c *Comm) FastPath() unsafe.Pointer { return unsafe.Pointer(c.fx) }

func (c *Comm) fastWord() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&c.fx.word)) }

// fastSeq is C's collective count: the call C runs (or resumes in Go)
// once it has its number, the last one it ran before.
func (c *Comm) fastSeq() uint64 { return (*atomic.Uint64)(unsafe.Pointer(&c.fx.seq)).Load() }

func (c *Comm) fastPeers() []C.xccl_fast_peer { return unsafe.Slice(c.fx.peer, c.n) }

// StopFastPath turns the fast path off for good: the communicator's calls
// all go through Go from now on (streams, statistics, destroy, failure).
func (c *Comm) StopFastPath() {
	if c.fxStopped.Load() { // set only once off is: a caller never returns before
		return
	}
	c.fxMu.Lock()
	defer c.fxMu.Unlock()
	if c.fx != nil {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.fx.off)), 1)
	}
	c.fxRun.Store(nil) // exec no longer asks fast.c, which would refuse
	c.fxStopped.Store(true)
}

// lockColl takes what a collective holds: collMu, then the C state's lock
// (fastLock); unlockColl lets both go.
func (c *Comm) lockColl() {
	c.collMu.Lock()
	c.fastLock()
	c.inFlight.Store(c.collSeq + 1)
}

func (c *Comm) unlockColl() {
	c.inFlight.Store(0)
	c.fastUnlock()
	c.collMu.Unlock()
}

// fastLock takes the C state's lock for a Go collective (collMu held),
// waiting for a C caller that holds it (at most its spin, or a resumed
// call in Go), and copies in what C changed.
func (c *Comm) fastLock() {
	if c.fx == nil {
		return
	}
	w := c.fastWord()
	for i := 0; ; i++ {
		if v := w.Load(); v&(fastC|fastGo) == 0 && w.CompareAndSwap(v, fastGo) {
			break
		}
		switch {
		case i < 100:
		case i < 1000:
			goruntime.Gosched()
		default: // a resumed call (in Go, waiting for a peer) holds it: back off, to 1 ms
			time.Sleep(min(time.Duration(i-999)*20*time.Microsecond, time.Millisecond))
		}
	}
	c.fastIn(false)
}

// fastIn copies the collective state from C (all: even if C ran no call).
func (c *Comm) fastIn(all bool) {
	f := c.fx
	if f.peer == nil || !all && uint64(f.seq) == c.collSeq {
		return // C ran nothing since Go let go; its cached counts (seen) may lag, which is allowed
	}
	c.collSeq = uint64(f.seq)
	peers := c.fastPeers()
	for _, p := range c.boxPeers {
		b, fp := &c.box[p], &peers[p]
		b.got, b.seen, b.told = uint64(fp.got), uint64(fp.seen), uint64(fp.told)
	}
}

// fastOut copies the collective state to C.
func (c *Comm) fastOut() {
	f := c.fx
	if f.peer == nil {
		return // freed (Destroy)
	}
	f.seq = C.uint64_t(c.collSeq)
	peers := c.fastPeers()
	for _, p := range c.boxPeers {
		b, fp := &c.box[p], &peers[p]
		fp.got, fp.seen, fp.told = C.uint64_t(b.got), C.uint64_t(b.seen), C.uint64_t(b.told)
	}
	if c.logged[algoDirect] && f.logged == 0 {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&f.logged)), 1)
	}
}

// fastUnlock copies the state out and lets go of the lock (held by Go, or
// by C for a resumed call), marking a late mismatch that waits for the next
// call (which Go then runs): a store-release, the lock's holder being the
// only one that changes it.
func (c *Comm) fastUnlock() {
	if c.fx == nil {
		return
	}
	c.fastOut()
	var v uint64
	if c.lateErr != nil {
		v = fastLate
	}
	relstore.Store((*uint64)(unsafe.Pointer(&c.fx.word)), v)
}

// fastFree, in Destroy (collMu and the lock held, the fast path off),
// frees what only a lock holder touches and hands the struct back to the
// free list (xccl_fast_put): what was in it comes back to Go memory.
func (c *Comm) fastFree() {
	if c.fx == nil {
		return
	}
	c.fxMu.Lock()
	defer c.fxMu.Unlock()
	f := c.fx
	for st, v := range c.fastCallsLocked() {
		c.count(st, v)
	}
	sent, lone := *c.sent, *c.lone
	c.sent, c.lone = &sent, &lone
	fastComms.Delete(f)
	c.fxRun.Store(nil) // a Go caller that loaded f before finds another owner in it
	C.free(unsafe.Pointer(f.scratch))
	C.free(unsafe.Pointer(f.peer))
	f.scratch, f.peer = nil, nil
	c.fx = nil
	C.xccl_fast_put(f)
}

// FastResume goes on, in Go, with a call the C fast path sent and could
// not finish (xccl_fast_run answered XCCL_FAST_RESUME, the lock held):
// quickExchange's collect, then the rest of quickRun, as exec does.
func FastResume(f unsafe.Pointer, op *rt.Op) error {
	c, err := fastCommOf(f)
	if err != nil {
		return err
	}
	return c.fastResume(op)
}

// fastCommOf is the communicator of C state f, whose lock a resumed call
// holds (let go if there is none).
func fastCommOf(f unsafe.Pointer) (*Comm, error) {
	v, ok := fastComms.Load((*C.xccl_fast)(f))
	if !ok { // cannot be: Destroy waits for the lock this call holds
		relstore.Store((*uint64)(unsafe.Pointer(&(*C.xccl_fast)(f).word)), 0)
		return nil, rt.Failedf("host: the fast path's communicator is gone")
	}
	return v.(*Comm), nil
}

// FastRanks is the rank and the size of the communicator of C state f.
func FastRanks(f unsafe.Pointer) (rank, n int) {
	fs := (*C.xccl_fast)(f)
	return int(fs.rank), int(fs.n)
}

func (c *Comm) fastResume(op *rt.Op) error {
	c.fastIn(true)
	defer c.fastUnlock()
	c.count(statFastResumed, 1)
	if err := c.quickDo(op, true); err != nil || c.lateErr != nil {
		return c.failed(c.takeBack(c.takeLate(err)))
	}
	return nil
}

// fastCall runs op as the C entries do, through fast.c when it takes it
// (exec's small calls, from Go: a Go→C call costs far less than the Go
// path's locks and copies). taken: fast.c took it (its result is err).
func (c *Comm) fastCall(op *rt.Op) (taken bool, err error) {
	return c.fastRun(op.Kind, op.Send, op.Recv, op.Count, op.Type, op.Red, op.Root, op)
}

// fastRun is fastCall of a call given by its arguments; op, if not nil,
// is the same call (a resume needs one, made here otherwise).
func (c *Comm) fastRun(kind rt.OpKind, send, recv unsafe.Pointer, count int, dt rt.DataType, red rt.ReduceOp, root int, op *rt.Op) (taken bool, err error) {
	f := c.fxRun.Load()
	// What fast.c never takes, refused without the call; root before it
	// becomes a C int.
	if f == nil || count < 0 || red == rt.Avg || !red.Valid() || isHalf(dt) || root < 0 || root >= c.n {
		return false, nil
	}
	r := C.xccl_fast_run_go(C.uintptr_t(uintptr(unsafe.Pointer(f))), C.uint64_t(c.fxOwner), C.int(kind),
		C.uintptr_t(uintptr(send)), C.uintptr_t(uintptr(recv)), C.size_t(count), C.int(dt), C.int(red), C.int(root))
	goruntime.KeepAlive(send) // and the Go memory behind the buffers
	goruntime.KeepAlive(recv)
	switch r {
	case C.XCCL_FAST_DONE:
		return true, nil
	case C.XCCL_FAST_RESUME:
		if op == nil {
			op = &rt.Op{Kind: kind, Send: send, Recv: recv, Count: count, Type: dt, Red: red, Root: root}
		}
		return true, c.fastResume(op)
	}
	return false, nil
}

// FastRun runs a small NULL-stream collective through fast.c before any
// check, for package xccl's typed calls: fast.c refuses whatever it does
// not run (invalid arguments, a communicator that used streams or is
// broken or destroyed included), and the caller then goes the whole way
// (validate, Run). Skipping the op, its pool and the layers between saves
// a fifth of a small Go call.
func (c *devComm) FastRun(kind rt.OpKind, send, recv unsafe.Pointer, count int, dt rt.DataType, red rt.ReduceOp, root int) (bool, error) {
	return c.fastRun(kind, send, recv, count, dt, red, root, nil)
}

// fusedArgs holds a fused batch's sends, recvs and counts for fast.c, as
// integers: Go memory without Go pointers, which cgocheck need not walk.
type fusedArgs struct{ a []uintptr }

var fusedArgsPool = sync.Pool{New: func() any { return new(fusedArgs) }}

// fastFused runs fused all-reduce op (fusedInPlace's) through fast.c when
// it takes it, as fastCall does a single call.
func (c *Comm) fastFused(op *rt.Op) (taken bool, err error) {
	f := c.fxRun.Load()
	if f == nil {
		return false, nil
	}
	k := len(op.Batch)
	if k < 2 { // fast.c's refusal, without building its arguments
		return false, nil
	}
	args := fusedArgsPool.Get().(*fusedArgs)
	defer fusedArgsPool.Put(args)
	if cap(args.a) < 3*k {
		args.a = make([]uintptr, 3*k)
	}
	a := args.a[:3*k]
	for i, o := range op.Batch {
		a[i], a[k+i], a[2*k+i] = uintptr(o.Send), uintptr(o.Recv), uintptr(o.Count)
	}
	r := C.xccl_fast_fused_go(C.uintptr_t(uintptr(unsafe.Pointer(f))), C.uint64_t(c.fxOwner), C.size_t(k),
		C.uintptr_t(uintptr(unsafe.Pointer(&a[0]))), C.int(op.Type), C.int(op.Red))
	goruntime.KeepAlive(args)
	goruntime.KeepAlive(op)
	switch r {
	case C.XCCL_FAST_DONE:
		return true, nil
	case C.XCCL_FAST_RESUME:
		return true, c.fusedResume(op)
	}
	return false, nil
}

// FastResumeFused is FastResume for a fused all-reduce (xccl_fast_fused).
func FastResumeFused(f unsafe.Pointer, op *rt.Op) error {
	c, err := fastCommOf(f)
	if err != nil {
		return err
	}
	return c.fusedResume(op)
}

// fastBody is fast.c's fingerprint body of such a call: for tests.
func fastBody(op *rt.Op) (uint64, uint64) {
	var w0, w1 C.uint64_t
	C.xccl_fast_body(C.int(op.Kind), C.int(op.Type), C.int(op.Red), C.int(op.Root), C.uint64_t(op.Count), &w0, &w1)
	return uint64(w0), uint64(w1)
}

// fastCallsLocked is what the C path ran, by statistic: direct
// all-reduces, other direct collectives, fused batches and their buffers
// (EngineStats; fxMu held).
func (c *Comm) fastCallsLocked() map[stat]uint64 {
	if c.fx == nil {
		return nil
	}
	load := func(p *C.uint64_t) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(p))) }
	f := c.fx
	return map[stat]uint64{statAllReduceDirect: load(&f.calls_ar), statDirect: load(&f.calls),
		statFusedBatches: load(&f.calls_fused), statFusedBuffers: load(&f.bufs_fused)}
}
