// Package xccl is the collective API in Go: communicators over any
// registered device, argument validation, and group calls. The C ABI
// (package abi) is a thin layer over it.
package xccl

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/xccl-project/xccl/mixed"
	rt "github.com/xccl-project/xccl/runtime"
)

// Version of the library (XcclGetVersion reports major*10000+minor*100+patch).
const (
	VersionMajor = 0
	VersionMinor = 1
	VersionPatch = 0
)

// VersionCode is the integer XcclGetVersion returns.
func VersionCode() int { return VersionMajor*10000 + VersionMinor*100 + VersionPatch }

// maxBytes bounds any buffer: no 64-bit machine maps more than 2^48 bytes,
// so a larger count is a caller's error, not a buffer to walk off.
const maxBytes = 1 << 48

// Comm is a communicator: one rank of a group on one device.
type Comm struct {
	dev      rt.Device
	c        rt.Comm
	cfg      Config // its settings at init, which Split's communicators inherit
	devID    int    // the device (of dev) it was made on: the calling thread's then
	st       stats
	checking bool // XCCL_CHECK=1 on a vendor device (check.go)
	chk      checker
	selfMode rt.SelfMode // who matches sends to self (selfp2p.go)
	zeroP2P  bool        // count-0 sends and receives between ranks go to the device (rt.ZeroP2Per)
	self     selfQueue
	// p2p runs its groups of NULL-stream sends and receives (P2PRunner);
	// nil: they take the general path.
	p2p P2PRunner
	// Fixed for the communicator's life, so resolved once (validate made
	// an interface assertion and two interface calls per call for them);
	// the whole package reads these, not c.c's.
	supports   func(rt.DataType, rt.ReduceOp) error
	rank, size int
	fast       fastRunner // nil: the device has none

	timeout  atomic.Int64 // SetTimeout's (ns; 0: none), which Split's children take
	relMu    sync.Mutex
	released atomic.Bool // destroyed, or aborted: nothing of c.c is left
	final    atomic.Bool // finalized: no more calls, Destroy is left
	finMu    sync.Mutex  // one Finalize at a time
	finDone  bool        // a Finalize succeeded (under finMu)
	regMu    sync.Mutex
	regs     map[uintptr]uintptr // Register's handles: the library's (0: none), under regMu
	regsGone bool                // closeRegistrations ran (under regMu)
	lastErr  error               // c.c's async error when it was released
	pmMu     sync.Mutex
	pms      [rt.MaxPreMulSums]*rt.PreMul // CreatePreMulSum's, by op - rt.FirstPreMulSum (under pmMu)
	pmGone   bool                         // closePreMulSums ran (under pmMu)
	pmUses   map[*rt.PreMul]int           // their uses queued in groups (under pmMu)
	pmDoomed map[*rt.PreMul]bool          // destroyed while used so: the library's op goes after (under pmMu)
}

// UniqueIDSize is the size of xccl's unique id: one size whatever the
// device (the vendor's own id, of whatever size, travels inside xccl's
// bootstrap and no caller sees it).
func UniqueIDSize(dev rt.Device) int { return mixed.IDSize() }

// GetUniqueID makes an id for a new communicator (call on one rank, hand
// the bytes to the others): the same kind of id for every device, naming a
// bootstrap served from this process.
func GetUniqueID(dev rt.Device) ([]byte, error) {
	id, err := mixed.NewID()
	if err != nil {
		return nil, rt.WrapFailed(err, "GetUniqueId")
	}
	return id, nil
}

// CommInitRank joins rank of nranks, on dev, to the communicator named by
// id, in this process's cluster (XCCL_CLUSTER, default the device kind). It
// blocks until every rank has joined or the timeout passes.
func CommInitRank(dev rt.Device, nranks int, id []byte, rank int) (*Comm, error) {
	return CommInitRankConfig(dev, nranks, id, rank, Config{Cluster: rt.Load().Cluster})
}

// CommInitRankCluster is CommInitRank with the rank's cluster label given.
// Ranks whose labels (or, unlabelled, device kinds) differ make a mixed
// communicator; when all agree it is the device's own.
func CommInitRankCluster(dev rt.Device, nranks int, id []byte, rank int, cluster string) (*Comm, error) {
	return CommInitRankConfig(dev, nranks, id, rank, Config{Cluster: cluster})
}

// Config holds a communicator's settings at init (ncclConfig_t's place).
type Config struct {
	Cluster string        // the rank's cluster label ("": the device kind; CommInitRank gives XCCL_CLUSTER's)
	Timeout time.Duration // the init's and, on the host engine, every operation's (0: XCCL_TIMEOUT)
}

