package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/internal/refdata"
	rt "github.com/xccl-project/xccl/runtime"
)

// Rank processes whose buffers are device memory (shared allocations):
// the large collectives map each other's buffers and read and write them
// directly; the results match a reference computed here element by
// element, for every real type and reduction, in and out of place, odd
// counts, 2 and 3 ranks; and a rank that cannot map falls back to system
// calls with the same results.
func TestSharedDeviceMemoryAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if !sharedMemory() {
		t.Skip("XCCL_SHARED_MEMORY=0")
	}
	for _, tc := range []struct {
		n      int
		broken string // ranks that cannot map their peers' memory
		roomy  bool   // as if every rank had a CPU of its own (forceRoomy)
	}{{2, "", false}, {3, "", false}, {3, "1", false}, {3, "", true}, {4, "2", true}} {
		t.Run(fmt.Sprintf("n=%d/unmappable=%q/roomy=%v", tc.n, tc.broken, tc.roomy), func(t *testing.T) {
			r, err := StartRoot(60 * time.Second)
			require.NoError(t, err)
			defer r.Close()
			children := make([]*exec.Cmd, tc.n)
			outs := make([]strings.Builder, tc.n)
			for i := range children {
				c := exec.Command(os.Args[0], "-test.run=^$")
				c.Env = append(os.Environ(), "XCCL_TEST_CHILD=shared-memory", "XCCL_RANK="+strconv.Itoa(i),
					"XCCL_NRANKS="+strconv.Itoa(tc.n), "XCCL_UNIQUE_ID="+r.ID.Hex())
				if strings.Contains(tc.broken, strconv.Itoa(i)) {
					c.Env = append(c.Env, "XCCL_TEST_BREAK_MAPS=1")
				}
				if tc.roomy {
					c.Env = append(c.Env, "XCCL_TEST_ROOMY=1")
				}
				c.Stdout, c.Stderr = &outs[i], &outs[i]
				require.NoError(t, c.Start())
				children[i] = c
			}
			for i, c := range children {
				err := c.Wait()
				require.NoError(t, err, "rank %d:\n%s", i, outs[i].String())
				require.Contains(t, outs[i].String(), "all correct", "rank %d", i)
			}
		})
	}
}

// childShared is one rank of TestSharedDeviceMemoryAcrossProcesses.
func childShared() int {
	id, err := ParseUniqueIDHex(os.Getenv("XCCL_UNIQUE_ID"))
	if err == nil && os.Getenv("XCCL_TEST_BREAK_MAPS") == "1" {
		testMapError = errors.New("mapping broken by the test")
	}
	forceRoomy = os.Getenv("XCCL_TEST_ROOMY") == "1"
	rank, _ := strconv.Atoi(os.Getenv("XCCL_RANK"))
	n, _ := strconv.Atoi(os.Getenv("XCCL_NRANKS"))
	var c *Comm
	if err == nil {
		c, err = NewComm(id, n, rank, opts(60*time.Second))
	}
	if err == nil {
		err = sharedBattery(c, n, rank)
		if derr := c.Destroy(); err == nil {
			err = derr
		}
	}
	if err != nil {
		fmt.Println("rank", rank, err)
		return 1
	}
	fmt.Println("all correct")
	return 0
}

