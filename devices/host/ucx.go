package host

// UCX links: UCP byte streams (ucp_stream_send_nbx / ucp_stream_recv_nbx)
// between ranks, one endpoint per channel and peer, through libucp opened
// with dlopen at run time (ucx_shim.c): one build runs with or without UCX.
//
// A link has the same two private rings as a TCP link. One progress
// goroutine per communicator owns the UCP worker: it posts a stream send of
// whatever the rank has written to an outbound ring (straight from the
// ring's memory; the tail moves once UCX reports the send complete), keeps
// a stream receive posted into the free part of each inbound ring (the head
// moves by what arrived), calls ucp_worker_progress, and rings the rank's
// bell when it moved bytes. When nothing moves it sleeps in poll(2) on the
// worker's event fd and on an eventfd that the rings' bells write, so a
// rank writing to a ring or freeing room in one wakes it.
//
// Authentication: the worker addresses travel in the bootstrap, whose
// connections prove the id's secret (bootstrap.go); then the first 32 bytes
// each way on every endpoint are an HMAC under the secret of the job, the
// two ranks, the channel and both ranks' random handles, checked before any
// ring byte flows, so a stream from anyone else (or a channel crossed with
// another) is refused.
//
// Teardown: Destroy waits for the outbound rings to empty, sends a
// goodbye on a control endpoint per peer and hands the worker to its
// goroutine, which keeps delivering until every peer has said goodbye (or
// failed) or the timeout passes, then closes the endpoints and destroys the
// worker: bytes a slower peer has not read yet are not lost, as the kernel
// keeps them for a closed TCP socket.

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "ucx_shim.h"
*/
import "C"

import (
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	rt "github.com/xccl-project/xccl/runtime"
)

const (
	chCtl        = nch // the control endpoint per peer (goodbye)
	ucxMACBytes  = 32
	ucxMaxSends  = 4  // stream sends in flight per link
	ucxSpinPolls = 64 // progress passes without movement before sleeping
)

var ucxLoad struct {
	mu   sync.Mutex
	path string // the library that loaded
}

// ucxPaths are the libraries tried, in order.
func ucxPaths() []string {
	if p := rt.Getenv("XCCL_UCX_LIBRARY"); p != "" {
		return []string{p}
	}
	return []string{"libucp.so.0", "libucp.so"}
}

