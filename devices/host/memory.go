package host

/*
#include <stdlib.h>
*/
import "C"

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	rt "github.com/xccl-project/xccl/runtime"
)

// Host "device memory" is C heap memory (C callers keep these pointers, so
// it cannot be Go memory), aligned to minChunk.
const minChunk = 256

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
	n := (max(size, 1) + minChunk - 1) &^ (minChunk - 1)
	p := C.aligned_alloc(minChunk, C.size_t(n))
	if p == nil {
		return nil, rt.Failedf("host: out of memory allocating %d bytes", size)
	}
	allocated.Add(int64(n))
	return p, nil
}

func hostFree(p unsafe.Pointer, size int) {
	if p == nil {
		return
	}
	allocated.Add(-int64((max(size, 1) + minChunk - 1) &^ (minChunk - 1)))
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
