package conformance

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"unsafe"

	_ "github.com/xccl-project/xccl/devices/host" // the host engine every communicator boots on
	"github.com/xccl-project/xccl/internal/refdata"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// Config selects the matrix.
type Config struct {
	Ranks  []int // rank counts, default 1, 2, 3, 4, 7
	Counts []int // element counts, default 0, 1, 7, 1000003 (4099 with -short)
	// GCPressure runs the suite with a garbage collection after every few
	// allocations: buffers are Go memory, and a device that let go of them
	// before the vendor was done with them (groups run at their end) shows.
	GCPressure bool
	// MoveUnit, where a device moves only whole units of this many bytes
	// (Gaudi's HCCL has no 1-byte type): the types narrower than it run
	// only the counts whose bytes are whole units, and a broadcast of one
	// element of them must be refused with C_ERROR on every rank.
	MoveUnit int
}

func (c Config) withDefaults() Config {
	if len(c.Ranks) == 0 {
		c.Ranks = []int{1, 2, 3, 4, 7}
	}
	if len(c.Counts) == 0 {
		c.Counts = []int{0, 1, 7, 1000003}
		if testing.Short() {
			c.Counts = []int{0, 1, 7, 4099}
		}
	}
	return c
}

// Comms makes n communicators of dev, one per goroutine-rank.
func Comms(t testing.TB, dev rt.Device, n int) []*xccl.Comm {
	t.Helper()
	return initRanks(t, dev, n, "CommInitRank", func(r int, id []byte) (*xccl.Comm, error) {
		return xccl.CommInitRank(dev, n, id, r)
	})
}

// initRanks makes an id on dev and joins n goroutine-ranks to it with
// init (named in failures); the communicators are destroyed at cleanup.
func initRanks(t testing.TB, dev rt.Device, n int, name string, init func(r int, id []byte) (*xccl.Comm, error)) []*xccl.Comm {
	t.Helper()
	id, err := xccl.GetUniqueID(dev)
	if err != nil {
		t.Fatalf("GetUniqueID: %v", err)
	}
	comms := make([]*xccl.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			comms[r], errs[r] = init(r, id)
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s rank %d of %d: %v", name, r, n, err)
		}
	}
	t.Cleanup(func() {
		for _, c := range comms {
			_ = c.Destroy()
		}
	})
	return comms
}

// OnAll runs f for every rank at once and fails on any error.
func OnAll(t *testing.T, comms []*xccl.Comm, f func(r int, c *xccl.Comm) error) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func(r int, c *xccl.Comm) {
			defer wg.Done()
			errs[r] = f(r, c)
		}(r, c)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func fill(dt rt.DataType, rank, count int) []byte { return fillAt(dt, rank, 0, count) }

// fillAt is rank's input from element base on (a fresh copy the caller
// may hand to a collective).
func fillAt(dt rt.DataType, rank, base, count int) []byte {
	return append([]byte(nil), refs.get(refKey{dt: dt, rank: rank, base: base, count: count}, func() []byte {
		return expected(dt, count, func(i int) refdata.Value { return refdata.Gen(dt, rank, base+i) })
	})...)
}

// reducedAt is the reference reduction over n ranks' inputs from element
// base on (shared, read only).
func reducedAt(dt rt.DataType, op rt.ReduceOp, n, base, count int) []byte {
	return refs.get(refKey{dt: dt, op: op, rank: -n, base: base, count: count}, func() []byte {
		return expected(dt, count, func(i int) refdata.Value {
			return refdata.Reference(dt, op, n, func(q int) refdata.Value { return refdata.Gen(dt, q, base+i) })
		})
	})
}

// refs memoises inputs and references: the matrix asks for the same ones
// many times (every op, in place or not, every collective), and computing
// them element by element costs more than the collectives themselves.
var refs = refCache{m: map[refKey][]byte{}}

type refKey struct {
	dt                rt.DataType
	op                rt.ReduceOp
	rank, base, count int // rank < 0: a reduction over -rank ranks
}

type refCache struct {
	mu    sync.Mutex
	m     map[refKey][]byte
	bytes int
}

const refCacheBytes = 1 << 30