// loadUCX opens libucp (once it loaded, later calls only check that the
// path asked for opens).
func loadUCX() error {
	ucxLoad.mu.Lock()
	defer ucxLoad.mu.Unlock()
	var tried []string
	for _, p := range ucxPaths() {
		cp := C.CString(p)
		var msg [512]C.char
		rc := C.xu_load(cp, &msg[0], C.size_t(len(msg)))
		C.free(unsafe.Pointer(cp))
		if rc == 0 {
			ucxLoad.path = p
			return nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", p, C.GoString(&msg[0])))
	}
	return fmt.Errorf("UCX does not load: tried %s; install libucx0 (Debian, Ubuntu) or ucx (RHEL, Fedora), "+
		"or name libucp.so with XCCL_UCX_LIBRARY", strings.Join(tried, ", "))
}

func ucxStatus(st C.int) string { return C.GoString(C.xu_status_string(st)) }

// ucxWorker is a communicator's UCP context and worker and the goroutine
// that drives them. mu is held around every UCP call (the worker is
// created UCS_THREAD_MODE_SERIALIZED).
type ucxWorker struct {
	mu    sync.Mutex
	w     *C.xu_worker // C memory
	links []*ucxLink   // every endpoint (data channels and control)
	ctl   []*ucxLink   // control endpoint per peer (nil: not a UCX peer)
	wake  *bell        // rung by the ranks' side of the rings; writes evfd
	evfd  int
	addr  []byte
	log   *zap.Logger
	spin  time.Duration // how long to poll after the last movement before sleeping

	// Under mu:
	aborting  bool      // force-close every endpoint now
	aborted   bool      // done that
	releasing bool      // the communicator let go: finish and tear down
	lingerEnd time.Time // tear down by then even if peers have not said goodbye
	done      chan struct{}
}

// newUCXWorker loads libucp, makes a context and worker (UCX_* variables
// apply: ucp_config_read reads them now) and starts the progress goroutine.
func newUCXWorker(log *zap.Logger, npeers int, spin time.Duration) (*ucxWorker, error) {
	if err := loadUCX(); err != nil {
		return nil, err
	}
	w := (*C.xu_worker)(C.calloc(1, C.size_t(unsafe.Sizeof(C.xu_worker{}))))
	var msg [512]C.char
	if C.xu_worker_create(w, &msg[0], C.size_t(len(msg))) != 0 {
		C.free(unsafe.Pointer(w))
		return nil, fmt.Errorf("UCX: %s", C.GoString(&msg[0]))
	}
	const addrCap = 1 << 16
	buf := C.malloc(addrCap)
	defer C.free(buf)
	var n C.size_t
	if st := C.xu_worker_address(w, buf, addrCap, &n); st != 0 {
		C.xu_worker_destroy(w)
		C.free(unsafe.Pointer(w))
		return nil, fmt.Errorf("UCX: worker address: %s", ucxStatus(st))
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		C.xu_worker_destroy(w)
		C.free(unsafe.Pointer(w))
		return nil, fmt.Errorf("UCX: eventfd: %v", err)
	}
	if v, err := strconv.Atoi(rt.Getenv("XCCL_UCX_SPIN_US")); err == nil && v >= 0 {
		spin = time.Duration(v) * time.Microsecond
	}
	u := &ucxWorker{w: w, evfd: evfd, log: log, spin: spin, ctl: make([]*ucxLink, npeers), done: make(chan struct{}),
		addr: C.GoBytes(buf, C.int(n))}
	u.wake = newPrivateBell()
	u.wake.efd = evfd + 1
	ucxLive.Add(1)
	go u.run()
	return u, nil
}

// connect makes the endpoints to peer p (its data channels, then its
// control endpoint: both sides make them in this order, which is how UCP
// pairs them) and posts the handshakes. macOut is what this rank sends on
// channel ch, macIn what it expects.
func (u *ucxWorker) connect(p int, addr []byte, ringBytes int, rankBell *bell, macOut, macIn func(ch int) []byte) ([]*ucxLink, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ca := C.CBytes(addr)
	defer C.free(ca)
	var out []*ucxLink
	for ch := 0; ch <= chCtl; ch++ {
		size := ringBytes
		if ch == chCtl {
			size = 64
		}
		l := newUCXLink(u, p, ch, size, rankBell, macOut(ch), macIn(ch))
		if st := C.xu_ep_create(u.w, ca, l.ep); st != 0 {
			l.freeMem()
			return out, fmt.Errorf("UCX endpoint to rank %d: %s (UCX_TLS=%q: no transport to it with peer-failure handling?)",
				p, ucxStatus(st), rt.Getenv("UCX_TLS"))
		}
		u.links = append(u.links, l)
		l.startLocked()
		if ch == chCtl {
			u.ctl[p] = l
		} else {
			out = append(out, l)
		}
	}
	u.wake.ring()
	return out, nil
}

// run is the progress goroutine.
func (u *ucxWorker) run() {
	defer ucxLive.Done()
	defer close(u.done)
	idle, lastMoved := 0, time.Now()
	for {
		u.mu.Lock()
		moved := false
		for C.xu_progress(u.w) != 0 {
			moved = true
		}
		for _, l := range u.links {
			moved = l.step() || moved
		}
		if u.aborting {
			u.abortLocked()
		}
		if u.releasing && (u.aborting || u.peersGone() || time.Now().After(u.lingerEnd)) {
			u.teardownLocked()
			u.mu.Unlock()
			return
		}
		u.mu.Unlock()
		if moved {
			idle = 0
			lastMoved = time.Time{}
			continue
		}
		// Poll on while the ranks are busy (a peer is usually microseconds
		// away): for u.spin where the machine has a CPU for this goroutine,
		// else a few passes.
		if idle++; idle%8 == 0 {
			goruntime.Gosched()
		}
		if idle < ucxSpinPolls {
			continue
		}
		if u.spin > 0 {
			now := time.Now()
			if lastMoved.IsZero() {
				lastMoved = now
			}
			if now.Sub(lastMoved) < u.spin {
				continue
			}
		}
		// Sleep: arm the bell (the rank's side rings it from now on), then
		// check once more and arm the worker's event fd.
		u.wake.arm()
		u.mu.Lock()
		busy := u.aborting || u.releasing
		for _, l := range u.links {
			busy = l.step() || busy
		}
		if !busy && C.xu_arm(u.w) != C.XU_OK { // busy: events are waiting
			busy = true
		}
		u.mu.Unlock()
		if !busy {
			fds := []unix.PollFd{{Fd: int32(u.w.efd), Events: unix.POLLIN}, {Fd: int32(u.evfd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, 100)
			var b [8]byte
			_, _ = unix.Read(u.evfd, b[:])
		}
		u.wake.disarm()
		idle, lastMoved = 0, time.Time{}
	}
}

// peersGone: every peer said goodbye or failed, and this rank's own
// goodbyes have left.
func (u *ucxWorker) peersGone() bool {
	for _, l := range u.ctl {
		if l == nil {
			continue
		}
		if l.err.Load() == nil && (!l.bye.Load() || l.out.head.Load() != l.out.tail.Load()) {
			return false
		}
	}
	return true
}

// abort force-closes every endpoint (from fail: the peers see the
// connections go); the rings stay until release.
func (u *ucxWorker) abort() {
	u.mu.Lock()
	u.aborting = true
	u.mu.Unlock()
	u.ring()
}

func (u *ucxWorker) ring() {
	one := [8]byte{1}
	_, _ = unix.Write(u.evfd, one[:])
}

// abortLocked tells every peer on its control endpoint (a goodbye that
// counts no bytes) and closes the data endpoints.
func (u *ucxWorker) abortLocked() {
	if u.aborted {
		return
	}
	u.aborted = true
	for _, l := range u.links {
		if l.ch == chCtl {
			if l.err.Load() == nil && !u.releasing {
				var bye [8 * nch]byte
				for i := range bye {
					bye[i] = 0xff
				}
				l.out.push(bye[:], 0)
			}
			continue
		}
		if l.ep.ep != nil {
			l.setErr(errors.New("closed by this rank"))
			l.closeEP(true)
		}
	}
}

// release hands the worker over to its goroutine: with linger, it sends
// every peer the goodbye and tears down once they all said theirs (or
// failed) or the deadline passed; without, at once. The rank must not
// touch the rings afterwards.
func (u *ucxWorker) release(linger bool, deadline time.Time) {
	u.mu.Lock()
	quiet := newPrivateBell() // the rank's bell may be unmapped from now on
	for _, l := range u.links {
		l.rankBell = quiet
	}
	if linger {
		// The goodbye says how many bytes each channel carried, so the
		// peer blames this rank only once all of them have arrived.
		for _, l := range u.ctl {
			if l != nil && l.err.Load() == nil {
				var bye [8 * nch]byte
				for _, d := range u.links {
					if d.peer == l.peer && d.ch < nch {
						binary.LittleEndian.PutUint64(bye[8*d.ch:], d.out.head.Load())
					}
				}
				l.out.push(bye[:], 0)
			}
		}
	}
	if !u.releasing {
		C.xu_release_begin() // the process's exit waits for the teardown
	}
	u.releasing, u.lingerEnd = true, deadline
	if !linger {
		u.aborting = true
	}
	u.mu.Unlock()
	u.ring()
}

// teardownLocked closes every endpoint, destroys the worker and frees the
// C memory (the progress goroutine, last thing it does).
func (u *ucxWorker) teardownLocked() {
	// Let the control messages out first (a goodbye or an abort), briefly.
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		pending := false
		for _, l := range u.ctl {
			if l != nil && l.ep.ep != nil && l.err.Load() == nil && l.out.head.Load() != l.out.tail.Load() {
				pending = true
				l.step()
			}
		}
		if !pending {
			break
		}
		C.xu_progress(u.w)
	}
	var closing []unsafe.Pointer
	for _, l := range u.links {
		l.cancelLocked()
		if l.ep.ep != nil {
			if r := C.xu_ep_close(u.w, l.ep, 1); r != nil {
				closing = append(closing, r)
			}
		}
	}
	for end := time.Now().Add(2 * time.Second); len(closing) > 0 && time.Now().Before(end); {
		C.xu_progress(u.w)
		k := 0
		for _, r := range closing {
			if C.xu_test_close(r) == C.XU_INPROGRESS {
				closing[k] = r
				k++
			} else {
				C.xu_free(r)
			}
		}
		closing = closing[:k]
	}
	for _, r := range closing {
		C.xu_free(r)
	}
	C.xu_worker_destroy(u.w)
	C.free(unsafe.Pointer(u.w))
	for _, l := range u.links {
		l.freeMem()
	}
	u.links = nil
	_ = unix.Close(u.evfd)
	C.xu_release_end()
}

// transports names what UCX picked for the link (from ucp_ep_print_info's
// lanes), e.g. "tcp/eth0" or "rc_mlx5/mlx5_0:1".
func (u *ucxWorker) transports(l *ucxLink) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if l.ep.ep == nil {
		return "?"
	}
	p := C.xu_ep_info(l.ep)
	if p == nil {
		return "?"
	}
	text := C.GoString(p)
	C.free(unsafe.Pointer(p))
	seen := map[string]bool{}
	var tls []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, "lane[") {
			continue
		}
		for _, f := range strings.Fields(line) {
			// "2:tcp/eth0.0" or "1:posix/memory.0": resource index, transport/device.
			if i := strings.IndexByte(f, ':'); i > 0 && strings.Contains(f[i:], "/") && !strings.HasPrefix(f, "md[") {
				tl := strings.TrimSuffix(f[i+1:], ".0")
				if !seen[tl] {
					seen[tl] = true
					tls = append(tls, tl)
				}
				break
			}
		}
	}
	if len(tls) == 0 {
		return "?"
	}
	return strings.Join(tls, ",")
}

