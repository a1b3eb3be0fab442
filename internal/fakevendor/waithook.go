package fakevendor

// -rdynamic puts xcclFakeWaitHook in the dynamic symbols of every test
// binary that builds the fakes, where they find it (dlsym RTLD_DEFAULT).

/*
#cgo LDFLAGS: -rdynamic
*/
import "C"

import (
	"math"
	"runtime/metrics"
	"sync/atomic"
)

var waitHookCalls, joins, joinsCollectorOn atomic.Uint64

// xcclFakeWaitHook is what the fake libraries call from their waits every
// millisecond or so: coming into Go lets a stop-the-world that missed the
// waiting thread's cgo call take its P (fake_common.h's fake_pause says
// how it was missed); without it, ranks that are goroutines of this process
// waited for each other until the fake's 60 s timeout.
//
//export xcclFakeWaitHook
func xcclFakeWaitHook() { waitHookCalls.Add(1) }

// WaitHookCalls counts the fakes' calls of the hook in this process.
func WaitHookCalls() uint64 { return waitHookCalls.Load() }

// xcclFakeJoinHook is what the fakes call as a rank joins a communicator
// (its CommInitRank's wait for the other ranks): it notes whether Go's
// collector was held off there, as vendor.Joining does for every vendor's
// join.
//
//export xcclFakeJoinHook
func xcclFakeJoinHook() {
	joins.Add(1)
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}} // read without setting it
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() != math.MaxUint64 { // GOGC=off reads as -1
		joinsCollectorOn.Add(1)
	}
}

// Joins counts the ranks that joined a fake's communicator in this
// process, and of them those that joined with Go's collector on.
func Joins() (all, collectorOn uint64) { return joins.Load(), joinsCollectorOn.Load() }