func (c *refCache) get(k refKey, make func() []byte) []byte {
	c.mu.Lock()
	b, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return b
	}
	b = make()
	c.mu.Lock()
	if c.bytes+len(b) > refCacheBytes {
		c.m, c.bytes = map[refKey][]byte{}, 0
	}
	c.m[k], c.bytes = b, c.bytes+len(b)
	c.mu.Unlock()
	return b
}

// expected encodes want(i) for count elements: the reference buffer.
func expected(dt rt.DataType, count int, want func(i int) refdata.Value) []byte {
	b := make([]byte, count*dt.Size())
	for i := 0; i < count; i++ {
		refdata.Put(dt, b, i, want(i))
	}
	return b
}

// check compares got with the reference buffer: bytes first (the common,
// exact case), then element by element within closeTo's tolerance.
func check(t *testing.T, dt rt.DataType, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
		return
	}
	wrong := 0
	for i := 0; i < len(want)/dt.Size(); i++ {
		g, w := refdata.Get(dt, got, i), refdata.Get(dt, want, i)
		if !refdata.CloseTo(dt, g, w) {
			if wrong++; wrong <= 5 {
				t.Errorf("%s: element %d = %+v, want %+v", what, i, g, w)
			}
		}
	}
	if wrong > 5 {
		t.Errorf("%s: %d elements wrong", what, wrong)
	}
}

// Run runs the whole matrix on dev, and checks that every pair dev does
// not support is refused with C_ERROR naming the device, the type and op.
func Run(t *testing.T, dev rt.Device, cfg Config) {
	cfg = cfg.withDefaults()
	if cfg.GCPressure {
		defer debug.SetGCPercent(debug.SetGCPercent(2))
	}
	t.Run("refused", func(t *testing.T) { Refusals(t, dev) })
	for _, n := range cfg.Ranks {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			comms := Comms(t, dev, n)
			runComms(t, dev, comms, cfg.Counts, cfg.MoveUnit)
		})
	}
}

// MixedComms makes one communicator of len(devs) goroutine-ranks, rank r
// on devs[r] in cluster labels[r] ("" = the device's kind).
func MixedComms(t testing.TB, devs []rt.Device, labels []string) []*xccl.Comm {
	t.Helper()
	return initRanks(t, devs[0], len(devs), "CommInitRankCluster", func(r int, id []byte) (*xccl.Comm, error) {
		return xccl.CommInitRankCluster(devs[r], len(devs), id, r, labels[r])
	})
}

// RunComms runs the matrix on existing communicators (dev: the device the
// pairs are refused by; the communicators' own capabilities decide).
func RunComms(t *testing.T, dev rt.Device, comms []*xccl.Comm, counts []int) {
	runComms(t, dev, comms, counts, 1)
}

func runComms(t *testing.T, dev rt.Device, comms []*xccl.Comm, counts []int, unit int) {
	for _, dt := range rt.AllDataTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			if dt.Size() < unit {
				movesRefused(t, comms, dt)
			}
			preMul := PreMulSupported(t, comms, dt)
			for _, count := range counts {
				if count*dt.Size()%max(unit, 1) != 0 {
					continue
				}
				for _, op := range rt.AllReduceOps() {
					if comms[0].Supports(dt, op) != nil {
						continue
					}
					for _, inPlace := range []bool{false, true} {
						name := fmt.Sprintf("%v/count=%d/inplace=%v", op, count, inPlace)
						allReduce(t, comms, dt, op, count, inPlace, name)
						reduce(t, comms, dt, op, count, inPlace, name)
						reduceScatter(t, comms, dt, op, perRank(count, len(comms)), inPlace, name)
						fused(t, comms, dt, op, count, inPlace, name)
					}
					groupedAllReduces(t, comms, dt, op, count)
				}
				if preMul {
					preMulSums(t, comms, dt, count)
				}
				for _, inPlace := range []bool{false, true} {
					allGather(t, comms, dt, perRank(count, len(comms)), inPlace)
				}
				broadcast(t, comms, dt, count)
				if dt.Size() >= unit {
					allToAll(t, comms, dt, count)
					for _, inPlace := range []bool{false, true} {
						gatherScatter(t, comms, dt, perRank(count, len(comms)), inPlace)
					}
					p2pSuite(t, dev, comms, dt, count)
				} else { // the rest take other counts too
					sendRecvRing(t, comms, dt, count, true)
				}
			}
		})
	}
}

