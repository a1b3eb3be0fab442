package host

import (
	"encoding/binary"
	"math"
	"math/rand"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// fastOrGo runs op as a C caller's call goes: through fast.c when it takes
// it, else through Go.
func fastOrGo(c *Comm, op *rt.Op, tryFast bool) (taken bool, err error) {
	if tryFast {
		if taken, err = c.fastCall(op); taken {
			return taken, err
		}
	}
	return false, c.execGo(op)
}

// fastAll runs op(i) on every rank i at once, as fastOrGo does (through
// fast.c where tryFast(i)), and says which fast.c took and what each
// returned.
func fastAll(comms []*Comm, op func(i int) *rt.Op, tryFast func(i int) bool) (taken []bool, errs []error) {
	taken, errs = make([]bool, len(comms)), make([]error, len(comms))
	var wg sync.WaitGroup
	for i := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); taken[i], errs[i] = fastOrGo(comms[i], op(i), tryFast(i)) }()
	}
	wg.Wait()
	return taken, errs
}

func always(int) bool { return true }

// fast.c's fingerprint body is Go's, for every call it may take.
func TestFastBodyIsGos(t *testing.T) {
	for kind := rt.OpAllReduce; kind <= rt.OpReduceScatter; kind++ {
		for _, dt := range rt.AllDataTypes() {
			for op := rt.Sum; op <= rt.Product; op++ {
				for _, count := range []int{1, 7, 255, 256, 1 << 20, math.MaxInt32 + 5} {
					o := rt.Op{Kind: kind, Type: dt, Red: op, Count: count, Root: count % 5}
					if kind == rt.OpAllGather {
						o.Red = 0 // as the C entry passes it
					}
					var f rt.Fingerprint
					f.Set(&o, 9)
					w0, w1 := f.Body()
					g0, g1 := fastBody(&o)
					require.Equal(t, [2]uint64{w0, w1}, [2]uint64{g0, g1}, "%v", f)
				}
			}
		}
	}
}

// typed encodes small integers as elements of dt and back.
func putTyped(b []byte, dt rt.DataType, v []int64) {
	for i, x := range v {
		switch dt {
		case rt.Uint8:
			b[i] = byte(x)
		case rt.Int32:
			binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(x)))
		case rt.Float32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		case rt.Float64:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(x)))
		}
	}
}

