// Package fakecheck holds checks the vendor tests run against the fake
// vendor libraries.
package fakecheck

import (
	"testing"
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/dl"
	"github.com/xccl-project/xccl/internal/conformance"
	rt "github.com/xccl-project/xccl/runtime"
)

// CheckStream asserts that the stream a caller passes to a collective is
// the stream the fake vendor library (at path lib) was handed.
func CheckStream(t *testing.T, dev rt.Device, lib string) {
	t.Helper()
	comms := conformance.Comms(t, dev, 1)
	s, err := dev.CreateStream()
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	defer dev.DestroyStream(s)
	v := []float32{1, 2}
	if err := comms[0].AllReduce(unsafe.Pointer(&v[0]), unsafe.Pointer(&v[0]), 2, rt.Float32, rt.Max, s); err != nil {
		t.Fatalf("AllReduce on a stream: %v", err)
	}
	if err := dev.SynchronizeStream(s); err != nil {
		t.Fatalf("SynchronizeStream: %v", err)
	}
	l, err := dl.Open("", lib)
	if err != nil {
		t.Fatal(err)
	}
	last, _, err := l.Sym("fakeLastStream")
	if err != nil {
		t.Fatal(err)
	}
	if got := dl.Call0(last); got != uintptr(s) {
		t.Fatalf("the vendor got stream %#x, the caller passed %#x", got, uintptr(s))
	}
}