// movesRefused: a broadcast of one element of dt, less than the device's
// move unit, is refused with C_ERROR on every rank, naming the library.
func movesRefused(t *testing.T, comms []*xccl.Comm, dt rt.DataType) {
	for r, c := range comms {
		b := make([]byte, 8)
		err := c.Broadcast(ptr(b), 1, dt, 0, 0)
		if err == nil || rt.StatusOf(err) != rt.StatusError || !strings.Contains(err.Error(), "moves no unit") {
			t.Fatalf("rank %d: a 1-element %v broadcast = %v, want C_ERROR: the library moves no unit that divides it", r, dt, err)
		}
	}
}

func allReduce(t *testing.T, comms []*xccl.Comm, dt rt.DataType, op rt.ReduceOp, count int, inPlace bool, name string) {
	n := len(comms)
	out := make([][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		in := fill(dt, r, count)
		out[r] = in
		if !inPlace {
			out[r] = make([]byte, len(in))
		}
		return c.AllReduce(ptr(in), ptr(out[r]), count, dt, op, 0)
	})
	want := reducedAt(dt, op, n, 0, count)
	for r := 0; r < n; r++ {
		check(t, dt, fmt.Sprintf("AllReduce %s rank %d", name, r), out[r], want)
	}
}

// fused: AllReduceFused over buffers of count, 0, 5 and 1 elements.
func fused(t *testing.T, comms []*xccl.Comm, dt rt.DataType, op rt.ReduceOp, count int, inPlace bool, name string) {
	n := len(comms)
	counts := []int{count, 0, 5, 1}
	outs := make([][][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		sends, recvs := make([]unsafe.Pointer, len(counts)), make([]unsafe.Pointer, len(counts))
		outs[r] = make([][]byte, len(counts))
		for k, cnt := range counts {
			in := fillAt(dt, r, 100*k, cnt)
			out := in
			if !inPlace {
				out = make([]byte, len(in))
			}
			sends[k], recvs[k], outs[r][k] = ptr(in), ptr(out), out
		}
		return c.AllReduceFused(sends, recvs, counts, dt, op, 0)
	})
	for k, cnt := range counts {
		want := reducedAt(dt, op, n, 100*k, cnt)
		for r := 0; r < n; r++ {
			check(t, dt, fmt.Sprintf("AllReduceFused %s buffer %d rank %d", name, k, r), outs[r][k], want)
		}
	}
}

// groupedAllReduces: a group of small all-reduces (which the group fuses
// where the device can) around a broadcast, then a large one.
func groupedAllReduces(t *testing.T, comms []*xccl.Comm, dt rt.DataType, op rt.ReduceOp, count int) {
	n := len(comms)
	counts := []int{5, 1, 3, count} // index 2 is the broadcast
	outs := make([][][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		var g xccl.Group
		g.Start()
		outs[r] = make([][]byte, len(counts))
		for k, cnt := range counts {
			buf := fillAt(dt, r, 100*k, cnt)
			outs[r][k] = buf
			o := rt.Op{Kind: rt.OpAllReduce, Send: ptr(buf), Recv: ptr(buf), Count: cnt, Type: dt, Red: op}
			if k == 2 {
				o = rt.Op{Kind: rt.OpBroadcast, Send: ptr(buf), Recv: ptr(buf), Count: cnt, Type: dt, Root: n - 1}
			}
			if err := c.Do(&g, o); err != nil {
				return err
			}
		}
		return g.End()
	})
	for k, cnt := range counts {
		want := reducedAt(dt, op, n, 100*k, cnt)
		if k == 2 {
			want = fillAt(dt, n-1, 100*k, cnt)
		}
		for r := 0; r < n; r++ {
			check(t, dt, fmt.Sprintf("grouped %v/count=%d call %d rank %d", op, count, k, r), outs[r][k], want)
		}
	}
}

func reduce(t *testing.T, comms []*xccl.Comm, dt rt.DataType, op rt.ReduceOp, count int, inPlace bool, name string) {
	n := len(comms)
	root := n / 2
	var out []byte
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		in := fill(dt, r, count)
		recv := in
		if !inPlace {
			recv = make([]byte, len(in))
		}
		if r == root {
			out = recv
		}
		return c.Reduce(ptr(in), ptr(recv), count, dt, op, root, 0)
	})
	want := reducedAt(dt, op, n, 0, count)
	check(t, dt, fmt.Sprintf("Reduce %s root %d", name, root), out, want)
}

