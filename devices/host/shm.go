package host

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xccl-project/xccl/internal/shmseg"
)

// A segment is one rank's shared-memory file in /dev/shm: a header with the
// rank's bell and state word, then one inbound ring per (source rank,
// channel). Writers on the same machine map it and push straight into it.
//
//	0     magic (8) | job (8)
//	64    bell seq (u32)
//	128   bell waiters (u32)
//	192   state (u32): 0 alive, 1 closed, 2 aborted
//	196   cause (u32): once aborted, the rank whose loss made it fail, + 1
//	256   cpu (u64): the CPU its owner last waited on, + 1, and when (sharesCPU)
//	4096  slot[src*nch+ch]: head u64 @0, tail u64 @256, data @4096 (ringBytes)
//	(head and tail written by different ranks: 256 bytes apart, beyond the
//	adjacent-line prefetcher that would make them share)
//	then  fast boxes, per source rank a block (fastbox.go): the count of its
//	      slots this rank is done with (u64) @0, then fastDepth slots from
//	      @256, fastSlotSize(nranks) bytes each
type segment struct {
	path      string
	fd        int // kept open: the owner holds an exclusive flock on it while alive
	mem       []byte
	nranks    int
	ringBytes int
}

const (
	segMagic   = 0x58434c5345473031 // "XCLSEG01"
	segHeader  = 4096
	slotHeader = 4096
	nch        = 2 // channels: collectives, point-to-point
	chColl     = 0
	chP2P      = 1
)

const (
	stateAlive   = 0
	stateClosed  = 1
	stateAborted = 2
)

func segSize(nranks, ringBytes int) int {
	return fastBase(nranks, ringBytes) + fastArea(nranks)
}

// The fast boxes follow the rings: per source rank a block of a counter
// and fastDepth slots, collective k in slot k mod fastDepth (fastbox.go).
func fastBase(nranks, ringBytes int) int { return segHeader + nranks*nch*(slotHeader+ringBytes) }
func fastBlock(nranks int) int           { return fastBlockHead + fastDepth*fastSlotSize(nranks) }
func fastArea(nranks int) int            { return (nranks*fastBlock(nranks) + 4095) &^ 4095 }

// fastBlockHead keeps the counter 256 bytes from the first slot, beyond the
// adjacent-line prefetcher: different ranks write them.
const fastBlockHead = 256

// fastSlotOf is the fast-box slot from src for collectives k mod fastDepth.
func (s *segment) fastSlotOf(src, k int) []byte {
	size := fastSlotSize(s.nranks)
	off := s.fastBlockAt(src) + fastBlockHead + k*size
	return s.mem[off : off+size : off+size]
}

// fastDone is the count of src's slots this segment's owner is done with:
// the collectives up to which src may write again.
func (s *segment) fastDone(src int) *atomic.Uint64 { return s.u64(s.fastBlockAt(src)) }

// fastBlockAt is where src's block of fast boxes begins.
func (s *segment) fastBlockAt(src int) int {
	return fastBase(s.nranks, s.ringBytes) + src*fastBlock(s.nranks)
}

