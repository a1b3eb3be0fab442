package vendor

import (
	"math"
	"runtime/debug"
	"sync"
)

// joining counts the vendor joins in flight (Joining) and keeps the
// collector's setting from before the first.
var joining struct {
	sync.Mutex
	n       int
	percent int
	limit   int64
}

// Joining runs join, a vendor call that returns only once every rank of a
// new communicator has joined (ncclCommInitRank, HcclCommInitRootInfo,
// cnclInitComms, bkcl_init_rank), and returns its communicator handle and
// return code, with Go's collector held off from before the first such
// call of the process until after the last.
//
// Go's stop-the-world (1.26, 1.27) can miss a goroutine that enters a cgo
// call just as the stop begins: the goroutine checks for a pending stop
// before it marks itself in a syscall, and the stop takes the Ps of
// syscalling goroutines in one pass only. The stop then waits for that C
// call to return, with every other goroutine stopped. Where the call waits
// for another goroutine of this process (XcclCommInitAll's ranks, inits and
// splits deferred to XcclGroupEnd, an application's threads each joining a
// rank of one communicator) that had not yet entered its own call, nothing
// moves until the vendor's timeout. The collector is what stops the world
// in this library; with it off (SetGCPercent(-1) also waits for a cycle
// under way to finish its marking) none comes while a join waits. A memory
// limit (GOMEMLIMIT) starts cycles even so: it is lifted too. Both come
// back as they were (GOGC, GOMEMLIMIT), unless set again meanwhile. The
// cost: nothing is collected for as long as a join waits (for the slowest
// rank, up to the vendor's own timeout), so the process's Go heap grows
// with what is allocated meanwhile.
//
// Vendor collectives need none of this: they are queued on a stream and
// return without waiting for a peer.
func Joining(join func() (uintptr, int)) (uintptr, int) {
	joining.Lock()
	if joining.n == 0 {
		joining.limit = debug.SetMemoryLimit(math.MaxInt64) // first: no cycle from the limit after the next line's wait
		joining.percent = debug.SetGCPercent(-1)
	}
	joining.n++
	joining.Unlock()
	defer func() {
		joining.Lock()
		if joining.n--; joining.n == 0 {
			if now := debug.SetGCPercent(joining.percent); now != -1 {
				debug.SetGCPercent(now) // set again meanwhile (SetGCPercent elsewhere): that one stays
			}
			if now := debug.SetMemoryLimit(joining.limit); now != math.MaxInt64 {
				debug.SetMemoryLimit(now) // likewise
			}
		}
		joining.Unlock()
	}()
	return join()
}