// CommInitRankConfig is CommInitRank with settings.
func CommInitRankConfig(dev rt.Device, nranks int, id []byte, rank int, cfg Config) (*Comm, error) {
	if cfg.Timeout < 0 {
		return nil, rt.Errorf("CommInitRank: timeout %v must be positive", cfg.Timeout)
	}
	switch {
	case dev == nil:
		return nil, rt.Errorf("CommInitRank: no device")
	case nranks < 1:
		return nil, rt.Errorf("CommInitRank: nranks %d must be at least 1", nranks)
	case rank < 0 || rank >= nranks:
		return nil, rt.Errorf("CommInitRank: rank %d out of range [0, %d)", rank, nranks)
	case len(id) != UniqueIDSize(dev):
		return nil, rt.Errorf("CommInitRank: unique id is %d bytes, xccl's ids are %d", len(id), UniqueIDSize(dev))
	}
	c, err := mixed.Init(dev, nranks, id, rank, cfg.Cluster, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	if t, ok := c.(interface{ SetTimeout(time.Duration) error }); ok && cfg.Timeout > 0 {
		if err := t.SetTimeout(cfg.Timeout); err != nil {
			_ = c.Destroy()
			return nil, err
		}
	}
	rt.Log().Info("communicator created", zap.String("device", c.Device()), zap.Int("rank", rank), zap.Int("nranks", nranks))
	devID, _ := dev.GetDevice()
	comm := &Comm{dev: dev, c: c, cfg: cfg, devID: devID, checking: rt.Load().Check && c.Device() != "host" && c.Device() != "mixed", selfMode: rt.SelfP2PMode(dev)}
	if s, ok := c.(rt.SelfP2Per); ok {
		comm.selfMode = s.SelfP2P()
	}
	comm.zeroP2P = rt.MatchesZeroP2P(dev, c)
	if r, ok := c.(P2PRunner); ok {
		comm.p2p = r
	}
	comm.rank, comm.size, comm.supports = c.Rank(), c.Size(), dev.Supports
	if s, ok := c.(interface {
		Supports(rt.DataType, rt.ReduceOp) error
	}); ok {
		comm.supports = s.Supports
	}
	comm.fast, _ = c.(fastRunner)
	comm.st.on.Store(rt.Load().Stats)
	return comm, nil
}

// fastRunner is a device communicator with a fast path for small
// NULL-stream collectives (the host device's C path, devices/host/fast.c)
// that takes the typed calls' arguments unchecked: it refuses whatever it
// does not run, invalid arguments included, and the call then goes through
// Submit (validation, statistics, groups, Run).
type fastRunner interface {
	FastRun(kind rt.OpKind, send, recv unsafe.Pointer, count int, dt rt.DataType, red rt.ReduceOp, root int) (bool, error)
}

// quick reports whether a typed call on the NULL stream may try the
// device's fast path first: the communicator is live and bypassable.
func (c *Comm) quick() bool {
	return c != nil && c.fast != nil && !c.released.Load() && !c.final.Load() && c.bypassable()
}

// bypassable reports whether calls may skip Submit for a device's fast
// path (quick, FastPath): nothing of what it adds (statistics, checks,
// self-sends matched here) applies.
func (c *Comm) bypassable() bool {
	return !c.checking && !c.st.on.Load() && c.selfMode == rt.SelfNative
}

// Supports reports whether this communicator reduces dt with op: its
// device's capability, or a mixed communicator's own.
func (c *Comm) Supports(dt rt.DataType, op rt.ReduceOp) error { return c.supports(dt, op) }

// Mixed reports whether the communicator spans clusters of different
// devices or labels.
func (c *Comm) Mixed() bool { return c.c.Device() == "mixed" }

// Capabilities is what the communicator can reduce, and how.
func (c *Comm) Capabilities() string {
	if m, ok := c.c.(interface{ Capabilities() string }); ok {
		return m.Capabilities()
	}
	return rt.CapabilityMatrix(c.dev)
}

// Rank is this rank's index.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Device is the communicator's device.
func (c *Comm) Device() rt.Device { return c.dev }

// DeviceID is the device of Device() the communicator was made on.
func (c *Comm) DeviceID() int { return c.devID }

// Destroy releases the communicator (nothing is left to release after
// Abort).
func (c *Comm) Destroy() error { return c.release() }

// Abort breaks the communicator and frees what it holds, as NCCL's
// ncclCommAbort does: calls in flight on other threads fail and return
// first; later calls fail, AsyncError still tells the error, and Destroy
// has nothing left to do. (It used to only break it: a program that
// aborts and never destroys, as NCCL's own do, leaked its segments and
// sockets, and an NCCL communicator was destroyed after ncclCommAbort had
// freed it.) A vendor library with no abort call of its own keeps the
// communicator until Destroy: freeing it would wait for its work in flight,
// the very work an abort is for.
func (c *Comm) Abort() {
	c.closeRegistrations() // before the library's communicator may go
	c.closePreMulSums()
	c.c.Abort()
	if k, ok := c.c.(interface{ KeepsOnAbort() bool }); ok && k.KeepsOnAbort() {
		return // freeing waits for the work in flight: Destroy does it
	}
	_ = c.release()
}

// Finalize completes the communicator's work, as ncclCommFinalize: later
// calls fail with C_ERROR, and where the device finalizes (rt.Finalizer:
// the host engine, mixed communicators, NCCL-shaped libraries with
// <ccl>CommFinalize) every operation issued on it is done when it returns;
// elsewhere Destroy waits for that work, as those libraries' destroy does.
// Destroy frees it then. A broken communicator returns its error and asks
// the device for nothing; once one Finalize succeeded, the next do nothing,
// and after a failure the next tries again.
func (c *Comm) Finalize() error {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	if c.released.Load() {
		return rt.Errorf("CommFinalize: the communicator was destroyed or aborted")
	}
	if c.finDone {
		return nil
	}
	if !c.final.Swap(true) {
		c.stopFastPath() // the C entries' fast path goes by no check of final
	}
	if err := c.c.AsyncError(); err != nil {
		return err // aborted or broken: its work may be what is stuck
	}
	if f, ok := c.c.(rt.Finalizer); ok {
		if err := f.Finalize(); err != nil {
			return err
		}
	}
	c.finDone = true
	return nil
}

// stopFastPath turns the device's C fast path off for good, where it has
// one: every later call goes through Submit.
func (c *Comm) stopFastPath() {
	if s, ok := c.c.(interface{ StopFastPath() }); ok {
		s.StopFastPath()
	}
}

// closed is why call may not run on c: destroyed, aborted or finalized.
func (c *Comm) closed(call string) error {
	switch {
	case c.released.Load():
		return rt.Errorf("%s: the communicator was destroyed or aborted", call)
	case c.final.Load():
		return rt.Errorf("%s: the communicator was finalized (CommFinalize): only its Destroy is left", call)
	}
	return nil
}

func (c *Comm) release() error {
	c.relMu.Lock()
	defer c.relMu.Unlock()
	if c.released.Load() {
		return nil
	}
	c.lastErr = c.c.AsyncError()
	c.closeRegistrations()
	c.closePreMulSums()
	err := c.c.Destroy()
	c.freeCheck()
	c.dropSelf()
	c.released.Store(true)
	return err
}

// SetTimeout sets how long each later operation may wait for the other
// ranks before it fails with C_FAILED, on devices that time operations
// themselves (the host device); a vendor library keeps its own.
func (c *Comm) SetTimeout(d time.Duration) error {
	if t, ok := c.c.(interface{ SetTimeout(time.Duration) error }); ok {
		err := t.SetTimeout(d)
		if err == nil {
			c.timeout.Store(int64(d))
		}
		return err
	}
	return rt.Errorf("SetTimeout: the %s device has no per-communicator timeout (its library has its own)", c.dev.Name())
}

// AsyncError is the error that broke the communicator, if any.
func (c *Comm) AsyncError() error {
	if c.released.Load() {
		c.relMu.Lock()
		defer c.relMu.Unlock()
		return c.lastErr
	}
	return c.c.AsyncError()
}

// AllReduce: recv = op over all ranks' send (count elements).
func (c *Comm) AllReduce(send, recv unsafe.Pointer, count int, dt rt.DataType, op rt.ReduceOp, s rt.Stream) error {
	if s == 0 && c.quick() {
		if taken, err := c.fast.FastRun(rt.OpAllReduce, send, recv, count, dt, op, 0); taken {
			return err
		}
	}
	o := NewOp()
	o.Kind, o.Send, o.Recv, o.Count, o.Type, o.Red, o.Stream = rt.OpAllReduce, send, recv, count, dt, op, s
	return c.Submit(nil, o)
}

// Broadcast: buf of root to every rank.
func (c *Comm) Broadcast(buf unsafe.Pointer, count int, dt rt.DataType, root int, s rt.Stream) error {
	if s == 0 && c.quick() {
		if taken, err := c.fast.FastRun(rt.OpBroadcast, buf, buf, count, dt, 0, root); taken {
			return err
		}
	}
	o := NewOp()
	o.Kind, o.Send, o.Recv, o.Count, o.Type, o.Root, o.Stream = rt.OpBroadcast, buf, buf, count, dt, root, s
	return c.Submit(nil, o)
}

// Reduce: recv on root = op over all ranks' send.
func (c *Comm) Reduce(send, recv unsafe.Pointer, count int, dt rt.DataType, op rt.ReduceOp, root int, s rt.Stream) error {
	if s == 0 && c.quick() {
		if taken, err := c.fast.FastRun(rt.OpReduce, send, recv, count, dt, op, root); taken {
			return err
		}
	}
	o := NewOp()
	o.Kind, o.Send, o.Recv, o.Count, o.Type, o.Red, o.Root, o.Stream = rt.OpReduce, send, recv, count, dt, op, root, s
	return c.Submit(nil, o)
}

// AllGather: recv (count×nranks) = every rank's send (count) in rank order.
func (c *Comm) AllGather(send, recv unsafe.Pointer, count int, dt rt.DataType, s rt.Stream) error {
	if s == 0 && c.quick() {
		if taken, err := c.fast.FastRun(rt.OpAllGather, send, recv, count, dt, 0, 0); taken {
			return err
		}
	}
	o := NewOp()
	o.Kind, o.Send, o.Recv, o.Count, o.Type, o.Stream = rt.OpAllGather, send, recv, count, dt, s
	return c.Submit(nil, o)
}

// ReduceScatter: recv (count) = block rank of op over all sends (count×nranks).
func (c *Comm) ReduceScatter(send, recv unsafe.Pointer, count int, dt rt.DataType, op rt.ReduceOp, s rt.Stream) error {
	if s == 0 && c.quick() {
		if taken, err := c.fast.FastRun(rt.OpReduceScatter, send, recv, count, dt, op, 0); taken {
			return err
		}
	}
	o := NewOp()
	o.Kind, o.Send, o.Recv, o.Count, o.Type, o.Red, o.Stream = rt.OpReduceScatter, send, recv, count, dt, op, s
	return c.Submit(nil, o)
}

// Send count elements to peer; it never waits for the receiver.
func (c *Comm) Send(buf unsafe.Pointer, count int, dt rt.DataType, peer int, s rt.Stream) error {
	o := NewOp()
	o.Kind, o.Send, o.Count, o.Type, o.Root, o.Stream = rt.OpSend, buf, count, dt, peer, s
	return c.Submit(nil, o)
}

// Recv count elements from peer.
func (c *Comm) Recv(buf unsafe.Pointer, count int, dt rt.DataType, peer int, s rt.Stream) error {
	o := NewOp()
	o.Kind, o.Recv, o.Count, o.Type, o.Root, o.Stream = rt.OpRecv, buf, count, dt, peer, s
	return c.Submit(nil, o)
}

// AllToAll sends sendBufs[p] (sendCounts[p] elements of sendTypes[p]) to
// every rank p and receives recvBufs[p] from it; slices have one entry per rank.
func (c *Comm) AllToAll(sendBufs []unsafe.Pointer, sendCounts []int, sendTypes []rt.DataType,
	recvBufs []unsafe.Pointer, recvCounts []int, recvTypes []rt.DataType, s rt.Stream) error {
	return c.Do(nil, rt.Op{Kind: rt.OpAllToAll, SendBufs: sendBufs, SendCounts: sendCounts, SendTypes: sendTypes,
		RecvBufs: recvBufs, RecvCounts: recvCounts, RecvTypes: recvTypes, Stream: s})
}

// Gather, as ncclGather: rank r's count elements of send land at recv +
// r×count on root; recv is not used on the other ranks (it may be nil).
// In place where send is recv + root×count on the root. It runs as an
// all-to-all with one column (every device's all-to-all: grouped sends and
// receives on the vendors' libraries), queued when g is an open group.
func (c *Comm) Gather(g *Group, send, recv unsafe.Pointer, count int, dt rt.DataType, root int, s rt.Stream) error {
	return c.rooted(g, false, send, recv, count, dt, root, s)
}

// Scatter, as ncclScatter: rank r receives count elements from send +
// r×count on root into recv; send is not used on the other ranks (it may
// be nil). In place where recv is send + root×count on the root. An
// all-to-all with one row, as Gather.
func (c *Comm) Scatter(g *Group, send, recv unsafe.Pointer, count int, dt rt.DataType, root int, s rt.Stream) error {
	return c.rooted(g, true, send, recv, count, dt, root, s)
}

// rooted checks a Gather's (or with scatter a Scatter's) arguments, naming
// the call, and runs the all-to-all that carries it: every rank's own
// buffer ("each") goes to or comes from the root; the root's buffer of
// count×nranks elements ("whole") is cut into a block per rank. Count 0
// returns at once, as NCCL's (the communicator's error, if any).
func (c *Comm) rooted(g *Group, scatter bool, send, recv unsafe.Pointer, count int, dt rt.DataType, root int, s rt.Stream) error {
	name, whole, each, wholeName, eachName := "Gather", recv, send, "receive", "send"
	if scatter {
		name, whole, each, wholeName, eachName = "Scatter", send, recv, "send", "receive"
	}
	if c == nil || c.c == nil {
		return rt.Errorf("%s: communicator is NULL", name)
	}
	if err := c.closed(name); err != nil {
		return err
	}
	n := c.size
	switch {
	case !dt.Valid():
		return rt.Errorf("%s: unknown data type %d", name, int32(dt))
	case count < 0:
		return rt.Errorf("%s: negative count %d", name, count)
	case root < 0 || root >= n:
		return rt.Errorf("%s: root %d out of range [0, %d)", name, root, n)
	}
	if hi, lo := bits.Mul64(uint64(count), uint64(dt.Size()*n)); hi != 0 || lo > maxBytes {
		return rt.Errorf("%s: count %d of %v overflows the address space", name, count, dt)
	}
	if count > 0 && each == nil {
		return rt.Errorf("%s: %s buffer is NULL", name, eachName)
	}
	if count > 0 && c.rank == root && whole == nil {
		return rt.Errorf("%s: %s buffer is NULL on the root", name, wholeName)
	}
	if count == 0 {
		return c.AsyncError()
	}
	types := make([]rt.DataType, n)
	for p := range types {
		types[p] = dt
	}
	op := rt.Op{Kind: rt.OpAllToAll, Stream: s,
		SendBufs: make([]unsafe.Pointer, n), SendCounts: make([]int, n), SendTypes: types,
		RecvBufs: make([]unsafe.Pointer, n), RecvCounts: make([]int, n), RecvTypes: types}
	eachBufs, eachCounts, wholeBufs, wholeCounts := op.SendBufs, op.SendCounts, op.RecvBufs, op.RecvCounts
	if scatter {
		eachBufs, eachCounts, wholeBufs, wholeCounts = op.RecvBufs, op.RecvCounts, op.SendBufs, op.SendCounts
	}
	eachBufs[root], eachCounts[root] = each, count
	if c.rank == root {
		for p := range n {
			wholeBufs[p], wholeCounts[p] = unsafe.Add(whole, p*count*dt.Size()), count
		}
	}
	if err := c.Do(g, op); err != nil {
		// a mismatch names the all-to-all's bytes: say whose they are
		return rt.WrapFailed(err, "%s (run as an all-to-all)", name)
	}
	return nil
}

// Do validates op and runs it, or queues it when g is an open group.
func (c *Comm) Do(g *Group, op rt.Op) error {
	o := NewOp()
	*o = op
	return c.Submit(g, o)
}

// Everything below Do works on a pooled Op: taking the caller's address
// would move it to the heap, an allocation per call. The typed calls
// (AllReduce, ...) fill one in place instead of copying in a literal: the
// copy reads fields just stored one by one back 16 bytes at a time, which
// the store buffer cannot forward (in a profile of 8-byte all-reduces, a
// third of the benchmark loop's samples sat on that copy). No device keeps
// the pooled Op after Run returns (a stream copies what it queues); the
// same holds for a group's spare Ops (Group.newOp), which go back to the
// group instead.
var opPool = sync.Pool{New: func() any { return new(rt.Op) }}

// NewOp is a zeroed Op from the pool, for a caller that fills one field by
// field and hands it to Submit (the typed calls here, the C entries).
func NewOp() *rt.Op { return opPool.Get().(*rt.Op) }

// FastPath is the device communicator's state for a C fast path (the host
// device's, devices/host/fast.h) that the C entries may run small
// collectives through without entering Go; nil where every call must go
// through Submit (checks or statistics on, or a device without one).
func (c *Comm) FastPath() unsafe.Pointer {
	if !c.bypassable() {
		return nil
	}
	if fp, ok := c.c.(interface{ FastPath() unsafe.Pointer }); ok {
		return fp.FastPath()
	}
	return nil
}

// NewOpIn is NewOp for a call made on g's thread (nil: none): from g's own
// spares, which need no pool.
func NewOpIn(g *Group) *rt.Op {
	if g != nil {
		return g.newOp()
	}
	return NewOp()
}

// Submit is Do for an Op from NewOp or NewOpIn, which it gives back (to g
// where there is one): the caller must not touch o afterwards. One
// dropped without Submit is only garbage.
func (c *Comm) Submit(g *Group, o *rt.Op) error {
	var err error
	if c == nil || c.c == nil {
		err = rt.Errorf("%v: communicator is NULL", o.Kind)
	} else {
		o.Comm = c.c
		err = c.do(g, o)
	}
	g.Fail(err)
	runtime.KeepAlive(o) // Go memory behind the op's pointers lives until Run returns
	*o = rt.Op{}
	g.putOp(o)
	return err
}

// maxSpare bounds a group's spare Ops; more go back to the pool.
const maxSpare = 64

// newOp is a zeroed Op for a call of the group's thread.
func (g *Group) newOp() *rt.Op {
	if k := len(g.spare); k > 0 {
		o := g.spare[k-1]
		g.spare[k-1] = nil
		g.spare = g.spare[:k-1]
		return o
	}
	return new(rt.Op)
}

// putOp takes back o, zeroed (nil g: the pool).
func (g *Group) putOp(o *rt.Op) {
	if g == nil || len(g.spare) >= maxSpare {
		opPool.Put(o)
		return
	}
	g.spare = append(g.spare, o)
}

func (c *Comm) do(g *Group, op *rt.Op) error {
	if c.released.Load() || c.final.Load() { // one test per call: the names only on the way out
		return c.closed(op.Kind.String())
	}
	if err := c.validate(op); err != nil {
		return err // the caller (the C entry) logs it, once
	}
	if op.Count == 0 && op.Kind != rt.OpAllToAll && !c.matchesZero(op) {
		return c.c.AsyncError() // count 0 is a no-op on every rank
	}
	if g != nil && g.depth > 0 {
		queued := g.newOp() // the group holds it until End
		*queued = *op
		g.add(c, queued)
		return nil
	}
	if c.selfMode != rt.SelfNative && op.PreMul == nil { // the library scales its own
		if c.isSelf(op) {
			return c.record(op, c.runSelf)
		}
		if op.Kind == rt.OpAllToAll && c.selfMode == rt.SelfCopy && op.SendCounts[c.rank] > 0 {
			return c.record(op, c.selfAllToAll)
		}
	}
	if c.checking && op.Kind != rt.OpSend && op.Kind != rt.OpRecv {
		if err := c.check(op); err != nil {
			return err
		}
	}
	if !c.st.on.Load() {
		return c.c.Run(op) // not through record: its func value costs a wrapper per call
	}
	return c.record(op, c.c.Run)
}

// record runs f(op), counted in the statistics when they are on.
func (c *Comm) record(op *rt.Op, f func(*rt.Op) error) error {
	if !c.st.on.Load() {
		return f(op)
	}
	start := time.Now()
	err := f(op)
	c.st.record(op, start, err)
	return err
}

// matchesZero says whether op, of count 0, goes to the device: a send or
// receive between ranks on a device that matches them (rt.ZeroP2Per), as
// NCCL's are (a program may order two ranks with them).
func (c *Comm) matchesZero(op *rt.Op) bool {
	return c.zeroP2P && (op.Kind == rt.OpSend || op.Kind == rt.OpRecv) && op.Root != c.rank
}

func (c *Comm) validate(op *rt.Op) error {
	n := c.size
	k := op.Kind
	if k < rt.OpAllReduce || k > rt.OpAllToAll {
		return rt.Errorf("unknown operation %d", int(k))
	}
	if op.Batch != nil {
		return rt.Errorf("%v: a batch is made by AllReduceFused, not passed in", k)
	}
	if op.Kind == rt.OpAllToAll {
		return c.validateAllToAll(op)
	}
	if !op.Type.Valid() {
		return rt.Errorf("%v: unknown data type %d", k, int32(op.Type))
	}
	if op.Count < 0 {
		return rt.Errorf("%v: negative count %d", k, op.Count)
	}
	mult := 1
	if k == rt.OpAllGather || k == rt.OpReduceScatter {
		mult = n
	}
	if hi, lo := bits.Mul64(uint64(op.Count), uint64(op.Type.Size()*mult)); hi != 0 || lo > maxBytes { // no division: it costs ~40 cycles a call
		return rt.Errorf("%v: count %d of %v overflows the address space", k, op.Count, op.Type)
	}
	switch k {
	case rt.OpAllReduce, rt.OpReduce, rt.OpReduceScatter:
		if op.Red.IsPreMulSum() {
			p, err := c.preMul(k, op.Red, op.Type)
			op.PreMul = p
			if err != nil {
				return err
			}
			break
		}
		if !op.Red.Valid() {
			return rt.Errorf("%v: unknown reduce op %d", k, int32(op.Red))
		}
		if err := c.Supports(op.Type, op.Red); err != nil {
			return rt.Errorf("%v(%v, %v): %v", k, op.Type, op.Red, err)
		}
	}
	switch k {
	case rt.OpBroadcast, rt.OpReduce:
		if op.Root < 0 || op.Root >= n {
			return rt.Errorf("%v: root %d out of range [0, %d)", k, op.Root, n)
		}
	case rt.OpSend, rt.OpRecv:
		if op.Root < 0 || op.Root >= n {
			return rt.Errorf("%v: peer %d out of range [0, %d)", k, op.Root, n)
		}
	}
	if op.Count > 0 {
		needSend := k != rt.OpRecv && k != rt.OpBroadcast
		needRecv := k != rt.OpSend && !(k == rt.OpReduce && op.Root != c.rank)
		if k == rt.OpBroadcast && op.Recv == nil {
			return rt.Errorf("%v: buffer is NULL", k)
		}
		if needSend && op.Send == nil {
			return rt.Errorf("%v: send buffer is NULL", k)
		}
		if needRecv && op.Recv == nil {
			return rt.Errorf("%v: receive buffer is NULL", k)
		}
	}
	return nil
}

func (c *Comm) validateAllToAll(op *rt.Op) error {
	n := c.size
	if len(op.SendBufs) != n || len(op.SendCounts) != n || len(op.SendTypes) != n ||
		len(op.RecvBufs) != n || len(op.RecvCounts) != n || len(op.RecvTypes) != n {
		return rt.Errorf("AllToAll: every array needs %d entries (one per rank)", n)
	}
	for p := 0; p < n; p++ {
		for _, side := range []struct {
			name  string
			buf   unsafe.Pointer
			count int
			dt    rt.DataType
		}{{"send", op.SendBufs[p], op.SendCounts[p], op.SendTypes[p]}, {"receive", op.RecvBufs[p], op.RecvCounts[p], op.RecvTypes[p]}} {
			switch {
			case side.count < 0:
				return rt.Errorf("AllToAll: negative %s count %d for rank %d", side.name, side.count, p)
			case side.count == 0:
			case !side.dt.Valid():
				return rt.Errorf("AllToAll: unknown %s data type %d for rank %d", side.name, int32(side.dt), p)
			case side.count > maxBytes/side.dt.Size():
				return rt.Errorf("AllToAll: %s count %d for rank %d overflows", side.name, side.count, p)
			case side.buf == nil:
				return rt.Errorf("AllToAll: %s buffer for rank %d is NULL", side.name, p)
			}
		}
	}
	me := c.rank
	if sb, rb := op.SendCounts[me]*op.SendTypes[me].Size(), op.RecvCounts[me]*op.RecvTypes[me].Size(); sb != rb {
		return rt.Errorf("AllToAll: the self block sends %d bytes but receives %d", sb, rb)
	}
	return nil
}

// Group collects operations between Start and End and runs them as one
// unit: point-to-point calls inside a group never deadlock on their order.
// Groups nest; only the outermost End runs. A Group is not safe for
// concurrent use, open or not (calls given it keep spare Ops in it): the C
// ABI keeps one per calling thread, like NCCL.
//
// With XCCL_FUSION_BYTES set (it is off by default: fusing is then every
// rank's choice to make alike), small all-reduces queued back to back on
// one communicator, with one data type, reduce op and stream, each at most
// that size and none touching another's buffers, are fused on devices that
// can (the host device): one packed all-reduce instead of many.
type Group struct {
	depth   int
	devs    map[rt.Device][]*rt.Op
	comms   map[rt.Comm]*Comm
	inits   []deferred
	runner  groupRunner  // the first communicator that runs its own groups
	runOps  []*rt.Op     // the ops of every such communicator, in issue order
	preMuls []heldPreMul // pre-multiplied sums the queued calls use

	// The common group of sends and receives on the NULL stream of one
	// communicator that runs such groups itself (P2PRunner), kept apart
	// while it is only that (p2pOnly): End hands them to it without the
	// general path's bookkeeping, and its Ops go back to the group (a group
	// of a send and a receive cost several times the two calls). Another
	// op moves them to the general path.
	p2pOnly bool
	p2pComm *Comm
	p2p     []*rt.Op
	spare   []*rt.Op // zeroed Ops of groups before, for the next calls (newOp): the group is one thread's

	failed error // the first call of the group that was refused (Fail): End runs none of its operations
}

// Fail records that a call made inside the group was refused (err, which
// the call returned): as NCCL's ncclGroupEnd after a failed call, the
// outermost End then runs none of the group's operations and returns it.
// Nothing happens outside an open group.
func (g *Group) Fail(err error) {
	if g != nil && g.depth > 0 && err != nil && g.failed == nil {
		g.failed = err
	}
}

// P2PRunner is a device communicator that runs a group of its sends and
// receives on the NULL stream itself, in issue order, after the work
// issued before it, and keeps none of the Ops past its return (the host
// device's: the sends, which never wait for their receivers, then the
// receives).
type P2PRunner interface {
	RunP2P(ops []*rt.Op) error
}

// Defer queues a communicator's initialization to the outermost End, where
// every queued one runs at once, each on its own thread, before the
// group's operations: as with ncclCommInitRank inside a group, one thread
// can so initialize several ranks of one communicator.
func (g *Group) Defer(init func() error) { g.inits = append(g.inits, deferred{f: init}) }

// DeferOn is Defer for a call that runs an exchange on an existing
// communicator (key, a split of it): the calls deferred on one key run one
// after another in the order they were queued, so that every rank runs
// two splits of one communicator in one order.
func (g *Group) DeferOn(key any, f func() error) { g.inits = append(g.inits, deferred{key: key, f: f}) }

type deferred struct {
	key any // nil: alone
	f   func() error
}

// runInits runs the deferred calls, concurrently but for those of one key,
// which run in order (each even after an error before it: every rank runs
// them all alike), and returns the first error.
func runInits(inits []deferred) error {
	if len(inits) == 0 {
		return nil
	}
	var chains [][]func() error
	at := map[any]int{} // a key's chain
	for _, d := range inits {
		if i, ok := at[d.key]; ok {
			chains[i] = append(chains[i], d.f)
			continue
		}
		if d.key != nil {
			at[d.key] = len(chains)
		}
		chains = append(chains, []func() error{d.f})
	}
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	for i, chain := range chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, f := range chain {
				if err := f(); err != nil && errs[i] == nil {
					errs[i] = err
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Start opens (or nests) the group.
func (g *Group) Start() {
	if g.depth == 0 {
		g.p2pOnly, g.p2pComm, g.p2p = true, nil, g.p2p[:0]
		// The maps of the last group are reused (End cleared them): a
		// group of a send and a receive otherwise spends as long making
		// two maps as exchanging its messages.
		if g.devs == nil {
			g.devs = map[rt.Device][]*rt.Op{}
		}
		if g.comms == nil {
			g.comms = map[rt.Comm]*Comm{}
		}
	}
	g.depth++
}

// Active reports whether the group is open.
func (g *Group) Active() bool { return g.depth > 0 }

// groupRunner is a communicator that runs its own groups (a mixed one):
// its RunGroup takes the ops of every communicator of its kind, in issue
// order (each rank issues the same order, so ranks that run a group's ops
// one after another, as the mixed ones do, run them alike).
type groupRunner interface {
	RunGroup(ops []*rt.Op) error
}

func (g *Group) add(c *Comm, op *rt.Op) {
	if c.st.on.Load() {
		c.st.queued(op)
	}
	if g.p2pOnly {
		if (op.Kind == rt.OpSend || op.Kind == rt.OpRecv) && op.Stream == 0 && (g.p2pComm == nil || g.p2pComm == c) &&
			c.p2p != nil && (c.selfMode == rt.SelfNative || !c.isSelf(op)) {
			g.p2pComm = c
			g.p2p = append(g.p2p, op)
			return
		}
		g.general()
	}
	g.queue(c, op)
}

// general moves the group's sends and receives kept apart to the general
// path, in the order they came.
func (g *Group) general() {
	g.p2pOnly = false
	for _, op := range g.p2p {
		g.queue(g.p2pComm, op)
	}
	g.p2p, g.p2pComm = nil, nil // the general path keeps them (a stream may hold them past End)
}

// queue adds op to the general path.
func (g *Group) queue(c *Comm, op *rt.Op) {
	if r, ok := c.c.(groupRunner); ok {
		if g.runner == nil {
			g.runner = r
		}
		g.runOps = append(g.runOps, op)
	} else {
		g.devs[c.dev] = append(g.devs[c.dev], op)
	}
	g.comms[c.c] = c
	if op.PreMul != nil {
		c.holdPreMul(op.PreMul)
		g.preMuls = append(g.preMuls, heldPreMul{c, op.PreMul})
	}
}

// runP2P ends a group of sends and receives kept apart: its communicator
// runs them (P2PRunner), and the Ops go back to the group (releaseP2P).
func (g *Group) runP2P() error {
	c, ops := g.p2pComm, g.p2p
	defer g.releaseP2P()
	if c == nil {
		return nil
	}
	if err := c.closed("GroupEnd: a communicator of the group"); err != nil {
		return err
	}
	return c.p2p.RunP2P(ops)
}

// releaseP2P takes back the Ops kept apart (they ran, or never will) and
// empties the list for the next group.
func (g *Group) releaseP2P() {
	for i, op := range g.p2p {
		*op = rt.Op{}
		g.putOp(op)
		g.p2p[i] = nil
	}
	g.p2p, g.p2pComm = g.p2p[:0], nil
}

// heldPreMul is a pre-multiplied sum a group's queued call uses (holdPreMul).
type heldPreMul struct {
	c *Comm
	p *rt.PreMul
}

// End closes one level; the outermost runs the queued operations.
func (g *Group) End() error {
	if g.depth == 0 {
		return rt.Errorf("GroupEnd without GroupStart")
	}
	g.depth--
	if g.depth > 0 {
		return nil
	}
	failed := g.failed
	g.failed = nil
	if g.p2pOnly && len(g.inits) == 0 {
		if failed != nil {
			g.releaseP2P()
			return groupNotRun(failed)
		}
		return g.runP2P()
	}
	if g.p2pOnly {
		g.general()
	}
	devs, inits, runner, runOps, preMuls := g.devs, g.inits, g.runner, g.runOps, g.preMuls
	g.devs, g.inits, g.runner, g.runOps, g.preMuls = nil, nil, nil, nil, nil
	defer func() { // the calls ran (or never will): their pre-multiplied sums may go
		for _, h := range preMuls {
			h.c.releasePreMul(h.p)
		}
		if g.devs == nil { // the next group's (the ops' slices live on where a stream holds them)
			clear(devs)
			g.devs = devs
		}
		clear(g.comms) // holds none of them past the group
	}()
	defer runtime.KeepAlive(devs) // the ops' memory lives until every group ran
	defer runtime.KeepAlive(runOps)
	initErr := runInits(inits) // the inits run whatever else was refused: their handles are the callers'
	if failed != nil {
		return errors.Join(groupNotRun(failed), initErr)
	}
	for _, c := range g.comms {
		if err := c.closed("GroupEnd: a communicator of the group"); err != nil {
			return errors.Join(err, initErr)
		}
	}
	if runner != nil {
		if err := runner.RunGroup(runOps); err != nil {
			return errors.Join(err, initErr)
		}
	}
	limit := rt.Load().FusionBytes
	for dev, ops := range devs {
		if limit > 0 {
			ops = g.fuse(ops, limit)
		}
		if err := g.runDevice(dev, ops); err != nil {
			return errors.Join(err, initErr)
		}
	}
	return initErr
}

// groupNotRun is End's error for a group one of whose calls was refused:
// that call's status and message.
func groupNotRun(failed error) error {
	return &rt.Error{Status: rt.StatusOf(failed), Err: failed,
		Msg: fmt.Sprintf("GroupEnd: a call of the group was refused, so none of its operations ran (%v)", failed)}
}

// runDevice runs one device's part of a group. Sends to and receives from
// self that xccl matches (selfp2p.go) are checked first, so a group that
// would receive from self more than was sent to self fails before anything
// runs; the sends are posted, the device runs the rest, then the receives
// and the self blocks of all-to-alls are copied.
func (g *Group) runDevice(dev rt.Device, ops []*rt.Op) error {
	ops, self := g.groupSelf(ops)
	if len(self.sends)+len(self.recvs)+len(self.blocks) == 0 {
		return dev.RunGroup(ops)
	}
	if err := g.checkSelf(self); err != nil {
		return err
	}
	posted := map[*Comm]int{}
	undo := func() {
		for c, k := range posted {
			c.unpostSelf(k)
		}
	}
	for _, op := range self.sends {
		c := g.comms[op.Comm]
		if err := c.postSelfSend(op); err != nil {
			undo()
			return err
		}
		posted[c]++
	}
	if len(ops) > 0 {
		if err := dev.RunGroup(ops); err != nil {
			undo()
			return err
		}
	}
	for _, op := range self.recvs {
		if err := g.comms[op.Comm].takeSelfRecv(op); err != nil {
			return rt.WrapFailed(err, "group: receive from self after the group ran")
		}
	}
	for _, op := range self.blocks {
		if err := g.comms[op.Comm].selfBlock(op); err != nil {
			return rt.WrapFailed(err, "group: all-to-all self block")
		}
	}
	return nil
}

// fuse replaces every run of two or more fusable all-reduces (same
// communicator, type, op and stream, each at most limit bytes, no
// pre-multiplied sum: a batch has no scalar) by one batch. A call that
// touches a buffer an earlier call of the run writes, or writes one it
// reads, ends the run: a batch reads every input before it writes, and a
// group runs its calls in order (AllReduce(a, a) twice is a times n times
// n). Fusing is off unless XCCL_FUSION_BYTES is set, and then every rank
// must queue the same calls: a rank that fuses meets its peers' single
// calls as a mismatch.
func (g *Group) fuse(ops []*rt.Op, limit int) []*rt.Op {
	fusable := func(op *rt.Op) bool {
		f, ok := op.Comm.(rt.Fuser)
		return ok && f.CanFuse() && op.Kind == rt.OpAllReduce && op.Batch == nil && op.PreMul == nil &&
			op.Count*op.Type.Size() <= limit
	}
	out := ops[:0:0]
	for i := 0; i < len(ops); {
		j := i + 1
		if fusable(ops[i]) {
			for j < len(ops) && fusable(ops[j]) && ops[j].Comm == ops[i].Comm && ops[j].Type == ops[i].Type &&
				ops[j].Red == ops[i].Red && ops[j].Stream == ops[i].Stream && independent(ops[i:j], ops[j]) {
				j++
			}
		}
		if j-i < 2 {
			out = append(out, ops[i])
			i = j
			continue
		}
		out = append(out, batchOf(ops[i:j]))
		if c := g.comms[ops[i].Comm]; c != nil {
			c.st.groupFused.Add(uint64(j - i))
		}
		i = j
	}
	return out
}

// independent says whether op neither reads what one of run writes nor
// writes what one of them reads or writes (an all-reduce reads Send and
// writes Recv, Count elements of Type each).
func independent(run []*rt.Op, op *rt.Op) bool {
	n := uintptr(op.Count * op.Type.Size())
	for _, p := range run {
		m := uintptr(p.Count * p.Type.Size())
		if overlap(p.Recv, m, op.Send, n) || overlap(p.Recv, m, op.Recv, n) || overlap(p.Send, m, op.Recv, n) {
			return false
		}
	}
	return true
}

// overlap says whether the an bytes at a and the bn bytes at b share one.
func overlap(a unsafe.Pointer, an uintptr, b unsafe.Pointer, bn uintptr) bool {
	x, y := uintptr(a), uintptr(b)
	return an > 0 && bn > 0 && x < y+bn && y < x+an
}

func batchOf(ops []*rt.Op) *rt.Op {
	b := new(rt.Op)
	fillBatch(b, ops, nil)
	return b
}

// fillBatch makes b the fused all-reduce of ops, its list appended to list.
func fillBatch(b *rt.Op, ops, list []*rt.Op) {
	*b = rt.Op{Kind: rt.OpAllReduce, Comm: ops[0].Comm, Type: ops[0].Type, Red: ops[0].Red,
		Stream: ops[0].Stream, Batch: append(list, ops...)}
	for _, op := range ops {
		b.Count += op.Count
	}
}

// fuseScratch is what a fused all-reduce on the NULL stream builds, kept
// for the next call (no allocation per call).
type fuseScratch struct {
	values []rt.Op
	ops    []*rt.Op
	list   []*rt.Op
	batch  rt.Op
}

var fusePool = sync.Pool{New: func() any { return new(fuseScratch) }}

func (f *fuseScratch) vals(n int) []rt.Op {
	if cap(f.values) < n {
		f.values = make([]rt.Op, n)
	}
	f.values = f.values[:n]
	return f.values
}

// put clears what points at the caller's buffers and returns f to the pool.
func (f *fuseScratch) put() {
	clear(f.values)
	clear(f.ops[:cap(f.ops)])
	clear(f.list[:cap(f.list)])
	f.batch = rt.Op{}
	fusePool.Put(f)
}

// AllReduceFused all-reduces several buffers of one data type at once:
// recvs[i] = op over all ranks' sends[i] (counts[i] elements). Devices
// that can (the host device) run the batch as one call (algo.go's
// decision table says how); others run them as one group.
func (c *Comm) AllReduceFused(sends, recvs []unsafe.Pointer, counts []int, dt rt.DataType, op rt.ReduceOp, s rt.Stream) error {
	return c.AllReduceFusedIn(nil, sends, recvs, counts, dt, op, s)
}

// AllReduceFusedIn is AllReduceFused, queued in g when g is open: as one
// batch where the device fuses (so a rank that calls it in a group and one
// that does not make the same call), else as separate all-reduces, as the
// call outside a group runs them.
func (c *Comm) AllReduceFusedIn(g *Group, sends, recvs []unsafe.Pointer, counts []int, dt rt.DataType, op rt.ReduceOp, s rt.Stream) error {
	if c == nil || c.c == nil {
		return rt.Errorf("AllReduceFused: communicator is NULL")
	}
	if err := c.closed("AllReduceFused"); err != nil {
		return err
	}
	if len(sends) != len(counts) || len(recvs) != len(counts) {
		return rt.Errorf("AllReduceFused: %d send buffers, %d receive buffers and %d counts", len(sends), len(recvs), len(counts))
	}
	// On the NULL stream the call is over when Run returns, so the ops come
	// from a pool; a stream may hold them until it runs them.
	grouped := g != nil && g.depth > 0
	var fs *fuseScratch
	var vals []rt.Op
	var ops []*rt.Op
	if s == 0 && !grouped {
		fs = fusePool.Get().(*fuseScratch)
		defer fs.put()
		vals, ops = fs.vals(len(counts)), fs.ops[:0]
	} else {
		vals = make([]rt.Op, len(counts)) // one allocation for the whole batch
		ops = make([]*rt.Op, 0, len(counts))
	}
	total := 0
	for i := range counts {
		o := &vals[i]
		*o = rt.Op{Kind: rt.OpAllReduce, Comm: c.c, Send: sends[i], Recv: recvs[i], Count: counts[i], Type: dt, Red: op, Stream: s}
		if err := c.validate(o); err != nil {
			return rt.Errorf("AllReduceFused: buffer %d: %v", i, err)
		}
		if o.Count > 0 {
			ops = append(ops, o)
			total += o.Count
		}
	}
	if total > maxBytes/dt.Size() {
		return rt.Errorf("AllReduceFused: %d elements of %v in all overflow the address space", total, dt)
	}
	if len(ops) == 0 {
		return c.c.AsyncError()
	}
	var start time.Time
	if c.st.on.Load() {
		start = time.Now()
		c.st.fusedCalls.Add(1)
		c.st.fusedTensors.Add(uint64(len(ops)))
	}
	f, ok := c.c.(rt.Fuser)
	if !ok || !f.CanFuse() || len(ops) == 1 || op.IsPreMulSum() { // a pre-multiplied sum: as a group
		// As a group: the caller's open one, else one of its own.
		own := !grouped
		if own {
			g = new(Group)
			g.Start()
		}
		for _, o := range ops {
			g.add(c, o)
		}
		if !own {
			return nil
		}
		err := g.End()
		runtime.KeepAlive(ops)
		return err
	}
	if grouped {
		g.add(c, batchOf(ops))
		return nil
	}
	var b *rt.Op
	if fs != nil {
		b = &fs.batch
		fillBatch(b, ops, fs.list[:0])
		fs.ops, fs.list = ops, b.Batch
	} else {
		b = batchOf(ops)
	}
	err := c.c.Run(b)
	if c.st.on.Load() {
		c.st.record(b, start, err)
	}
	runtime.KeepAlive(ops)
	return err
}
