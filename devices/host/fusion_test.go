package host

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/internal/refdata"
	rt "github.com/xccl-project/xccl/runtime"
)

// fusedPools is one rank's memory for fused batches: a send and a receive
// allocation, shared (hostAlloc from sharedMin on) or Go memory.
type fusedPools struct{ send, recv []byte }

func newFusedPools(t *testing.T, shared bool) fusedPools {
	const size = sharedMin
	if !shared {
		return fusedPools{make([]byte, size), make([]byte, size)}
	}
	var bs [2][]byte
	for i := range bs {
		p, err := hostAlloc(size)
		require.NoError(t, err)
		t.Cleanup(func() { hostFree(p, size) })
		bs[i] = bytesAt(p, size)
	}
	return fusedPools{bs[0], bs[1]}
}

// fusedBatch lays out total elements of dt as a batch of at most maxBufs
// buffers in pools, split at random, with random gaps in both memories (or
// none: buffers that follow one another), in place or not, and fills the
// send buffers with rank's inputs (refdata.Gen of the element's index in
// the batch) and the receive buffers with poison.
func fusedBatch(rng *rand.Rand, pools fusedPools, rank, total, maxBufs int, dt rt.DataType, red rt.ReduceOp, inPlace bool) *rt.Op {
	es := dt.Size()
	op := &rt.Op{Kind: rt.OpAllReduce, Count: total, Type: dt, Red: red}
	gap := func() int {
		if rng.Intn(2) == 0 {
			return 0
		}
		return es * rng.Intn(64)
	}
	soff, roff := gap(), gap()
	for left := total; left > 0; {
		cnt := left
		if len(op.Batch) < maxBufs-1 && left > 1 && rng.Intn(3) != 0 {
			cnt = 1 + rng.Intn(left-1)
		}
		op.Batch = append(op.Batch, fusedBuf(pools.send[soff:soff+cnt*es], pools.recv[roff:roff+cnt*es], rank, total-left, dt, red, inPlace))
		soff, roff, left = soff+cnt*es+gap(), roff+cnt*es+gap(), left-cnt
	}
	return op
}

// fusedBuf is a buffer of a batch: send (and recv, unless in place), which
// hold elements done on of the batch, filled as fusedBatch fills them.
func fusedBuf(send, recv []byte, rank, done int, dt rt.DataType, red rt.ReduceOp, inPlace bool) *rt.Op {
	if inPlace {
		recv = send
	}
	cnt := len(send) / dt.Size()
	for j := 0; j < cnt; j++ {
		refdata.Put(dt, send, j, refdata.Gen(dt, rank, done+j))
		if !inPlace {
			refdata.Put(dt, recv, j, refdata.Value{I: -1, C: -1})
		}
	}
	return &rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&send[0]), Recv: unsafe.Pointer(&recv[0]), Count: cnt, Type: dt, Red: red}
}

// checkFused compares every element of rank's batch op with the reference.
func checkFused(op *rt.Op, n int) error {
	dt, es := op.Type, op.Type.Size()
	at := 0
	for i, o := range op.Batch {
		recv := bytesAt(o.Recv, o.Count*es)
		for j := 0; j < o.Count; j++ {
			want := refdata.Reference(dt, op.Red, n, func(r int) refdata.Value { return refdata.Gen(dt, r, at+j) })
			if got := refdata.Get(dt, recv, j); !refdata.CloseTo(dt, got, want) {
				return fmt.Errorf("buffer %d (of %d), element %d (batch element %d): %v, want %v", i, len(op.Batch), j, at+j, got, want)
			}
		}
		at += o.Count
	}
	return nil
}

