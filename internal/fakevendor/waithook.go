package fakevendor

// -rdynamic puts xcclFakeWaitHook in the dynamic symbols of every test
// binary that builds the fakes, where they find it (dlsym RTLD_DEFAULT).

/*
#cgo LDFLAGS: -rdynamic
*/
import "C"

import "sync/atomic"

var waitHookCalls atomic.Uint64

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