func getTyped(b []byte, dt rt.DataType, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		switch dt {
		case rt.Uint8:
			out[i] = int64(b[i])
		case rt.Int32:
			out[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		case rt.Float32:
			out[i] = int64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		case rt.Float64:
			out[i] = int64(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	}
	return out
}

func combine(op rt.ReduceOp, a, b int64) int64 {
	switch op {
	case rt.Max:
		return max(a, b)
	case rt.Min:
		return min(a, b)
	case rt.Product:
		return a * b
	}
	return a + b
}

// Ranks that take the C fast path and ranks that take Go meet in the same
// calls, every collective among them, in place and not, quick and not,
// lone, quiet and waiting ranks: every result is the reference's, and the
// C path took a good share of the calls it may take.
func TestFastPathMeetsGoPath(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		comms := inProcessRanks(t, n, opts(20*time.Second))
		if comms[0].fx == nil {
			t.Skip("no fast boxes between every pair here")
		}
		rng := rand.New(rand.NewSource(int64(n)))
		const calls = 400
		taken := make([]int, n)
		var kindsTaken [rt.OpReduceScatter + 1]int
		bufs := make([][]byte, n)
		for k := 0; k < calls; k++ {
			kinds := []rt.OpKind{rt.OpAllReduce, rt.OpAllGather, rt.OpReduceScatter, rt.OpAllReduce, rt.OpBroadcast, rt.OpReduce}
			kind := kinds[rng.Intn(len(kinds))]
			dt := []rt.DataType{rt.Uint8, rt.Int32, rt.Float32, rt.Float64}[rng.Intn(4)]
			red := []rt.ReduceOp{rt.Sum, rt.Max, rt.Min, rt.Product, rt.Sum}[rng.Intn(5)]
			count := 1 + rng.Intn(200)
			if rng.Intn(10) == 0 {
				count = 3000 + rng.Intn(3000) // beyond the quick path
			}
			root, inPlace := rng.Intn(n), rng.Intn(2) == 0
			es := dt.Size()
			vals := make([][]int64, n) // rank r's input: count (or count*n) values in 0..3
			in := count
			if kind == rt.OpReduceScatter {
				in = count * n
			}
			for r := range vals {
				vals[r] = make([]int64, in)
				for i := range vals[r] {
					vals[r][i] = int64(rng.Intn(4))
				}
				bufs[r] = make([]byte, (count*(n+1)+8)*es)
			}
			fast := make([]bool, n)
			for r := range fast {
				fast[r] = rng.Intn(3) != 0
			}
			ops := make([]*rt.Op, n)
			for r := range ops {
				b := bufs[r]
				op := &rt.Op{Kind: kind, Type: dt, Red: red, Count: count, Root: root}
				switch kind {
				case rt.OpAllReduce, rt.OpReduce, rt.OpBroadcast:
					putTyped(b, dt, vals[r])
					op.Send, op.Recv = unsafe.Pointer(&b[0]), unsafe.Pointer(&b[count*es])
					if inPlace || kind == rt.OpBroadcast {
						op.Recv = op.Send
					} else if kind == rt.OpReduce && r != root && rng.Intn(2) == 0 {
						op.Recv = nil // not the root's: unused
					}
				case rt.OpAllGather:
					op.Red = 0
					op.Recv = unsafe.Pointer(&b[0])
					op.Send = unsafe.Pointer(&b[count*n*es])
					if inPlace {
						op.Send = unsafe.Pointer(&b[r*count*es])
					}
					putTyped(unsafe.Slice((*byte)(op.Send), count*es), dt, vals[r])
				case rt.OpReduceScatter:
					putTyped(b, dt, vals[r])
					op.Send, op.Recv = unsafe.Pointer(&b[0]), unsafe.Pointer(&b[count*n*es])
					if inPlace {
						op.Recv = unsafe.Pointer(&b[r*count*es])
					}
				}
				ops[r] = op
			}
			took, errs := fastAll(comms, func(r int) *rt.Op { return ops[r] }, func(r int) bool { return fast[r] })
			for r, ok := range took {
				if ok {
					taken[r]++
					kindsTaken[kind]++
				}
			}
			for r := range comms {
				what := []any{"call %d (%v %v %v count %d root %d in place %v), rank %d (C path tried %v)", k, kind, dt, red, count, root, inPlace, r, fast[r]}
				require.NoError(t, errs[r], what...)
				op := ops[r]
				switch kind {
				case rt.OpAllReduce, rt.OpReduce, rt.OpReduceScatter:
					if kind == rt.OpReduce && r != root {
						continue
					}
					off := 0
					if kind == rt.OpReduceScatter {
						off = r * count
					}
					want := make([]int64, count)
					for i := range want {
						want[i] = vals[0][off+i]
						for p := 1; p < n; p++ {
							want[i] = combine(red, want[i], vals[p][off+i])
						}
					}
					require.Equal(t, want, getTyped(unsafe.Slice((*byte)(op.Recv), count*es), dt, count), what...)
				case rt.OpBroadcast:
					require.Equal(t, vals[root], getTyped(unsafe.Slice((*byte)(op.Recv), count*es), dt, count), what...)
				case rt.OpAllGather:
					var want []int64
					for p := range n {
						want = append(want, vals[p]...)
					}
					require.Equal(t, want, getTyped(unsafe.Slice((*byte)(op.Recv), count*n*es), dt, count*n), what...)
				}
			}
		}
		for k := range kindsTaken {
			require.Positive(t, kindsTaken[k], "%v calls the C path took, %d ranks", rt.OpKind(k), n)
		}
		for r, c := range comms {
			require.Greater(t, taken[r], calls/10, "rank %d of %d: calls the C path took", r, n)
			c.fxMu.Lock()
			fc := c.fastCallsLocked() // what fast.c finished itself (not resumed in Go)
			ar, others := fc[statAllReduceDirect], fc[statDirect]
			c.fxMu.Unlock()
			require.Positive(t, ar+others, "rank %d", r)
			require.LessOrEqual(t, ar+others, uint64(taken[r]), "rank %d", r)
			st := c.EngineStats()
			require.GreaterOrEqual(t, st["allreduce.direct"]+st["allgather_reducescatter_broadcast_reduce.direct"], ar+others, "rank %d", r)
		}
	}
}

// fusedOrGo runs fused all-reduce op as fastOrGo runs a call: through
// fast.c when tryFast and it takes it, else all in Go.
func fusedOrGo(c *Comm, op *rt.Op, tryFast bool) (taken bool, err error) {
	if !c.fusedInPlace(op) {
		return false, c.execGo(op) // staged: fast.c takes the whole only if it fits
	}
	if tryFast {
		if taken, err = c.fastFused(op); taken {
			return taken, err
		}
	}
	if c.fusedMayShare(op) { // as fusedAllReduce
		if ran, err := c.fusedShared(op); ran {
			return false, c.failed(err)
		}
	}
	return false, c.failed(c.fusedDirect(op))
}

// fusedInC is the fused batches fast.c finished on c.
func fusedInC(c *Comm) uint64 {
	c.fxMu.Lock()
	defer c.fxMu.Unlock()
	return c.fastCallsLocked()[statFusedBatches]
}

// Fused all-reduces through fast.c and through Go meet in the same calls,
// between single calls of either: every buffer gets the reference's
// result, in place and not, for batches that fit a slot and batches that
// do not; a late rank's batch is resumed in Go.
func TestFastPathFusedMeetsGoPath(t *testing.T) {
	for _, n := range []int{2, 3} {
		comms := inProcessRanks(t, n, opts(20*time.Second))
		if comms[0].fx == nil {
			t.Skip("no fast boxes between every pair here")
		}
		rng := rand.New(rand.NewSource(int64(10 + n)))
		taken := make([]uint64, n)    // batches fast.c took (finished in C, or resumed in Go)
		execDone := make([]uint64, n) // batches fast.c finished for exec
		execTook := make([]uint64, n) // batches fast.c took for exec (finished, or resumed in Go)
		for k := 0; k < 300; k++ {
			dt := []rt.DataType{rt.Uint8, rt.Int32, rt.Float32, rt.Float64}[rng.Intn(4)]
			red := []rt.ReduceOp{rt.Sum, rt.Max, rt.Min, rt.Product}[rng.Intn(4)]
			es := dt.Size()
			nbufs := 1 + rng.Intn(6)
			counts := make([]int, nbufs)
			total := 0
			for i := range counts {
				counts[i] = 1 + rng.Intn(300)
				if rng.Intn(15) == 0 {
					counts[i] = comms[0].fastCap/es/2 + rng.Intn(100) // the batch may not fit a slot
				}
				total += counts[i]
			}
			inPlace := rng.Intn(2) == 0
			vals := make([][][]int64, n) // rank r's buffer i
			ops := make([]*rt.Op, n)
			for r := range ops {
				vals[r] = make([][]int64, nbufs)
				op := &rt.Op{Kind: rt.OpAllReduce, Type: dt, Red: red, Count: total}
				for i, cnt := range counts {
					vals[r][i] = make([]int64, cnt)
					for j := range vals[r][i] {
						vals[r][i][j] = int64(rng.Intn(4))
					}
					send, recv := make([]byte, cnt*es), make([]byte, cnt*es)
					putTyped(send, dt, vals[r][i])
					if inPlace {
						recv = send
					}
					op.Batch = append(op.Batch, &rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&send[0]), Recv: unsafe.Pointer(&recv[0]), Count: cnt, Type: dt, Red: red})
				}
				ops[r] = op
			}
			fast, whole := make([]bool, n), make([]bool, n)
			for r := range fast {
				fast[r], whole[r] = rng.Intn(3) != 0, rng.Intn(4) == 0
			}
			took := make([]bool, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if rng := rand.New(rand.NewSource(int64(k*n + r))); rng.Intn(8) == 0 {
						time.Sleep(time.Duration(rng.Intn(300)) * time.Microsecond) // late: the others resume
					}
					if whole[r] { // exec's way (fusedAllReduce: fast.c, else Go), not counted as taken
						before, resumed := fusedInC(comms[r]), comms[r].stats[statFastResumed].Load()
						errs[r] = comms[r].exec(ops[r])
						done := fusedInC(comms[r]) - before
						execDone[r] += done
						execTook[r] += done + comms[r].stats[statFastResumed].Load() - resumed
						return
					}
					took[r], errs[r] = fusedOrGo(comms[r], ops[r], fast[r])
				}()
			}
			wg.Wait()
			for r := range comms {
				what := []any{"call %d (%v %v, %d buffers, %d elements, in place %v), rank %d (C path tried %v)", k, dt, red, nbufs, total, inPlace, r, fast[r]}
				require.NoError(t, errs[r], what...)
				if took[r] {
					taken[r]++
				}
				for i, cnt := range counts {
					want := make([]int64, cnt)
					for j := range want {
						want[j] = vals[0][i][j]
						for p := 1; p < n; p++ {
							want[j] = combine(red, want[j], vals[p][i][j])
						}
					}
					require.Equal(t, want, getTyped(unsafe.Slice((*byte)(ops[r].Batch[i].Recv), cnt*es), dt, cnt), what...)
				}
			}
			if k%5 == 4 { // a single call between batches, C or Go
				a := make([][]int32, n)
				_, errs := fastAll(comms, func(r int) *rt.Op {
					a[r] = []int32{int32(r), 1, 2}
					return &rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&a[r][0]), Recv: unsafe.Pointer(&a[r][0]), Count: 3, Type: rt.Int32, Red: rt.Sum}
				}, func(r int) bool { return (k+r)%2 == 0 })
				for r := range comms {
					require.NoError(t, errs[r])
					require.Equal(t, []int32{int32(n * (n - 1) / 2), int32(n), int32(2 * n)}, a[r])
				}
			}
		}
		resumed := uint64(0)
		for r, c := range comms {
			c.fxMu.Lock()
			fc := c.fastCallsLocked()
			c.fxMu.Unlock()
			require.Greater(t, taken[r], uint64(30), "rank %d of %d: fused calls the C path took", r, n)
			// Under load a rank's every such batch may have waited past
			// the spin (resumed), so what it finished is checked below.
			require.Positive(t, execTook[r], "rank %d: exec's batches fast.c took", r)
			require.Greater(t, fc[statFusedBuffers], fc[statFusedBatches], "rank %d", r)
			// Each batch counted once, wherever it ran: in C, resumed, in Go, staged.
			require.Equal(t, uint64(300), c.EngineStats()["fusion.batches"], "rank %d", r)
			done := fc[statFusedBatches] - execDone[r] // of the batches fastFused took
			require.LessOrEqual(t, done, taken[r], "rank %d", r)
			resumed += taken[r] - done
		}
		require.Positive(t, resumed, "%d ranks: no fused call was resumed in Go", n)
		finished := uint64(0)
		for _, d := range execDone {
			finished += d
		}
		require.Positive(t, finished, "%d ranks: no batch of exec's finished in fast.c", n)
	}
}