// perRank is the per-rank count of a gather or scatter of count elements:
// count itself while small, and count/n (rounded up to odd) when the whole
// buffer would pass a million elements, as nccl-tests sizes the whole.
func perRank(count, n int) int {
	if count*n <= 1<<20 {
		return count
	}
	return count/n | 1
}

func reduceScatter(t *testing.T, comms []*xccl.Comm, dt rt.DataType, op rt.ReduceOp, count int, inPlace bool, name string) {
	n := len(comms)
	es := dt.Size()
	out := make([][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		in := fill(dt, r, count*n)
		out[r] = make([]byte, count*es)
		if inPlace {
			out[r] = in[r*count*es : (r+1)*count*es]
		}
		return c.ReduceScatter(ptr(in), ptr(out[r]), count, dt, op, 0)
	})
	for r := 0; r < n; r++ {
		want := reducedAt(dt, op, n, r*count, count)
		check(t, dt, fmt.Sprintf("ReduceScatter %s rank %d", name, r), out[r], want)
	}
}

func allGather(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int, inPlace bool) {
	n := len(comms)
	es := dt.Size()
	out := make([][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		out[r] = make([]byte, n*count*es)
		send := fill(dt, r, count)
		if inPlace {
			copy(out[r][r*count*es:], send)
			send = out[r][r*count*es : (r+1)*count*es]
		}
		return c.AllGather(ptr(send), ptr(out[r]), count, dt, 0)
	})
	want := expected(dt, n*count, func(i int) refdata.Value { return refdata.Gen(dt, i/count, i%count) })
	for r := 0; r < n; r++ {
		check(t, dt, fmt.Sprintf("AllGather count=%d inplace=%v rank %d", count, inPlace, r), out[r], want)
	}
}

func broadcast(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int) {
	n := len(comms)
	root := n - 1
	out := make([][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		out[r] = make([]byte, count*dt.Size())
		if r == root {
			out[r] = fill(dt, r, count)
		}
		return c.Broadcast(ptr(out[r]), count, dt, root, 0)
	})
	want := fillAt(dt, root, 0, count)
	for r := 0; r < n; r++ {
		check(t, dt, fmt.Sprintf("Broadcast count=%d root %d rank %d", count, root, r), out[r], want)
	}
}

// allToAll sends count+p elements to rank p (uneven per-peer counts).
func allToAll(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int) {
	n := len(comms)
	es := dt.Size()
	recv := make([][][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		sb, rb := make([]unsafe.Pointer, n), make([]unsafe.Pointer, n)
		sc, rc := make([]int, n), make([]int, n)
		st, rtp := make([]rt.DataType, n), make([]rt.DataType, n)
		recv[r] = make([][]byte, n)
		for p := 0; p < n; p++ {
			cnt := count + p
			if count == 0 {
				cnt = 0
			}
			all := fill(dt, r, r*1000+p+cnt) // block for p: elements starting at r*1000+p
			sb[p], sc[p], st[p] = ptr(all[(r*1000+p)*es:]), cnt, dt
			in := count + r
			if count == 0 {
				in = 0
			}
			recv[r][p] = make([]byte, in*es)
			rb[p], rc[p], rtp[p] = ptr(recv[r][p]), in, dt
		}
		return c.AllToAll(sb, sc, st, rb, rc, rtp, 0)
	})
	for r := 0; r < n; r++ {
		for p := 0; p < n; p++ {
			want := expected(dt, len(recv[r][p])/es, func(i int) refdata.Value { return refdata.Gen(dt, p, p*1000+r+i) })
			check(t, dt, fmt.Sprintf("AllToAll count=%d rank %d from %d", count, r, p), recv[r][p], want)
		}
	}
}

