package host

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
)

// Algorithm choice. All-reduce: "direct" (every rank sends its whole buffer
// to every other and reduces all contributions in rank order: one step,
// best for small messages) or "ring" (reduce-scatter then all-gather around
// the ring: each rank moves 2(n-1)/n of the buffer, best for large ones).
// XCCL_ALGO=direct|ring forces one. XCCL_DEBUG=INFO logs each choice the
// first time a communicator makes it, with the reason.

type algo int

const (
	algoDirect algo = iota
	algoRing
	numAlgos
)

func (a algo) String() string { return [...]string{"direct", "ring"}[a] }

// directMaxBytes is the largest all-reduce sent to every peer whole.
const directMaxBytes = 32 << 10

func (c *Comm) allReduceAlgo(bytes int) algo {
	a, why := c.chooseAllReduce(bytes)
	if !c.logged[a] {
		c.logged[a] = true
		c.log.Info("all-reduce algorithm chosen", zap.String("algo", a.String()), zap.Int("bytes", bytes), zap.String("why", why))
	}
	return a
}

func (c *Comm) chooseAllReduce(bytes int) (algo, string) {
	switch c.opts.Algo {
	case "direct":
		return algoDirect, "XCCL_ALGO=direct"
	case "ring":
		return algoRing, "XCCL_ALGO=ring"
	}
	if bytes <= directMaxBytes {
		return algoDirect, fmt.Sprintf("%d bytes <= %d: one step, latency bound", bytes, directMaxBytes)
	}
	return algoRing, fmt.Sprintf("%d bytes > %d: bandwidth bound, each rank moves 2(n-1)/n of the buffer", bytes, directMaxBytes)
}

// Algorithms is the host device's decision table (XcclGetAlgorithms,
// xcclrun --probe).
func (d *Device) Algorithms() string { return DecisionTable() }

// DecisionTable describes the automatic choices.
func DecisionTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "host all_reduce: direct up to %d bytes, ring reduce-scatter + all-gather above (XCCL_ALGO=direct|ring forces one)\n", directMaxBytes)
	b.WriteString("host all_reduce of float16/bfloat16: widened to float32, reduced, rounded once\n")
	b.WriteString("host all_reduce_fused and grouped small all-reduces: packed into one buffer, then as above by total size\n")
	b.WriteString("host reduce, broadcast: binomial tree\n")
	b.WriteString("host all_gather, reduce_scatter: ring\n")
	b.WriteString("host all_to_all: every pair at once\n")
	b.WriteString("host transport: shared memory between ranks of one machine, TCP across machines (XCCL_TRANSPORT)\n")
	return b.String()
}
