package mixed

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"

	rt "github.com/xccl-project/xccl/runtime"
)

// Comm is one rank of a mixed communicator.
//
// All-reduce is hierarchical where every cluster's library reduces the
// type and op and some accelerator cluster has two or more ranks (or
// XCCL_MIXED_ALGO=hier): a reduce to the cluster's leader on its own
// library and the caller's stream; the leader copies the result to host
// staging (a leader on the host device works in the caller's buffers),
// all-reduces it with the other leaders on the host engine (in chunks),
// and copies it back; a broadcast from the leader on the cluster's library.
// Only leaders wait on the stream (once per chunk, or once on the host
// device); the other ranks only enqueue. Everything else, and all-reduces
// some library cannot do, is flat: every rank copies its data to host
// staging, the host engine runs the collective among all ranks, and the
// result is copied back; ranks on the host device take part from their
// own buffers.
type Comm struct {
	rank, n int
	dev     rt.Device // this rank's device
	hostDev rt.Device // the host engine
	hc      rt.Comm   // every rank, host engine
	sub     rt.Comm   // this rank's cluster on its device (nil when alone in it)
	leaders rt.Comm   // the clusters' leaders, host engine (nil unless a leader)
	cs      []*cluster
	mine    *cluster
	algo    string // auto, flat or hier: rank 0's XCCL_MIXED_ALGO
	chunk   int

	gone     atomic.Bool    // destroyed (or aborted): no call reaches the parts
	mu       sync.Mutex     // one call at a time owns the staging
	stage    unsafe.Pointer // host staging, from the device's host allocator
	stageN   int
	stageOf  rt.Device   // whose allocator made it
	stageReg atomic.Bool // registered with this rank's runtime (rt.HostRegisterer; EngineStats reads it)
	noReg    bool        // registering failed once: not tried again
	pending  rt.Stream   // the stream of the last host-to-device copy out of the staging
	dirty    bool        // that copy may still be running
	done     rt.Event    // recorded after it (0: the device has no events; wait on the stream)
	noEvent  bool

	seq uint64 // collectives so far, of either path (under mu), for fingerprints
	fps []byte // every rank's fingerprint of the current call

	phase [numPhases]atomic.Uint64 // nanoseconds per phase
	plans [2]atomic.Uint64         // calls per plan: flat, hierarchical
}

const (
	phIntra = iota // on the cluster's library
	phD2H
	phInter // host engine
	phH2D
	numPhases
)

var phaseNames = [numPhases]string{"intra_cluster_ns", "device_to_host_ns", "inter_cluster_ns", "host_to_device_ns"}

func newComm(dev, hostDev rt.Device, hc rt.Comm, ms []member, cs []*cluster, rank int) (*Comm, error) {
	c := &Comm{rank: rank, n: len(ms), dev: dev, hostDev: hostDev, hc: hc, cs: cs, algo: ms[0].algo, chunk: int(ms[0].chunk)}
	for _, cl := range cs {
		if cl.index(rank) >= 0 {
			c.mine = cl
		}
	}
	switch c.algo {
	case "auto", "flat", "hier":
	default:
		return nil, rt.Errorf("XCCL_MIXED_ALGO=%q on rank 0: want auto, flat or hier", c.algo)
	}
	if c.algo == "flat" || c.algo == "auto" && !c.accelerated() {
		// No all-reduce goes hierarchical (hierarchical): no cluster or
		// leaders' communicator, whose rings and boxes would sit idle.
		return c, nil
	}
	var err error
	if c.sub, err = subComm(hc, dev, c.mine, cs, rank); err != nil {
		return nil, err
	}
	// The leaders' communicator on the host engine: rank 0 (always a
	// leader) makes its id.
	buf := make([]byte, idRoom)
	if rank == 0 {
		fillID(buf, hostDev)
	}
	if err := runOn(hc, &rt.Op{Kind: rt.OpBroadcast, Send: ptr(buf), Recv: ptr(buf), Count: idRoom, Type: rt.Uint8}); err != nil {
		c.release()
		return nil, rt.WrapFailed(err, "rank %d: handing out the leaders' id", rank)
	}
	if rank == c.mine.leader() {
		n := int(buf[1])<<8 | int(buf[2])
		if buf[0] != 1 {
			c.release()
			return nil, rt.Failedf("rank %d: rank 0 could not make the leaders' id: %s", rank, buf[3:3+n])
		}
		li := 0
		for i, cl := range cs {
			if cl == c.mine {
				li = i
			}
		}
		if c.leaders, err = hostDev.CommInitRank(len(cs), buf[3:3+n], li); err != nil {
			c.release()
			return nil, err
		}
	}
	return c, nil
}