// gatherScatter: a Gather to one root, then a Scatter from another of
// what it gathered (count elements per rank). Out of place the ranks off
// the root pass nil for the buffer they do not use; in place the root's
// own block lies in the whole buffer, and both calls go in one group.
func gatherScatter(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int, inPlace bool) {
	n := len(comms)
	es := dt.Size()
	groot, sroot := count%n, (count+1)%n
	gathered, scattered := make([]byte, n*count*es), make([][]byte, n)
	whole := make([]byte, n*count*es) // the scatter root's send buffer
	want := expected(dt, n*count, func(i int) refdata.Value { return refdata.Gen(dt, i/count, i%count) })
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		send := fill(dt, r, count)
		var recv unsafe.Pointer
		if r == groot {
			recv = ptr(gathered)
			if inPlace {
				copy(gathered[r*count*es:], send)
				send = gathered[r*count*es : (r+1)*count*es]
			}
		}
		if !inPlace {
			if err := c.Gather(nil, ptr(send), recv, count, dt, groot, 0); err != nil {
				return err
			}
		}
		var from unsafe.Pointer
		scattered[r] = make([]byte, count*es)
		into := ptr(scattered[r])
		if r == sroot {
			if inPlace { // the reference, as the gather's would be
				copy(whole, want)
				into = ptr(whole[r*count*es:])
			}
			from = ptr(whole)
		}
		if !inPlace {
			if r == sroot {
				copy(whole, want)
			}
			return c.Scatter(nil, from, into, count, dt, sroot, 0)
		}
		g := &xccl.Group{}
		g.Start()
		if err := c.Gather(g, ptr(send), recv, count, dt, groot, 0); err != nil {
			g.End()
			return err
		}
		if err := c.Scatter(g, from, into, count, dt, sroot, 0); err != nil {
			g.End()
			return err
		}
		if err := g.End(); err != nil {
			return err
		}
		if r == sroot {
			copy(scattered[r], whole[r*count*es:(r+1)*count*es])
		}
		return nil
	})
	name := fmt.Sprintf("count=%d inplace=%v", count, inPlace)
	check(t, dt, fmt.Sprintf("Gather %s root %d", name, groot), gathered, want)
	for r := 0; r < n; r++ {
		check(t, dt, fmt.Sprintf("Scatter %s root %d rank %d", name, sroot, r), scattered[r], want[r*count*es:(r+1)*count*es])
	}
}

// sendRecvRing: every rank sends to the next and receives from the
// previous: send first outside a group, receive first inside one. With one
// rank, it sends to itself.
func sendRecvRing(t *testing.T, comms []*xccl.Comm, dt rt.DataType, count int, grouped bool) {
	n := len(comms)
	out := make([][]byte, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		send := fill(dt, r, count)
		out[r] = make([]byte, len(send))
		var g *xccl.Group
		if grouped {
			g = &xccl.Group{}
			g.Start()
		}
		ops := []rt.Op{
			{Kind: rt.OpSend, Send: ptr(send), Count: count, Type: dt, Root: (r + 1) % n},
			{Kind: rt.OpRecv, Recv: ptr(out[r]), Count: count, Type: dt, Root: (r + n - 1) % n},
		}
		if grouped { // receive first: only group semantics make this safe
			ops[0], ops[1] = ops[1], ops[0]
		}
		for _, op := range ops {
			if err := c.Do(g, op); err != nil {
				return err
			}
		}
		if g != nil {
			return g.End()
		}
		return nil
	})
	for r := 0; r < n; r++ {
		want := expected(dt, count, func(i int) refdata.Value { return refdata.Gen(dt, (r+n-1)%n, i) })
		check(t, dt, fmt.Sprintf("SendRecv grouped=%v count=%d rank %d", grouped, count, r), out[r], want)
	}
}

// Refusals: every unsupported (dtype, op) pair fails before it reaches the
// device, with C_ERROR and a message naming device, data type and op.
func Refusals(t *testing.T, dev rt.Device) {
	comms := Comms(t, dev, 1)
	buf := make([]byte, 64)
	for _, dt := range rt.AllDataTypes() {
		for _, op := range rt.AllReduceOps() {
			if dev.Supports(dt, op) == nil {
				continue
			}
			err := comms[0].AllReduce(ptr(buf), ptr(buf), 1, dt, op, 0)
			if err == nil || rt.StatusOf(err) != rt.StatusError {
				t.Errorf("%v %v: want C_ERROR, got %v", dt, op, err)
				continue
			}
			for _, want := range []string{dev.Name(), dt.String(), op.String()} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v %v: message %q does not name %q", dt, op, err, want)
				}
			}
		}
	}
}
