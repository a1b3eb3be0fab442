package host

// What the engine counts about itself for xccl's per-communicator
// statistics: the algorithm each collective took and the fallbacks taken.
// One uncontended atomic add per collective.

type stat int

const (
	statAllReduceDirect stat = iota
	statAllReduceRing
	statAllReduceCMA
	statSingleCopy
	statDirect
	statHalfWidened
	statBroadcastTree
	statReduceTree
	statAllGatherRing
	statReduceScatterRing
	statAllToAllPairs
	statFusedBatches
	statFusedBuffers
	statSendCopied
	statTCPFallback
	statAddrRounds
	statSleeps
	statLateWakes
	statFastResumed
	statSharedCPU
	statMovedOff
	numStats
)

var statNames = [numStats]string{
	"allreduce.direct", "allreduce.ring", "allreduce.single_copy", "allgather_reducescatter_broadcast.single_copy", "allgather_reducescatter_broadcast_reduce.direct", "half.widened_to_float32", "broadcast.tree", "reduce.tree",
	"allgather.ring", "reducescatter.ring", "alltoall.pairs", "fusion.batches", "fusion.buffers",
	"fallback.p2p_send_copied", "fallback.tcp_instead_of_shm", "single_copy.address_rounds",
	"wait.sleeps", "wait.late_wakes", "wait.fast_path_resumed", "wait.peer_on_this_cpu", "wait.moved_off_peer_cpu",
}

func (c *Comm) count(s stat, n uint64) { c.stats[s].Add(n) }

// EngineStats reports the non-zero counters by name.
func (c *Comm) EngineStats() map[string]uint64 {
	m := map[string]uint64{}
	c.fxMu.Lock() // Destroy moves the C path's counts into stats under it (fastFree)
	defer c.fxMu.Unlock()
	fast := c.fastCallsLocked() // the C fast path's (fastpath.go)
	for i := range c.stats {
		v := c.stats[i].Load() + fast[stat(i)]
		if v > 0 {
			m[statNames[i]] = v
		}
	}
	return m
}