func sharedBattery(c *Comm, n, rank int) error {
	if !c.cma {
		fmt.Println("single copy not allowed here: the rings run")
	}
	const count = 262147 // odd, and 256 KiB or more in every type
	const size = 4 << 20
	sp, err := hostAlloc(size)
	if err != nil {
		return err
	}
	defer hostFree(sp, size)
	rp, err := hostAlloc(size)
	if err != nil {
		return err
	}
	defer hostFree(rp, size)
	send, recv := bytesAt(sp, size), bytesAt(rp, size)
	before, rounds := c.stats[statAllReduceCMA].Load(), c.stats[statAddrRounds].Load()
	for _, dt := range []rt.DataType{rt.Float32, rt.Float64, rt.Int32, rt.Int64, rt.Int8, rt.Uint8} {
		for _, op := range []rt.ReduceOp{rt.Sum, rt.Product, rt.Max, rt.Min, rt.Avg} {
			for _, inPlace := range []bool{false, true} {
				for j := 0; j < count; j++ {
					refdata.Put(dt, send, j, refdata.Gen(dt, rank, j))
					refdata.Put(dt, recv, j, refdata.Value{I: -1, C: -1})
				}
				s := sp
				if inPlace {
					copy(recv, send[:count*dt.Size()])
					s = rp
				}
				if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: s, Recv: rp, Count: count, Type: dt, Red: op}); err != nil {
					return err
				}
				for j := 0; j < count; j++ {
					want := refdata.Reference(dt, op, n, func(r int) refdata.Value { return refdata.Gen(dt, r, j) })
					if got := refdata.Get(dt, recv, j); !refdata.CloseTo(dt, got, want) {
						return fmt.Errorf("all-reduce %v %v in place %v: element %d is %v, want %v", dt, op, inPlace, j, got, want)
					}
				}
			}
		}
	}
	if c.cma && c.stats[statAllReduceCMA].Load()-before != 60 {
		return fmt.Errorf("%d of 60 all-reduces went through the peers' memory", c.stats[statAllReduceCMA].Load()-before)
	}
	// An all-reduce of 12 KiB, which would otherwise carry its data in the
	// fast boxes, copies once too with 2 ranks, or up to roomyRanks where
	// each has a CPU (tryShared).
	midCopies := n == 2 || (c.roomy && n <= 4) // 4: what was measured, written out (not roomyRanks)
	if forceRoomy && !c.roomy {
		return errors.New("forceRoomy set, but the communicator is not roomy")
	}
	{
		const count = 3001
		for j := 0; j < count; j++ {
			refdata.Put(rt.Float32, send, j, refdata.Gen(rt.Float32, rank, j))
		}
		before := c.stats[statAllReduceCMA].Load()
		if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: sp, Recv: rp, Count: count, Type: rt.Float32, Red: rt.Sum}); err != nil {
			return err
		}
		for j := 0; j < count; j++ {
			want := refdata.Reference(rt.Float32, rt.Sum, n, func(r int) refdata.Value { return refdata.Gen(rt.Float32, r, j) })
			if got := refdata.Get(rt.Float32, recv, j); !refdata.CloseTo(rt.Float32, got, want) {
				return fmt.Errorf("12 KiB all-reduce: element %d is %v, want %v", j, got, want)
			}
		}
		want := uint64(0)
		if midCopies && c.allBoxed {
			want = 1
		}
		if c.cma && c.stats[statAllReduceCMA].Load()-before != want {
			return fmt.Errorf("12 KiB all-reduce: %d single copies, want %d", c.stats[statAllReduceCMA].Load()-before, want)
		}
	}

	// The other collectives, float32: large, and mid-sized (24 KiB, where
	// they would otherwise carry their data in the fast boxes:
	// tryShared), both through the peers' memory (mid-sized: 2 ranks).
	f := unsafe.Slice((*float32)(sp), size/4)
	g := unsafe.Slice((*float32)(rp), size/4)
	in32 := func(rank, j int) float32 { return float32(real(refdata.Gen(rt.Float32, rank, j).C)) }
	ref32 := func(op rt.ReduceOp, j int) float32 {
		return float32(real(refdata.Reference(rt.Float32, op, n, func(r int) refdata.Value { return refdata.Gen(rt.Float32, r, j) }).C))
	}
	fill := func() {
		for j := range f {
			f[j], g[j] = in32(rank, j), -1
		}
	}
	for _, count := range []int{count, 6007} {
		per := count / n
		before := c.stats[statSingleCopy].Load()
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpAllGather, Send: sp, Recv: rp, Count: per, Type: rt.Float32}); err != nil {
			return err
		}
		for j := 0; j < per*n; j++ {
			if want := in32(j/per, j%per); g[j] != want {
				return fmt.Errorf("count %d: all-gather: element %d is %v, want %v", count, j, g[j], want)
			}
		}
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpReduceScatter, Send: sp, Recv: rp, Count: per, Type: rt.Float32, Red: rt.Sum}); err != nil {
			return err
		}
		for j := 0; j < per; j++ {
			if want := ref32(rt.Sum, rank*per+j); g[j] != want {
				return fmt.Errorf("count %d: reduce-scatter: element %d is %v, want %v", count, j, g[j], want)
			}
		}
		root := n - 1
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpBroadcast, Send: sp, Recv: sp, Count: count, Type: rt.Float32, Root: root}); err != nil {
			return err
		}
		for j := 0; j < count; j++ {
			if want := in32(root, j); f[j] != want {
				return fmt.Errorf("count %d: broadcast: element %d is %v, want %v", count, j, f[j], want)
			}
		}
		fill()
		if err := c.exec(&rt.Op{Kind: rt.OpReduce, Send: sp, Recv: rp, Count: count, Type: rt.Float32, Red: rt.Max, Root: root}); err != nil {
			return err
		}
		for j := 0; rank == root && j < count; j++ {
			if want := ref32(rt.Max, j); g[j] != want {
				return fmt.Errorf("count %d: reduce: element %d is %v, want %v", count, j, g[j], want)
			}
		}
		want := uint64(4)
		if count*4 < cmaMinBytes && !(midCopies && c.allBoxed) {
			want = 0 // mid-sized: only 2 ranks, or a few roomy ones, copy once (tryShared)
		}
		if c.cma && c.stats[statSingleCopy].Load()-before != want {
			return fmt.Errorf("count %d: %d of %d collectives copied once", count, c.stats[statSingleCopy].Load()-before, want)
		}
	}
	// Buffers allocated, used and freed over and over (the address comes
	// back): peers drop the mappings of what was freed, and no stale one
	// is used.
	for i := 0; i < 3*peerMapsKept; i++ {
		p, err := hostAlloc(size)
		if err != nil {
			return err
		}
		b := unsafe.Slice((*float32)(p), count)
		for j := range b {
			b[j] = float32(rank + i)
		}
		err = c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: count, Type: rt.Float32, Red: rt.Sum})
		want := float32(n*(n-1)/2 + n*i)
		if err == nil && (b[0] != want || b[count-1] != want) {
			err = fmt.Errorf("all-reduce %d of a new buffer: %v, %v, want %v", i, b[0], b[count-1], want)
		}
		hostFree(p, size)
		if err != nil {
			return err
		}
	}
	if r := c.stats[statAddrRounds].Load() - rounds; c.cma && c.allBoxed && r != 0 {
		return fmt.Errorf("%d address rounds: the addresses should come with the fingerprints (addrsRide)", r)
	}
	for p, maps := range c.pmem.maps {
		if len(maps) > 3 { // send and receive buffers above, and the last loop's
			return fmt.Errorf("%d mappings of rank %d's memory kept, freed ones among them", len(maps), p)
		}
	}
	return nil
}

