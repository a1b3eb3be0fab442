// Package host is xccl's host device: host memory, streams as ordered
// worker queues, and real collectives between ranks that are goroutines,
// processes on one machine (shared memory) or processes on several (TCP).
package host

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	rt "github.com/xccl-project/xccl/runtime"
)

func init() {
	rt.Register("host", func() (rt.Device, error) { return New(), nil })
}

// Device is the host device.
type Device struct {
	mu      sync.Mutex
	streams map[rt.Stream]*stream
	events  map[rt.Event]*event
	next    atomic.Uint64
	opts    *Options    // nil: DefaultOptions() at each comm init
	current map[int]int // OS thread id → current device
	groupMu sync.Mutex  // a group takes its communicators' tickets at once
}

// New makes a host device.
func New() *Device {
	d := &Device{streams: map[rt.Stream]*stream{}, events: map[rt.Event]*event{}, current: map[int]int{}}
	d.next.Store(0x7c0000)
	return d
}

// NewWithOptions makes a host device whose communicators use opts instead
// of the XCCL_* environment (tests run the TCP transport this way).
func NewWithOptions(opts Options) *Device {
	d := New()
	d.opts = &opts
	return d
}

// Name is "host".
func (d *Device) Name() string { return "host" }

// DeviceCount is XCCL_HOST_DEVICES (default 1).
func (d *Device) DeviceCount() int { return rt.Load().HostDevices }

// SetDevice makes id the calling OS thread's current device.
func (d *Device) SetDevice(id int) error {
	if err := d.checkDev(id); err != nil {
		return err
	}
	d.mu.Lock()
	d.current[unix.Gettid()] = id
	d.mu.Unlock()
	return nil
}

// GetDevice is the calling OS thread's current device (0 if never set).
func (d *Device) GetDevice() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current[unix.Gettid()], nil
}

