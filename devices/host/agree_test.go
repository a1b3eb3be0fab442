package host

import (
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// Mismatched calls between ranks: every rank gets C_ERROR naming both
// calls, and the communicator stays usable.
func TestMismatchIsFoundByEveryRank(t *testing.T) {
	// Over TCP every fingerprint and its data share the rings: the drains
	// after a mismatch must leave them in step.
	for _, transport := range []string{"auto", "tcp"} {
		t.Run(transport, func(t *testing.T) { mismatchIsFoundByEveryRank(t, transport) })
	}
}

func mismatchIsFoundByEveryRank(t *testing.T, transport string) {
	o := opts(10 * time.Second)
	o.Transport = transport
	comms := inProcessRanks(t, 3, o)
	run := func(ops func(rank int) *rt.Op) []error { return execAll(comms, ops) }
	buf := make([][]float32, 3)
	for i := range buf {
		buf[i] = make([]float32, 16)
	}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i][0]) }

	// Count.
	got := run(func(i int) *rt.Op {
		n := 10
		if i == 1 {
			n = 12
		}
		return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: n, Type: rt.Float32, Red: rt.Sum}
	})
	for i, err := range got {
		require.Error(t, err, "rank %d", i)
		require.Equal(t, rt.StatusError, rt.StatusOf(err))
		require.Contains(t, err.Error(), "called AllReduce(count=12, FLOAT32, SUM) as op #1", "rank %d", i)
	}
	require.Contains(t, got[0].Error(), "rank 1 called AllReduce(count=12, FLOAT32, SUM) as op #1, rank 0 called AllReduce(count=10, FLOAT32, SUM) as op #1")

	// A small all-reduce (its data rides with the fingerprint) against a
	// broadcast from rank 1 (rank 0 waits for rank 1 only).
	got = run(func(i int) *rt.Op {
		if i == 0 {
			return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: 4, Type: rt.Float32, Root: 1}
		}
		return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: 5, Type: rt.Float16, Red: rt.Sum}
	})
	for _, err := range got {
		require.ErrorContains(t, err, "collective mismatch")
	}
	// Direct forms with data going different ways: a reduce to rank 0, one
	// to rank 1 and an all-gather. Every rank drains what came, in step.
	got = run(func(i int) *rt.Op {
		if i == 2 {
			return &rt.Op{Kind: rt.OpAllGather, Send: p(i), Recv: p(i), Count: 3, Type: rt.Float32}
		}
		return &rt.Op{Kind: rt.OpReduce, Send: p(i), Recv: p(i), Count: 3, Type: rt.Int32, Red: rt.Sum, Root: i}
	})
	for _, err := range got {
		require.ErrorContains(t, err, "collective mismatch")
	}
	for i := range buf {
		buf[i][0] = float32(i + 1)
	}
	for i, err := range run(func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: 1, Type: rt.Float32, Red: rt.Sum}
	}) {
		require.NoError(t, err)
		require.Equal(t, float32(6), buf[i][0])
	}

	// All-to-all: rank 0 sends 2 floats to rank 1, which expects 1.
	got = run(func(i int) *rt.Op {
		op := &rt.Op{Kind: rt.OpAllToAll, SendBufs: make([]unsafe.Pointer, 3), RecvBufs: make([]unsafe.Pointer, 3),
			SendCounts: []int{1, 1, 1}, RecvCounts: []int{1, 1, 1}, SendTypes: make([]rt.DataType, 3), RecvTypes: make([]rt.DataType, 3)}
		for q := 0; q < 3; q++ {
			op.SendBufs[q], op.RecvBufs[q] = p(i), unsafe.Pointer(&buf[i][8+q])
			op.SendTypes[q], op.RecvTypes[q] = rt.Float32, rt.Float32
		}
		if i == 0 {
			op.SendCounts[1] = 2
		}
		return op
	})
	for _, err := range got {
		require.ErrorContains(t, err, "collective mismatch in AllToAll op #5: rank 0 sends 8 bytes to rank 1, which expects 4")
	}
}