// createSegment makes and maps this rank's segment (private anonymous memory
// when shared is false: TCP-only ranks still need a bell).
func createSegment(job uint64, rank, nranks, ringBytes int, shared bool) (*segment, error) {
	s := &segment{nranks: nranks, ringBytes: ringBytes, fd: -1}
	if !shared {
		mem, err := unix.Mmap(-1, 0, segHeader, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, fmt.Errorf("mmap: %w", err)
		}
		s.mem = mem
		s.init(job)
		return s, nil
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	sweepSegments()
	s.path = fmt.Sprintf("/dev/shm/%s%016x-r%d-%s", segPrefix(), job, rank, hex.EncodeToString(r[:]))
	if seg, err := s.make(job, rank, nranks, ringBytes, true); err == nil || !errors.Is(err, errNoLink) {
		return seg, err
	}
	return s.make(job, rank, nranks, ringBytes, false)
}

// errNoLink: a nameless file could not be given its name.
var errNoLink = errors.New("cannot link a nameless file")

// make makes the segment file at s.path. Made nameless (O_TMPFILE) and
// linked under its name once locked and ready, so that a process killed
// while it makes it leaves nothing in /dev/shm; where /dev/shm cannot make
// nameless files, or link them (no /proc, and no CAP_DAC_READ_SEARCH),
// made under a temporary name and renamed. Either way a segment under its
// final name is always locked while its owner lives (sweepSegments).
func (s *segment) make(job uint64, rank, nranks, ringBytes int, nameless bool) (*segment, error) {
	size := segSize(nranks, ringBytes)
	tmp := s.path + segTemp
	var fd int
	var err error
	if nameless {
		fd, err = unix.Open("/dev/shm", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create a nameless file in /dev/shm: %w: %w", errNoLink, err)
		}
	} else if fd, err = unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600); err != nil {
		return nil, fmt.Errorf("create %s: %w", tmp, err)
	}
	s.fd = fd
	fail := func(what string, err error) (*segment, error) {
		where := tmp
		if nameless {
			where = s.path + " (nameless until linked)"
		} else {
			_ = unix.Unlink(tmp)
		}
		_ = unix.Close(fd)
		s.fd = -1
		return nil, fmt.Errorf("%s %s: %w", what, where, err)
	}
	// The lock is the liveness signal: the kernel drops it when this
	// process exits, even while it lingers as a zombie.
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail("lock", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("size", err)
	}
	faultPoint("segment-making")
	// The file stays sparse: only the rings and fast boxes of the ranks
	// found on this machine take memory, reserved once they are known
	// (reserve). A rank of a job of many machines, or one told a wrong
	// nranks, does not hold pages for every rank it was told of.
	if err := unix.Fallocate(fd, 0, 0, segHeader); err != nil {
		return fail("reserve the header of", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	s.mem = mem
	s.init(job)
	if nameless {
		err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, s.path, unix.AT_SYMLINK_FOLLOW)
		if err != nil { // no /proc: linking an fd by AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH
			err = unix.Linkat(fd, "", unix.AT_FDCWD, s.path, unix.AT_EMPTY_PATH)
		}
	} else {
		err = unix.Rename(tmp, s.path)
	}
	if err != nil {
		_ = unix.Munmap(mem)
		s.mem = nil
		if nameless {
			err = fmt.Errorf("%w: %w", errNoLink, err)
		}
		return fail("link", err)
	}
	return s, nil
}

// reserve takes the pages of src's inbound rings and fast boxes now: a full
// /dev/shm is an error at init rather than a SIGBUS in the middle of a
// collective.
func (s *segment) reserve(src int) error {
	if s.fd < 0 {
		return nil
	}
	if err := unix.Fallocate(s.fd, 0, int64(s.slotAt(src, 0)), int64(nch*(slotHeader+s.ringBytes))); err != nil {
		return fmt.Errorf("reserve the rings from rank %d in /dev/shm: %w", src, err)
	}
	if err := unix.Fallocate(s.fd, 0, int64(s.fastBlockAt(src)), int64(fastBlock(s.nranks))); err != nil {
		return fmt.Errorf("reserve the fast boxes from rank %d in /dev/shm: %w", src, err)
	}
	return nil
}

func (s *segment) init(job uint64) {
	binary.LittleEndian.PutUint64(s.mem[8:], job)
	(*atomic.Uint64)(unsafe.Pointer(&s.mem[0])).Store(segMagic)
}

// openSegment maps a peer's segment and checks it belongs to this job.
func openSegment(path string, job uint64, nranks, ringBytes int) (*segment, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	size := segSize(nranks, ringBytes)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Size != int64(size) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is %d bytes, want %d", path, st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	s := &segment{path: path, fd: fd, mem: mem, nranks: nranks, ringBytes: ringBytes}
	if (*atomic.Uint64)(unsafe.Pointer(&mem[0])).Load() != segMagic || binary.LittleEndian.Uint64(mem[8:]) != job {
		s.unmap()
		return nil, fmt.Errorf("%s is not a segment of job %x", path, job)
	}
	return s, nil
}

func (s *segment) u32(off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&s.mem[off])) }
func (s *segment) u64(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&s.mem[off])) }

func (s *segment) bell() *bell { return &bell{seq: s.u32(64), waiters: s.u32(128)} }

func (s *segment) state() *atomic.Uint32 { return s.u32(192) }

// cause is, once state says aborted, the rank whose loss made this one
// fail, plus one (0: its own failure, or an Abort), so that the peers it
// tells name that rank, not the messenger.
func (s *segment) cause() *atomic.Uint32 { return s.u32(196) }

// cpu is the CPU the segment's owner last found itself on while it waited
// for a peer, plus one, and when (0: none yet); it alone writes it
// (sharesCPU).
func (s *segment) cpu() *atomic.Uint64 { return s.u64(256) }

// slotAt is where the inbound ring from src on channel ch begins (its
// header; the channels of one source follow each other).
func (s *segment) slotAt(src, ch int) int { return segHeader + (src*nch+ch)*(slotHeader+s.ringBytes) }

// slot returns head, tail and data of the inbound ring from src on channel ch.
func (s *segment) slot(src, ch int) (*atomic.Uint64, *atomic.Uint64, []byte) {
	base := s.slotAt(src, ch)
	return s.u64(base), s.u64(base + 256), s.mem[base+slotHeader : base+slotHeader+s.ringBytes : base+slotHeader+s.ringBytes]
}

const segTemp = shmseg.Temp

func segPrefix() string { return shmseg.Prefix() }

func sweepSegments() int { return shmseg.Sweep() }

// sweepJob sweeps now and, while segments of job are left (their owner
// may still be on its way out, holding its lock), again for about a second.
func sweepJob(job uint64) {
	sweepSegments()
	go func() {
		pattern := fmt.Sprintf("/dev/shm/%s%016x-*", segPrefix(), job)
		for i := 0; i < 20; i++ {
			if m, _ := filepath.Glob(pattern); len(m) == 0 {
				return
			}
			time.Sleep(50 * time.Millisecond)
			sweepSegments()
		}
	}()
}

func (s *segment) unlink() {
	if s.path != "" {
		_ = unix.Unlink(s.path)
	}
}

// ownerAlive reports whether the process that made this (peer) segment
// still holds its lock.
func (s *segment) ownerAlive() bool {
	err := unix.Flock(s.fd, unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		_ = unix.Flock(s.fd, unix.LOCK_UN)
		return false
	}
	return true
}

func (s *segment) unmap() {
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
}