// A call fast.c sent whose peer comes late goes on in Go (FastResume), and
// a mismatch met there is every rank's C_ERROR, the ranks in step after it.
func TestFastPathResumes(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(10*time.Second))
	if comms[0].fx == nil {
		t.Skip("no fast boxes between every pair here")
	}
	a, b := make([]int32, 8), make([]int32, 8)
	call := func(k int, counts [2]int, delay time.Duration) (errs [2]error, taken bool) { // delay < 0: rank 0's
		d0 := max(-delay, 0)
		delay = max(delay, 0)
		for i := range a {
			a[i], b[i] = int32(k+i), int32(2*k)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			errs[1] = comms[1].execGo(&rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&b[0]), Recv: unsafe.Pointer(&b[0]), Count: counts[1], Type: rt.Int32, Red: rt.Sum})
		}()
		time.Sleep(d0)
		taken, errs[0] = comms[0].fastCall(&rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&a[0]), Recv: unsafe.Pointer(&a[0]), Count: counts[0], Type: rt.Int32, Red: rt.Sum})
		if !taken {
			errs[0] = comms[0].execGo(&rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&a[0]), Recv: unsafe.Pointer(&a[0]), Count: counts[0], Type: rt.Int32, Red: rt.Sum})
		}
		wg.Wait()
		return errs, taken
	}
	for k := 0; k < 2*fastDepth; k++ { // past the first calls, which Go runs
		errs, _ := call(k, [2]int{8, 8}, 0)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
	}
	errs, taken := call(100, [2]int{8, 8}, 5*time.Millisecond)
	require.True(t, taken, "the C path took the call")
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, int32(300), a[0])
	require.Equal(t, int32(300+7), a[7])
	require.Equal(t, a, b)

	errs, taken = call(101, [2]int{8, 7}, 5*time.Millisecond)
	require.True(t, taken)
	for i, err := range errs {
		require.ErrorContains(t, err, "collective mismatch", "rank %d", i)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), "rank %d", i)
	}
	errs, taken = call(102, [2]int{8, 7}, -5*time.Millisecond) // rank 1's fingerprint there first: fast.c compares
	require.True(t, taken)
	for i, err := range errs {
		require.ErrorContains(t, err, "collective mismatch", "rank %d", i)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), "rank %d", i)
	}
	for k := 103; k < 110; k++ {
		errs, _ := call(k, [2]int{8, 8}, time.Duration(k%2)*time.Millisecond)
		require.NoError(t, errs[0], "call %d", k)
		require.NoError(t, errs[1], "call %d", k)
		require.Equal(t, int32(3*k+5), a[5], "call %d", k)
	}
}