// Fused batches between shared buffers copy once (fusedShared): every
// rank reduces its chunk of the batch straight from the peers' send
// buffers into every receive buffer. The results match the reference for
// every real type and reduction, in place and not, with every rank
// splitting the same elements into its own buffers, gaps between them or
// none, batches from below a fast box to past it, 2 ranks and 3 roomy
// ones; the smaller ones keep the fast boxes. Ranks that cannot map each
// other's memory get the same results through system calls.
func TestFusedSharedBatches(t *testing.T) {
	for _, tc := range []struct {
		n      int
		roomy  bool
		broken bool
	}{{2, false, false}, {3, true, false}, {2, false, true}} {
		t.Run(fmt.Sprintf("n=%d/roomy=%v/unmappable=%v", tc.n, tc.roomy, tc.broken), func(t *testing.T) {
			forceRoomy = tc.roomy
			if tc.broken {
				testMapError = errors.New("mapping broken by the test")
			}
			comms := inProcessRanks(t, tc.n, opts(20*time.Second))
			forceRoomy = false
			defer func() { testMapError = nil }()
			if !comms[0].cma || !comms[0].allBoxed {
				t.Skip("single-copy reads or fast boxes are unavailable here")
			}
			pools := make([]fusedPools, tc.n)
			for r := range pools {
				pools[r] = newFusedPools(t, true)
			}
			rng := rand.New(rand.NewSource(int64(tc.n)))
			types := []rt.DataType{rt.Float32, rt.Float64, rt.Int32, rt.Int64, rt.Int8, rt.Uint8}
			ops := []rt.ReduceOp{rt.Sum, rt.Product, rt.Max, rt.Min, rt.Avg}
			copied := uint64(0)
			before := comms[0].stats[statAllReduceCMA].Load()
			for k := 0; k < 120; k++ {
				dt, red := types[k%len(types)], ops[(k/len(types))%len(ops)]
				es := dt.Size()
				var total int
				switch k % 3 {
				case 0:
					total = 1 + rng.Intn(sharedReduceMin/es) // may fit below sharedReduceMin: the boxes
				case 1:
					total = sharedReduceMin/es + rng.Intn(comms[0].fastCap/es) // a box's worth or so
				default:
					total = comms[0].fastCap/es + rng.Intn(3*comms[0].fastCap/es) // past a box
				}
				batches := make([]*rt.Op, tc.n)
				for r := range batches {
					batches[r] = fusedBatch(rng, pools[r], r, total, 1+rng.Intn(9), dt, red, rng.Intn(2) == 0)
				}
				for r, err := range execAll(comms, func(r int) *rt.Op { return batches[r] }) {
					require.NoError(t, err, "batch %d, rank %d", k, r)
					require.NoError(t, checkFused(batches[r], tc.n), "batch %d (%v %v, %d elements), rank %d", k, dt, red, total, r)
				}
				if total*es >= sharedReduceMin {
					copied++
				}
			}
			require.Equal(t, copied, comms[0].stats[statAllReduceCMA].Load()-before, "batches that copied once")
		})
	}
}

// A rank whose batch lies in Go memory makes every rank fall back, with
// the right results; the ranks then remember it for the batch's size
// class and try again only sharedProbeEach collectives on (each try is a
// collective of its own: the sequence numbers show how many there were).
// A fused batch that copies once against a single all-reduce of the same
// elements is a mismatch on both ranks, and the communicator goes on.
func TestFusedSharedFallsBackAndMismatches(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(10*time.Second))
	if !comms[0].cma || !comms[0].allBoxed {
		t.Skip("single-copy reads or fast boxes are unavailable here")
	}
	pools := []fusedPools{newFusedPools(t, true), newFusedPools(t, false)}
	rng := rand.New(rand.NewSource(7))
	const total, calls = 3000, 40 // float32s: 12 KiB, in one fast box
	seq0, cma0, inC := seqOf(comms[0]), comms[0].stats[statAllReduceCMA].Load(), fusedInC(comms[0])
	run := func(k int) {
		batches := make([]*rt.Op, 2)
		for r := range batches {
			batches[r] = fusedBatch(rng, pools[r], r, total, 4, rt.Float32, rt.Sum, k%2 == 0)
		}
		for r, err := range execAll(comms, func(r int) *rt.Op { return batches[r] }) {
			require.NoError(t, err, "batch %d, rank %d", k, r)
			require.NoError(t, checkFused(batches[r], 2), "batch %d, rank %d", k, r)
		}
	}
	for k := 0; k < calls; k++ {
		run(k)
	}
	require.Equal(t, cma0, comms[0].stats[statAllReduceCMA].Load(), "no batch copies once")
	require.EqualValues(t, calls+1, seqOf(comms[0])-seq0, "one try, then the boxes")
	if comms[0].fx != nil {
		// fast.c takes a batch only once its peer is done with the slots
		// it needs, within its spin: on a loaded machine every call above
		// can go through Go, so more come until one runs in C.
		for k, end := calls, time.Now().Add(20*time.Second); fusedInC(comms[0]) == inC && time.Now().Before(end); k++ {
			run(k)
		}
		require.Greater(t, fusedInC(comms[0]), inC, "once Go decided, fast.c runs batches past fused_max")
	}

	shared := []fusedPools{pools[0], newFusedPools(t, true)}
	p := make([]unsafe.Pointer, 2)
	for r := range p {
		p[r] = unsafe.Pointer(&shared[r].send[0])
	}
	const other = 2 * total // another size class: it tries (fusedSharedRoot)
	errs := execAll(comms, func(r int) *rt.Op {
		if r == 0 {
			return fusedBatch(rng, shared[r], r, other, 4, rt.Float32, rt.Sum, false)
		}
		return &rt.Op{Kind: rt.OpAllReduce, Send: p[r], Recv: p[r], Count: other, Type: rt.Float32, Red: rt.Sum}
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), "rank %d: %v", r, err)
		require.Contains(t, err.Error(), "mismatch", "rank %d", r)
	}
	cma0 = comms[0].stats[statAllReduceCMA].Load()
	batches := make([]*rt.Op, 2)
	for r := range batches {
		batches[r] = fusedBatch(rng, shared[r], r, other, 4, rt.Int32, rt.Max, false)
	}
	for r, err := range execAll(comms, func(r int) *rt.Op { return batches[r] }) {
		require.NoError(t, err, "after the mismatch, rank %d", r)
		require.NoError(t, checkFused(batches[r], 2), "after the mismatch, rank %d", r)
	}
	require.Equal(t, cma0+1, comms[0].stats[statAllReduceCMA].Load(), "the batch after the mismatch copies once")
}