func (c *Comm) Rank() int      { return c.rank }
func (c *Comm) Size() int      { return c.n }
func (c *Comm) Device() string { return "mixed" }

// SelfP2P: sends to self go through the host engine, which matches them.
func (c *Comm) SelfP2P() rt.SelfMode { return rt.SelfNative }

// MatchesZeroP2P: sends and receives between ranks go through the host
// engine, which matches those of count 0 (rt.ZeroP2Per).
func (c *Comm) MatchesZeroP2P() bool { return true }

// Supports: the host engine reduces every pair it supports, whatever the
// clusters' libraries can do.
func (c *Comm) Supports(dt rt.DataType, op rt.ReduceOp) error {
	if err := c.hostDev.Supports(dt, op); err != nil {
		return rt.Errorf("mixed communicator (clusters %s): %v", describe(c.cs), err)
	}
	return nil
}

// Capabilities says, per type and op, how a mixed all-reduce runs.
func (c *Comm) Capabilities() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mixed communicator, clusters %s\n%s\n", describe(c.cs), c.planText())
	for _, dt := range rt.AllDataTypes() {
		var hier, flat []string
		for _, op := range rt.AllReduceOps() {
			switch {
			case c.Supports(dt, op) != nil:
			case c.hierarchical(dt, op):
				hier = append(hier, op.String())
			default:
				flat = append(flat, op.String())
			}
		}
		fmt.Fprintf(&b, "%-10s hierarchical: %s; through the host engine: %s\n", dt, orDash(hier), orDash(flat))
	}
	return b.String()
}

func orDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}

func (c *Comm) planText() string {
	plan := "through the host engine"
	switch {
	case c.algo == "hier":
		plan = "hierarchical where every cluster's library reduces the pair"
	case c.algo == "auto" && c.accelerated():
		plan = "hierarchical where every cluster's library reduces the pair, as an accelerator cluster has two or more ranks"
	case c.algo == "auto":
		plan = "through the host engine, as no accelerator cluster has two or more ranks"
	}
	return fmt.Sprintf("all-reduce (XCCL_MIXED_ALGO=%s): %s; other collectives and p2p: through host staging on the host engine "+
		"(host-device ranks from their own buffers); chunks of %d bytes", c.algo, plan, c.chunk)
}

// hierarchical reports whether an all-reduce of dt and op goes through
// the clusters' libraries: every cluster reduces the pair (AVG as SUM,
// then a scale on the host, for real types), and, unless forced (hier),
// some cluster of two or more ranks is an accelerator's, whose library
// reduces in device memory. Where every such cluster is on the host
// device, its library is the host engine itself: the hierarchical path
// then runs three host collectives (and a fingerprint round) where the
// flat one runs one. Measured, 4 host ranks on 2 cores as clusters 2+2:
// 65-137 us against 6-24 at 8-8192 B, 27 ms against 16 at 32 MiB; one GPU
// rank beside three host ranks (an H200 machine), 128 MiB: 118 ms against
// 53 (docs/perf/gpu-h200.txt).
func (c *Comm) hierarchical(dt rt.DataType, op rt.ReduceOp) bool {
	if c.algo == "flat" {
		return false
	}
	red := op
	if op == rt.Avg {
		if dt != rt.Float32 && dt != rt.Float64 {
			return false
		}
		red = rt.Sum
	}
	for _, cl := range c.cs {
		if cl.caps[dt]&(1<<uint(red)) == 0 {
			return false
		}
	}
	return c.algo == "hier" || c.accelerated()
}

// accelerated reports whether some accelerator cluster has two or more
// ranks: its library reduces inside it, in device memory.
func (c *Comm) accelerated() bool {
	for _, cl := range c.cs {
		if len(cl.ranks) > 1 && cl.device != c.hostDev.Name() {
			return true
		}
	}
	return false
}