// A small broadcast's root and a small reduce's other ranks do not wait for
// their peers' fingerprints (they send and return, fastbox.go): the ranks
// that wait find a mismatch at once, and these at their next collective,
// which runs and then returns C_ERROR naming the op, or at Destroy.
func TestMismatchIsFoundLaterByRanksThatDoNotWait(t *testing.T) {
	comms := inProcessRanks(t, 3, opts(10*time.Second))
	for _, c := range comms {
		require.True(t, c.allBoxed)
	}
	run := func(ops func(rank int) *rt.Op) []error { return execAll(comms, ops) }
	buf := make([][]float32, 3)
	for i := range buf {
		buf[i] = make([]float32, 16)
	}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i][0]) }
	sum := func() []error {
		for i := range buf {
			buf[i][0] = float32(i + 1)
		}
		got := run(func(i int) *rt.Op {
			return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: 1, Type: rt.Float32, Red: rt.Sum}
		})
		for i := range buf {
			require.Equal(t, float32(6), buf[i][0], "rank %d", i)
		}
		return got
	}

	// Rank 2 broadcasts from rank 0; ranks 0 and 1 reduce to rank 0. Rank 0
	// waits for everyone, rank 2 for rank 0, rank 1 for nobody.
	got := run(func(i int) *rt.Op {
		if i == 2 {
			return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: 4, Type: rt.Float32, Root: 0}
		}
		return &rt.Op{Kind: rt.OpReduce, Send: p(i), Recv: p(i), Count: 4, Type: rt.Float32, Red: rt.Max, Root: 0}
	})
	require.ErrorContains(t, got[0], "rank 2 called Broadcast(count=4, FLOAT32, root=0) as op #1")
	require.ErrorContains(t, got[2], "rank 0 called Reduce(count=4, FLOAT32, MAX, root=0) as op #1")
	require.NoError(t, got[1])
	// The next collective runs everywhere; rank 1 then reports op #1.
	got = sum()
	require.NoError(t, got[0])
	require.NoError(t, got[2])
	require.Equal(t, rt.StatusError, rt.StatusOf(got[1]))
	require.ErrorContains(t, got[1], "found after op #1 returned")
	require.ErrorContains(t, got[1], "rank 2 called Broadcast(count=4, FLOAT32, root=0) as op #1")
	for i, err := range sum() {
		require.NoError(t, err, "rank %d", i)
	}

	// Nobody waits: a broadcast from rank 0 against reduces to rank 1 from
	// ranks 1 and 2 (rank 1 waits: it is their root).
	got = run(func(i int) *rt.Op {
		if i == 0 {
			return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: 2, Type: rt.Float32, Root: 0}
		}
		return &rt.Op{Kind: rt.OpReduce, Send: p(i), Recv: p(i), Count: 2, Type: rt.Float32, Red: rt.Sum, Root: 1}
	})
	require.NoError(t, got[0])
	require.ErrorContains(t, got[1], "collective mismatch")
	require.NoError(t, got[2])
	got = sum()
	require.ErrorContains(t, got[0], "found after op #4 returned")
	require.NoError(t, got[1])
	require.ErrorContains(t, got[2], "found after op #4 returned")

	// Found by Destroy: rank 0 broadcasts 4 floats, the others expect 5.
	got = run(func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: 4 + min(i, 1), Type: rt.Float32, Root: 0}
	})
	require.NoError(t, got[0])
	require.ErrorContains(t, got[1], "collective mismatch")
	require.ErrorContains(t, got[2], "collective mismatch")
	require.ErrorContains(t, comms[0].Destroy(), "found after op #6 returned")
	require.NoError(t, comms[1].Destroy())
	require.NoError(t, comms[2].Destroy())
}

// A mismatch a rank has returned is not reported again when it later
// checks the fingerprint of a peer it did not wait for in that call, even
// after a second mismatch: 3 ranks broadcast from rank 0 with three
// different counts, twice; ranks 1 and 2 wait only for the root, return the
// mismatch each time, and their next matched collective succeeds. The root
// waits for nobody and reports the first one late, once.
func TestMismatchIsReportedOnce(t *testing.T) {
	comms := inProcessRanks(t, 3, opts(10*time.Second))
	buf := make([][]float32, 3)
	for i := range buf {
		buf[i] = make([]float32, 16)
	}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i][0]) }
	for call := 1; call <= 2; call++ {
		got := execAll(comms, func(i int) *rt.Op {
			return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: 4 + i, Type: rt.Float32, Root: 0}
		})
		require.NoError(t, got[0], "call %d", call)
		require.ErrorContains(t, got[1], "collective mismatch", "call %d", call)
		require.ErrorContains(t, got[2], "collective mismatch", "call %d", call)
	}
	for k := 0; k < 2; k++ {
		got := execAll(comms, func(i int) *rt.Op {
			return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: 1, Type: rt.Float32, Red: rt.Sum}
		})
		if k == 0 {
			require.ErrorContains(t, got[0], "found after op #1 returned")
		} else {
			require.NoError(t, got[0])
		}
		require.NoError(t, got[1], "all-reduce %d", k)
		require.NoError(t, got[2], "all-reduce %d", k)
	}
}

