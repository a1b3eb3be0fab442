// Package perf is the engine of xccl-perf: it times one collective over a
// sweep of sizes on any device, the way nccl-tests does (same size and count
// conventions, same bus-bandwidth factors), and checks the results against
// exactly predictable inputs (package refdata).
package perf

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/xccl-project/xccl/internal/refdata"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// Coll is a collective xccl-perf can time.
type Coll struct {
	Name string
	// BusFactor turns algorithm bandwidth into bus bandwidth (nccl-tests'
	// PERFORMANCE.md): the share of the data every link must carry.
	BusFactor func(n int) float64
	// PerRank: the size is the whole buffer of n blocks, the count is one
	// rank's block (all-gather, reduce-scatter, all-to-all).
	PerRank bool
	Reduces bool // takes a reduce op
	Rooted  bool // takes a root
	InPlace bool // has an in-place form
}

func ring(n int) float64 { return float64(n-1) / float64(n) }
func one(int) float64    { return 1 }

// Colls are the collectives by name (nccl-tests' names without _perf).
var Colls = map[string]Coll{
	"all_reduce":     {Name: "all_reduce", BusFactor: func(n int) float64 { return 2 * ring(n) }, Reduces: true, InPlace: true},
	"broadcast":      {Name: "broadcast", BusFactor: one, Rooted: true},
	"reduce":         {Name: "reduce", BusFactor: one, Reduces: true, Rooted: true, InPlace: true},
	"all_gather":     {Name: "all_gather", BusFactor: ring, PerRank: true, InPlace: true},
	"reduce_scatter": {Name: "reduce_scatter", BusFactor: ring, PerRank: true, Reduces: true, InPlace: true},
	"alltoall":       {Name: "alltoall", BusFactor: ring, PerRank: true},
	"sendrecv":       {Name: "sendrecv", BusFactor: one},
}