// Collectives that may copy once between shared buffers learn whether they
// can without a round of their own: the addresses ride with the
// fingerprints (addrsRide). From Go memory, which is private, all-reduces
// past the direct form run the ring; mid-sized broadcasts (2 ranks) leave
// their direct form to try single copy only while the last exchange found
// every buffer shared, else once sharedProbeEach collectives have passed
// since it (tryShared): the tree on those calls only. All with the
// right results.
func TestPrivateMemoryProbesForSharingRarely(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(10*time.Second))
	if !comms[0].cma {
		t.Skip("single-copy reads are unavailable here: nothing is probed")
	}
	const count = 8 << 10 // float32s: 32 KiB, past the direct all-reduce
	bufs := [2][]float32{make([]float32, count), make([]float32, count)}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&bufs[i][0]) }
	run := func(kind rt.OpKind, k int) {
		for i := range bufs {
			bufs[i][0], bufs[i][count-1] = float32(k+i), float32(i-k)
		}
		for i, err := range execAll(comms, func(i int) *rt.Op {
			return &rt.Op{Kind: kind, Send: p(i), Recv: p(i), Count: count, Type: rt.Float32, Red: rt.Sum}
		}) {
			require.NoError(t, err, "call %d, rank %d", k, i)
			want := []float32{float32(2*k + 1), -float32(2*k - 1)}
			if kind == rt.OpBroadcast {
				want = []float32{float32(k), -float32(k)}
			}
			require.Equal(t, want, []float32{bufs[i][0], bufs[i][count-1]}, "call %d (%v), rank %d", k, kind, i)
		}
	}
	const allReduces, broadcasts = sharedProbeEach + 25, 2*sharedProbeEach + 10
	for k := 1; k <= allReduces; k++ {
		run(rt.OpAllReduce, k)
	}
	for k := 1; k <= broadcasts; k++ {
		run(rt.OpBroadcast, k)
	}
	s := &comms[0].stats
	require.EqualValues(t, 0, s[statAddrRounds].Load())
	require.EqualValues(t, allReduces, s[statAllReduceRing].Load())
	require.EqualValues(t, 0, s[statAllReduceCMA].Load()+s[statSingleCopy].Load())
	// The broadcasts' size class knew nothing yet: they try at their first
	// call and sharedProbeEach and 2*sharedProbeEach calls on.
	require.EqualValues(t, 3, s[statBroadcastTree].Load())
	require.EqualValues(t, broadcasts-3, s[statDirect].Load())
}

