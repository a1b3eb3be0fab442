package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Peers' device memory, mapped here. A rank tells its peers, with the
// addresses of a collective's buffers (shareAddrs), which shared allocation
// (memory.go) holds each: its memfd's number in the owner, its address and
// size, and an id unique in the owner. A peer takes the memfd with
// pidfd_getfd (or /proc/<pid>/fd, where that is missing), which the kernel
// allows exactly where it allows process_vm_readv, and maps it. Loads and
// stores then reach the peer's buffer with no system call, no page pinning
// and no staging copy. A peer that cannot map falls back to single-copy
// system calls on its own: the result is the same, only slower.
//
// Mappings are kept for the next collectives (most recently used first, at
// most peerMapsKept per peer), dropped as soon as their owner frees the
// allocation (it marks the allocation's trailer page), and all unmapped
// when the communicator is destroyed. Ranks of one process map each other's
// allocations too, rather than use the owner's address: a mapping keeps the
// memory alive, so a rank still writing into a peer that failed and freed
// its buffer writes into orphaned pages, never into unmapped memory (into
// whatever took the buffer's place, where the allocation is an arena of
// pieces: commmem.go).

const peerMapsKept = 16

// allocRef says where a buffer lies: in a shared allocation of its owner
// (fd >= 0), in a private huge-page one (fd -1), or in neither (fd -2).
type allocRef struct {
	base, size uintptr // the allocation, in the owner
	id         uint64
	fd         int64
}

const allocRefSize = 32

func refOf(b []byte) allocRef {
	blk, ok := blocks.find(b)
	if !ok {
		return allocRef{fd: -2}
	}
	return allocRef{base: blk.start, size: blk.end - blk.start, id: blk.id, fd: int64(blk.fd)}
}

func (r allocRef) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(r.base))
	binary.LittleEndian.PutUint64(b[8:], uint64(r.size))
	binary.LittleEndian.PutUint64(b[16:], r.id)
	binary.LittleEndian.PutUint64(b[24:], uint64(r.fd))
}

func getRef(b []byte) allocRef {
	return allocRef{
		base: uintptr(binary.LittleEndian.Uint64(b[0:])),
		size: uintptr(binary.LittleEndian.Uint64(b[8:])),
		id:   binary.LittleEndian.Uint64(b[16:]),
		fd:   int64(binary.LittleEndian.Uint64(b[24:])),
	}
}

func (r allocRef) shared() bool { return r.fd >= 0 }
func (r allocRef) large() bool  { return r.fd >= -1 }

func (r allocRef) holds(addr uintptr, n int) bool {
	return addr >= r.base && addr+uintptr(n) <= r.base+r.size
}

// peerMap is a peer's shared allocation mapped here.
type peerMap struct {
	id   uint64
	size uintptr
	mem  unsafe.Pointer
}

func (m peerMap) freed() bool { return trailerOf(m.mem, int(m.size)).freed.Load() != 0 }

func (m peerMap) unmap() { _ = unix.MunmapPtr(m.mem, m.size+trailerSize) }

// peerMem is this rank's view of peers' memory (under collMu).
type peerMem struct {
	maps   [][]peerMap // by peer, most recently used first
	pidfds []int       // by peer: -2 not opened yet, -1 none
	broken []bool      // by peer: mapping failed once; system calls from then on
}

// view returns peer p's n bytes at addr as memory of this process, or nil
// where they are not in a shared allocation this rank can map.
func (c *Comm) view(p int, addr uintptr, n int) []byte {
	if n == 0 || p >= len(c.peerRefs) {
		return nil
	}
	for _, r := range c.peerRefs[p] {
		if r.shared() && r.holds(addr, n) {
			mem := c.mapPeer(p, r)
			if mem == nil {
				return nil
			}
			return unsafe.Slice((*byte)(unsafe.Add(mem, addr-r.base)), n)
		}
	}
	return nil
}

// mapPeer returns where peer p's allocation r is mapped here, mapping it
// the first time; nil if it cannot be.
func (c *Comm) mapPeer(p int, r allocRef) unsafe.Pointer {
	pm := &c.pmem
	if pm.maps == nil {
		pm.maps, pm.pidfds, pm.broken = make([][]peerMap, c.n), make([]int, c.n), make([]bool, c.n)
		for i := range pm.pidfds {
			pm.pidfds[i] = -2
		}
	}
	maps := slices.DeleteFunc(pm.maps[p], func(m peerMap) bool { // drop what the owner freed
		freed := m.freed()
		if freed {
			m.unmap()
		}
		return freed
	})
	pm.maps[p] = maps
	for i, m := range maps {
		if m.id == r.id && m.size == r.size {
			copy(maps[1:i+1], maps[:i])
			maps[0] = m
			return m.mem
		}
	}
	if pm.broken[p] {
		return nil
	}
	mem, err := c.mapAlloc(p, r)
	if err != nil {
		pm.broken[p] = true
		c.log.Info("cannot map a peer's device memory; single-copy system calls reach it",
			zap.Int("peer", p), zap.Error(err))
		return nil
	}
	if len(maps) == peerMapsKept {
		maps[len(maps)-1].unmap()
		maps = maps[:len(maps)-1]
	}
	pm.maps[p] = append([]peerMap{{id: r.id, size: r.size, mem: mem}}, maps...)
	return mem
}

// testMapError, set by a test, is what every mapping fails with.
var testMapError error

// mapAlloc maps peer p's shared allocation r (its memfd and trailer).
func (c *Comm) mapAlloc(p int, r allocRef) (unsafe.Pointer, error) {
	if testMapError != nil {
		return nil, testMapError
	}
	pm := &c.pmem
	pid := c.peers[p].Pid
	if pm.pidfds[p] == -2 {
		pm.pidfds[p] = -1
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			pm.pidfds[p] = fd
		}
	}
	fd := -1
	var err error
	if pm.pidfds[p] >= 0 {
		fd, err = unix.PidfdGetfd(pm.pidfds[p], int(r.fd), 0)
	}
	if fd < 0 && (pm.pidfds[p] < 0 || errors.Is(err, unix.ENOSYS)) {
		fd, err = unix.Open(fmt.Sprintf("/proc/%d/fd/%d", pid, r.fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if uintptr(st.Size) != r.size+trailerSize {
		return nil, fmt.Errorf("rank %d's file %d has %d bytes, not an allocation of %d", p, r.fd, st.Size, r.size)
	}
	return unix.MmapPtr(fd, 0, nil, r.size+trailerSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// releasePeerMem unmaps every peer's memory (the communicator is released).
func (c *Comm) releasePeerMem() {
	pm := &c.pmem
	for p := range pm.maps {
		for _, m := range pm.maps[p] {
			m.unmap()
		}
		pm.maps[p] = nil
		if pm.pidfds[p] >= 0 {
			unix.Close(pm.pidfds[p])
		}
		pm.pidfds[p] = -2
	}
}
