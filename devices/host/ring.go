package host

import (
	"encoding/binary"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bell is a wake-up word. A sleeper arms it (counts itself in waiters and
// reads seq), checks its condition once more, and sleeps on seq with a
// futex. Whoever makes progress possible rings it: only when someone is
// armed does it bump seq and wake, so a busy-polling peer costs the ringer
// one read of a line nobody writes. This is the Dekker pattern with
// sequentially consistent atomics: either the ringer sees the waiter, or
// the waiter's re-check sees the ringer's progress (fast boxes publish with
// a store-release instead, and the waiter looks once more a little after
// arming: see progress). A bell lives in shared
// memory (one per rank, woken across processes) or in Go memory (private
// to the TCP helper goroutines of one rank).
type bell struct {
	seq     *atomic.Uint32
	waiters *atomic.Uint32
	efd     int // an eventfd written too when rung (+1; 0: none): the UCX progress loop polls it
}

func newPrivateBell() *bell {
	w := new([2]atomic.Uint32)
	return &bell{seq: &w[0], waiters: &w[1]}
}

func (b *bell) ring() {
	if b.waiters.Load() != 0 {
		b.seq.Add(1)
		futexWake(b.seq)
		if b.efd != 0 {
			one := [8]byte{1}
			_, _ = unix.Write(b.efd-1, one[:])
		}
	}
}

// arm registers a sleeper; the caller re-checks its condition, then calls
// sleep (or disarm when the condition already holds).
func (b *bell) arm() uint32 {
	b.waiters.Add(1)
	return b.seq.Load()
}

// wait waits, still armed, until seq moves past seen or d passes; true if
// it moved.
func (b *bell) wait(seen uint32, d time.Duration) bool {
	if b.seq.Load() == seen {
		futexWait(b.seq, seen, d)
	}
	return b.seq.Load() != seen
}

// sleep waits until seq moves past seen or d passes, and disarms.
func (b *bell) sleep(seen uint32, d time.Duration) {
	if b.seq.Load() == seen {
		futexWait(b.seq, seen, d)
	}
	b.disarm()
}

func (b *bell) disarm() { b.waiters.Add(^uint32(0)) }

const (
	futexWaitOp = 0 // FUTEX_WAIT, not private: the word may be shared across processes
	futexWakeOp = 1
)

func futexWait(w *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0) // EAGAIN, EINTR, ETIMEDOUT: the caller re-checks
}

func futexWake(w *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, 1<<30, 0, 0, 0)
}

// ring is a single-producer single-consumer byte ring. Messages are padded
// to 16 bytes so every message starts 16-aligned, and no element of any type
// straddles the wrap. head counts bytes written, tail bytes consumed.
type ring struct {
	head, tail *atomic.Uint64
	data       []byte // power-of-two length
	mask       uint64
	tailSeen   uint64 // writer's last read of tail: reread only when that looks full
	headMine   uint64 // the writer's head (it alone moves it: one ring object writes each ring), once headOK (publish)
	headOK     bool
	bad        bool  // head and tail are impossible (more than the ring apart): corrupt
	held       bool  // a message on this ring is unfinished in the current pass: later ones wait (Comm.pass)
	readerBell *bell // rung after a write
	writerBell *bell // rung after a read
}

func newRing(head, tail *atomic.Uint64, data []byte, reader, writer *bell) *ring {
	if len(data)&(len(data)-1) != 0 || len(data) < 64 {
		panic("host: ring size must be a power of two")
	}
	return &ring{head: head, tail: tail, data: data, mask: uint64(len(data) - 1), readerBell: reader, writerBell: writer}
}

func padded(n int) int { return (n + 15) &^ 15 }

// writerHead is head as the writer knows it: read from shared memory once,
// then kept here (a load of the line the reader polls costs a transfer).
func (r *ring) writerHead() uint64 {
	if !r.headOK {
		r.headMine, r.headOK = r.head.Load(), true
	}
	return r.headMine
}

// publish moves head to h: the writer's only store of it, a swap from the
// head it knows, so that a head someone else moved (corrupt shared memory)
// is seen here (bad; false: nothing published) rather than overwritten.
func (r *ring) publish(h uint64) bool {
	if !r.head.CompareAndSwap(r.headMine, h) {
		r.bad = true
		return false
	}
	r.headMine = h
	return true
}