// Stats are the time spent in each phase, the calls per plan, the
// communicators this rank holds (parts: all ranks', its cluster's, the
// leaders') and whether its staging is registered host-device memory.
func (c *Comm) EngineStats() map[string]uint64 {
	m := map[string]uint64{"mixed.flat_calls": c.plans[0].Load(), "mixed.hierarchical_calls": c.plans[1].Load()}
	if c.stageReg.Load() {
		m["mixed.staging_registered"] = 1 // host-device memory pinned by this rank's runtime
	}
	for _, p := range c.parts() { // the communicators this rank holds
		if p != nil {
			m["mixed.parts"]++
		}
	}
	for i, name := range phaseNames {
		m["mixed."+name] = c.phase[i].Load()
	}
	return m
}

func (c *Comm) timed(ph int, f func() error) error {
	start := time.Now()
	err := f()
	c.phase[ph].Add(uint64(time.Since(start)))
	return err
}

// parts are the communicators this rank may hold: every rank's on the host
// engine, its cluster's, the leaders' (nil where it holds none).
func (c *Comm) parts() [3]rt.Comm { return [3]rt.Comm{c.hc, c.sub, c.leaders} }

// AsyncError is the first error of any part.
func (c *Comm) AsyncError() error {
	for _, p := range c.parts() {
		if p != nil {
			if err := p.AsyncError(); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetTimeout sets the host engine's timeouts (vendor libraries keep theirs).
func (c *Comm) SetTimeout(d time.Duration) error {
	for _, p := range c.parts() {
		if t, ok := p.(interface{ SetTimeout(time.Duration) error }); ok {
			if err := t.SetTimeout(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// Abort breaks every part at once.
func (c *Comm) Abort() {
	for _, p := range c.parts() {
		if p != nil {
			p.Abort()
		}
	}
}

// Destroy waits for the staging to be free and releases everything.
func (c *Comm) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.release()
}

func (c *Comm) release() error {
	if c.gone.Swap(true) {
		return nil
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if err := c.settle(); err != nil {
		// A copy out of the staging may still be running: leave it
		// allocated rather than free it under the copy.
		keep(err)
		rt.Log().Warn("mixed: staging left allocated: the copy out of it could not be waited for",
			zap.Int("rank", c.rank), zap.Int("bytes", c.stageN), zap.Error(err))
		c.stage, c.stageN, c.dirty = nil, 0, false
		c.stageReg.Store(false)
	}
	if c.done != 0 {
		keep(c.dev.DestroyEvent(c.done))
		c.done = 0
	}
	keep(c.freeStaging())
	// The parts stay referenced (AsyncError, EngineStats and Abort read
	// them without mu); gone keeps calls off them.
	for _, p := range []rt.Comm{c.sub, c.leaders, c.hc} { // every rank's last
		if p != nil {
			keep(p.Destroy())
		}
	}
	return first
}

// Finalize (rt.Finalizer) completes what was issued: the last copy out of
// the staging, then each part's own work where the part finalizes.
func (c *Comm) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone.Load() {
		return rt.Errorf("mixed: the communicator was destroyed")
	}
	first := c.settle()
	for _, p := range c.parts() {
		if f, ok := p.(rt.Finalizer); ok {
			if err := f.Finalize(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// KeepsOnAbort: a part whose library cannot abort keeps the whole until
// Destroy (freeing it would wait for its work in flight).
func (c *Comm) KeepsOnAbort() bool {
	for _, p := range c.parts() {
		if k, ok := p.(interface{ KeepsOnAbort() bool }); ok && k.KeepsOnAbort() {
			return true
		}
	}
	return false
}

// staging returns at least n bytes of host staging, growing it when
// needed. A copy back still reading it is waited for, unless the caller's
// first use is a copy in queued behind it on the same stream (copyFirst on
// s): then the wait for that copy covers both. Call with mu held.
func (c *Comm) staging(n int, s rt.Stream, copyFirst bool) (unsafe.Pointer, error) {
	if n <= c.stageN {
		if copyFirst && c.pending == s {
			return c.stage, nil
		}
		return c.stage, c.settle()
	}
	if err := c.settle(); err != nil {
		return nil, err
	}
	if err := c.freeStaging(); err != nil {
		return nil, err
	}
	size := max(n, 64<<10)
	if r, ok := c.dev.(rt.HostRegisterer); ok && r.CanRegisterHost() && !c.noReg {
		// Host-device memory, pinned for this rank's copies: from 2 MiB it
		// is page-aligned shared memory that the host engine's peers map,
		// so the collective reads and writes it in one pass instead of
		// through its rings. Measured, one GPU rank beside three host
		// ranks on an H200, 128 MiB all-reduce: 53 -> 31 ms (the host
		// device alone: 28.5); with the fake NCCL, 16 MiB: 24.3 -> 16.2.
		reg := (max(size, 2<<20) + 4095) &^ 4095 // whole pages, as registering wants
		if p, err := c.hostDev.HostAlloc(reg); err == nil {
			rerr := r.HostRegister(p, reg)
			if rerr == nil {
				c.stage, c.stageN, c.stageOf = p, reg, c.hostDev
				c.stageReg.Store(true)
				return p, nil
			}
			_ = c.hostDev.HostFree(p, reg)
			c.noReg = true
			rt.Log().Info("mixed: staging in the runtime's pinned memory instead: registering host-device memory failed",
				zap.Int("rank", c.rank), zap.Error(rerr))
		}
	}
	p, err := c.dev.HostAlloc(size)
	c.stageOf = c.dev
	if err != nil { // no pinned allocator (or none left): the host's
		if p, err = c.hostDev.HostAlloc(size); err != nil {
			return nil, err
		}
		c.stageOf = c.hostDev
	}
	c.stage, c.stageN = p, size
	return p, nil
}

// freeStaging unregisters and frees the staging, if any.
func (c *Comm) freeStaging() error {
	if c.stage == nil {
		return nil
	}
	var err error
	if c.stageReg.Load() {
		err = c.dev.(rt.HostRegisterer).HostUnregister(c.stage)
	}
	if ferr := c.stageOf.HostFree(c.stage, c.stageN); err == nil {
		err = ferr
	}
	c.stage, c.stageN = nil, 0
	c.stageReg.Store(false)
	return err
}

// settle waits for a host-to-device copy still reading the staging (its
// event: the stream itself may be gone by now). The staging stays busy
// until a wait succeeds.
func (c *Comm) settle() error {
	if !c.dirty {
		return nil
	}
	err := c.timed(phH2D, func() error {
		if c.done != 0 {
			return c.dev.SynchronizeEvent(c.done)
		}
		return c.dev.SynchronizeStream(c.pending)
	})
	if err == nil {
		c.dirty = false
	}
	return err
}

func (c *Comm) d2h(dst, src unsafe.Pointer, n int, s rt.Stream) error {
	if n == 0 {
		return nil
	}
	return c.timed(phD2H, func() error { return c.dev.Memcpy(c.devID(), dst, src, n, rt.DeviceToHost, s) })
}

// h2d queues a copy out of the staging on s; the staging is busy until s
// passes it.
func (c *Comm) h2d(dst, src unsafe.Pointer, n int, s rt.Stream) error {
	if n == 0 {
		return nil
	}
	c.pending, c.dirty = s, true
	return c.timed(phH2D, func() error {
		if err := c.dev.Memcpy(c.devID(), dst, src, n, rt.HostToDevice, s); err != nil {
			return err
		}
		if c.done == 0 && !c.noEvent {
			var err error
			if c.done, err = c.dev.CreateEvent(); err != nil {
				c.done, c.noEvent = 0, true
			}
		}
		if c.done == 0 {
			return nil
		}
		err := c.dev.RecordEvent(c.done, s)
		if err != nil {
			// The event would mark an earlier copy: wait for this one now.
			if c.dev.SynchronizeStream(s) == nil {
				c.dirty = false
			}
		}
		return err
	})
}

// wait waits for s to pass the device-to-host copies queued on it (and a
// copy out of the staging queued on it before them).
func (c *Comm) wait(s rt.Stream) error {
	err := c.timed(phD2H, func() error { return c.dev.SynchronizeStream(s) })
	if err == nil && s == c.pending {
		c.dirty = false
	}
	return err
}

func (c *Comm) devID() int {
	id, err := c.dev.GetDevice()
	if err != nil {
		return 0
	}
	return id
}

func (c *Comm) inter(comm rt.Comm, op *rt.Op) error {
	return c.timed(phInter, func() error { return runOn(comm, op) })
}

// runOn runs op on comm synchronously (the host engine's NULL stream).
func runOn(comm rt.Comm, op *rt.Op) error {
	op.Comm = comm
	return comm.Run(op)
}

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}
