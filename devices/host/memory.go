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

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	rt "github.com/xccl-project/xccl/runtime"
)

// Host "device memory" is memory outside the Go heap (C callers keep these
// pointers), aligned to minChunk. From sharedMin on it is a memfd mapped
// shared (MAP_SHARED), so that peers of a communicator on this machine can
// map it too: the large collectives then read and write each other's
// buffers with plain loads and stores (peermap.go), each byte once, as a
// memcpy does. Like any shared mapping it is shared with a child forked
// afterwards, not copied on write. Where memfds cannot be made, or with
// XCCL_SHARED_MEMORY=0, it is C heap memory aligned to 2 MiB and advised to
// be backed by transparent huge pages: fewer TLB misses, and single-copy
// reads (process_vm_readv) that pin a peer's pages 512 at a time.
const (
	minChunk  = 256
	hugeMin   = 2 << 20
	sharedMin = hugeMin
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

// CommMemAlloc allocates size bytes for communication (rt.CommMemAllocator,
// XcclMemAlloc): shared at every size, where MemAlloc shares from sharedMin
// on, so that a collective on these buffers copies once between the ranks of
// this machine however small they are (commmem.go). Past the shared
// allocations' limit, or with XCCL_SHARED_MEMORY=0, it is MemAlloc's
// memory. MemFree frees it.
func (d *Device) CommMemAlloc(dev, size int) (unsafe.Pointer, error) {
	if err := d.checkDev(dev); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, rt.Errorf("host: allocation of %d bytes", size)
	}
	if n := chunkOf(size); n < arenaMax && sharedMemory() {
		if p, ok := commMem.alloc(n); ok {
			allocated.Add(int64(n))
			return p, nil
		}
	}
	return allocShared(size, 0)
}

// SmallCommMem: CommMemAlloc's small allocations come from arenas and cost
// what MemAlloc's do, so Paddle's tensors use it (rt.TensorMemAlloc).
func (d *Device) SmallCommMem() {}

func hostAlloc(size int) (unsafe.Pointer, error) { return allocShared(size, sharedMin) }

// allocShared allocates size bytes, shared from shareFrom bytes on.
func allocShared(size, shareFrom int) (unsafe.Pointer, error) {
	if size < 0 {
		return nil, rt.Errorf("host: allocation of %d bytes", size)
	}
	n, align := chunkOf(size), minChunk
	if n >= shareFrom && sharedMemory() {
		if p, ok := sharedAlloc(n, true); ok {
			allocated.Add(int64(n))
			return p, nil
		}
	}
	if n >= hugeMin {
		align = hugeMin
	}
	p := C.aligned_alloc(C.size_t(align), C.size_t(n))
	if p == nil {
		return nil, rt.Failedf("host: out of memory allocating %d bytes", size)
	}
	if align == hugeMin && unix.Madvise(unsafe.Slice((*byte)(p), n), unix.MADV_HUGEPAGE) == nil {
		blocks.add(block{start: uintptr(p), end: uintptr(p) + uintptr(n), fd: -1})
	} else {
		private.add(uintptr(p))
	}
	allocated.Add(int64(n))
	return p, nil
}

// private holds hostAlloc's private allocations that are not in blocks:
// hostFree frees only what it finds there, in blocks or in commMem, so a
// pointer this device never handed out (an interior one, another
// allocator's, garbage) is logged and ignored, never handed to free(3).
var private privateSet

type privateSet struct {
	mu sync.Mutex
	m  map[uintptr]struct{}
}

func (s *privateSet) add(p uintptr) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[uintptr]struct{}{}
	}
	s.m[p] = struct{}{}
	s.mu.Unlock()
}

func (s *privateSet) remove(p uintptr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[p]
	delete(s.m, p)
	return ok
}

// A shared allocation ends with a trailer page, past the bytes asked for,
// that peers which mapped it read: freed says the owner has freed it.
const trailerSize = 4096

type trailer struct{ freed atomic.Uint32 }

func trailerOf(p unsafe.Pointer, n int) *trailer { return (*trailer)(unsafe.Add(p, n)) }

// sharedMemory: XCCL_SHARED_MEMORY=0 keeps device memory private.
func sharedMemory() bool { return rt.Getenv("XCCL_SHARED_MEMORY") != "0" }