// free is how many bytes the writer may add at head now, wanting want:
// the tail is the reader's line, read only when the cached one says the
// ring is too full; 0 when head and tail are impossible (bad).
func (r *ring) free(head, want uint64) uint64 {
	free := uint64(len(r.data)) - (head - r.tailSeen)
	if free < want || free > uint64(len(r.data)) {
		r.tailSeen = r.tail.Load()
		if head-r.tailSeen > uint64(len(r.data)) {
			r.bad = true
			return 0
		}
		free = uint64(len(r.data)) - (head - r.tailSeen)
	}
	return free
}

// push writes the next bytes of a message of len(msg) data bytes whose first
// done padded bytes are already in the ring. It returns how many padded bytes
// it added (0 when the ring is full).
func (r *ring) push(msg []byte, done int) int {
	head := r.writerHead()
	want := padded(len(msg)) - done
	n := min(int(r.free(head, uint64(want))), want)
	if n <= 0 {
		return 0
	}
	if done < len(msg) {
		c := min(n, len(msg)-done)
		r.copyIn(head, msg[done:done+c])
	}
	if !r.publish(head + uint64(n)) {
		return 0
	}
	r.readerBell.ring()
	return n
}

// pushWhole writes a message of one header unit (hdr) and its data at
// once, with one store of head, when the ring has room for all of it now
// (false: nothing written). A reader polling head pays one transfer of
// its line per message, not two.
func (r *ring) pushWhole(hdr *[p2pHeaderSize]byte, data []byte) bool {
	head := r.writerHead()
	want := uint64(p2pHeaderSize + padded(len(data)))
	if r.free(head, want) < want {
		return false
	}
	r.copyIn(head, hdr[:])
	r.copyIn(head+p2pHeaderSize, data)
	if !r.publish(head + want) {
		return false
	}
	r.readerBell.ring()
	return true
}

// takeWhole reads, when the ring holds all of it now, a message of a
// header unit saying magic and len(data) bytes, and its data, into data,
// with one store of tail: taken, or nothing read and whether another
// message (or part of one) is there (other: the caller reads it the long
// way) or nothing yet.
func (r *ring) takeWhole(magic uint64, data []byte) (taken, other bool) {
	tail := r.tail.Load()
	used := r.head.Load() - tail
	if used == 0 {
		return false, false
	}
	want := uint64(p2pHeaderSize + padded(len(data)))
	if used > uint64(len(r.data)) {
		return false, true
	}
	off := int(tail & r.mask) // a header unit never straddles the wrap
	if used < p2pHeaderSize || binary.LittleEndian.Uint64(r.data[off:]) != magic ||
		binary.LittleEndian.Uint64(r.data[off+8:]) != uint64(len(data)) || used < want {
		return false, true
	}
	off = int((tail + p2pHeaderSize) & r.mask)
	if k := copy(data, r.data[off:]); k < len(data) {
		copy(data[k:], r.data)
	}
	r.tail.Store(tail + want)
	r.writerBell.ring()
	return true, false
}

func (r *ring) copyIn(pos uint64, p []byte) {
	off := int(pos & r.mask)
	k := copyShared(r.data[off:], p)
	if k < len(p) {
		copyShared(r.data, p[k:])
	}
}

// pull consumes the next bytes of x's message (x.done padded bytes were
// consumed). x.consume receives data bytes in order, in whole units of
// x.elem bytes, possibly in two pieces at the wrap; pad is skipped.
func (r *ring) pull(x *xfer) int {
	size, done, elem := len(x.buf), x.done, x.elem
	tail := r.tail.Load()
	used := r.head.Load() - tail
	if used > uint64(len(r.data)) {
		r.bad = true
		return 0
	}
	n := min(int(used), padded(size)-done)
	if n <= 0 {
		return 0
	}
	if done < size {
		c := min(n, size-done)
		if c < size-done { // partial: whole elements only
			c -= c % elem
			if c == 0 {
				return 0
			}
			n = c
		}
		off := int(tail & r.mask)
		first := min(c, len(r.data)-off)
		x.consume(done, r.data[off:off+first])
		if first < c {
			x.consume(done+first, r.data[:c-first])
		}
	}
	r.tail.Store(tail + uint64(n))
	r.writerBell.ring()
	return n
}