// ucxLink is one endpoint: a data channel (rings the collectives use) or
// the control endpoint (its inbound ring only ever holds the goodbye).
type ucxLink struct {
	u        *ucxWorker
	peer, ch int
	ep       *C.xu_ep // C memory: UCX's error callback writes its status
	in, out  *ring    // data in C memory: UCX reads and writes it
	mem      [3]unsafe.Pointer
	rankBell *bell
	macIn    []byte
	up       atomic.Bool // handshake verified
	bye      atomic.Bool // control: the peer said goodbye
	byeSent  [nch]uint64 // control: what the peer sent on each channel (set before bye)
	err      atomic.Pointer[error]

	// Under u.mu (the progress goroutine):
	sends   []ucxSend
	posted  uint64         // outbound bytes handed to UCX (tail <= posted <= head)
	recvReq unsafe.Pointer // the receive posted into the inbound ring
	hsReq   unsafe.Pointer // the handshake receive
}

type ucxSend struct {
	req unsafe.Pointer // nil: completed at once
	n   int            // ring bytes it carries (0: the handshake)
}

func newUCXLink(u *ucxWorker, p, ch, ringBytes int, rankBell *bell, macOut, macIn []byte) *ucxLink {
	l := &ucxLink{u: u, peer: p, ch: ch, rankBell: rankBell, macIn: macIn}
	l.ep = (*C.xu_ep)(C.calloc(1, C.size_t(unsafe.Sizeof(C.xu_ep{}))))
	mk := func(i int, reader, writer *bell) *ring {
		l.mem[i] = C.malloc(C.size_t(ringBytes))
		var hw [2]atomic.Uint64
		return newRing(&hw[0], &hw[1], unsafe.Slice((*byte)(l.mem[i]), ringBytes), reader, writer)
	}
	l.in = mk(0, rankBell, u.wake)  // UCX writes, the rank reads
	l.out = mk(1, u.wake, rankBell) // the rank writes, UCX reads
	l.mem[2] = C.malloc(2 * ucxMACBytes)
	copy(unsafe.Slice((*byte)(l.mem[2]), ucxMACBytes), macOut)
	return l
}