// seqOf is c's collective sequence number, with what fast.c ran since Go
// last held the communicator.
func seqOf(c *Comm) uint64 {
	c.lockColl()
	defer c.unlockColl()
	return c.collSeq
}

// fusedBatchSpread is fusedBatch with buffer i in pools[i%len(pools)]:
// a batch whose buffers lie in several allocations.
func fusedBatchSpread(rng *rand.Rand, pools []fusedPools, rank, total, nbufs int, dt rt.DataType, red rt.ReduceOp, inPlace bool) *rt.Op {
	es := dt.Size()
	op := &rt.Op{Kind: rt.OpAllReduce, Count: total, Type: dt, Red: red}
	offs := make([][2]int, len(pools))
	for left, i := total, 0; left > 0; i++ {
		cnt := left
		if i < nbufs-1 && left > 1 {
			cnt = 1 + rng.Intn(left-1)
		}
		j := i % len(pools)
		op.Batch = append(op.Batch, fusedBuf(pools[j].send[offs[j][0]:offs[j][0]+cnt*es], pools[j].recv[offs[j][1]:offs[j][1]+cnt*es],
			rank, total-left, dt, red, inPlace))
		offs[j][0] += cnt*es + es*rng.Intn(8)
		offs[j][1] += cnt*es + es*rng.Intn(8)
		left -= cnt
	}
	return op
}

// A batch whose buffers lie in several shared allocations copies once too
// (each rank's own number of them, up to fusedMaxAllocs in all), mapped or
// through system calls; in more, every rank falls back, with the same
// results.
func TestFusedSharedOverSeveralAllocations(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("unmappable=%v", broken), func(t *testing.T) {
			if broken {
				testMapError = errors.New("mapping broken by the test")
			}
			comms := inProcessRanks(t, 2, opts(20*time.Second))
			defer func() { testMapError = nil }()
			if !comms[0].cma || !comms[0].allBoxed {
				t.Skip("single-copy reads or fast boxes are unavailable here")
			}
			pools := make([][]fusedPools, 2)
			for r := range pools {
				for range fusedMaxAllocs/2 + 1 {
					pools[r] = append(pools[r], newFusedPools(t, true))
				}
			}
			rng := rand.New(rand.NewSource(11))
			for k := 0; k < 60; k++ {
				dt, red := []rt.DataType{rt.Float32, rt.Int64, rt.Uint8}[k%3], []rt.ReduceOp{rt.Sum, rt.Max, rt.Avg}[k%3]
				if red == rt.Avg && !dt.IsFloat() {
					red = rt.Min
				}
				es := dt.Size()
				total := sharedReduceMin/es + rng.Intn(2*comms[0].fastCap/es)
				// Last, send and receive buffers in fusedMaxAllocs+2 allocations:
				// the boxes (and the size classes remember it, fusedMemo).
				many := k >= 50
				nallocs := make([]int, 2)
				batches := make([]*rt.Op, 2)
				for r := range batches {
					nallocs[r] = 1 + rng.Intn(fusedMaxAllocs/2)
					if many {
						nallocs[r] = fusedMaxAllocs/2 + 1
					}
					inPlace := k%2 == 0 && !many // in place, the receive buffers add no allocation
					batches[r] = fusedBatchSpread(rng, pools[r][:nallocs[r]], r, total, 2*nallocs[r]+rng.Intn(4), dt, red, inPlace)
				}
				before := comms[0].stats[statAllReduceCMA].Load()
				for r, err := range execAll(comms, func(r int) *rt.Op { return batches[r] }) {
					require.NoError(t, err, "batch %d, rank %d", k, r)
					require.NoError(t, checkFused(batches[r], 2), "batch %d (%v %v, %d elements, %v allocations), rank %d", k, dt, red, total, nallocs, r)
				}
				copied := comms[0].stats[statAllReduceCMA].Load() - before
				if many {
					require.Zero(t, copied, "batch %d: in %v allocations", k, nallocs)
				} else {
					require.EqualValues(t, 1, copied, "batch %d: in %v allocations", k, nallocs)
				}
			}
		})
	}
}
