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
// Between processes of one machine that can read each other's memory, the
// large collectives copy once ("single-copy", cma.go). XCCL_ALGO=direct|ring|cma
// forces one. XCCL_DEBUG=INFO logs each choice the
// first time a communicator makes it, with the reason.

type algo int

const (
	algoDirect algo = iota
	algoRing
	algoCMA
	numAlgos
)

func (a algo) String() string { return [...]string{"direct", "ring", "single-copy"}[a] }

// cmaMinBytes: from this size on, collectives among processes of one
// machine read their peers' buffers directly (cma.go), when all can.
const cmaMinBytes = 64 << 10

// useCMA says whether a collective of this many bytes reads peers directly.
func (c *Comm) useCMA(bytes int) bool {
	switch c.opts.Algo {
	case "direct", "ring":
		return false
	case "cma", "single-copy":
		return c.cma
	}
	return c.cma && bytes >= cmaMinBytes
}

// directMaxBytes is the largest all-reduce sent to every peer whole.
const directMaxBytes = 32 << 10

func (c *Comm) allReduceAlgo(bytes int) algo {
	a := c.chooseAllReduce(bytes)
	if !c.logged[a] {
		c.logged[a] = true
		c.log.Info("all-reduce algorithm chosen", zap.String("algo", a.String()), zap.Int("bytes", bytes),
			zap.String("why", c.why(a, bytes)))
	}
	return a
}

func (c *Comm) chooseAllReduce(bytes int) algo {
	switch c.opts.Algo {
	case "direct":
		return algoDirect
	case "ring":
		return algoRing
	case "cma", "single-copy":
		if c.cma {
			return algoCMA
		}
		return algoRing
	}
	if bytes <= directMaxBytes {
		return algoDirect
	}
	if c.useCMA(bytes) {
		return algoCMA
	}
	return algoRing
}

// why explains a choice of chooseAllReduce (for the log, once per algorithm).
func (c *Comm) why(a algo, bytes int) string {
	switch {
	case c.opts.Algo != "" && a == algoRing && !c.cma && (c.opts.Algo == "cma" || c.opts.Algo == "single-copy"):
		return "XCCL_ALGO=" + c.opts.Algo + ", but not every rank can read every other: ring"
	case c.opts.Algo != "":
		return "XCCL_ALGO=" + c.opts.Algo
	case a == algoDirect:
		return fmt.Sprintf("%d bytes <= %d: one step, latency bound", bytes, directMaxBytes)
	case a == algoCMA:
		return fmt.Sprintf("%d bytes > %d, every rank on this machine can read every other: single copy", bytes, directMaxBytes)
	}
	return fmt.Sprintf("%d bytes > %d: bandwidth bound, each rank moves 2(n-1)/n of the buffer", bytes, directMaxBytes)
}

// Algorithms is the host device's decision table (XcclGetAlgorithms,
// xcclrun --probe).
func (d *Device) Algorithms() string { return DecisionTable() }

// DecisionTable describes the automatic choices.
func DecisionTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "host all_reduce: direct up to %d bytes; above, single copy when every rank is a process of one machine\n", directMaxBytes)
	b.WriteString("  that can read the others' memory (process_vm_readv; XCCL_CMA=0 turns it off), else ring reduce-scatter + all-gather\n")
	b.WriteString("  (XCCL_ALGO=direct|ring|cma forces one)\n")
	fmt.Fprintf(&b, "host all_gather, reduce_scatter, broadcast: single copy from %d bytes where available (as above), else ring (broadcast: binomial tree)\n", cmaMinBytes)
	b.WriteString("host all_reduce of float16/bfloat16: widened to float32, reduced, rounded once\n")
	b.WriteString("host all_reduce_fused and grouped small all-reduces: packed into one buffer, then as above by total size\n")
	b.WriteString("host reduce: binomial tree\n")
	b.WriteString("host all_to_all: every pair at once\n")
	b.WriteString("host transport: shared memory between ranks of one machine, TCP across machines (XCCL_TRANSPORT)\n")
	return b.String()
}
