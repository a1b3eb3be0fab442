package host

import (
	"fmt"
	"strings"
)

// Algorithm choice. All-reduce: "direct" (every rank sends its whole buffer
// to every other and reduces all contributions in rank order: one step,
// best for small messages) or "ring" (reduce-scatter then all-gather around
// the ring: each rank moves 2(n-1)/n of the buffer, best for large ones).
// XCCL_ALGO=direct|ring forces one.

type algo int

const (
	algoDirect algo = iota
	algoRing
)

func (a algo) String() string { return [...]string{"direct", "ring"}[a] }

// directMaxBytes is the largest all-reduce sent to every peer whole.
const directMaxBytes = 32 << 10

func (c *Comm) allReduceAlgo(bytes int) algo {
	switch c.opts.Algo {
	case "direct":
		return algoDirect
	case "ring":
		return algoRing
	}
	if bytes <= directMaxBytes {
		return algoDirect
	}
	return algoRing
}

// DecisionTable describes the automatic choices, for XCCL_DEBUG=INFO and tools.
func DecisionTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "allreduce: direct up to %d bytes, ring above (XCCL_ALGO=direct|ring forces one)\n", directMaxBytes)
	b.WriteString("reduce: binomial tree; broadcast: binomial tree\n")
	b.WriteString("allgather, reducescatter: ring; alltoall: all pairs at once\n")
	return b.String()
}
