package host

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// rssBytes is the resident set after a GC that returns freed memory.
func rssBytes(t *testing.T) int {
	runtime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	pages, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return pages * os.Getpagesize()
}

// shmMappings counts this process's mappings of xccl segments.
func shmMappings(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Count(string(b), "/dev/shm/xccl-")
}

// TestSoak: mixed collectives × 4 goroutine-ranks on communicators that are
// made and destroyed in turn; results are checked, and goroutines and open
// files return to where they started. XCCL_SOAK_OPS sets the op count
// (make soak: 10000); the default keeps CI short.
func TestSoak(t *testing.T) { soak(t, "auto") }

// TestSoakOverTCP: the same over TCP links, whose rings carry every
// fingerprint too (no fast boxes), and which a large all-reduce leaves full
// in front of the next call's fingerprint and data.
func TestSoakOverTCP(t *testing.T) { soak(t, "tcp") }

func soak(t *testing.T, transport string) {
	total := 600
	if testing.Short() {
		total = 200
	}
	if v, err := strconv.Atoi(os.Getenv("XCCL_SOAK_OPS")); err == nil && v > 0 {
		total = v
	}
	o := opts(60 * time.Second)
	o.Transport = transport
	const n, rounds = 4, 3
	WaitUCXWorkers() // UCP workers of earlier tests finish in the background
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	done, rss := 0, 0
	for round := 0; round < rounds; round++ {
		if round == 1 { // after one round: the heap and caches have their working size
			rss = rssBytes(t)
		}
		r, err := StartRoot(30 * time.Second)
		require.NoError(t, err)
		comms, errs := join(r.ID, n, seq(n), o)
		for _, e := range errs {
			require.NoError(t, e)
		}
		ops := (total + rounds - 1) / rounds
		var wg sync.WaitGroup
		failures := make([]error, n)
		for i, c := range comms {
			wg.Add(1)
			go func(i int, c *Comm) {
				defer wg.Done()
				failures[i] = soakRank(c, i, n, ops)
			}(i, c)
		}
		wg.Wait()
		for i, err := range failures {
			require.NoError(t, err, "rank %d", i)
		}
		destroyAll(comms)
		done += ops
	}
	t.Logf("%d collectives × %d ranks", done, n)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutines leaked")
	// Fewer is fine: earlier tests' roots may time out and close meanwhile.
	require.LessOrEqual(t, openFDs(t), fds, "file descriptors leaked")
	require.Zero(t, shmMappings(t), "shared-memory segments still mapped")
	// Two more rounds of communicators (4 segments of 2 rings each) came and
	// went: the resident set may wobble, but not grow by a round's worth.
	after := rssBytes(t)
	t.Logf("resident set after round 1: %d KiB, at the end: %d KiB", rss>>10, after>>10)
	require.Less(t, after, rss+16<<20, "resident memory grew")
}

// soakRank runs ops mixed collectives as rank i of n and checks a result of
// each kind it can predict.
func soakRank(c *Comm, i, n, ops int) error {
	big := make([]float32, 70001)
	small := make([]int32, 7*n)
	out := make([]int32, 7*n)
	tri := float32(n * (n + 1) / 2)
	for k := 0; k < ops; k++ {
		var op rt.Op
		switch k % 6 {
		case 0: // large all-reduce (ring)
			for j := range big {
				big[j] = float32(i + 1)
			}
			op = rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&big[0]), Recv: unsafe.Pointer(&big[0]), Count: len(big), Type: rt.Float32, Red: rt.Sum}
		case 1: // small all-reduce (direct)
			for j := range small {
				small[j] = int32(i)
			}
			op = rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(&small[0]), Recv: unsafe.Pointer(&out[0]), Count: 7, Type: rt.Int32, Red: rt.Max}
		case 2:
			op = rt.Op{Kind: rt.OpBroadcast, Send: unsafe.Pointer(&small[0]), Recv: unsafe.Pointer(&small[0]), Count: 7, Type: rt.Int32, Root: k % n}
		case 3:
			op = rt.Op{Kind: rt.OpAllGather, Send: unsafe.Pointer(&small[0]), Recv: unsafe.Pointer(&out[0]), Count: 7, Type: rt.Int32}
		case 4:
			op = rt.Op{Kind: rt.OpReduceScatter, Send: unsafe.Pointer(&small[0]), Recv: unsafe.Pointer(&out[0]), Count: 7, Type: rt.Int32, Red: rt.Sum}
		case 5: // a send/recv ring
			if err := c.exec(&rt.Op{Kind: rt.OpSend, Send: unsafe.Pointer(&small[0]), Count: 7, Type: rt.Int32, Root: (i + 1) % n}); err != nil {
				return err
			}
			op = rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&out[0]), Count: 7, Type: rt.Int32, Root: (i + n - 1) % n}
		}
		if err := c.exec(&op); err != nil {
			return err
		}
		switch k % 6 {
		case 0:
			if big[0] != tri || big[len(big)-1] != tri {
				return rt.Failedf("op %d: all-reduce gave %v, want %v", k, big[0], tri)
			}
		case 1:
			if out[0] != int32(n-1) {
				return rt.Failedf("op %d: max gave %d, want %d", k, out[0], n-1)
			}
		}
	}
	return nil
}