func (l *ucxLink) macBuf(i int) unsafe.Pointer { return unsafe.Add(l.mem[2], i*ucxMACBytes) }

// startLocked posts the handshake: this side's MAC out, the peer's in.
func (l *ucxLink) startLocked() {
	var st C.int
	r := C.xu_send(l.ep, l.macBuf(0), ucxMACBytes, &st)
	if st < 0 {
		l.fail("UCX handshake send", st)
		return
	}
	l.sends = append(l.sends, ucxSend{req: r})
	var n C.size_t
	r = C.xu_recv(l.ep, l.macBuf(1), ucxMACBytes, 1, &n, &st)
	switch {
	case st < 0:
		l.fail("UCX handshake receive", st)
	case r == nil:
		l.verify()
	default:
		l.hsReq = r
	}
}

func (l *ucxLink) verify() {
	if !hmac.Equal(C.GoBytes(l.macBuf(1), ucxMACBytes), l.macIn) {
		l.setErr(errors.New("the peer's UCX link handshake does not verify (wrong secret or crossed channels)"))
		l.closeEP(true)
		return
	}
	l.up.Store(true)
	l.rankBell.ring()
}

func (l *ucxLink) setErr(err error) {
	if l.err.CompareAndSwap(nil, &err) {
		l.rankBell.ring()
	}
}

