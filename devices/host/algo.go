package host

import (
	"fmt"
	"math/bits"
	"strings"

	"go.uber.org/zap"

	rt "github.com/xccl-project/xccl/runtime"
)

// Algorithm choice. All-reduce: "direct" (every rank sends its whole buffer
// to every other and reduces all contributions in rank order: one step,
// best for small messages) or "ring" (reduce-scatter then all-gather around
// the ring: each rank moves 2(n-1)/n of the buffer, best for large ones).
// Between processes of one machine that can read each other's memory,
// mid-sized all-gathers, reduce-scatters and broadcasts copy once
// ("single-copy", cma.go). XCCL_ALGO=direct|ring|cma forces one.
// XCCL_DEBUG=INFO logs each choice the first time a communicator makes it,
// with the reason.

type algo int

const (
	algoDirect algo = iota
	algoRing
	algoCMA
	numAlgos
)

func (a algo) String() string { return [...]string{"direct", "ring", "single-copy"}[a] }

// The size limits, measured with xccl-perf between processes (2-core VM,
// 2 and 4 ranks, sizes of the whole buffer as nccl-tests counts them):
// direct all-reduce beats the ring up to about 8 KiB for 2 ranks and 16 KiB
// for more (further with fast boxes, below). Single copy beats the rings
// from 64 KiB for all-gather, reduce-scatter and broadcast, until the ring,
// whose pieces stay in the cache, catches up: from 16 MiB for all-gather
// and broadcast, 4 MiB for reduce-scatter and reduce (they reduce what
// they read). Where every rank's buffers are device memory that peers map
// (shared allocations, peermap.go) there are no system calls and no pinned
// pages, and single copy leads at every size: then the all-reduce uses it
// too, from cmaAllReduceMin (2 ranks: 5 against 53 us at 32 KiB, 37
// against 229 us at 1 MiB, 2.8 against 5.6 ms at 32 MiB; 4 ranks 3x from
// 256 KiB). From other memory the ring all-reduce, which reads the send
// buffer where it is, was ahead of single copy at every size from 256 KiB
// to 32 MiB, so single copy is used for it only when forced (XCCL_ALGO=cma).
const (
	directMaxBytes2 = 8 << 10
	directMaxBytes  = 16 << 10
	cmaMinBytes     = 64 << 10
	cmaMaxGather    = 16 << 20 // all-gather, broadcast: single copy below
	cmaMaxReduce    = 4 << 20  // reduce-scatter: single copy below
	cmaMaxRoot      = 4 << 20  // reduce: single copy below (2 ranks: 2-3x the tree to 1 MiB, even at 4 MiB)
	cmaAllReduceMin = 16 << 10 // all-reduce between shared buffers: single copy from here (direct below)
	sharedOthersMin = 16 << 10 // the others between shared buffers: single copy from here (tryShared)
	sharedReduceMin = 4 << 10  // all-reduce between shared buffers, 2 ranks: single copy from here (tryShared)
	sharedProbeEach = 1024     // see tryShared
	roomyRanks      = 4        // tryShared with more than 2 ranks: up to this many, each with a CPU (roomy)
)

// tryShared says whether a collective with fingerprint f that would
// otherwise carry its data in the fast boxes (or, past a box, take its ring
// or tree) tries single copy instead: an all-gather, reduce-scatter,
// broadcast or reduce whose buffer is between sharedOthersMin and
// cmaMinBytes, or an all-reduce from sharedReduceMin up to where it leaves
// its direct form anyway. It learns the addresses first (with the
// fingerprints, addrsRide) and copies once where every rank's buffers lie
// in shared allocations, else it falls back to its ring or tree (measured,
// 2 ranks, 32 KiB of device memory: broadcast 8.7 -> 4.0 us, reduce 10.3
// -> 4.4, all-gather 8.0 -> 3.5; all-reduce, same runs, 8 KiB 3.12 -> 1.39
// us, 16 KiB 1.60 -> 0.75). With 2 ranks, or up to roomyRanks where each
// has a CPU (roomy; 16 cores, 4 ranks, 32 KiB: all-reduce 21.5 -> 4.2 us,
// broadcast 9.8 -> 2.7, reduce 8.7 -> 5.2, all-gather 7.2 -> 3.2,
// reduce-scatter 7.0 -> 2.5; 8 KiB all-reduce 6.8 -> 3.0): with 4 on 2
// cores its two extra rounds (the addresses, the final barrier) cost more
// than the copy saves (32 KiB broadcast 13.6 -> 56 us, reduce 12.2 -> 75).
// Whether they all did is known only after that exchange, so it tries
// while the last exchange of a collective of its size class (sharedMemo)
// found them all shared, and otherwise once sharedProbeEach collectives
// have passed since that exchange: other memory then pays the exchange and
// the slower form at most once in 1024 calls. Every rank decides alike,
// from state that only matched calls change (an exchange happens after the
// fingerprints agreed); a count of this rank's eligible calls would split
// after a mismatch, where the ranks' calls differed.
func (c *Comm) tryShared(f rt.Fingerprint) bool {
	if !c.cma || !c.allBoxed || (c.n != 2 && !(c.roomy && c.n <= roomyRanks)) || c.opts.Algo != "" || !f.Type.Valid() {
		return false
	}
	var bytes int
	if f.Kind == rt.OpAllReduce {
		bytes = wireBytes(f.Type, int(f.Count))
		if isHalf(f.Type) || f.Root == fusedRoot || bytes < sharedReduceMin || bytes > c.directMax() {
			return false
		}
	} else {
		per, blocks, ok := c.othersShape(f)
		if bytes = per * blocks; !ok || bytes < sharedOthersMin || bytes >= cmaMinBytes {
			return false
		}
	}
	c.memoAt, c.memoSeq = bits.Len(uint(bytes)), f.Seq
	m := c.memo[c.memoAt]
	return m.shared || f.Seq >= m.probe
}

