package host

/*
#include <stdlib.h>
*/
import "C"

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	rt "github.com/xccl-project/xccl/runtime"
)

// Host "device memory" is C heap memory (C callers keep these pointers, so
// it cannot be Go memory), aligned to minChunk. From hugeMin on it is
// aligned to 2 MiB and advised to be backed by transparent huge pages
// (where the kernel offers them on request): fewer TLB misses in the large
// copies and reductions, and single-copy reads (process_vm_readv) that pin
// a peer's pages 512 at a time instead of one by one.
const (
	minChunk = 256
	hugeMin  = 2 << 20
)

var allocated atomic.Int64

func (d *Device) checkDev(dev int) error {
	if dev < 0 || dev >= d.DeviceCount() {
		return rt.Errorf("host: device %d out of range [0, %d)", dev, d.DeviceCount())
	}
	return nil
}

// MemAlloc allocates size bytes, aligned to 256.
func (d *Device) MemAlloc(dev, size int) (unsafe.Pointer, error) {
	if err := d.checkDev(dev); err != nil {
		return nil, err
	}
	return hostAlloc(size)
}

func hostAlloc(size int) (unsafe.Pointer, error) {
	if size < 0 {
		return nil, rt.Errorf("host: allocation of %d bytes", size)
	}
	n, align := chunkOf(size), minChunk
	if n >= hugeMin {
		align = hugeMin
	}
	p := C.aligned_alloc(C.size_t(align), C.size_t(n))
	if p == nil {
		return nil, rt.Failedf("host: out of memory allocating %d bytes", size)
	}
	if align == hugeMin {
		if unix.Madvise(unsafe.Slice((*byte)(p), n), unix.MADV_HUGEPAGE) == nil {
			hugeAllocs.add(uintptr(p), n)
		}
	}
	allocated.Add(int64(n))
	return p, nil
}

// chunkOf is what hostAlloc reserves for size bytes: whole minChunks, and
// whole huge pages from hugeMin on.
func chunkOf(size int) int {
	n := (max(size, 1) + minChunk - 1) &^ (minChunk - 1)
	if n >= hugeMin {
		n = (n + hugeMin - 1) &^ (hugeMin - 1)
	}
	return n
}

func hostFree(p unsafe.Pointer, size int) {
	if p == nil {
		return
	}
	allocated.Add(-int64(chunkOf(size)))
	hugeAllocs.remove(uintptr(p))
	C.free(p)
}

// MemFree frees memory from MemAlloc (size is the size asked for).
func (d *Device) MemFree(dev int, p unsafe.Pointer, size int) error {
	if err := d.checkDev(dev); err != nil {
		return err
	}
	hostFree(p, size)
	return nil
}

// HostAlloc allocates host memory (pinned memory, on other devices).
func (d *Device) HostAlloc(size int) (unsafe.Pointer, error) { return hostAlloc(size) }

// HostFree frees memory from HostAlloc.
func (d *Device) HostFree(p unsafe.Pointer, size int) error { hostFree(p, size); return nil }

// Memset fills size bytes at p with value, in stream order.
func (d *Device) Memset(dev int, p unsafe.Pointer, value byte, size int, s rt.Stream) error {
	if err := d.checkDev(dev); err != nil {
		return err
	}
	return d.submit(s, func() error {
		b := bytesAt(p, size)
		for i := range b {
			b[i] = value
		}
		return nil
	})
}

// Memcpy copies size bytes in stream order; every kind is a host copy here.
func (d *Device) Memcpy(dev int, dst, src unsafe.Pointer, size int, kind rt.CopyKind, s rt.Stream) error {
	if err := d.checkDev(dev); err != nil {
		return err
	}
	if size > 0 && (dst == nil || src == nil) {
		return rt.Errorf("host: copy of %d bytes with a NULL pointer", size)
	}
	return d.submit(s, func() error {
		copy(bytesAt(dst, size), bytesAt(src, size))
		return nil
	})
}

// MemStats reports the machine's memory: total and available bytes.
func (d *Device) MemStats(dev int) (total, free uint64, err error) {
	if err := d.checkDev(dev); err != nil {
		return 0, 0, err
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, 0, rt.Failedf("host: sysinfo: %v", err)
	}
	unit := uint64(si.Unit)
	return si.Totalram * unit, (si.Freeram + si.Bufferram) * unit, nil
}

// MinChunkSize is the allocation alignment.
func (d *Device) MinChunkSize(int) int { return minChunk }

// Allocated reports bytes currently allocated through MemAlloc/HostAlloc.
func Allocated() int64 { return allocated.Load() }

// hugeAllocs are hostAlloc's huge-page allocations, sorted by address: the
// large collectives read a peer's buffer directly (single copy) at every
// size when every such buffer is one of them (see algo.go).
var hugeAllocs hugeSet

type hugeSet struct {
	mu sync.RWMutex
	r  [][2]uintptr // [start, end)
}

func (h *hugeSet) add(p uintptr, n int) {
	h.mu.Lock()
	i, _ := slices.BinarySearchFunc(h.r, p, byStart)
	h.r = slices.Insert(h.r, i, [2]uintptr{p, p + uintptr(n)})
	h.mu.Unlock()
}

func (h *hugeSet) remove(p uintptr) {
	h.mu.Lock()
	if i, ok := slices.BinarySearchFunc(h.r, p, byStart); ok {
		h.r = slices.Delete(h.r, i, i+1)
	}
	h.mu.Unlock()
}

// holds says whether b lies inside one huge-page allocation.
func (h *hugeSet) holds(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	h.mu.RLock()
	defer h.mu.RUnlock()
	i, ok := slices.BinarySearchFunc(h.r, p, byStart)
	if !ok {
		i-- // the last range starting before p
	}
	return i >= 0 && p >= h.r[i][0] && p+uintptr(len(b)) <= h.r[i][1]
}

// byStart orders ranges by their start against an address.
func byStart(r [2]uintptr, p uintptr) int { return cmp.Compare(r[0], p) }