func (l *ucxLink) fail(what string, st C.int) {
	l.setErr(fmt.Errorf("%s: %s", what, ucxStatus(st)))
}

func (l *ucxLink) closeEP(force bool) {
	if l.ep.ep == nil {
		return
	}
	l.cancelLocked()
	f := C.int(0)
	if force {
		f = 1
	}
	if r := C.xu_ep_close(l.u.w, l.ep, f); r != nil {
		C.xu_free(r) // released by UCX once done
	}
}

// cancelLocked gives back every request this link holds.
func (l *ucxLink) cancelLocked() {
	for _, r := range []*unsafe.Pointer{&l.recvReq, &l.hsReq} {
		if *r != nil {
			C.xu_cancel(l.u.w, *r)
			C.xu_free(*r)
			*r = nil
		}
	}
	for _, s := range l.sends {
		if s.req != nil {
			C.xu_free(s.req)
		}
	}
	l.sends = nil
}

// step moves what it can without waiting (the progress goroutine, under
// u.mu); it reports whether anything moved.
func (l *ucxLink) step() bool {
	if l.ep.ep == nil {
		return false
	}
	if st := C.int(l.ep.status); st != 0 {
		l.fail("UCX endpoint failed", st)
		l.closeEP(true)
		return true
	}
	moved := false
	if l.hsReq != nil {
		var n C.size_t
		st := C.xu_test_recv(l.hsReq, &n)
		if st == C.XU_INPROGRESS {
			return l.stepSends()
		}
		C.xu_free(l.hsReq)
		l.hsReq = nil
		if st < 0 {
			l.fail("UCX handshake receive", st)
			l.closeEP(true)
			return true
		}
		l.verify()
		moved = true
	}
	if !l.up.Load() {
		return l.stepSends() || moved
	}
	moved = l.stepSends() || moved
	return l.stepRecv() || moved
}