// execAll runs op(rank) on every rank's communicator at once and returns
// each rank's error.
func execAll(comms []*Comm, op func(rank int) *rt.Op) []error {
	out := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func(i int, c *Comm) { defer wg.Done(); out[i] = c.exec(op(i)) }(i, c)
	}
	wg.Wait()
	return out
}

// A mismatch leaves the ranks' plans in step: rank 0 calls a mid-sized
// broadcast (which may try single copy between shared buffers,
// tryShared) where rank 1 calls a small one; both fail, and then a
// long run of matched mid-sized broadcasts from Go memory (probed for
// sharing now and then) all succeed on both ranks, with the root's data.
func TestMismatchKeepsPlansInStep(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(5*time.Second))
	if !comms[0].cma {
		// Without single copy the root of a boxed broadcast waits for
		// nobody: the mismatch is found later
		// (TestMismatchIsFoundLaterByRanksThatDoNotWait).
		t.Skip("single-copy reads are unavailable here: no shared-memory plan to keep in step")
	}
	const mid, small = 6 << 10, 2 << 10 // float32s: 24 KiB, 8 KiB
	bufs := [2][]float32{make([]float32, mid), make([]float32, mid)}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&bufs[i][0]) }
	got := execAll(comms, func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: mid - i*(mid-small), Type: rt.Float32, Root: 0}
	})
	require.ErrorContains(t, got[0], "collective mismatch")
	require.ErrorContains(t, got[1], "collective mismatch")
	for k := 0; k < 3*sharedProbeEach; k++ {
		for i := range bufs {
			bufs[i][0], bufs[i][mid-1] = float32(10*k+i), float32(-10*k-i)
		}
		for i, err := range execAll(comms, func(i int) *rt.Op {
			return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: mid, Type: rt.Float32, Root: 0}
		}) {
			require.NoError(t, err, "call %d, rank %d", k, i)
			require.Equal(t, []float32{float32(10 * k), float32(-10 * k)}, []float32{bufs[i][0], bufs[i][mid-1]}, "call %d, rank %d", k, i)
		}
	}
	for _, c := range comms {
		require.NoError(t, c.Destroy())
	}
}

// A call small enough for the quick path (quick.go) meets one that takes
// the general direct form, its data in the boxes too: every rank finds the
// mismatch, and the next calls (one quick, one general) run in step.
func TestQuickAndGeneralPathsMeet(t *testing.T) {
	comms := inProcessRanks(t, 3, opts(10*time.Second))
	if !comms[0].quick {
		t.Skip("no fast boxes between every pair here")
	}
	const small, large = 1000, 1100 // float32s: 4000 bytes quick, 4400 not
	buf := make([][]float32, 3)
	for i := range buf {
		buf[i] = make([]float32, large)
	}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i][0]) }
	probe := rt.Op{Kind: rt.OpAllReduce, Count: small, Type: rt.Float32}
	require.True(t, comms[0].quickable(&probe))
	probe.Count = large
	require.False(t, comms[0].quickable(&probe))
	// Ranks 1 and 2 first, so that rank 0's quick poll finds both
	// fingerprints there and compares them itself.
	got := make([]error, 3)
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i] = comms[i].exec(&rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: small + (large-small)*(i%2), Type: rt.Float32, Red: rt.Sum})
		}(i)
	}
	time.Sleep(100 * time.Millisecond)
	got[0] = comms[0].exec(&rt.Op{Kind: rt.OpAllReduce, Send: p(0), Recv: p(0), Count: small, Type: rt.Float32, Red: rt.Sum})
	wg.Wait()
	for i, err := range got {
		require.ErrorContains(t, err, "collective mismatch", "rank %d", i)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), "rank %d", i)
	}
	for _, n := range []int{small, large} {
		for i := range buf {
			for k := range buf[i] {
				buf[i][k] = float32(i + k)
			}
		}
		for i, err := range execAll(comms, func(i int) *rt.Op {
			return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: n, Type: rt.Float32, Red: rt.Sum}
		}) {
			require.NoError(t, err, "count %d, rank %d", n, i)
			require.Equal(t, float32(3+3*(n-1)), buf[i][n-1], "count %d, rank %d", n, i)
		}
	}
}