var lastBlockID atomic.Uint64

// sharedBlocks counts live shared allocations: each holds a file
// descriptor, so at most a quarter of the process's limit (and 1024) are
// shared; the rest are private.
var sharedBlocks atomic.Int64

func maxSharedBlocks() int64 {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 64
	}
	return int64(min(lim.Cur/4, 1024))
}

// sharedAlloc maps n bytes of a new memfd, advised to be backed by huge
// pages where huge; false: none could be made.
func sharedAlloc(n int, huge bool) (p unsafe.Pointer, ok bool) {
	if sharedBlocks.Add(1) > maxSharedBlocks() {
		sharedBlocks.Add(-1)
		return nil, false
	}
	defer func() {
		if !ok {
			sharedBlocks.Add(-1)
		}
	}()
	fd, err := unix.MemfdCreate("xccl-device-memory", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, false
	}
	if unix.Ftruncate(fd, int64(n+trailerSize)) != nil {
		unix.Close(fd)
		return nil, false
	}
	p, err = unix.MmapPtr(fd, 0, nil, uintptr(n+trailerSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, false
	}
	if huge {
		_ = unix.Madvise(unsafe.Slice((*byte)(p), n), unix.MADV_HUGEPAGE) // where shmem offers them
	}
	blocks.add(block{start: uintptr(p), end: uintptr(p) + uintptr(n), fd: fd, id: lastBlockID.Add(1)})
	return p, true
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
	switch n, kind := commMem.free(p); kind { // before blocks: an arena's first piece starts it
	case freedPiece:
		allocated.Add(-int64(n))
		return
	case arenaBase:
		rt.Log().Warn("host: free of a device memory pointer that is no live allocation (freed twice?): ignored",
			zap.Uintptr("ptr", uintptr(p)))
		return
	}
	b, ok := blocks.remove(uintptr(p))
	if !ok && !private.remove(uintptr(p)) {
		rt.Log().Warn("host: free of a pointer that is no allocation of this device (another allocator's, "+
			"inside an allocation, or freed twice): ignored", zap.Uintptr("ptr", uintptr(p)))
		return
	}
	allocated.Add(-int64(chunkOf(size)))
	if ok && b.fd >= 0 {
		sharedFree(p, b)
		return
	}
	C.free(p)
}

// sharedFree unmaps shared allocation b at p, removed from blocks.
func sharedFree(p unsafe.Pointer, b block) {
	n := int(b.end - b.start)
	trailerOf(p, n).freed.Store(1) // peers drop their mappings
	_ = unix.MunmapPtr(p, uintptr(n+trailerSize))
	unix.Close(b.fd)
	sharedBlocks.Add(-1)
}

// MemFree frees memory from MemAlloc (size is the size asked for). As
// cudaFree, it does not cut short work queued before it: where a stream has
// work not yet done, the memory is freed once every stream has finished what
// was queued when MemFree was called (a framework's allocator frees idle
// blocks without synchronizing first).
func (d *Device) MemFree(dev int, p unsafe.Pointer, size int) error {
	if err := d.checkDev(dev); err != nil {
		return err
	}
	d.afterQueued(func() { hostFree(p, size) })
	return nil
}

// HostAlloc allocates host memory (pinned memory, on other devices). Copies
// on a stream to or from it run in stream order, as with pinned memory;
// those with other host memory read or write it before they return (Memcpy).
func (d *Device) HostAlloc(size int) (unsafe.Pointer, error) {
	p, err := hostAlloc(size)
	if err == nil && size > 0 {
		pinned.add(block{start: uintptr(p), end: uintptr(p) + uintptr(size), fd: -1})
	}
	return p, err
}

// HostFree frees memory from HostAlloc, after the work queued before it (as
// MemFree).
func (d *Device) HostFree(p unsafe.Pointer, size int) error {
	pinned.remove(uintptr(p))
	d.afterQueued(func() { hostFree(p, size) })
	return nil
}

// pinned are HostAlloc's allocations.
var pinned blockSet

// afterQueued runs f once every stream has finished the work queued so far:
// at once where none has any; else on a goroutine of its own, which runs
// what it waits for where no one does (a stream's own work may free
// memory, so f's caller never waits for it).
func (d *Device) afterQueued(f func()) {
	type mark struct {
		s   *stream
		pos uint64
	}
	var busy []mark
	for _, s := range d.allStreams() {
		if pos := s.position(); !s.reached(pos) {
			busy = append(busy, mark{s, pos})
		}
	}
	if len(busy) == 0 {
		f()
		return
	}
	deferredFrees.Add(1)
	go func() {
		defer deferredFrees.Done()
		for _, m := range busy {
			m.s.waitFor(m.pos)
		}
		f()
	}()
}

// deferredFrees are the frees afterQueued runs later.
var deferredFrees sync.WaitGroup

// SettleFrees waits for the frees that wait for queued work (MemFree,
// HostFree), for tests that count Allocated.
func SettleFrees() { deferredFrees.Wait() }

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
// As CUDA's copies on a stream with host memory that is not pinned (not
// from HostAlloc): one from it has read it when Memcpy returns (Paddle frees
// a vector's array straight after), and one to it has written it (after the
// stream's earlier work).
func (d *Device) Memcpy(dev int, dst, src unsafe.Pointer, size int, kind rt.CopyKind, h rt.Stream) error {
	if err := d.checkDev(dev); err != nil {
		return err
	}
	if size > 0 && (dst == nil || src == nil) {
		return rt.Errorf("host: copy of %d bytes with a NULL pointer", size)
	}
	if h == 0 || size == 0 {
		copy(bytesAt(dst, size), bytesAt(src, size))
		return nil
	}
	s, err := d.stream(h)
	if err != nil {
		return err
	}
	move := func() error { copy(bytesAt(dst, size), bytesAt(src, size)); return nil }
	switch {
	case kind == rt.HostToDevice && !pinned.holds(src, size):
		if s.runIfIdle(func() { _ = move() }) {
			return nil
		}
		snap := make([]byte, size)
		copy(snap, bytesAt(src, size))
		s.enqueue(func() error { copy(bytesAt(dst, size), snap); return nil })
	case kind == rt.DeviceToHost && !pinned.holds(dst, size):
		// In stream order, waited for: the stream's failure before it (a
		// broken communicator) is this call's, as CUDA's sticky error is.
		pos := s.enqueueAt(move)
		s.waitFor(pos)
		return s.failedBy(pos)
	default:
		s.enqueue(move)
	}
	return nil
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

// blocks are hostAlloc's large allocations, sorted by address: shared
// ones (a memfd, which peers map), and private huge-page ones (fd -1). The
// large collectives reach a peer's buffer directly at every size when every
// rank's buffer lies in one of them (see algo.go).
var blocks blockSet

// block is one allocation, [start, end); id is unique in this process.
type block struct {
	start, end uintptr
	fd         int
	id         uint64
}

type blockSet struct {
	mu sync.RWMutex
	r  []block
}

func (h *blockSet) add(b block) {
	h.mu.Lock()
	i, _ := slices.BinarySearchFunc(h.r, b.start, byStart)
	h.r = slices.Insert(h.r, i, b)
	h.mu.Unlock()
}

func (h *blockSet) remove(p uintptr) (block, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok := slices.BinarySearchFunc(h.r, p, byStart)
	if !ok {
		return block{}, false
	}
	b := h.r[i]
	h.r = slices.Delete(h.r, i, i+1)
	return b, true
}

// find returns the allocation b lies inside, if any.
func (h *blockSet) find(b []byte) (block, bool) {
	if len(b) == 0 {
		return block{}, false
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	h.mu.RLock()
	defer h.mu.RUnlock()
	i, ok := slices.BinarySearchFunc(h.r, p, byStart)
	if !ok {
		i-- // the last range starting before p
	}
	if i >= 0 && p >= h.r[i].start && p+uintptr(len(b)) <= h.r[i].end {
		return h.r[i], true
	}
	return block{}, false
}

// holds says whether the n bytes at p lie inside one allocation.
func (h *blockSet) holds(p unsafe.Pointer, n int) bool {
	_, ok := h.find(bytesAt(p, n))
	return ok
}

// byStart orders ranges by their start against an address.
func byStart(r block, p uintptr) int { return cmp.Compare(r.start, p) }