// stepSends retires completed sends in order (the ring's tail follows
// them) and posts what the rank has written since.
func (l *ucxLink) stepSends() bool {
	moved := false
	r := l.out
	for {
		for len(l.sends) > 0 {
			s := l.sends[0]
			if s.req != nil {
				st := C.xu_test_send(s.req)
				if st == C.XU_INPROGRESS {
					break
				}
				C.xu_free(s.req)
				if st < 0 {
					l.sends = l.sends[1:]
					l.fail("UCX send", st)
					l.closeEP(true)
					return true
				}
			}
			l.sends = l.sends[1:]
			if s.n > 0 {
				r.tail.Store(r.tail.Load() + uint64(s.n))
				l.rankBell.ring()
			}
			moved = true
		}
		if len(l.sends) >= ucxMaxSends || l.ep.ep == nil {
			return moved
		}
		if l.posted < r.tail.Load() {
			l.posted = r.tail.Load()
		}
		avail := r.head.Load() - l.posted
		if avail == 0 {
			return moved
		}
		off := int(l.posted & r.mask)
		n := min(int(avail), len(r.data)-off, max(len(r.data)/ucxMaxSends, 64))
		var st C.int
		req := C.xu_send(l.ep, unsafe.Pointer(&r.data[off]), C.size_t(n), &st)
		if st < 0 {
			l.fail("UCX send", st)
			l.closeEP(true)
			return true
		}
		l.sends = append(l.sends, ucxSend{req: req, n: n})
		l.posted += uint64(n)
		moved = true
	}
}

// stepRecv completes the posted receive (the head moves by what came) and
// posts the next one into the free part of the ring.
func (l *ucxLink) stepRecv() bool {
	moved := false
	r := l.in
	if l.recvReq != nil {
		var n C.size_t
		st := C.xu_test_recv(l.recvReq, &n)
		if st == C.XU_INPROGRESS {
			return false
		}
		C.xu_free(l.recvReq)
		l.recvReq = nil
		if st < 0 {
			l.fail("UCX receive", st)
			l.closeEP(true)
			return true
		}
		l.arrived(int(n))
		moved = true
	}
	for l.ep.ep != nil {
		head := r.head.Load()
		free := uint64(len(r.data)) - (head - r.tail.Load())
		if free == 0 {
			return moved
		}
		off := int(head & r.mask)
		n := min(int(free), len(r.data)-off)
		var got C.size_t
		var st C.int
		req := C.xu_recv(l.ep, unsafe.Pointer(&r.data[off]), C.size_t(n), 0, &got, &st)
		switch {
		case st < 0:
			l.fail("UCX receive", st)
			l.closeEP(true)
			return true
		case req != nil:
			l.recvReq = req
			return moved
		case got == 0:
			return moved
		}
		l.arrived(int(got))
		moved = true
	}
	return moved
}

func (l *ucxLink) arrived(n int) {
	if n == 0 {
		return
	}
	l.in.head.Store(l.in.head.Load() + uint64(n))
	if l.ch == chCtl && !l.bye.Load() && l.in.head.Load() >= 8*nch {
		for ch := range l.byeSent {
			l.byeSent[ch] = binary.LittleEndian.Uint64(l.in.data[8*ch:])
		}
		l.bye.Store(true)
	}
	l.rankBell.ring()
}

func (l *ucxLink) freeMem() {
	for i, p := range l.mem {
		if p != nil {
			C.free(p)
			l.mem[i] = nil
		}
	}
	if l.ep != nil {
		C.free(unsafe.Pointer(l.ep))
		l.ep = nil
	}
}

// The link interface (link.go), for data channels.

func (l *ucxLink) rings() (in, out *ring) { return l.in, l.out }
func (l *ucxLink) transport() string      { return "ucx" }

func (l *ucxLink) error() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

// drained: every byte written has been sent (UCX completed the sends).
func (l *ucxLink) drained() bool {
	return l.out.head.Load() == l.out.tail.Load() || l.error() != nil
}

func (l *ucxLink) abort() { l.u.abort() }

// close: the worker's teardown frees the link (ucxWorker.release).
func (l *ucxLink) close() {}