// Whatever the quick path takes, the general path would send the same way:
// the direct form, no single-copy try, every message in the fast boxes.
func TestQuickableMeansDirectInBoxes(t *testing.T) {
	for _, n := range []int{2, 3} {
		comms := inProcessRanks(t, n, opts(10*time.Second))
		c := comms[n-1]
		if !c.quick {
			t.Skip("no fast boxes between every pair here")
		}
		taken := 0
		for _, kind := range []rt.OpKind{rt.OpAllReduce, rt.OpBroadcast, rt.OpReduce, rt.OpAllGather, rt.OpReduceScatter} {
			for _, dt := range []rt.DataType{rt.Int8, rt.Float32, rt.Float64, rt.Float16} {
				for count := 1; count < 20000; count += 1 + count/8 {
					op := rt.Op{Kind: kind, Count: count, Type: dt, Root: 0}
					if !c.quickable(&op) {
						continue
					}
					taken++
					var f rt.Fingerprint
					f.Set(&op, 1)
					require.False(t, c.tryShared(f), "%v", f)
					c.sharedTry = false
					require.True(t, c.directPlan(f), "%v", f)
					for p := 0; p < n; p++ {
						if p != c.rank {
							require.True(t, c.inBox(p, c.payloadFrom(f, c.rank, p)), "%v to %d", f, p)
							require.True(t, c.inBox(p, c.payloadFrom(f, p, c.rank)), "%v from %d", f, p)
						}
					}
				}
			}
		}
		require.Greater(t, taken, 100)
		for _, c := range comms {
			require.NoError(t, c.Destroy())
		}
	}
}

// A rank that waits for a peer that does not wait for it, and sends it no
// data (a small broadcast's other ranks to the root, a small reduce's root
// to the others), sends it no fingerprint when the peer's is equal
// (quickExchange); the peer counts the empty slot as checked once it may,
// and a mismatch still reaches it. Ranks run one after another here, the
// ones that do not wait first, so that every wait finds its fingerprints.
func TestQuietRanksSendNoFingerprint(t *testing.T) {
	comms := inProcessRanks(t, 3, opts(10*time.Second))
	if !comms[0].quick {
		t.Skip("no fast boxes between every pair here")
	}
	const count = 5
	buf := make([][]float32, 3)
	for i := range buf {
		buf[i] = make([]float32, count)
	}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i][0]) }
	run := func(order []int, op func(i int) *rt.Op) []error {
		errs := make([]error, 3)
		for _, i := range order {
			errs[i] = comms[i].exec(op(i))
		}
		return errs
	}
	slot := func(to, from int, j uint64) bool { return slotSeq(comms[to].box[from].in[j%fastDepth]).Load() == j }
	first := comms[0].collSeq + 1
	const k = 10 // broadcasts, then reduces: 2k < fastDepth, no slot reused
	for it := 0; it < k; it++ {
		for i := range buf {
			for e := range buf[i] {
				buf[i][e] = float32(100*i + e + it)
			}
		}
		for i, err := range run([]int{0, 1, 2}, func(i int) *rt.Op {
			return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: count, Type: rt.Float32, Root: 0}
		}) {
			require.NoError(t, err, "broadcast %d, rank %d", it, i)
			require.Equal(t, float32(count-1+it), buf[i][count-1], "broadcast %d, rank %d", it, i)
		}
	}
	for it := 0; it < k; it++ {
		for i, err := range run([]int{0, 1, 2}, func(i int) *rt.Op {
			return &rt.Op{Kind: rt.OpReduce, Send: p(i), Recv: p(i), Count: count, Type: rt.Float32, Red: rt.Sum, Root: 2}
		}) {
			require.NoError(t, err, "reduce %d, rank %d", it, i)
		}
	}
	for j := first; j < first+2*k; j++ {
		if j < first+k { // broadcasts from 0
			require.False(t, slot(0, 1, j), "op #%d: rank 1 sent the root a fingerprint", j)
			require.False(t, slot(0, 2, j), "op #%d: rank 2 sent the root a fingerprint", j)
			require.True(t, slot(1, 2, j) && slot(2, 1, j), "op #%d: the other ranks send each other theirs", j)
		} else { // reduces to 2
			require.False(t, slot(0, 2, j), "op #%d: the root sent rank 0 a fingerprint", j)
			require.False(t, slot(1, 2, j), "op #%d: the root sent rank 1 a fingerprint", j)
			require.True(t, slot(2, 0, j) && slot(2, 1, j), "op #%d: the others send the root theirs", j)
		}
	}
	// An all-reduce waits for everyone: every gap is filled by then.
	for i, err := range execAll(comms, func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: count, Type: rt.Float32, Red: rt.Sum}
	}) {
		require.NoError(t, err, "rank %d", i)
		for q := range comms {
			if q != i {
				require.Equal(t, comms[i].collSeq, comms[i].box[q].got, "rank %d, peer %d", i, q)
			}
		}
	}
	// Rank 1 calls another count: it says so to the root, which finds it
	// at its next collective that waits for rank 1; rank 2 stays quiet.
	mis := comms[0].collSeq + 1
	errs := run([]int{0, 1, 2}, func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpBroadcast, Send: p(i), Recv: p(i), Count: count - i%2, Type: rt.Float32, Root: 0}
	})
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "collective mismatch")
	require.NoError(t, errs[2])
	require.True(t, slot(0, 1, mis))
	require.False(t, slot(0, 2, mis))
	errs = execAll(comms, func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpAllReduce, Send: p(i), Recv: p(i), Count: count, Type: rt.Float32, Red: rt.Sum}
	})
	require.ErrorContains(t, errs[0], "collective mismatch")
	require.ErrorContains(t, errs[0], fmt.Sprintf("op #%d", mis))
}