// sharedMemo is what the last address exchange of one size class (bytes
// up to the next power of two) found, for tryShared: whether every rank's
// buffers were shared, and from which collective a class found otherwise
// is tried again. Per class, because programs keep buffers of different
// sizes in different memory (a large all-reduce on device memory beside
// small ones on Go slices or tensors): one memory for all let every large
// shared call send the next small private one the slower way (2 ranks,
// alternating 64 KiB shared and 8 KiB private all-reduces: the 8 KiB ones
// 20 -> 57 us). All ranks see the same calls, so they keep the same memo.
type sharedMemo struct {
	shared bool
	probe  uint64
}

// With fast boxes between every pair the direct form carries its data in
// them (no ring), and wins further: measured, it ties the ring at 16 KiB
// for 2 ranks and beats it 2.5x at 32 KiB for 4 ranks on 2 cores.
const (
	boxedDirectMax2 = 16 << 10
)

func (c *Comm) directMax() int {
	switch {
	case c.allBoxed && c.n == 2:
		return min(boxedDirectMax2, c.fastCap)
	case c.allBoxed:
		return max(c.fastCap, directMaxBytes)
	case c.n == 2:
		return directMaxBytes2
	}
	return directMaxBytes
}

// singleCopy runs a collective of this many bytes by its single-copy form
// run (and counts it) when it reads peers directly: forced, or from
// cmaMinBytes to below max bytes, or from max on when every rank's buffer
// is backed by huge pages (host device memory from hugeMin on: there
// single copy led the rings at every size measured, up to 32 MiB, 2 ranks,
// as the kernel pins a peer's pages 512 at a time). The ranks learn the
// last together (hugeSingleCopy), at the cost of one round. ran false: use
// the rings or the tree.
func (c *Comm) singleCopy(bytes, max int, send, recv []byte, name label, run func() error) (ran bool, err error) {
	switch c.opts.Algo {
	case "direct", "ring":
		return false, nil
	case "cma", "single-copy":
		if !c.cma {
			return false, nil
		}
	default:
		if !c.cma {
			return false, nil
		}
		if bytes < cmaMinBytes {
			if !c.sharedTry {
				return false, nil
			}
			shared, err := c.sharedSingleCopy(send, recv, name)
			if err != nil || !shared {
				return err != nil, err
			}
		} else if bytes >= max {
			if c.opts.Algo != "" {
				return false, nil
			}
			huge, err := c.hugeSingleCopy(send, recv, name)
			if err != nil || !huge {
				return err != nil, err
			}
		}
	}
	c.count(statSingleCopy, 1)
	return true, run()
}

func (c *Comm) allReduceAlgo(bytes int) algo {
	a := c.chooseAllReduce(bytes)
	if !c.logged[a] {
		c.logChoice(a, bytes, c.why(a, bytes))
	}
	return a
}

// logChoice logs the first all-reduce a communicator runs with algorithm a
// (callers check c.logged[a] first: the reason is built only then).
func (c *Comm) logChoice(a algo, bytes int, why string) {
	c.logged[a] = true
	c.log.Info("all-reduce algorithm chosen", zap.String("algo", a.String()), zap.Int("bytes", bytes), zap.String("why", why))
}