// What an address exchange found is remembered per size class: large
// all-reduces between shared buffers (single copy) beside small ones on Go
// memory leave the small ones in their direct form, probing for sharing
// only once in sharedProbeEach collectives.
func TestSharingIsRememberedPerSize(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(10*time.Second))
	if !comms[0].cma {
		t.Skip("single-copy reads are unavailable here: nothing is probed")
	}
	const big, small, rounds = 16 << 10, 2 << 10, sharedProbeEach // float32s: 64 and 8 KiB
	shared := make([][]float32, 2)
	private := [2][]float32{make([]float32, small), make([]float32, small)}
	for i := range shared {
		p, err := hostAlloc(4 << 20) // shared memory: allocations of 2 MiB and more
		require.NoError(t, err)
		t.Cleanup(func() { hostFree(p, 4<<20) })
		shared[i] = unsafe.Slice((*float32)(p), big)
	}
	for k := 1; k <= rounds; k++ {
		for _, bufs := range [][][]float32{shared, private[:]} {
			for i := range bufs {
				bufs[i][0] = float32(k + i)
			}
			for i, err := range execAll(comms, func(i int) *rt.Op {
				p := unsafe.Pointer(&bufs[i][0])
				return &rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: len(bufs[i]), Type: rt.Float32, Red: rt.Sum}
			}) {
				require.NoError(t, err, "round %d, rank %d", k, i)
				require.Equal(t, float32(2*k+1), bufs[i][0], "round %d, rank %d", k, i)
			}
		}
	}
	s := &comms[0].stats
	require.EqualValues(t, rounds, s[statAllReduceCMA].Load(), "the large ones copy once")
	// 2*rounds collectives: the small class probes at its first call and
	// once sharedProbeEach collectives later.
	require.EqualValues(t, 2, s[statAllReduceRing].Load(), "small ones that probed")
	require.EqualValues(t, rounds-2, s[statAllReduceDirect].Load())
}

// roomy: no machine has more ranks than the fewest CPUs one of its ranks
// reports; a rank that reports none (an older build) makes it false.
func TestRoomy(t *testing.T) {
	p := func(host string, cpus int) peerInfo { return peerInfo{Host: host, CPUs: cpus} }
	require.True(t, roomy([]peerInfo{p("a", 4), p("a", 4), p("a", 4), p("a", 4)}))
	require.False(t, roomy([]peerInfo{p("a", 4), p("a", 3), p("a", 4), p("a", 4)}), "one rank may run on 3 CPUs")
	require.True(t, roomy([]peerInfo{p("a", 2), p("a", 2), p("b", 2), p("b", 2)}))
	require.False(t, roomy([]peerInfo{p("a", 2), p("a", 2), p("a", 2), p("b", 8)}))
	require.False(t, roomy([]peerInfo{p("a", 16), p("a", 0)}), "a rank that sent no count")
	require.False(t, roomy(nil))
}