// Ranks plan their waits alike only with the same forced algorithm (a
// quiet rank counts on its peers' plans): init refuses a mix.
func TestForcedAlgorithmMustMatch(t *testing.T) {
	r, err := StartRoot(10 * time.Second)
	require.NoError(t, err)
	defer r.Close()
	comms := make([]*Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range comms {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := opts(10 * time.Second)
			if i == 1 {
				o.Algo = "ring"
			}
			comms[i], errs[i] = NewComm(r.ID, 2, i, o)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		require.ErrorContains(t, err, "XCCL_ALGO", "rank %d", i)
		require.Nil(t, comms[i], "rank %d", i)
	}
}

// Quiet ranks under way: a root that runs fastDepth calls ahead needs its
// slots back from a quiet rank that sends it nothing (boxFree, doneWith by
// its count); a quiet rank whose root is late sends its fingerprint after
// all; and Destroy right after calls its rank waited for nobody in does
// not wait for fingerprints that never come.
func TestQuietRanksUnderLoad(t *testing.T) {
	r, err := StartRoot(10 * time.Second)
	require.NoError(t, err)
	defer r.Close()
	comms, errs := join(r.ID, 2, seq(2), opts(20*time.Second))
	require.NoError(t, errors0(errs))
	if !comms[0].quick {
		destroyAll(comms)
		t.Skip("no fast boxes between every pair here")
	}
	const calls = 3 * fastDepth
	buf := [2][]float32{make([]float32, 3), make([]float32, 3)}
	bcast := func(i int) *rt.Op {
		return &rt.Op{Kind: rt.OpBroadcast, Send: unsafe.Pointer(&buf[i][0]), Recv: unsafe.Pointer(&buf[i][0]), Count: 3, Type: rt.Float32}
	}
	// The other rank first, its root late: it sends its fingerprint.
	late := comms[0].collSeq + 1
	done := make(chan error)
	go func() { done <- comms[1].exec(bcast(1)) }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, comms[0].exec(bcast(0)))
	require.NoError(t, <-done)
	require.Equal(t, late, slotSeq(comms[0].box[1].in[late%fastDepth]).Load(), "a quiet rank whose root is late sends its fingerprint")
	// The root runs ahead of a rank that starts late, and destroys first.
	took := make([]time.Duration, 2)
	first := make(chan struct{})
	var wg sync.WaitGroup
	for i := range comms {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i == 1 {
				time.Sleep(50 * time.Millisecond)
			}
			for k := 0; k < calls; k++ {
				buf[i][2] = float32(k * (1 - i))
				if err := comms[i].exec(bcast(i)); err != nil {
					errs[i] = err
					return
				}
				if buf[i][2] != float32(k) {
					errs[i] = fmt.Errorf("call %d: got %v", k, buf[i][2])
					return
				}
			}
			if i == 1 {
				<-first // the root's Destroy must not count on this rank's
			}
			start := time.Now()
			errs[i] = comms[i].Destroy()
			took[i] = time.Since(start)
			if i == 0 {
				close(first)
			}
		}(i)
	}
	wg.Wait()
	for i := range comms {
		require.NoError(t, errs[i], "rank %d", i)
		require.Less(t, took[i], 5*time.Second, "rank %d: Destroy waited", i)
	}
}