func (c *Comm) chooseAllReduce(bytes int) algo {
	switch c.opts.Algo {
	case "direct":
		if c.ringHolds(bytes) {
			return algoDirect
		}
		return algoRing
	case "ring":
		return algoRing
	case "cma", "single-copy":
		if c.cma {
			return algoCMA
		}
		return algoRing
	}
	if bytes <= c.directMax() {
		return algoDirect
	}
	return algoRing
}

// ringHolds says whether a message of payload bytes and its fingerprint fit
// one ring: the direct forms send every peer theirs before they receive
// anything, so a message a ring cannot hold whole waits for a reader that
// is itself still sending (XCCL_ALGO=direct at any size deadlocked above
// the ring's size).
func (c *Comm) ringHolds(payload int) bool {
	return payload+rt.FingerprintSize+64 <= c.opts.RingBytes
}

// why explains a choice of chooseAllReduce (for the log, once per algorithm).
func (c *Comm) why(a algo, bytes int) string {
	switch {
	case c.opts.Algo == "direct" && a == algoRing:
		return fmt.Sprintf("XCCL_ALGO=direct, but %d bytes to each peer do not fit its ring (%d, XCCL_SHM_RING_BYTES): ring", bytes, c.opts.RingBytes)
	case c.opts.Algo != "" && a == algoRing && !c.cma && (c.opts.Algo == "cma" || c.opts.Algo == "single-copy"):
		return "XCCL_ALGO=" + c.opts.Algo + ", but not every rank can read every other: ring"
	case c.opts.Algo != "":
		return "XCCL_ALGO=" + c.opts.Algo
	case a == algoDirect:
		return fmt.Sprintf("%d bytes <= %d: one step, latency bound", bytes, c.directMax())
	}
	return fmt.Sprintf("%d bytes > %d: bandwidth bound, each rank moves 2(n-1)/n of the buffer", bytes, c.directMax())
}

// Algorithms is the host device's decision table (XcclGetAlgorithms,
// xcclrun --probe).
func (d *Device) Algorithms() string { return DecisionTable() }

// DecisionTable describes the automatic choices.
func DecisionTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "host all_reduce: direct up to %d bytes (2 ranks) or %d (more; with fast boxes between every pair %d, or the box size), ring reduce-scatter + all-gather above\n",
		directMaxBytes2, directMaxBytes, boxedDirectMax2)
	b.WriteString("  (XCCL_ALGO=direct|ring|cma forces one; cma: single copy, where every rank reads every other)\n")
	fmt.Fprintf(&b, "host all_gather, broadcast: single copy from %d bytes to below %d, reduce_scatter and reduce to below %d, when every rank is a process of one machine\n",
		cmaMinBytes, cmaMaxGather, cmaMaxReduce)
	b.WriteString("  that can read the others' memory (process_vm_readv; XCCL_CMA=0 turns it off); else ring (broadcast: binomial tree)\n")
	fmt.Fprintf(&b, "host, when every rank's buffers lie in device allocations of %d bytes or more (shared memory the peers map): single copy at every size from %d bytes (2 ranks) or %d (more), all_reduce too from %d bytes (2 ranks) or %d (more; rank r reduces chunk r and writes it to everyone)\n",
		sharedMin, sharedOthersMin, cmaMinBytes, sharedReduceMin, cmaAllReduceMin)
	b.WriteString("host all_reduce of float16/bfloat16: widened to float32, reduced, rounded once\n")
	fmt.Fprintf(&b, "host all_reduce_fused and grouped small all-reduces: one call for the batch; from %d bytes in all, where every rank's buffers lie in shared device allocations (2 ranks, or up to %d with a CPU each), single copy (rank r reduces chunk r from every rank's buffers and writes it to everyone); else in the fast boxes where the batch fits one, else packed into one buffer and all-reduced as above by total size\n",
		sharedReduceMin, roomyRanks)
	fmt.Fprintf(&b, "host all_gather, reduce_scatter, broadcast, reduce: one round (fingerprint and data together) while a rank sends at most %d bytes in all\n", directOthersMax)
	b.WriteString("host reduce: binomial tree above that (or single copy, as above)\n")
	b.WriteString("host all_to_all: every pair at once\n")
	b.WriteString("host transport: shared memory between ranks of one machine; across machines UCX when libucp.so.0 loads (RDMA where the fabric has it), else TCP (XCCL_TRANSPORT, XCCL_UCX_LIBRARY)\n")
	return b.String()
}