// A late mismatch waiting to be returned keeps fast.c off until Go has
// returned it; a broken communicator's calls, and a destroyed one's, all go
// to Go, which reports them.
func TestFastPathLeavesErrorsToGo(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(5*time.Second))
	if comms[0].fx == nil {
		t.Skip("no fast boxes between every pair here")
	}
	x := make([][]float64, 2)
	for i := range x {
		x[i] = make([]float64, 4)
	}
	op := func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&x[i][0]), Recv: unsafe.Pointer(&x[i][0]), Count: 4, Type: rt.Float64, Red: rt.Sum}
	}
	both := func() ([]bool, []error) { return fastAll(comms, op, always) }
	for range 2 * fastDepth {
		_, errs := both()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
	}
	taken, _ := both()
	require.Equal(t, []bool{true, true}, taken, "idle communicators past their first calls")

	c := comms[0]
	c.collMu.Lock()
	c.fastLock()
	c.lateErr = rt.Errorf("an earlier mismatch")
	c.fastUnlock()
	c.collMu.Unlock()
	taken, errs := both()
	require.False(t, taken[0], "a late error waits: Go's")
	require.ErrorContains(t, errs[0], "an earlier mismatch")
	require.NoError(t, errs[1])
	taken, errs = both()
	require.Equal(t, []bool{true, true}, taken, "reported: the C path again")
	require.NoError(t, errors0(errs))

	comms[1].Abort()
	taken0, err := fastOrGo(c, op(0), true) // sent, the peer aborted: Go's collect finds it
	require.True(t, taken0)
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
	taken0, err = fastOrGo(c, op(0), true)
	require.False(t, taken0, "broken: off")
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err))
	require.NoError(t, comms[1].Destroy())
	_ = c.Destroy()
	taken0, err = fastOrGo(c, op(0), true)
	require.False(t, taken0, "destroyed: off")
	require.ErrorContains(t, err, "destroyed")
}

