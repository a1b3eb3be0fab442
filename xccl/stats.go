package xccl

import (
	"encoding/json"
	"math/bits"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	rt "github.com/xccl-project/xccl/runtime"
)

// Statistics per communicator: calls, bytes, errors and a latency histogram
// per operation kind, fused calls, and what the device reports about its
// own choices (algorithms, fallbacks). Off by default (XCCL_STATS=1 or
// EnableStats turns them on): when off a call pays one atomic load.
//
// Latency is the time the call took to return: for work on the NULL stream
// that is the whole operation, for a stream only the enqueue.

// latencyBuckets: bucket k counts calls that took less than 2^k µs (the
// last one everything slower).
const latencyBuckets = 24

type opStats struct {
	calls, errors, bytes, nanos atomic.Uint64
	hist                        [latencyBuckets]atomic.Uint64
}

type stats struct {
	on           atomic.Bool
	ops          [rt.OpAllToAll + 1]opStats
	fusedCalls   atomic.Uint64 // AllReduceFused calls
	fusedTensors atomic.Uint64 // buffers they carried
	groupFused   atomic.Uint64 // all-reduces merged inside groups
}

func (s *stats) record(op *rt.Op, start time.Time, err error) {
	d := uint64(time.Since(start))
	s.queued(op)
	o := &s.ops[op.Kind]
	o.nanos.Add(d)
	if err != nil {
		o.errors.Add(1)
	}
	k := min(bits.Len64(d/1000), latencyBuckets-1)
	o.hist[k].Add(1)
}

// queued counts a call and its bytes (alone: a call queued in a group,
// whose latency is the group's).
func (s *stats) queued(op *rt.Op) {
	o := &s.ops[op.Kind]
	o.calls.Add(1)
	o.bytes.Add(uint64(opBytes(op)))
}

// opBytes is the size of the call's data: its buffer, or the whole of the
// gathered/scattered buffer.
func opBytes(op *rt.Op) int {
	if op.Kind == rt.OpAllToAll {
		n := 0
		for i, c := range op.SendCounts {
			n += c * op.SendTypes[i].Size()
		}
		return n
	}
	n := op.Count * op.Type.Size()
	if op.Kind == rt.OpAllGather || op.Kind == rt.OpReduceScatter {
		n *= op.Comm.Size()
	}
	return n
}

// EnableStats turns statistics on or off for this communicator.
func (c *Comm) EnableStats(on bool) {
	if on { // every call is timed in Go from now on: no C fast path (FastPath)
		c.stopFastPath()
	}
	c.st.on.Store(on)
}

// OpStats are the statistics of one operation kind.
type OpStats struct {
	Calls   uint64            `json:"calls"`
	Errors  uint64            `json:"errors,omitempty"`
	Bytes   uint64            `json:"bytes"`
	TotalUs float64           `json:"total_us"`
	Latency map[string]uint64 `json:"latency_us,omitempty"` // "<4": calls under 4 µs
}

// Stats is a snapshot of a communicator's statistics.
type Stats struct {
	Device  string             `json:"device"`
	Rank    int                `json:"rank"`
	Ranks   int                `json:"nranks"`
	Enabled bool               `json:"enabled"`
	Ops     map[string]OpStats `json:"ops"`
	Fused   map[string]uint64  `json:"fusion"`
	// Engine is what the device counts itself (host: algorithms chosen,
	// fallbacks taken); empty for devices that count nothing.
	Engine map[string]uint64 `json:"engine,omitempty"`
}

// Stats returns a snapshot.
func (c *Comm) Stats() Stats {
	s := Stats{Device: c.dev.Name(), Rank: c.Rank(), Ranks: c.Size(), Enabled: c.st.on.Load(),
		Ops: map[string]OpStats{}, Fused: map[string]uint64{
			"fused_calls": c.st.fusedCalls.Load(), "fused_buffers": c.st.fusedTensors.Load(),
			"group_allreduces_fused": c.st.groupFused.Load()}}
	for k := range c.st.ops {
		o := &c.st.ops[k]
		calls := o.calls.Load()
		if calls == 0 {
			continue
		}
		os := OpStats{Calls: calls, Errors: o.errors.Load(), Bytes: o.bytes.Load(),
			TotalUs: float64(o.nanos.Load()) / 1e3, Latency: map[string]uint64{}}
		for b := range o.hist {
			if v := o.hist[b].Load(); v > 0 {
				label := "<" + strconv.Itoa(1<<b)
				if b == latencyBuckets-1 {
					label = ">=" + strconv.Itoa(1<<(b-1))
				}
				os.Latency[label] = v
			}
		}
		s.Ops[rt.OpKind(k).String()] = os
	}
	if e, ok := c.c.(interface{ EngineStats() map[string]uint64 }); ok {
		s.Engine = e.EngineStats()
	}
	return s
}

// StatsJSON is Stats as one line of JSON.
func (c *Comm) StatsJSON() string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c.Stats()) // maps of strings and numbers: cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}