// CollNames lists the collectives, sorted.
func CollNames() string {
	names := make([]string, 0, len(Colls))
	for n := range Colls {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// LookupColl accepts nccl-tests' names and the API's (allreduce, AllReduce…).
func LookupColl(s string) (Coll, error) {
	k := strings.ToLower(strings.TrimSuffix(s, "_perf"))
	for name, c := range Colls {
		if k == name || k == strings.ReplaceAll(name, "_", "") {
			return c, nil
		}
	}
	return Coll{}, fmt.Errorf("unknown collective %q (have %s)", s, CollNames())
}

var typeNames = map[string]rt.DataType{
	"float": rt.Float32, "half": rt.Float16, "double": rt.Float64, "bfloat16": rt.BFloat16,
	"int8": rt.Int8, "uint8": rt.Uint8, "int32": rt.Int32, "uint32": rt.Uint32, "int64": rt.Int64,
	"uint64": rt.Uint64, "int16": rt.Int16, "uint16": rt.Uint16, "bool": rt.Bool,
	"complex64": rt.Complex64, "complex128": rt.Complex128,
	"float32": rt.Float32, "float16": rt.Float16, "float64": rt.Float64, "int": rt.Int32, "char": rt.Int8,
}

// LookupType accepts nccl-tests' type names and xccl's (FLOAT32…).
func LookupType(s string) (rt.DataType, error) {
	if dt, ok := typeNames[strings.ToLower(s)]; ok {
		return dt, nil
	}
	return 0, fmt.Errorf("unknown data type %q", s)
}

// TypeName is nccl-tests' name of dt.
func TypeName(dt rt.DataType) string {
	for _, n := range []string{"float", "half", "double", "bfloat16", "int8", "uint8", "int32", "uint32",
		"int64", "uint64", "int16", "uint16", "bool", "complex64", "complex128"} {
		if typeNames[n] == dt {
			return n
		}
	}
	return dt.String()
}

// LookupOp accepts sum, prod, max, min, avg (any case).
func LookupOp(s string) (rt.ReduceOp, error) {
	switch strings.ToLower(s) {
	case "sum":
		return rt.Sum, nil
	case "prod", "product":
		return rt.Product, nil
	case "max":
		return rt.Max, nil
	case "min":
		return rt.Min, nil
	case "avg":
		return rt.Avg, nil
	}
	return 0, fmt.Errorf("unknown reduce op %q (sum, prod, max, min, avg)", s)
}

// Config is one sweep.
type Config struct {
	Coll     Coll
	Type     rt.DataType
	Red      rt.ReduceOp
	Root     int
	MinBytes int
	MaxBytes int
	Factor   int // multiply the size by this each step (≥ 2)
	Step     int // or, when Factor is 0 or 1, add this
	Iters    int
	Warmup   int
	Check    bool
	Stream   rt.Stream // 0: the NULL stream
	Dev      int       // the device id the buffers live on
	// Batch > 1 (all_reduce only): every iteration all-reduces Batch
	// buffers of the size, as one AllReduceFused call when Fused, else as
	// Batch separate calls. Times are per iteration, bandwidths count the
	// whole batch.
	Batch int
	Fused bool
	// Alloc: allocate each buffer with at least this many bytes (0: what
	// the sweep needs), as a framework's caching allocator hands out
	// pieces of large device allocations. On the host device allocations
	// from 2 MiB on are shared memory the peers map (single copy).
	Alloc int
	// CommMem: allocate the buffers with xccl.MemAlloc (XcclMemAlloc's
	// memory; on the host device shared at every size), not MemAlloc.
	CommMem bool
	// Phases: fill Timing.PhasesUs from the communicator's engine
	// counters (the "…_ns" ones, e.g. a mixed communicator's phases).
	Phases bool
	// Settle: barriers before the first size (xccl-perf: 1000), so that
	// measured rows do not depend on being first.
	Settle int
}

// Timing is one measurement of one size, in one placement.
type Timing struct {
	TimeUs float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw_GBs"`
	BusBW  float64 `json:"busbw_GBs"`
	Wrong  int64   `json:"wrong"` // -1: not checked
	// PhasesUs: with Config.Phases, this rank's time per timed call in
	// each phase the engine counts (key without its "_ns").
	PhasesUs map[string]float64 `json:"phases_us,omitempty"`
}

// Result is one row: a size, out-of-place and (where the collective has
// one) in-place.
type Result struct {
	Bytes    int     `json:"bytes"`
	Count    int     `json:"count"`
	Type     string  `json:"type"`
	Op       string  `json:"redop"`
	Root     int     `json:"root"`
	OutPlace Timing  `json:"out_of_place"`
	InPlace  *Timing `json:"in_place,omitempty"`
}

func (cfg *Config) batches() int { return max(cfg.Batch, 1) }

// Sizes lists the sweep's sizes in bytes.
func (cfg *Config) Sizes() []int {
	var out []int
	for b := max(cfg.MinBytes, 0); b <= cfg.MaxBytes; {
		out = append(out, b)
		switch {
		case cfg.Factor > 1:
			if b == 0 {
				b = 1
			} else {
				b *= cfg.Factor
			}
		case cfg.Step > 0:
			b += cfg.Step
		default:
			return out
		}
	}
	return out
}

// bench holds one rank's buffers and communicator.
type bench struct {
	cfg        *Config
	c          *xccl.Comm
	dev        rt.Device
	rank, n    int
	send, recv unsafe.Pointer // device buffers of cfg.MaxBytes (+ slack)
	cap        int
	host       []byte // staging for fills and checks
	scalar     unsafe.Pointer
	sends      []unsafe.Pointer // a fused batch's buffers
	recvs      []unsafe.Pointer
	counts     []int
	group      xccl.Group // sendrecv's, reused
}

// Run sweeps the sizes on this rank and calls emit with every row (every
// rank gets the same rows: times are the slowest rank's, wrong counts the
// sum over ranks). All ranks of c must call Run with the same Config.
func Run(c *xccl.Comm, cfg Config, emit func(Result)) (err error) {
	if cfg.Iters < 0 {
		cfg.Iters = 1
	}
	b := &bench{cfg: &cfg, c: c, dev: c.Device(), rank: c.Rank(), n: c.Size()}
	if cfg.Batch < 1 || cfg.Coll.Name != "all_reduce" {
		cfg.Batch = 1
	}
	b.cap = max(cfg.MaxBytes*cfg.Batch, cfg.Alloc, 64)
	alloc := func(n int) (unsafe.Pointer, func() error, error) {
		if cfg.CommMem {
			p, err := xccl.MemAllocOn(b.dev, cfg.Dev, n)
			return p, func() error { return xccl.MemFree(p) }, err
		}
		p, err := b.dev.MemAlloc(cfg.Dev, n)
		return p, func() error { return b.dev.MemFree(cfg.Dev, p, n) }, err
	}
	for _, m := range []struct {
		p *unsafe.Pointer
		n int
	}{{&b.send, b.cap}, {&b.recv, b.cap}, {&b.scalar, 64}} {
		p, free, err := alloc(m.n)
		if err != nil {
			return err
		}
		defer func() {
			if e := free(); e != nil && err == nil {
				err = e // a free that fails fails the run
			}
		}()
		*m.p = p
	}
	// Touch every page once, as real data would: untouched memory costs a
	// page fault per page on its first use, and a peer reading it directly
	// would pay for it on every call.
	for _, p := range []unsafe.Pointer{b.send, b.recv} {
		if err := b.dev.Memset(cfg.Dev, p, 0, b.cap, 0); err != nil {
			return err
		}
	}
	if cfg.Check {
		b.host = make([]byte, b.cap)
	}
	// Settle: right after init a rank's first few thousand calls run slow
	// (peers still waking from the bootstrap's sleeps); measured rows should
	// not depend on being first.
	for i := 0; i < cfg.Settle; i++ {
		if err := b.barrier(); err != nil {
			return err
		}
	}
	for _, size := range cfg.Sizes() {
		r, err := b.size(size)
		if err != nil {
			return err
		}
		if r != nil {
			emit(*r)
		}
	}
	return nil
}

// count is the element count of one call for size bytes (per rank block
// for the per-rank collectives); 0 skips the size.
func (b *bench) count(size int) int {
	es := b.cfg.Type.Size()
	if b.cfg.Coll.PerRank {
		return size / es / b.n
	}
	return size / es
}

func (b *bench) size(size int) (*Result, error) {
	count := b.count(size)
	if count == 0 && size > 0 {
		return nil, nil
	}
	bytes := count * b.cfg.Type.Size()
	if b.cfg.Coll.PerRank {
		bytes *= b.n
	}
	r := &Result{Bytes: bytes, Count: count, Type: TypeName(b.cfg.Type), Op: "none", Root: -1}
	if b.cfg.Coll.Reduces {
		r.Op = strings.ToLower(b.cfg.Red.String())
	}
	if b.cfg.Coll.Rooted {
		r.Root = b.cfg.Root
	}
	t, err := b.measure(count, bytes, false)
	if err != nil {
		return nil, err
	}
	r.OutPlace = t
	if b.cfg.Coll.InPlace {
		t, err := b.measure(count, bytes, true)
		if err != nil {
			return nil, err
		}
		r.InPlace = &t
	}
	return r, nil
}

func (b *bench) measure(count, bytes int, inPlace bool) (Timing, error) {
	t := Timing{Wrong: -1}
	var wrong int64
	if b.cfg.Check {
		if err := b.fill(count, inPlace); err != nil {
			return t, err
		}
		if err := b.call(count, inPlace); err != nil {
			return t, err
		}
		w, err := b.verify(count, inPlace)
		if err != nil {
			return t, err
		}
		wrong = w
	}
	for i := 0; i < b.cfg.Warmup; i++ {
		if err := b.call(count, inPlace); err != nil {
			return t, err
		}
	}
	if err := b.sync(); err != nil {
		return t, err
	}
	if err := b.barrier(); err != nil {
		return t, err
	}
	iters := b.cfg.Iters
	if iters == 0 { // the peers' schedule (../shared/bench/peers, bench/mpi_coll.c)
		iters = 20
		if bytes < 1<<20 {
			iters = 2000
		} else if bytes < 16<<20 {
			iters = 100
		}
	}
	var before map[string]uint64
	if b.cfg.Phases {
		before = b.c.Stats().Engine
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		if err := b.call(count, inPlace); err != nil {
			return t, err
		}
	}
	if err := b.sync(); err != nil {
		return t, err
	}
	sec := time.Since(start).Seconds() / float64(iters)
	if b.cfg.Phases {
		for k, v := range b.c.Stats().Engine {
			if name, ok := strings.CutSuffix(k, "_ns"); ok && v > before[k] {
				if t.PhasesUs == nil {
					t.PhasesUs = map[string]float64{}
				}
				t.PhasesUs[name] = float64(v-before[k]) / float64(iters) / 1e3
			}
		}
	}
	// The slowest rank's time, and the wrong elements of all ranks.
	agg, err := b.reduceScalars([]float64{sec, float64(wrong)})
	if err != nil {
		return t, err
	}
	t.TimeUs = agg[0] * 1e6
	if b.cfg.Check {
		t.Wrong = int64(agg[1])
	}
	if agg[0] > 0 {
		t.AlgBW = float64(bytes*b.cfg.batches()) / agg[0] / 1e9
		t.BusBW = t.AlgBW * b.cfg.Coll.BusFactor(b.n)
	}
	return t, nil
}

func (b *bench) sync() error {
	if b.cfg.Stream != 0 {
		return b.dev.SynchronizeStream(b.cfg.Stream)
	}
	return b.dev.SynchronizeDevice(b.cfg.Dev)
}

func (b *bench) barrier() error {
	_, err := b.reduceScalars([]float64{0, 0})
	return err
}

// reduceScalars all-reduces v[0] with MAX and v[1] with SUM (float64 on the
// device, NULL stream).
func (b *bench) reduceScalars(v []float64) ([]float64, error) {
	out := make([]float64, 2)
	for i, op := range []rt.ReduceOp{rt.Max, rt.Sum} {
		p := unsafe.Pointer(uintptr(b.scalar) + uintptr(16*i))
		if err := b.dev.Memcpy(b.cfg.Dev, p, unsafe.Pointer(&v[i]), 8, rt.HostToDevice, 0); err != nil {
			return nil, err
		}
		if err := b.c.AllReduce(p, p, 1, rt.Float64, op, 0); err != nil {
			return nil, err
		}
		if err := b.dev.Memcpy(b.cfg.Dev, unsafe.Pointer(&out[i]), p, 8, rt.DeviceToHost, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func at(p unsafe.Pointer, off int) unsafe.Pointer { return unsafe.Pointer(uintptr(p) + uintptr(off)) }

// buffers are the send and receive addresses of one call.
func (b *bench) buffers(count int, inPlace bool) (send, recv unsafe.Pointer) {
	block := count * b.cfg.Type.Size()
	switch {
	case !inPlace:
		return b.send, b.recv
	case b.cfg.Coll.Name == "all_gather":
		return at(b.recv, b.rank*block), b.recv
	case b.cfg.Coll.Name == "reduce_scatter":
		return b.recv, at(b.recv, b.rank*block)
	}
	return b.recv, b.recv
}

func (b *bench) call(count int, inPlace bool) error {
	cfg, c, s := b.cfg, b.c, b.cfg.Stream
	send, recv := b.buffers(count, inPlace)
	dt := cfg.Type
	switch cfg.Coll.Name {
	case "all_reduce":
		if cfg.Batch > 1 {
			return b.batch(send, recv, count)
		}
		return c.AllReduce(send, recv, count, dt, cfg.Red, s)
	case "broadcast":
		return c.Broadcast(recv, count, dt, cfg.Root, s)
	case "reduce":
		return c.Reduce(send, recv, count, dt, cfg.Red, cfg.Root, s)
	case "all_gather":
		return c.AllGather(send, recv, count, dt, s)
	case "reduce_scatter":
		return c.ReduceScatter(send, recv, count, dt, cfg.Red, s)
	case "alltoall":
		n, block := b.n, count*dt.Size()
		sb, rb := make([]unsafe.Pointer, n), make([]unsafe.Pointer, n)
		counts, types := make([]int, n), make([]rt.DataType, n)
		for p := range n {
			sb[p], rb[p], counts[p], types[p] = at(send, p*block), at(recv, p*block), count, dt
		}
		return c.AllToAll(sb, counts, types, rb, counts, types, s)
	case "sendrecv":
		g := &b.group // one for every call, as a thread's XcclGroupStart reuses one
		g.Start()
		_ = c.Do(g, rt.Op{Kind: rt.OpSend, Send: send, Count: count, Type: dt, Root: (b.rank + 1) % b.n, Stream: s})
		_ = c.Do(g, rt.Op{Kind: rt.OpRecv, Recv: recv, Count: count, Type: dt, Root: (b.rank + b.n - 1) % b.n, Stream: s})
		return g.End()
	}
	return fmt.Errorf("unknown collective %q", cfg.Coll.Name)
}

// batch all-reduces cfg.Batch consecutive buffers of count elements.
func (b *bench) batch(send, recv unsafe.Pointer, count int) error {
	cfg, block := b.cfg, count*b.cfg.Type.Size()
	if !cfg.Fused {
		for k := 0; k < cfg.Batch; k++ {
			if err := b.c.AllReduce(at(send, k*block), at(recv, k*block), count, cfg.Type, cfg.Red, cfg.Stream); err != nil {
				return err
			}
		}
		return nil
	}
	if len(b.sends) != cfg.Batch {
		b.sends, b.recvs, b.counts = make([]unsafe.Pointer, cfg.Batch), make([]unsafe.Pointer, cfg.Batch), make([]int, cfg.Batch)
	}
	for k := range cfg.Batch {
		b.sends[k], b.recvs[k], b.counts[k] = at(send, k*block), at(recv, k*block), count
	}
	return b.c.AllReduceFused(b.sends, b.recvs, b.counts, cfg.Type, cfg.Red, cfg.Stream)
}

// fill writes this rank's inputs (refdata.Gen) and poisons the output.
func (b *bench) fill(count int, inPlace bool) error {
	dt, es := b.cfg.Type, b.cfg.Type.Size()
	send, recv := b.buffers(count, inPlace)
	in := count
	if b.cfg.Coll.PerRank && b.cfg.Coll.Name != "all_gather" {
		in = count * b.n
	}
	out := count
	if b.cfg.Coll.PerRank && b.cfg.Coll.Name != "reduce_scatter" {
		out = count * b.n
	}
	in, out = in*b.cfg.batches(), out*b.cfg.batches() // a batch: consecutive buffers, inputs numbered on
	for i := 0; i < out*es; i++ {
		b.host[i] = 0xa5
	}
	if err := b.dev.Memcpy(b.cfg.Dev, b.recv, unsafe.Pointer(&b.host[0]), out*es, rt.HostToDevice, 0); err != nil {
		return err
	}
	for i := 0; i < in; i++ {
		refdata.Put(dt, b.host, i, refdata.Gen(dt, b.rank, i))
	}
	dst := send
	if b.cfg.Coll.Name == "broadcast" {
		if b.rank != b.cfg.Root {
			return nil
		}
		dst = recv
	}
	return b.dev.Memcpy(b.cfg.Dev, dst, unsafe.Pointer(&b.host[0]), in*es, rt.HostToDevice, 0)
}

// verify counts this rank's wrong output elements against refdata.
func (b *bench) verify(count int, inPlace bool) (int64, error) {
	if err := b.sync(); err != nil {
		return 0, err
	}
	cfg, n, rank := b.cfg, b.n, b.rank
	dt, es := cfg.Type, cfg.Type.Size()
	_, recv := b.buffers(count, inPlace)
	out := count
	if cfg.Coll.PerRank && cfg.Coll.Name != "reduce_scatter" {
		out = count * n
	}
	out *= cfg.batches()
	if cfg.Coll.Name == "reduce" && rank != cfg.Root {
		return 0, nil
	}
	if err := b.dev.Memcpy(cfg.Dev, unsafe.Pointer(&b.host[0]), recv, out*es, rt.DeviceToHost, 0); err != nil {
		return 0, err
	}
	reduce := func(i int) refdata.Value {
		return refdata.Reference(dt, cfg.Red, n, func(q int) refdata.Value { return refdata.Gen(dt, q, i) })
	}
	var want func(i int) refdata.Value
	switch cfg.Coll.Name {
	case "all_reduce", "reduce":
		want = reduce
	case "reduce_scatter":
		want = func(i int) refdata.Value { return reduce(rank*count + i) }
	case "broadcast":
		want = func(i int) refdata.Value { return refdata.Gen(dt, cfg.Root, i) }
	case "all_gather":
		want = func(i int) refdata.Value { return refdata.Gen(dt, i/count, i%count) }
	case "alltoall":
		want = func(i int) refdata.Value { return refdata.Gen(dt, i/count, rank*count+i%count) }
	case "sendrecv":
		want = func(i int) refdata.Value { return refdata.Gen(dt, (rank+n-1)%n, i) }
	}
	var wrong int64
	for i := 0; i < out; i++ {
		if !refdata.CloseTo(dt, refdata.Get(dt, b.host, i), want(i)) {
			wrong++
		}
	}
	return wrong, nil
}