// A broadcast whose root ran it in C, waiting for nobody, against ranks
// that expected another count: they return the mismatch at once, the root
// at its next call (Go drains what C marked lone), and all go on in step.
func TestFastPathLateMismatch(t *testing.T) {
	comms := inProcessRanks(t, 3, opts(10*time.Second))
	if comms[0].fx == nil {
		t.Skip("no fast boxes between every pair here")
	}
	buf := make([][]int64, 3)
	for i := range buf {
		buf[i] = make([]int64, 8)
	}
	run := func(op func(i int) *rt.Op) ([]bool, []error) { return fastAll(comms, op, always) }
	sum := func(i int) *rt.Op {
		buf[i][0] = int64(i + 1)
		return &rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&buf[i][0]), Recv: unsafe.Pointer(&buf[i][0]), Count: 1, Type: rt.Int64, Red: rt.Sum}
	}
	for range 2 * fastDepth {
		_, errs := run(sum)
		require.NoError(t, errors0(errs))
	}
	taken, errs := run(func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpBroadcast, Send: unsafe.Pointer(&buf[i][0]), Recv: unsafe.Pointer(&buf[i][0]), Count: 4 + min(i, 1), Type: rt.Int64}
	})
	require.True(t, taken[0], "the root ran it in C")
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "collective mismatch")
	require.ErrorContains(t, errs[2], "collective mismatch")
	_, errs = run(sum)
	require.ErrorContains(t, errs[0], "found after op")
	require.Equal(t, rt.StatusError, rt.StatusOf(errs[0]))
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	for k := range 3 * fastDepth {
		_, errs = run(sum)
		require.NoError(t, errors0(errs), "call %d", k)
		for i := range buf {
			require.Equal(t, int64(6), buf[i][0], "call %d rank %d", k, i)
		}
	}
}