// ucxFor is the worker that links this rank to peer p; on p's side,
// p's worker rank%workers links back.
func (c *Comm) ucxFor(p int) *ucxWorker { return c.ucx[p%len(c.ucx)] }

// connectUCX makes the UCX endpoints to peer p.
func (c *Comm) connectUCX(p int) error {
	me, them := c.peers[c.rank], c.peers[p]
	macOut := func(ch int) []byte {
		return mac(c.id.Secret[:], "xccl-ucx-link", c.id.Job, c.rank, p, ch, me.Handle, them.Handle)
	}
	macIn := func(ch int) []byte {
		return mac(c.id.Secret[:], "xccl-ucx-link", c.id.Job, p, c.rank, ch, them.Handle, me.Handle)
	}
	theirs := c.ucxAddrs[p]
	ls, err := c.ucxFor(p).connect(p, theirs[c.rank%len(theirs)], c.opts.RingBytes, c.bell, macOut, macIn)
	for ch, l := range ls {
		c.addLink(p, ch, l)
	}
	return err
}

// waitUCX waits until every UCX endpoint has verified its peer's
// handshake, and logs the transports UCX chose.
func (c *Comm) waitUCX(deadline time.Time) error {
	if c.ucx == nil {
		return nil
	}
	for {
		pending := -1
		for p := 0; p < c.n && pending < 0; p++ {
			for ch := 0; ch <= chCtl; ch++ {
				l := c.ucxFor(p).ctl[p]
				if ch < nch {
					l, _ = c.links[ch][p].(*ucxLink)
				}
				if l == nil {
					continue
				}
				if err := l.error(); err != nil {
					return fmt.Errorf("UCX link to rank %d (host %s): %v", p, hostName(c.peers[p].Host), err)
				}
				if !l.up.Load() {
					pending = p
					break
				}
			}
		}
		if pending < 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("UCX link to rank %d (host %s) not up before the deadline", pending, hostName(c.peers[pending].Host))
		}
		time.Sleep(200 * time.Microsecond)
	}
	var tls []string
	for p := 0; p < c.n; p++ {
		if l, ok := c.links[chColl][p].(*ucxLink); ok {
			tls = append(tls, fmt.Sprintf("%d:%s", p, l.u.transports(l)))
		}
	}
	c.log.Info("UCX links up", zap.String("library", ucxLoad.path), zap.Int("workers", len(c.ucx)),
		zap.String("transports", strings.Join(tls, " ")))
	return nil
}

// peerBye says what peer p's control endpoint told: that it destroyed its
// communicator (once everything it sent has arrived: waiting for more from
// it is an error) or aborted; "" when neither.
func (c *Comm) peerBye(p int) string {
	if c.ucx == nil || c.ucxFor(p).ctl[p] == nil || !c.ucxFor(p).ctl[p].bye.Load() {
		return ""
	}
	sent := c.ucxFor(p).ctl[p].byeSent
	if sent[0] == ^uint64(0) {
		return "aborted its communicator or failed"
	}
	for ch := 0; ch < nch; ch++ {
		if l, ok := c.links[ch][p].(*ucxLink); ok && l.in.head.Load() < sent[ch] {
			return ""
		}
	}
	return "destroyed its communicator"
}

// hostName is the host name part of a peer's host id.
func hostName(id string) string {
	h, _, _ := strings.Cut(id, "/")
	return h
}

// ucxLive counts the UCP workers whose goroutine runs (some linger after
// Destroy until their peers said goodbye).
var ucxLive sync.WaitGroup

// WaitUCXWorkers waits until every UCP worker of this process is gone
// (tests that count goroutines and file descriptors).
func WaitUCXWorkers() { ucxLive.Wait() }

// SkipWithoutUCX skips a test, saying why, where libucp does not load.
func SkipWithoutUCX(t interface{ Skip(...any) }) {
	if err := loadUCX(); err != nil {
		t.Skip("UCX tests skipped: ", err)
	}
}
