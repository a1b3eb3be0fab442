package vendor

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// collector is the collector's GOGC percent (-1: off).
func collector() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

var garbage []byte

// A join runs with the collector off (no cycle starts however much is
// allocated), which comes back as it was, after a panic too.
func TestJoiningHoldsTheCollectorOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	var before, after runtime.MemStats
	comm, rc := Joining(func() (uintptr, int) {
		require.Equal(t, -1, collector())
		runtime.ReadMemStats(&before)
		for i := 0; i < 64; i++ {
			garbage = make([]byte, 1<<20)
		}
		runtime.ReadMemStats(&after)
		return 0xc0, 7
	})
	require.Equal(t, uintptr(0xc0), comm, "the vendor's handle")
	require.Equal(t, 7, rc, "the vendor's return code")
	garbage = nil
	require.Equal(t, before.NumGC, after.NumGC, "a collection ran during a join")
	require.Equal(t, 77, collector())
	func() {
		defer func() { require.NotNil(t, recover()) }()
		Joining(func() (uintptr, int) { panic("the vendor call panicked") })
	}()
	require.Equal(t, 77, collector())
	Joining(func() (uintptr, int) { debug.SetGCPercent(33); return 0, 0 }) // set again during a join: that one stays
	require.Equal(t, 33, collector())
}

// Joins that overlap (ranks of one process joining on threads of their
// own) keep it off until the last has returned.
func TestOverlappingJoinsKeepTheCollectorOffUntilTheLast(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	firstIn, secondIn, firstOut, done := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan int)
	go Joining(func() (uintptr, int) {
		close(firstIn)
		<-secondIn
		return 0, 0
	})
	<-firstIn
	go func() {
		Joining(func() (uintptr, int) {
			close(secondIn)
			<-firstOut
			done <- collector()
			return 0, 0
		})
		done <- collector()
	}()
	<-secondIn
	for joined := true; joined; { // until the first has left
		joining.Lock()
		joined = joining.n == 2
		joining.Unlock()
		runtime.Gosched()
	}
	close(firstOut)
	require.Equal(t, -1, <-done, "the collector came back while a join still waited")
	require.Equal(t, 50, <-done)
}

// limit is the memory limit (GOMEMLIMIT) now.
func limit() int64 { return debug.SetMemoryLimit(-1) }

// A memory limit starts cycles with GOGC off: a join lifts it, and it comes
// back as it was, unless set again during the join.
func TestJoiningLiftsTheMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
	var before, after runtime.MemStats
	Joining(func() (uintptr, int) {
		require.Equal(t, int64(math.MaxInt64), limit())
		runtime.ReadMemStats(&before)
		for i := 0; i < 256; i++ { // 4 times the limit, kept: a limit would collect
			garbage = make([]byte, 1<<20)
		}
		runtime.ReadMemStats(&after)
		return 0, 0
	})
	garbage = nil
	require.Equal(t, before.NumGC, after.NumGC, "a collection ran during a join")
	require.Equal(t, int64(64<<20), limit())
	Joining(func() (uintptr, int) { debug.SetMemoryLimit(96 << 20); return 0, 0 })
	require.Equal(t, int64(96<<20), limit())
}