// A rank that waits for nobody (a broadcast's root, a reduce's other rank)
// and runs ahead of a slow peer stays in C: fast.c drains what the peer
// sent nothing in as drainBox does, once the peer says it is done, instead
// of leaving a call to Go each time the peer's tell lags (one in tellBatch).
// The slow peer's results are checked call by call.
func TestFastPathRunnerAheadStaysInC(t *testing.T) {
	for _, kind := range []rt.OpKind{rt.OpBroadcast, rt.OpReduce} {
		t.Run(kind.String(), func(t *testing.T) {
			o := opts(10 * time.Second)
			o.SpinPolls = 1 << 22 // poll for the slow peer (tens of ms) rather than leave the call to Go
			comms := inProcessRanks(t, 2, o)
			if comms[0].fx == nil {
				t.Skip("no fast boxes between every pair here")
			}
			runner, root := 0, 0 // the broadcast's root runs ahead; a reduce's other rank does
			if kind == rt.OpReduce {
				root = 1
			}
			const calls = 20 * fastDepth
			buf := [2][]int64{make([]int64, 4), make([]int64, 4)}
			out := make([]int64, 4)
			op := func(i, k int) *rt.Op {
				for j := range buf[i] {
					buf[i][j] = int64(1000*k + 10*i + j)
				}
				return &rt.Op{Kind: kind, Send: unsafe.Pointer(&buf[i][0]), Recv: unsafe.Pointer(&out[0]), Count: 4, Type: rt.Int64, Red: rt.Sum, Root: root}
			}
			if kind == rt.OpBroadcast {
				op = func(i, k int) *rt.Op {
					if i == root {
						for j := range buf[i] {
							buf[i][j] = int64(1000*k + j)
						}
					}
					return &rt.Op{Kind: kind, Send: unsafe.Pointer(&buf[i][0]), Recv: unsafe.Pointer(&buf[i][0]), Count: 4, Type: rt.Int64, Root: root}
				}
			}
			var inC int
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range calls {
					taken, err := fastOrGo(comms[runner], op(runner, k), true)
					if err != nil {
						errs <- err
						return
					}
					if taken && k >= fastDepth {
						inC++
					}
				}
			}()
			slow := 1 - runner
			for k := range calls {
				time.Sleep(20 * time.Microsecond)
				if _, err := fastOrGo(comms[slow], op(slow, k), true); err != nil {
					t.Fatalf("call %d: %v", k, err)
				}
				got := buf[slow]
				if kind == rt.OpReduce {
					got = out
				}
				for j := range got {
					want := int64(1000*k + j)
					if kind == rt.OpReduce {
						want = int64(2*1000*k + 10 + 2*j)
					}
					require.Equal(t, want, got[j], "call %d element %d", k, j)
				}
			}
			wg.Wait()
			close(errs)
			require.NoError(t, <-errs)
			// Without fast.c's drain every tellBatch-th call went to Go: 7/8 in C.
			require.GreaterOrEqual(t, inC, (calls-fastDepth)*95/100, "the runner's calls past the first fastDepth that fast.c took")
		})
	}
}
