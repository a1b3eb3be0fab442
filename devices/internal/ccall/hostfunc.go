package ccall

// #include <stdint.h>
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// xcclNcclHostFunc is the host function every callback enqueued with
// cudaLaunchHostFunc/hipLaunchHostFunc runs: its user data is a cgo.Handle.
//
//export xcclNcclHostFunc
func xcclNcclHostFunc(p unsafe.Pointer) {
	h := cgo.Handle(uintptr(p))
	cb := h.Value().(func())
	h.Delete()
	cb()
}
