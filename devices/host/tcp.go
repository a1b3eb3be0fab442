package host

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// tcpLink carries one channel to one peer on another machine. Two helper
// goroutines move bytes between the socket and two private rings, so the
// collectives see the same rings as on shared memory: reader fills in,
// writer drains out, and both ring the rank's bell when they make progress.
type tcpLink struct {
	conn    net.Conn
	in, out *ring
	err     atomic.Pointer[error]
	closed  atomic.Bool
	wg      sync.WaitGroup
}

func newTCPLink(conn net.Conn, ringBytes int, rankBell *bell) *tcpLink {
	l := &tcpLink{conn: conn}
	mk := func(reader, writer *bell) *ring {
		var hw [2]atomic.Uint64
		return newRing(&hw[0], &hw[1], make([]byte, ringBytes), reader, writer)
	}
	l.in = mk(rankBell, newPrivateBell())  // the socket reader writes, the rank reads
	l.out = mk(newPrivateBell(), rankBell) // the rank writes, the socket writer reads
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	l.wg.Add(2)
	go l.readLoop(rankBell)
	go l.writeLoop(rankBell)
	return l
}

// fail records the link's first error, except that a reset replaces an
// end of file or a broken pipe: after a peer's abort (SO_LINGER 0) the
// kernel hands ECONNRESET to whichever of the read and write loops asks
// first and EOF or EPIPE to the other, which may record first.
func (l *tcpLink) fail(err error, b *bell) {
	for !l.closed.Load() {
		old := l.err.Load()
		if old != nil && (!errors.Is(err, unix.ECONNRESET) ||
			!(errors.Is(*old, io.EOF) || errors.Is(*old, unix.EPIPE))) {
			break
		}
		if l.err.CompareAndSwap(old, &err) {
			break
		}
	}
	b.ring()
}

func (l *tcpLink) error() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *tcpLink) readLoop(rankBell *bell) {
	defer l.wg.Done()
	r := l.in
	for !l.closed.Load() {
		head := r.head.Load()
		free := uint64(len(r.data)) - (head - r.tail.Load())
		if free == 0 {
			seen := r.writerBell.arm()
			if uint64(len(r.data))-(head-r.tail.Load()) == 0 {
				r.writerBell.sleep(seen, 100*time.Millisecond)
			} else {
				r.writerBell.disarm()
			}
			continue
		}
		off := int(head & r.mask)
		end := min(off+int(free), len(r.data))
		n, err := l.conn.Read(r.data[off:end])
		if n > 0 {
			r.head.Store(head + uint64(n))
			rankBell.ring()
		}
		if err != nil {
			l.fail(err, rankBell)
			return
		}
	}
}

func (l *tcpLink) writeLoop(rankBell *bell) {
	defer l.wg.Done()
	r := l.out
	for {
		tail := r.tail.Load()
		avail := int(r.head.Load() - tail)
		if avail == 0 {
			if l.closed.Load() {
				return
			}
			seen := r.readerBell.arm()
			if r.head.Load() == tail {
				r.readerBell.sleep(seen, 100*time.Millisecond)
			} else {
				r.readerBell.disarm()
			}
			continue
		}
		off := int(tail & r.mask)
		end := min(off+avail, len(r.data))
		n, err := l.conn.Write(r.data[off:end])
		if n > 0 {
			r.tail.Store(tail + uint64(n))
			rankBell.ring()
		}
		if err != nil {
			l.fail(err, rankBell)
			return
		}
	}
}

// drained reports whether everything written has gone to the socket.
func (l *tcpLink) drained() bool { return l.out.head.Load() == l.out.tail.Load() || l.error() != nil }

func (l *tcpLink) close() {
	l.closed.Store(true)
	_ = l.conn.Close()
	l.in.writerBell.seq.Add(1) // wake the helpers whether or not they are armed
	futexWake(l.in.writerBell.seq)
	l.out.readerBell.seq.Add(1)
	futexWake(l.out.readerBell.seq)
	l.wg.Wait()
}
