package host

import (
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Communication memory below arenaMax (CommMemAlloc, XcclMemAlloc) is cut
// from shared arenas of arenaSize: one memfd each, as a caching
// allocator's blocks. A program that allocates its buffers one by one thus
// has them in a few allocations its peers map once and keep (peermap.go),
// not one memfd, one file descriptor and one mapping per buffer; and a
// fused all-reduce of many such buffers, which must lie in at most
// fusedMaxAllocs allocations (fusedAddrs), copies once. An arena's pages are
// committed as they are touched (small pages: a huge page would commit 2
// MiB for a 256-byte piece), and stay so while it lives; an arena left
// empty is unmapped unless it is the last one. As with any pooled memory, a
// peer's mapping keeps only the arena alive, not the piece of it a freed
// buffer was: a peer still writing after a timeout writes into whatever
// piece took its place. A child forked later shares the arenas, so it cuts
// its pieces from arenas of its own, never from its parent's.
const (
	arenaSize = 16 << 20
	arenaMax  = 1 << 20
)

var commMem arenas

type arenas struct {
	mu     sync.Mutex
	list   []*arena
	pieces map[uintptr]piece // by address
}

// arena is one shared allocation; free is its unused spans, by offset,
// none adjacent to another.
type arena struct {
	base unsafe.Pointer
	free []span
	used int
	pid  int // the process that made it
}

type span struct{ off, n int }

type piece struct {
	a *arena
	n int
}

// alloc cuts n bytes (a multiple of minChunk, below arenaMax) from the
// first arena with room, making one if none has; false: no arena could be
// made (no memfd, or the process's shared allocations are at their limit).
func (s *arenas) alloc(n int) (unsafe.Pointer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid := unix.Getpid()
	for _, a := range s.list {
		if a.pid != pid {
			continue
		}
		if p, ok := a.take(n); ok {
			s.pieces[uintptr(p)] = piece{a, n}
			return p, true
		}
	}
	base, ok := sharedAlloc(arenaSize, false)
	if !ok {
		return nil, false
	}
	a := &arena{base: base, free: []span{{0, arenaSize}}, pid: pid}
	s.list = append(s.list, a)
	if s.pieces == nil {
		s.pieces = map[uintptr]piece{}
	}
	p, _ := a.take(n)
	s.pieces[uintptr(p)] = piece{a, n}
	return p, true
}

// What free found at a pointer.
type freed int

const (
	notArena   freed = iota // no piece, no arena's start: not this allocator's
	freedPiece              // a live piece, now free
	arenaBase               // an arena's start, but no live piece there (a second free)
)

// free returns the piece at p to its arena, and its bytes.
func (s *arenas) free(p unsafe.Pointer) (int, freed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pc, ok := s.pieces[uintptr(p)]
	if !ok {
		for _, a := range s.list {
			if a.base == p {
				return 0, arenaBase
			}
		}
		return 0, notArena
	}
	delete(s.pieces, uintptr(p))
	a := pc.a
	a.give(int(uintptr(p)-uintptr(a.base)), pc.n)
	if a.used == 0 && len(s.list) > 1 && a.pid == unix.Getpid() { // a parent's arena is the parent's to unmap
		s.list = slices.DeleteFunc(s.list, func(b *arena) bool { return b == a })
		if b, ok := blocks.remove(uintptr(a.base)); ok {
			sharedFree(a.base, b)
		}
	}
	return pc.n, freedPiece
}

// take cuts n bytes from the first span that holds them.
func (a *arena) take(n int) (unsafe.Pointer, bool) {
	for i, sp := range a.free {
		if sp.n < n {
			continue
		}
		if sp.n == n {
			a.free = slices.Delete(a.free, i, i+1)
		} else {
			a.free[i] = span{sp.off + n, sp.n - n}
		}
		a.used += n
		return unsafe.Add(a.base, sp.off), true
	}
	return nil, false
}

// give returns n bytes at off, joining them to the spans they touch.
func (a *arena) give(off, n int) {
	a.used -= n
	i, _ := slices.BinarySearchFunc(a.free, off, func(sp span, off int) int { return sp.off - off })
	joinPrev := i > 0 && a.free[i-1].off+a.free[i-1].n == off
	joinNext := i < len(a.free) && off+n == a.free[i].off
	switch {
	case joinPrev && joinNext:
		a.free[i-1].n += n + a.free[i].n
		a.free = slices.Delete(a.free, i, i+1)
	case joinPrev:
		a.free[i-1].n += n
	case joinNext:
		a.free[i] = span{off, n + a.free[i].n}
	default:
		a.free = slices.Insert(a.free, i, span{off, n})
	}
}