// SynchronizeDevice waits for the work queued on every stream so far and
// returns the first error not yet reported (events still report theirs).
func (d *Device) SynchronizeDevice(id int) error {
	if err := d.checkDev(id); err != nil {
		return err
	}
	var first error
	for _, s := range d.allStreams() {
		if err := s.settle(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// allStreams is the device's streams now, to wait for outside d.mu.
func (d *Device) allStreams() []*stream {
	d.mu.Lock()
	defer d.mu.Unlock()
	all := make([]*stream, 0, len(d.streams))
	for _, s := range d.streams {
		all = append(all, s)
	}
	return all
}

// AddCallback runs fn once the stream's earlier work is done (at once for
// the NULL stream), with the stream's pending error if any.
func (d *Device) AddCallback(h rt.Stream, fn func(error)) error {
	return d.submit(h, func() error { fn(nil); return nil })
}

// Axpby computes y = alpha*x + beta*y in stream order.
func (d *Device) Axpby(dev int, h rt.Stream, dt rt.DataType, n int, alpha float32, x unsafe.Pointer, beta float32, y unsafe.Pointer) error {
	if err := d.checkDev(dev); err != nil {
		return err
	}
	if !dt.Valid() || dt == rt.Bool {
		return rt.Errorf("host: axpby on %v", dt)
	}
	if n > 0 && (x == nil || y == nil) {
		return rt.Errorf("host: axpby with a NULL buffer")
	}
	return d.submit(h, func() error {
		axpby(dt, alpha, bytesAt(x, n*dt.Size()), beta, bytesAt(y, n*dt.Size()))
		return nil
	})
}

// UniqueIDSize is UniqueIDSize.
func (d *Device) UniqueIDSize() int { return UniqueIDSize }

// NewUniqueID starts a bootstrap root in this process and returns its id.
// The root serves one communicator and stops when it is set up or after
// XCCL_TIMEOUT.
func (d *Device) NewUniqueID() ([]byte, error) {
	r, err := StartRoot(rt.Load().Timeout)
	if err != nil {
		return nil, err
	}
	return r.ID.Bytes(), nil
}

// LaunchID is the id the ranks of a launched job derive alike (package
// launch): the root at root (host:port; a name is resolved here), the job
// and secret given. serve (rank 0) also serves its bootstrap: on loopback
// when the root is, else on every address of this machine, so a name that
// resolves differently here (127.0.1.1 in /etc/hosts) still works.
func (d *Device) LaunchID(root string, job uint64, secret [32]byte, serve bool) ([]byte, error) {
	host, portStr, err := net.SplitHostPort(root)
	if err != nil {
		return nil, rt.Errorf("root %q: %v", root, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, rt.Errorf("root %q: bad port", root)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.LookupIP(host)
		if lerr != nil || len(ips) == 0 {
			return nil, rt.Errorf("root host %q does not resolve: %v", host, lerr)
		}
		for _, ip := range ips { // IPv4 first, as the rest of the job most likely dials it
			if a, ok := netip.AddrFromSlice(ip); ok && (!addr.IsValid() || (a.Unmap().Is4() && !addr.Is4())) {
				addr = a.Unmap()
			}
		}
	}
	id := UniqueID{Root: netip.AddrPortFrom(addr.Unmap(), uint16(port)), Job: job, Secret: secret}
	if addr.IsLoopback() {
		id.Machine = machineHash()
	}
	if serve {
		listen := fmt.Sprintf(":%d", port)
		if addr.IsLoopback() {
			listen = id.Root.String()
		}
		if _, err := StartRootAt(id, listen, rt.Load().Timeout); err != nil {
			return nil, err
		}
	}
	return id.Bytes(), nil
}

// CommInitRank joins a communicator with the default options.
func (d *Device) CommInitRank(nranks int, id []byte, rank int) (rt.Comm, error) {
	return d.CommInitRankTimeout(nranks, id, rank, 0)
}

// CommInitRankTimeout is CommInitRank within timeout (0: the options').
func (d *Device) CommInitRankTimeout(nranks int, id []byte, rank int, timeout time.Duration) (rt.Comm, error) {
	u, err := ParseUniqueID(id)
	if err != nil {
		return nil, err
	}
	o := DefaultOptions()
	if d.opts != nil {
		o = *d.opts
	}
	if timeout > 0 {
		o.Timeout = timeout
	}
	c, err := NewComm(u, nranks, rank, o)
	if err != nil {
		return nil, err
	}
	return newDevComm(c, d), nil
}

// Supports is the host capability matrix.
func (d *Device) Supports(dt rt.DataType, op rt.ReduceOp) error { return supports(dt, op) }

// SelfP2P: the host device matches sends to self with receives from self.
func (d *Device) SelfP2P() rt.SelfMode { return rt.SelfNative }

// MatchesZeroP2P: a send of count 0 to another rank is a message of no
// bytes, which its receive of count 0 takes (rt.ZeroP2Per).
func (d *Device) MatchesZeroP2P() bool { return true }

func (d *Device) handle() uint64 { return d.next.Add(1) }

// CreateStream makes an ordered work queue.
func (d *Device) CreateStream() (rt.Stream, error) {
	h := rt.Stream(d.handle())
	d.mu.Lock()
	d.streams[h] = newStream()
	d.mu.Unlock()
	return h, nil
}

func (d *Device) stream(h rt.Stream) (*stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.streams[h]
	if !ok {
		return nil, rt.Errorf("host: unknown stream %#x", uintptr(h))
	}
	return s, nil
}

// DestroyStream waits for the stream's work, then forgets it.
func (d *Device) DestroyStream(h rt.Stream) error {
	if h == 0 {
		return nil
	}
	s, err := d.stream(h)
	if err != nil {
		return err
	}
	_ = s.synchronize()
	s.mu.Lock()
	if s.kick.Stop() { // its worker has nothing to start for
		s.kicking = false
	}
	s.mu.Unlock()
	d.mu.Lock()
	delete(d.streams, h)
	d.mu.Unlock()
	return nil
}

// SynchronizeStream waits for all work on the stream and returns its first error.
func (d *Device) SynchronizeStream(h rt.Stream) error {
	if h == 0 {
		return nil
	}
	s, err := d.stream(h)
	if err != nil {
		return err
	}
	return s.synchronize()
}

// QueryStream is nil when the stream is idle, ErrNotReady otherwise.
func (d *Device) QueryStream(h rt.Stream) error {
	if h == 0 {
		return nil
	}
	s, err := d.stream(h)
	if err != nil {
		return err
	}
	return s.query()
}

// CreateEvent makes an event; one never recorded is complete.
func (d *Device) CreateEvent() (rt.Event, error) {
	h := rt.Event(d.handle())
	d.mu.Lock()
	d.events[h] = &event{}
	d.mu.Unlock()
	return h, nil
}

func (d *Device) event(h rt.Event) (*event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.events[h]
	if !ok {
		return nil, rt.Errorf("host: unknown event %#x", uintptr(h))
	}
	return e, nil
}

// RecordEvent marks the current end of the stream (NULL stream: done now).
func (d *Device) RecordEvent(h rt.Event, sh rt.Stream) error {
	e, err := d.event(h)
	if err != nil {
		return err
	}
	if sh == 0 {
		e.record(nil)
		return nil
	}
	s, err := d.stream(sh)
	if err != nil {
		return err
	}
	e.record(s)
	return nil
}

// QueryEvent is nil when the event's work is done.
func (d *Device) QueryEvent(h rt.Event) error {
	e, err := d.event(h)
	if err != nil {
		return err
	}
	if !e.done() {
		return rt.ErrNotReady
	}
	return nil
}

// SynchronizeEvent waits for the event's work.
func (d *Device) SynchronizeEvent(h rt.Event) error {
	e, err := d.event(h)
	if err != nil {
		return err
	}
	return e.wait()
}

// DestroyEvent forgets the event.
func (d *Device) DestroyEvent(h rt.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.events[h]; !ok {
		return rt.Errorf("host: unknown event %#x", uintptr(h))
	}
	delete(d.events, h)
	return nil
}

// StreamWaitEvent makes later work on the stream wait for the event.
func (d *Device) StreamWaitEvent(sh rt.Stream, h rt.Event) error {
	e, err := d.event(h)
	if err != nil {
		return err
	}
	if sh == 0 {
		_ = e.wait() // its stream's error is that stream's to report
		return nil
	}
	s, err := d.stream(sh)
	if err != nil {
		return err
	}
	es, pos := e.target()
	if es != nil && es != s {
		// A failure before the event (a broken communicator) fails the
		// waiting stream too, as an error on a device does what waits for
		// it: Paddle waits for a collective this way, then synchronizes
		// only its compute stream.
		s.enqueue(func() error {
			es.waitFor(pos)
			return rt.WrapFailed(es.failedBy(pos), "host: a stream waited for an event after a failed call")
		})
	}
	return nil
}

// submit runs f now (NULL stream) or enqueues it on the stream.
func (d *Device) submit(h rt.Stream, f func() error) error {
	if h == 0 {
		return f()
	}
	s, err := d.stream(h)
	if err != nil {
		return err
	}
	s.enqueue(f)
	return nil
}

// RunGroup executes a group on the stream of its first op: per
// communicator, point-to-point sends first (they never block), then
// everything else in issue order. Several communicators' ops (one thread
// driving several ranks, as NCCL allows) run at once, one goroutine each.
func (d *Device) RunGroup(ops []*rt.Op) error {
	if len(ops) == 0 {
		return nil
	}
	var order []*devComm
	var byComm map[*devComm][]*rt.Op // made for a group of several communicators only
	for i, op := range ops {
		c, ok := op.Comm.(*devComm)
		if !ok {
			return rt.Errorf("host: group mixes in a communicator of device %q", op.Comm.Device())
		}
		switch {
		case i == 0:
			order = append(order, c)
		case byComm == nil && c == order[0]:
		default:
			if byComm == nil {
				byComm = map[*devComm][]*rt.Op{order[0]: slices.Clone(ops[:i])}
			}
			if _, seen := byComm[c]; !seen {
				order = append(order, c)
			}
			byComm[c] = append(byComm[c], op)
		}
	}
	// The group runs on its first op's stream; every other stream of the
	// group is ordered with it: the group waits for the work already on
	// them, and their later work waits for the group.
	var others []*stream
	var at []uint64
	for _, op := range ops {
		if op.Stream == 0 || op.Stream == ops[0].Stream {
			continue
		}
		s, err := d.stream(op.Stream)
		if err != nil {
			return err
		}
		if !slices.Contains(others, s) {
			others, at = append(others, s), append(at, s.position())
		}
	}
	if len(order) == 1 && len(others) == 0 && ops[0].Stream == 0 {
		return d.runNow(order[0], ops)
	}
	var first *stream // nil: the NULL stream
	if ops[0].Stream != 0 {
		var err error
		if first, err = d.stream(ops[0].Stream); err != nil {
			return err
		}
	}
	// Every communicator of the group takes its turn in issue order at
	// once, and the group its place on the streams with it: two groups
	// over the same communicators queue alike on each.
	d.groupMu.Lock()
	for _, c := range order {
		c.issueMu.Lock()
	}
	tickets := make([]uint64, len(order))
	for i, c := range order {
		tickets[i] = c.ticket()
		if first != nil {
			c.StopFastPath() // its NULL-stream calls now wait for the streams (Run): Go's
		}
	}
	issued := func() {
		for _, c := range order {
			c.issueMu.Unlock()
		}
		d.groupMu.Unlock()
	}
	var finished chan struct{}
	if len(others) > 0 {
		finished = make(chan struct{})
		for _, s := range others {
			s.enqueue(func() error { <-finished; return nil })
		}
	}
	run := func() error {
		if finished != nil {
			defer close(finished)
			for i, s := range others {
				s.waitFor(at[i])
			}
		}
		var late error // every ticket is waited for and finished, even after a failed wait
		for i, c := range order {
			if err := c.await(tickets[i]); err != nil && late == nil {
				late = err
			}
		}
		defer func() {
			for _, c := range order {
				c.finish()
			}
		}()
		if late != nil {
			return late
		}
		if len(order) == 1 {
			return runComm(ops)
		}
		errs := make([]error, len(order))
		var wg sync.WaitGroup
		for i, c := range order {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = runComm(byComm[c])
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
	if first == nil {
		issued()
		return run()
	}
	if !slices.ContainsFunc(ops, func(op *rt.Op) bool { return op.Stream == 0 }) {
		first.enqueue(run)
		issued()
		return nil
	}
	// A NULL-stream call of the group is synchronous, as every NULL-stream
	// call: GroupEnd returns once the group ran (in its place on first),
	// with its error.
	var err error
	pos := first.enqueueAt(func() error { err = run(); return err })
	issued()
	first.waitFor(pos)
	return err
}

// runNow runs a group of one communicator's NULL-stream ops at once, in its
// turn: RunGroup's common case, without its bookkeeping for several
// communicators and streams.
func (d *Device) runNow(c *devComm, ops []*rt.Op) error {
	d.groupMu.Lock()
	c.issueMu.Lock()
	t := c.ticket()
	c.issueMu.Unlock()
	d.groupMu.Unlock()
	err := c.await(t)
	if err == nil {
		err = runComm(ops)
	}
	c.finish()
	return err
}

// runComm runs one communicator's ops of a group: sends, then the rest. A
// receive of another size than its send (errP2PSize: its message was
// discarded, the stream is in step) does not stop the rest, whose peers
// wait for them and whose messages would otherwise reach later receives;
// the group returns its first error.
func runComm(ops []*rt.Op) error {
	for _, op := range ops {
		if op.Kind == rt.OpSend {
			if err := op.Comm.(*devComm).exec(op); err != nil {
				return err
			}
		}
	}
	var first error
	for _, op := range ops {
		if op.Kind != rt.OpSend {
			if err := op.Comm.(*devComm).exec(op); err != nil {
				if !errors.Is(err, errP2PSize) {
					return err
				}
				if first == nil {
					first = err
				}
			}
		}
	}
	return first
}

// devComm ties a Comm to the device whose streams it runs on. Its
// operations run in the order they were issued, whatever their streams,
// as NCCL's do: each takes a ticket when issued, and runs once every
// earlier one has finished. (Run on its stream's worker as they come, two
// all-reduces issued on two streams in the same order on every rank ran
// in either order on each, and mixed up their results.)
type devComm struct {
	*Comm
	dev     *Device
	issued  atomic.Uint64 // tickets handed out
	done    atomic.Uint64 // operations finished, in ticket order
	turnMu  sync.Mutex
	turn    *sync.Cond // signalled when done grows, and on Destroy
	issueMu sync.Mutex // a ticket and its place on the stream are taken together
}

// AsyncError (rt.Comm, what XcclCommGetAsyncError asks) is the error that
// broke the communicator, or, once a peer on this machine aborted (its
// state word says so), that peer's: the others learn of an abort when they
// ask, not only at their next wait. The communicator is then broken.
func (c *devComm) AsyncError() error {
	if err := c.Comm.AsyncError(); err != nil {
		return err
	}
	c.lifeMu.Lock()
	var err error
	if !c.released { // the segments are mapped
		for p, ps := range c.peerSegs {
			if ps != nil && ps.state().Load() == stateAborted {
				err = c.peerError(p)
				break
			}
		}
	}
	c.lifeMu.Unlock()
	return c.fail(err)
}

func newDevComm(c *Comm, d *Device) *devComm {
	dc := &devComm{Comm: c, dev: d}
	dc.turn = sync.NewCond(&dc.turnMu)
	return dc
}

func (c *devComm) ticket() uint64 { return c.issued.Add(1) - 1 }

// waitStreams lets a NULL-stream call wait for the operations issued
// before it that are still queued on streams: it takes a turn (took: the
// caller calls finish once done) and waits for it; with none queued, it
// takes no turn.
func (c *devComm) waitStreams() (took bool, err error) {
	if c.issued.Load() == c.done.Load() {
		return false, nil
	}
	c.issueMu.Lock()
	t := c.ticket()
	c.issueMu.Unlock()
	return true, c.await(t)
}

// RunP2P (xccl.P2PRunner) runs a group of NULL-stream sends and receives:
// after the work issued on streams before it, as Run, then the sends and
// receives together (p2pGroup).
func (c *devComm) RunP2P(ops []*rt.Op) error {
	took, err := c.waitStreams()
	if took {
		defer c.finish()
	}
	if err != nil {
		return err
	}
	if c.destroyed.Load() || c.broken.Load() != nil {
		return c.usable()
	}
	return c.p2pGroup(ops)
}

// await returns once every operation issued before ticket t has finished
// (or the communicator is destroyed: what is left then fails). Waiting
// longer than the timeout (the earlier ones cannot run: a callback on a
// stream waits for this one, say) fails the communicator.
func (c *devComm) await(t uint64) error {
	if c.done.Load() == t {
		return nil
	}
	deadline := time.Now().Add(c.timeout())
	timer := time.AfterFunc(c.timeout(), func() {
		c.turnMu.Lock()
		c.turn.Broadcast()
		c.turnMu.Unlock()
	})
	defer timer.Stop()
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	for c.done.Load() != t {
		if c.destroyed.Load() || c.broken.Load() != nil {
			return nil // exec fails with the reason
		}
		if !time.Now().Before(deadline) {
			return c.fail(rt.Failedf("rank %d: an operation waited %v for the ones issued before it on this communicator (on other streams) to run", c.rank, c.timeout()))
		}
		c.turn.Wait()
	}
	return nil
}

func (c *devComm) finish() {
	c.turnMu.Lock()
	c.done.Add(1)
	c.turn.Broadcast()
	c.turnMu.Unlock()
}

// Run executes op on op.Stream, after the operations issued before it
// (synchronously for the NULL stream).
func (c *devComm) Run(op *rt.Op) error {
	if op.Stream == 0 {
		took, err := c.waitStreams()
		if took {
			defer c.finish()
		}
		if err != nil {
			return err
		}
		return c.exec(op) // the NULL stream: right here, no copy, no closure (exec checks usable)
	}
	if err := c.usable(); err != nil {
		return err
	}
	c.StopFastPath() // NULL-stream calls now wait for the streams' (above): Go's
	s, err := c.dev.stream(op.Stream)
	if err != nil {
		return err
	}
	o := *op
	c.issueMu.Lock()
	t := c.ticket()
	s.enqueue(func() error {
		defer c.finish()
		if err := c.await(t); err != nil {
			return err
		}
		return c.exec(&o)
	})
	c.issueMu.Unlock()
	return nil
}

// drain waits for every operation issued on streams so far to finish, as
// long as one finishes within each timeout (a long healthy queue is
// waited for; a stuck one for one timeout); it returns how many have not.
func (c *devComm) drain() uint64 {
	want := c.issued.Load()
	last, deadline := c.done.Load(), time.Now().Add(c.timeout())
	for last < want && time.Now().Before(deadline) {
		time.Sleep(200 * time.Microsecond)
		if d := c.done.Load(); d != last {
			last, deadline = d, time.Now().Add(c.timeout())
		}
	}
	return want - min(want, c.done.Load())
}

// Finalize (ncclCommFinalize) waits for the operations issued on streams
// (drain): C_FAILED if the communicator broke, or if some are still
// pending after a timeout with none finishing.
func (c *devComm) Finalize() error {
	if c.destroyed.Load() {
		return c.usable()
	}
	if err := c.AsyncError(); err != nil {
		return err
	}
	if left := c.drain(); left > 0 {
		return rt.Failedf("CommFinalize: %d operations issued on streams still pending, none finished in %v", left, c.timeout())
	}
	return c.AsyncError()
}

// Destroy finalizes first, as NCCL's destroy does: the operations issued
// on streams run (drain) before the communicator goes.
func (c *devComm) Destroy() error {
	if !c.destroyed.Load() && c.AsyncError() == nil { // a broken one's queue fails anyway
		c.drain()
	}
	err := c.Comm.Destroy()
	c.turnMu.Lock()
	c.turn.Broadcast() // operations still waiting their turn fail now
	c.turnMu.Unlock()
	return err
}
