// Package fakecheck holds checks the vendor tests run against the fake
// vendor libraries.
package fakecheck

import (
	"testing"
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/dl"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
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
	if got := Hook(t, lib, "fakeLastStream")(); got != uintptr(s) {
		t.Fatalf("the vendor got stream %#x, the caller passed %#x", got, uintptr(s))
	}
}

// CheckJoins asserts that three goroutine-ranks joining one communicator
// of dev, and every rank that joined a fake's communicator in this test
// binary so far, did so with Go's collector held off (vendor.Joining).
func CheckJoins(t *testing.T, dev rt.Device) {
	t.Helper()
	before, _ := fakevendor.Joins()
	conformance.Comms(t, dev, 3)
	all, on := fakevendor.Joins()
	if all < before+3 {
		t.Fatalf("the fake saw %d joins of 3 ranks (its join hook is not reached)", all-before)
	}
	if on != 0 {
		t.Fatalf("%d of %d ranks joined a communicator with Go's collector on", on, all)
	}
}

// Hook is the fake vendor library's (at path lib) test hook name, a C
// function of no argument: a counter, the last value it was handed.
func Hook(t *testing.T, lib, name string) func() uintptr {
	t.Helper()
	l, err := dl.Open("", lib)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := l.Sym(name)
	if err != nil {
		t.Fatal(err)
	}
	return func() uintptr { return dl.Call0(f) }
}

// CheckRuntime drives every runtime entry of a vendor device once against
// the fake runtime (whose device memory is host memory): device binding,
// streams, events, device and pinned host memory, copies both ways in
// stream order and synchronously, memset, memory statistics and a host
// callback.
func CheckRuntime(t *testing.T, dev rt.Device) {
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if dev.DeviceCount() < 1 {
		t.Fatalf("DeviceCount = %d", dev.DeviceCount())
	}
	must("SetDevice", dev.SetDevice(1))
	if id, err := dev.GetDevice(); err != nil || id != 1 {
		t.Fatalf("GetDevice = %d, %v; want 1", id, err)
	}
	must("SetDevice", dev.SetDevice(0))
	must("SynchronizeDevice", dev.SynchronizeDevice(0))

	s, err := dev.CreateStream()
	must("CreateStream", err)
	defer func() { must("DestroyStream", dev.DestroyStream(s)) }()
	const n = 64
	d, err := dev.MemAlloc(0, n)
	must("MemAlloc", err)
	h, err := dev.HostAlloc(n)
	must("HostAlloc", err)
	hb := unsafe.Slice((*byte)(h), n)
	for i := range hb {
		hb[i] = byte(i)
	}
	must("Memcpy H2D", dev.Memcpy(0, d, h, n, rt.HostToDevice, s))
	must("Memset", dev.Memset(0, unsafe.Add(d, n/2), 0xab, n/2, s))
	e, err := dev.CreateEvent()
	must("CreateEvent", err)
	must("RecordEvent", dev.RecordEvent(e, s))
	must("StreamWaitEvent", dev.StreamWaitEvent(0, e))
	must("SynchronizeEvent", dev.SynchronizeEvent(e))
	must("QueryEvent", dev.QueryEvent(e))
	must("DestroyEvent", dev.DestroyEvent(e))
	out := make([]byte, n)
	must("Memcpy D2H", dev.Memcpy(0, unsafe.Pointer(&out[0]), d, n, rt.DeviceToHost, 0))
	for i, b := range out {
		want := byte(i)
		if i >= n/2 {
			want = 0xab
		}
		if b != want {
			t.Fatalf("byte %d after copy and memset = %#x, want %#x", i, b, want)
		}
	}
	must("Memcpy D2D", dev.Memcpy(0, d, unsafe.Pointer(&out[n/2]), n/2, rt.DeviceToDevice, s))
	done := make(chan error, 1)
	must("AddCallback", dev.AddCallback(s, func(err error) { done <- err }))
	must("callback", <-done)
	must("SynchronizeStream", dev.SynchronizeStream(s))
	must("QueryStream", dev.QueryStream(s))
	if total, free, err := dev.MemStats(0); err != nil || total == 0 || free > total {
		t.Fatalf("MemStats = %d total, %d free, %v", total, free, err)
	}
	must("HostFree", dev.HostFree(h, n))
	must("MemFree", dev.MemFree(0, d, n))
}

// Suite runs what every NCCL-shaped vendor's test runs through its fakes:
// the conformance suite on 1, 2 and 4 ranks (counts 0, 1, 7, 4099; 0 and 7
// with -short), then CheckStream against the fake CCL library at cclLib
// and CheckRuntime.
func Suite(t *testing.T, dev rt.Device, cclLib string) {
	t.Helper()
	counts := []int{0, 1, 7, 4099}
	if testing.Short() {
		counts = []int{0, 7}
	}
	conformance.Run(t, dev, conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true})
	CheckStream(t, dev, cclLib)
	CheckRuntime(t, dev)
}
