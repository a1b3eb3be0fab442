package host

import (
	"crypto/hmac"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	goruntime "runtime"
	"slices"
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

// Options tune one communicator; DefaultOptions reads them from XCCL_*.
type Options struct {
	Timeout   time.Duration // deadline of init and of every operation
	Transport string        // auto (shm on one machine, UCX or else TCP across), shm, tcp, ucx
	RingBytes int           // bytes per ring, a power of two
	Algo      string        // force an algorithm: direct, ring, cma
	SpinPolls int           // polls between yields while waiting (0: by rank and CPU count)
}

// DefaultOptions are the options from the environment.
func DefaultOptions() Options {
	c := rt.Load()
	return Options{Timeout: c.Timeout, Transport: c.Transport, RingBytes: pow2(c.ShmRing), Algo: c.Algo, SpinPolls: c.SpinPolls}
}

func pow2(n int) int {
	p := 4096
	for p < n {
		p <<= 1
	}
	return p
}

// Comm is one rank's host-device communicator.
type Comm struct {
	rank, n int
	id      UniqueID
	opts    Options
	peers   []peerInfo
	log     *zap.Logger

	seg      *segment     // own segment: bell, state, inbound shm rings
	bell     *bell        // own bell
	peerSegs []*segment   // mapped segments of shm peers (nil for TCP peers and self)
	links    [nch][]link  // TCP and UCX links (nil for shm peers and self)
	kinds    []string     // how each peer is linked: shm, tcp, ucx
	ucx      []*ucxWorker // UCP workers when some peer is linked by UCX (peer p: ucxFor)
	ucxAddrs [][][]byte   // every rank's UCP worker addresses (none: no UCX)
	in, out  [nch][]*ring

	collMu    sync.Mutex    // serialises collectives: one ring per pair and channel
	collSeq   uint64        // collectives so far (under collMu), for fingerprints
	inFlight  atomic.Uint64 // the call that holds collMu: collSeq+1 when it took it (0: none); Abort withdraws its messages
	recvMu    []sync.Mutex
	recvHdr   [][p2pHeaderSize]byte // a receive's header from each peer, under its recvMu
	sendq     []*sendQueue
	self      selfPipe // sends to this rank (selfp2p.go)
	scratch   [5][]byte
	xferLists [2][]xfer
	parts     [][]byte      // a fused batch's send buffers (under collMu)
	jobs      []redJob      // reductions of a direct call (under collMu)
	cjobs     *cJobs        // the same, as handed to C
	pending   pendingCall   // a fingerprint a direct form sends with its data (direct.go)
	seq       atomic.Uint64 // operations traced (exec, when the log is at debug level)

	fuseMu  sync.Mutex // the staging buffer of fused all-reduces
	fuseBuf []byte
	preMu   sync.Mutex // the staging buffer of pre-multiplied sums (premul.go)
	preBuf  []byte
	stats   [numStats]atomic.Uint64

	opTimeout   atomic.Int64 // nanoseconds every operation may take (SetTimeout; 0: opts.Timeout)
	lifeMu      sync.Mutex   // orders teardown (release) with fail and Abort from other threads
	released    bool         // segments unmapped, links closed (under lifeMu)
	broken      atomic.Pointer[error]
	culprit     atomic.Int32 // the first lost peer this rank reported, plus one (peerError; fail tells the peers)
	destroyed   atomic.Bool
	trace       bool                       // XCCL_DEBUG=TRACE: every call logged (exec)
	roomy       bool                       // every rank has a CPU of its own, as every rank computes it (roomy)
	inProcess   bool                       // some peer rank is a goroutine of this process
	movedAt     atomic.Int64               // when a thread of this rank last moved off a peer's CPU (moveOff): ms since the process began + 1, 0 never
	spin        int                        // polls between yields: more when every local rank has a CPU
	logged      [numAlgos]bool             // algorithm choices already logged (under collMu)
	token       *cmaToken                  // read by peers to test single-copy reads
	cma         bool                       // every rank reads every other directly (agreed at init)
	peerAddr    [][2]uintptr               // peers' send and receive buffers of the current collective
	peerRefs    [][2]allocRef              // the allocations holding them (peermap.go)
	pmem        peerMem                    // peers' memory mapped here (peermap.go; under collMu)
	views       [][]byte                   // peers' buffers as mapped here, during allReduceCMA
	allLarge    bool                       // every rank's send buffer of the current collective is in a large allocation (shareAddrs)
	allShared   bool                       // every rank's buffers of the current collective are in shared allocations (shareAddrs)
	sharedEarly bool                       // the addresses of the current collective are shared already (hugeSingleCopy)
	addrsIn     uint64                     // the collective whose addresses came with its fingerprints (addrsRide)
	addrOut     [addrMsgSize]byte          // this rank's buffers, sent with the fingerprints (addrsRide)
	sharedTry   bool                       // the current collective tries single copy below cmaMinBytes (tryShared)
	memo        [64]sharedMemo             // per size class, what the last address exchange found (tryShared)
	fusedMemo   [64]sharedMemo             // the same for fused all-reduces (fusedShared)
	lays        []fusedLayout              // every rank's fused batch (fusedShared)
	curs        []fusedCur                 // fusedCopy's
	fmaps       []fusedMap                 // fusedCopy's peers' allocations, mapped
	runs        []fusedRun                 // this rank's fused batch (fusedAddrs)
	copies      []redJob                   // fusedCopy's (dst and a)
	memoAt      int                        // the current collective's size class, when memoSeq is its number
	memoSeq     uint64                     // (tryShared)
	peerBells   []*bell                    // shm peers' bells (fast boxes ring them)
	fastCap     int                        // data bytes a fast box carries (fastbox.go)
	box         []peerBox                  // fast boxes with each shm peer (fastbox.go; under collMu)
	sent        *[fastDepth][fpHeader]byte // this rank's fingerprints of its last collectives, by slot (in fx with it)
	fx          *fastState                 // the C fast path's state (fastpath.go); nil: none (set at init, cleared by Destroy under collMu and fxMu)
	fxRun       atomic.Pointer[fastState]  // fx for exec's calls into C, which hold no lock (cleared by Destroy)
	fxOwner     uint64                     // this communicator's token in fx (owner)
	fxMu        sync.Mutex                 // orders StopFastPath and fastCalls, from any thread, with Destroy's
	fxStopped   atomic.Bool                // StopFastPath ran
	lateErr     error                      // a mismatch found after its collective returned (under collMu)
	mismatched  [fastDepth]uint64          // collectives that returned a mismatch, k in k%fastDepth (under collMu)
	lone        *[fastDepth]uint64         // collectives this rank waited for nobody in, k in k%fastDepth (drainBox; under collMu; in fx with it)
	allBoxed    bool                       // every pair of ranks is linked by fast boxes (agreed at init)
	quick       bool                       // small collectives may take the quick path (quick.go)
	boxPeers    []int                      // the other ranks, where every pair has fast boxes (allBoxed)
}

// Rank is this rank's index in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.n }

// Device names the device.
func (c *Comm) Device() string { return "host" }

// AsyncError is the error that broke the communicator, if any.
func (c *Comm) AsyncError() error {
	if p := c.broken.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Comm) fail(err error) error {
	if err == nil {
		return nil
	}
	c.StopFastPath() // before broken is seen: no C call succeeds past it
	if c.broken.CompareAndSwap(nil, &err) {
		c.log.Info("communicator broken", zap.Error(err)) // the call that returns it logs it (abi), once
		// Tell the peers now, so they fail fast instead of at their deadline:
		// shm peers see the state word, TCP peers a closed connection.
		c.lifeMu.Lock()
		defer c.lifeMu.Unlock()
		if c.released {
			return err
		}
		if k := c.culprit.Load(); k > 0 {
			c.seg.cause().Store(uint32(k)) // before the state word that tells the peers
		}
		c.seg.state().CompareAndSwap(stateAlive, stateAborted)
		c.ringPeers()
		for ch := 0; ch < nch; ch++ {
			for _, l := range c.links[ch] {
				if l != nil {
					l.abort()
				}
			}
		}
	}
	return err
}

func (c *Comm) timeout() time.Duration {
	if d := c.opTimeout.Load(); d > 0 {
		return time.Duration(d)
	}
	return c.opts.Timeout
}

// SetTimeout sets how long every later operation of this communicator may
// wait for its peers before it fails (XCCL_TIMEOUT is the default).
func (c *Comm) SetTimeout(d time.Duration) error {
	if d <= 0 {
		return rt.Errorf("timeout %v must be positive", d)
	}
	c.opTimeout.Store(int64(d))
	return nil
}

func (c *Comm) usable() error {
	if c.destroyed.Load() {
		return rt.Errorf("rank %d: communicator was destroyed", c.rank)
	}
	if err := c.AsyncError(); err != nil {
		return rt.WrapFailed(err, "rank %d: communicator is broken by an earlier error", c.rank)
	}
	return nil
}

// NewComm joins rank of nranks to the communicator named by id: bootstrap,
// link setup, and a barrier with every other rank, all within opts.Timeout.
func NewComm(id UniqueID, nranks, rank int, opts Options) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, rt.Errorf("rank %d out of range for %d ranks", rank, nranks)
	}
	if opts.RingBytes == 0 {
		opts.RingBytes = 1 << 20
	}
	opts.RingBytes = pow2(opts.RingBytes)
	if opts.Timeout <= 0 {
		opts.Timeout = 300 * time.Second
	}
	switch opts.Transport {
	case "", "auto", "shm", "tcp":
	case "ucx":
		if err := loadUCX(); err != nil {
			return nil, rt.Errorf("rank %d: XCCL_TRANSPORT=ucx: %v", rank, err)
		}
	default:
		return nil, rt.Errorf("unknown transport %q (want auto, shm, tcp or ucx)", opts.Transport)
	}
	deadline := time.Now().Add(opts.Timeout)
	c := &Comm{rank: rank, n: nranks, id: id, opts: opts,
		log: rt.Log().With(zap.String("comm", fmt.Sprintf("%016x", id.Job)), zap.Int("rank", rank), zap.Int("nranks", nranks))}
	c.trace = rt.Trace() && c.log.Core().Enabled(zap.DebugLevel)
	for ch := 0; ch < nch; ch++ {
		c.in[ch] = make([]*ring, nranks)
		c.out[ch] = make([]*ring, nranks)
		c.links[ch] = make([]link, nranks)
	}
	c.kinds = make([]string, nranks)
	c.peerSegs = make([]*segment, nranks)
	c.peerBells = make([]*bell, nranks)
	c.fastCap = fastCap(nranks)
	c.box = make([]peerBox, nranks)
	c.sent, c.lone = new([fastDepth][fpHeader]byte), new([fastDepth]uint64)
	c.recvMu = make([]sync.Mutex, nranks)
	c.recvHdr = make([][p2pHeaderSize]byte, nranks)
	c.sendq = make([]*sendQueue, nranks)
	for i := range c.sendq {
		c.sendq[i] = &sendQueue{}
	}

	shared := opts.Transport != "tcp" && opts.Transport != "ucx" && nranks > 1
	seg, err := createSegment(id.Job, rank, nranks, opts.RingBytes, shared)
	if err != nil && shared && opts.Transport == "auto" {
		c.log.Warn("shared memory unavailable, using TCP", zap.Error(err))
		c.count(statTCPFallback, 1)
		shared = false
		seg, err = createSegment(id.Job, rank, nranks, opts.RingBytes, false)
	}
	if err != nil {
		return nil, rt.WrapFailed(err, "rank %d: shared memory", rank)
	}
	c.seg, c.bell = seg, seg.bell()

	bind, err := bindAddr(rt.Load().SocketIf)
	if err != nil {
		c.release()
		return nil, err
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(bind, 0).String())
	if err != nil {
		c.release()
		return nil, rt.WrapFailed(err, "rank %d: listen", rank)
	}
	defer ln.Close()
	me := peerInfo{Addr: ln.Addr().String(), Host: testHostID(rank), Pid: os.Getpid(), Seg: seg.path, Mode: opts.Transport,
		Handle: randUint64(), CPUs: goruntime.NumCPU()}
	if shared && cmaEnabled() {
		cmaOnce.Do(allowPeersToRead)
		c.token = &cmaToken{magic: cmaMagic, nonce: randUint64() | 1}
		me.Token, me.TokenAddr = c.token.nonce, uint64(uintptr(unsafe.Pointer(c.token)))
	}
	faultPoint("segment-created")
	peers, ctl, err := joinRoot(id, nranks, rank, me, deadline)
	if err != nil {
		c.release()
		sweepJob(id.Job) // a rank that died during setup may have left its segment
		return nil, err
	}
	faultPoint("joined-root")
	c.peers = peers
	for p, info := range peers {
		c.inProcess = c.inProcess || (p != rank && info.Pid == me.Pid && info.Host == me.Host)
	}
	c.roomy = roomy(peers) || forceRoomy
	// How long to poll before yielding the CPU: goroutine ranks share this
	// process's Ps; process ranks with a CPU each yield seldom, and ranks
	// that outnumber the CPUs yield at once (the one with work may be
	// waiting for this CPU), as MPI does when oversubscribed.
	c.spin = spinLimit
	if local := c.localRanks(); !c.inProcess && local <= goruntime.NumCPU() {
		c.spin = 16 * spinLimit
	} else if !c.inProcess {
		c.spin = 1
	}
	if opts.SpinPolls > 0 {
		c.spin = opts.SpinPolls
	}
	if err := c.chooseLinks(ctl, deadline); err != nil {
		ctl.Close()
		c.release()
		sweepJob(id.Job)
		return nil, err
	}
	verdict := watchRoot(ctl, ln, deadline)
	err = c.connect(ln, deadline)
	faultPoint("linked")
	if err = finishJoin(ctl, rank, err, verdict, deadline); err != nil {
		c.release()
		sweepJob(id.Job)
		return nil, err
	}
	c.seg.unlink() // every peer has mapped it
	if err := c.agreeCMA(); err != nil {
		c.release()
		return nil, rt.WrapFailed(err, "rank %d: communicator setup", rank)
	}
	c.newFast()
	c.log.Info("communicator ready", zap.String("links", c.describeLinks()), zap.Bool("single_copy", c.cma))
	return c, nil
}

// roomy reports whether on every machine of the job there are no more
// ranks than CPUs (the fewest any of its ranks may run on), from what each
// rank sent at bootstrap: every rank computes the same answer, so it can
// choose algorithms. A rank that sent none (0) makes it false.
func roomy(peers []peerInfo) bool {
	ranks, cpus := map[string]int{}, map[string]int{}
	for _, p := range peers {
		ranks[p.Host]++
		if c, ok := cpus[p.Host]; !ok || p.CPUs < c {
			cpus[p.Host] = p.CPUs
		}
	}
	for h, n := range ranks {
		if n > cpus[h] {
			return false
		}
	}
	return len(peers) > 0
}

// forceRoomy makes every communicator roomy (tests: the 2-CPU machines
// they run on have room for 2 ranks only).
var forceRoomy bool

// localRanks counts the ranks on this machine (this one included).
func (c *Comm) localRanks() int {
	k := 0
	for _, p := range c.peers {
		if p.Host == c.peers[c.rank].Host {
			k++
		}
	}
	return k
}

var cmaOnce sync.Once

func randUint64() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// hostID names the machine as the transport sees it: hostname, boot id
// and network namespace. Ranks in different network namespaces (containers,
// or the multi-node test's namespaces) are different machines: TCP.
func hostID() string {
	h, _ := os.Hostname()
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/net")
	return h + "/" + strings.TrimSpace(string(b)) + "/" + ns
}

// chooseLinks settles how this rank reaches every peer (linkKind), and,
// when some pair may use UCX, makes this rank's UCP worker if it needs
// one and trades worker addresses through the root.
func (c *Comm) chooseLinks(ctl net.Conn, deadline time.Time) error {
	me := c.peers[c.rank]
	want, forced := 0, false
	for p := range c.peers {
		if p != c.rank {
			c.kinds[p] = linkKind(me, c.peers[p])
			if c.kinds[p] == "ucx" || c.kinds[p] == "ucx?" {
				want++
			}
			forced = forced || c.kinds[p] == "ucx"
		}
	}
	if !ucxRound(c.peers) {
		return nil
	}
	var why string
	var setupErr error
	if want > 0 {
		// Workers, each with its progress goroutine, share the UCX peers
		// out: as many as the CPUs left to this rank allow (one where
		// ranks share a process or the machine is full), at most 8. They
		// poll a while before sleeping where the CPUs allow that too.
		workers, spin := 1, time.Duration(0)
		if cpus := goruntime.NumCPU() / c.localRanks(); !c.inProcess && cpus >= 2 {
			workers, spin = min(want, cpus-1, 8), 200*time.Microsecond
		}
		var err error
		for i := 0; i < workers && err == nil; i++ {
			var u *ucxWorker
			if u, err = newUCXWorker(c.log, c.n, spin); err == nil {
				c.ucx = append(c.ucx, u)
			}
		}
		if err != nil {
			c.releaseUCX(false, deadline)
		}
		switch {
		case err == nil:
		case forced:
			setupErr = rt.Failedf("rank %d: a peer asks for UCX (XCCL_TRANSPORT=ucx): %v", c.rank, err)
		default:
			why = err.Error()
			c.log.Info("UCX unavailable: TCP between machines", zap.Error(err))
		}
	}
	var addr [][]byte
	for _, u := range c.ucx {
		addr = append(addr, u.addr)
	}
	addrs, whys, err := tradeUCX(ctl, c.rank, c.n, addr, why, setupErr, deadline)
	if err != nil {
		return err
	}
	c.ucxAddrs = addrs
	for p, k := range c.kinds {
		switch {
		case k == "ucx?" && c.ucx != nil && len(addrs[p]) > 0:
			c.kinds[p] = "ucx"
		case k == "ucx?":
			c.kinds[p] = "tcp"
		case k == "ucx" && len(addrs[p]) == 0:
			return rt.Failedf("rank %d: UCX link to rank %d forced, but rank %d has no UCX: %s", c.rank, p, p, whys[p])
		}
	}
	if c.ucx != nil && !slices.Contains(c.kinds, "ucx") {
		c.releaseUCX(false, deadline) // every peer that might have used it lacks UCX
	}
	return nil
}

// releaseUCX hands the UCP workers over to their goroutines (ucx.go).
func (c *Comm) releaseUCX(linger bool, deadline time.Time) {
	for _, u := range c.ucx {
		u.release(linger, deadline)
	}
	c.ucx = nil
}

// testHostID is hostID; tests make goroutine ranks of one process look
// like ranks of different machines.
var testHostID = func(rank int) string { return hostID() }

func (c *Comm) sameHost(p int) bool { return c.kinds[p] == "shm" }

func (c *Comm) describeLinks() string {
	var b strings.Builder
	for p := 0; p < c.n; p++ {
		switch {
		case p == c.rank:
			b.WriteString("self ")
		case c.peerSegs[p] != nil:
			fmt.Fprintf(&b, "%d:shm ", p)
		case c.links[chColl][p] != nil:
			fmt.Fprintf(&b, "%d:%s ", p, c.links[chColl][p].transport())
		default:
			fmt.Fprintf(&b, "%d:? ", p)
		}
	}
	return strings.TrimSpace(b.String())
}

// connect maps shm peers' segments and dials or accepts TCP peers.
func (c *Comm) connect(ln net.Listener, deadline time.Time) error {
	accepts := 0
	for p := 0; p < c.n; p++ {
		if p == c.rank {
			continue
		}
		if c.sameHost(p) {
			if err := c.seg.reserve(p); err != nil {
				return err
			}
			ps, err := openSegment(c.peers[p].Seg, c.id.Job, c.n, c.opts.RingBytes)
			if err != nil {
				return fmt.Errorf("map the segment of rank %d: %v", p, err)
			}
			c.peerSegs[p] = ps
			c.peerBells[p] = ps.bell()
			c.openBox(p, ps)
			for ch := 0; ch < nch; ch++ {
				h, t, d := ps.slot(c.rank, ch)
				c.out[ch][p] = newRing(h, t, d, ps.bell(), c.bell)
				h, t, d = c.seg.slot(p, ch)
				c.in[ch][p] = newRing(h, t, d, c.bell, ps.bell())
			}
			continue
		}
		if c.opts.Transport == "shm" {
			return fmt.Errorf("XCCL_TRANSPORT=shm but rank %d is on another machine (%s)", p, c.peers[p].Host)
		}
		if c.kinds[p] == "ucx" {
			if err := c.connectUCX(p); err != nil {
				return err
			}
			continue
		}
		if p > c.rank {
			accepts += nch
			continue
		}
		for ch := 0; ch < nch; ch++ {
			if err := c.dialLink(p, ch, deadline); err != nil {
				return err
			}
		}
	}
	for accepts > 0 {
		if tl, ok := ln.(*net.TCPListener); ok {
			_ = tl.SetDeadline(deadline)
		}
		conn, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("waiting for %d connections from higher ranks: %v", accepts, err)
		}
		if err := c.acceptLink(conn, deadline); err != nil {
			c.log.Warn("refused a data connection", zap.String("from", conn.RemoteAddr().String()), zap.Error(err))
			conn.Close()
			continue
		}
		accepts--
	}
	return c.waitUCX(deadline)
}

func (c *Comm) dialLink(p, ch int, deadline time.Time) error {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("tcp", c.peers[p].Addr)
	if err != nil {
		return fmt.Errorf("connect to rank %d at %s: %v", p, c.peers[p].Addr, err)
	}
	_ = conn.SetDeadline(deadline)
	m, err := readMsg(conn)
	if err == nil && len(m.Nonce) != 32 {
		err = errors.New("bad challenge")
	}
	if err == nil {
		err = writeMsg(conn, &bootMsg{Job: c.id.Job, Rank: c.rank, Ch: ch,
			MAC: mac(c.id.Secret[:], "xccl-link", c.id.Job, c.rank, p, ch, m.Nonce)})
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("handshake with rank %d: %v", p, err)
	}
	_ = conn.SetDeadline(time.Time{})
	c.addTCP(p, ch, conn)
	return nil
}

func (c *Comm) acceptLink(conn net.Conn, deadline time.Time) error {
	_ = conn.SetDeadline(deadline)
	challenge := nonce()
	if err := writeMsg(conn, &bootMsg{Nonce: challenge}); err != nil {
		return err
	}
	m, err := readMsg(conn)
	if err != nil {
		return err
	}
	if m.Job != c.id.Job || m.Rank <= c.rank || m.Rank >= c.n || m.Ch < 0 || m.Ch >= nch {
		return fmt.Errorf("unexpected link request (job %x rank %d channel %d)", m.Job, m.Rank, m.Ch)
	}
	if !hmac.Equal(m.MAC, mac(c.id.Secret[:], "xccl-link", c.id.Job, m.Rank, c.rank, m.Ch, challenge)) {
		return errors.New("link handshake does not verify")
	}
	if c.kinds[m.Rank] != "tcp" {
		return fmt.Errorf("rank %d dialled, but its link is %s", m.Rank, c.kinds[m.Rank])
	}
	if c.links[m.Ch][m.Rank] != nil {
		return fmt.Errorf("duplicate link from rank %d", m.Rank)
	}
	_ = conn.SetDeadline(time.Time{})
	c.addTCP(m.Rank, m.Ch, conn)
	return nil
}

func (c *Comm) addTCP(p, ch int, conn net.Conn) {
	c.addLink(p, ch, newTCPLink(conn, c.opts.RingBytes, c.bell))
}

func (c *Comm) addLink(p, ch int, l link) {
	c.links[ch][p] = l
	c.in[ch][p], c.out[ch][p] = l.rings()
}

// peerError reports a lost peer: closed or aborted communicator, dead
// process, broken connection.
//
// The first lost peer it reports is the culprit that fail records for this
// rank's own peers: the peer itself, or, for a peer that aborted because it
// lost another rank, that rank, whom the error then names.
func (c *Comm) peerError(p int) error {
	culprit, err := c.lostPeer(p)
	if err != nil {
		c.culprit.CompareAndSwap(0, int32(culprit+1))
	}
	return err
}

func (c *Comm) lostPeer(p int) (int, error) {
	if ps := c.peerSegs[p]; ps != nil {
		switch ps.state().Load() {
		case stateClosed:
			return p, rt.Failedf("rank %d destroyed its communicator", p)
		case stateAborted:
			q := int(ps.cause().Load()) - 1
			if q < 0 || q >= c.n || q == p || q == c.rank {
				return p, rt.Failedf("rank %d aborted its communicator or failed", p)
			}
			why := "it lost rank " + strconv.Itoa(q)
			if qs := c.peerSegs[q]; qs != nil && qs.state().Load() == stateAlive && !qs.ownerAlive() {
				why = fmt.Sprintf("rank %d (pid %d on %s) died", q, c.peers[q].Pid, c.peers[q].Host)
			}
			return q, rt.Failedf("rank %d aborted its communicator: %s", p, why)
		case stateAlive:
		default:
			return p, rt.Failedf("rank %d's shared segment is corrupt (state word %d)", p, ps.state().Load())
		}
		if !ps.ownerAlive() {
			return p, rt.Failedf("rank %d (pid %d on %s) died", p, c.peers[p].Pid, c.peers[p].Host)
		}
		return p, nil
	}
	if bye := c.peerBye(p); bye != "" {
		return p, rt.Failedf("rank %d %s", p, bye)
	}
	for ch := 0; ch < nch; ch++ {
		if l := c.links[ch][p]; l != nil {
			if err := l.error(); err != nil {
				where := c.peers[p].Addr
				switch {
				case l.transport() == "ucx":
					where = "UCX, host " + hostName(c.peers[p].Host)
				case errors.Is(err, unix.ECONNRESET): // tcpLink.abort
					return p, rt.Failedf("rank %d aborted its communicator or failed (connection %s reset)", p, where)
				case errors.Is(err, io.EOF), errors.Is(err, unix.EPIPE): // read its close, or wrote after it
					return p, rt.Failedf("rank %d closed its connection (%s): it destroyed its communicator or exited", p, where)
				}
				return p, rt.Failedf("connection to rank %d (%s) lost: %v", p, where, err)
			}
		}
	}
	return p, nil
}

// xfer is one message to or from one peer on one channel. A receive
// copies what arrives into buf, reduces it into buf, or drops it.
type xfer struct {
	peer, ch int
	mode     xferMode
	buf      []byte
	done     int // padded bytes moved
	elem     int // a partial receive hands over whole elements only
	dt       rt.DataType
	op       rt.ReduceOp
	fb       []byte // fast-box slot (fastbox.go)
	src      []byte // xReduceFrom: the other operand, as long as buf
	seq      uint64 // the collective a fast-box transfer belongs to
}

type xferMode uint8

const (
	xSend xferMode = iota
	xCopy
	xReduce
	xReduceFrom // buf = src op incoming (src's bytes are not copied first)
	xDiscard
	xFastRecv
	xBoxFree // waits until a peer is done with a fast-box slot (boxReady)
	xDrain   // never finishes: checks what came in the fast boxes meanwhile (drainBoxes)
)

func (x *xfer) finished() bool { return x.done == padded(len(x.buf)) }

// consume takes the data bytes at offset off of the message.
func (x *xfer) consume(off int, p []byte) {
	switch x.mode {
	case xCopy:
		copy(x.buf[off:], p)
	case xReduce:
		reduceInto(x.buf[off:off+len(p)], p, x.dt, x.op)
	case xReduceFrom:
		reduce3Into(x.buf[off:off+len(p)], x.src[off:], p, x.dt, x.op)
	}
}

func sendTo(peer int, buf []byte) xfer { return xfer{peer: peer, ch: chColl, mode: xSend, buf: buf} }

func recvFrom(peer int, buf []byte) xfer {
	return xfer{peer: peer, ch: chColl, mode: xCopy, buf: buf, elem: 1}
}

func recvReduce(peer int, dst []byte, dt rt.DataType, op rt.ReduceOp) xfer {
	return xfer{peer: peer, ch: chColl, mode: xReduce, buf: dst, elem: dt.Size(), dt: dt, op: op}
}

// recvReduceFrom receives into dst src reduced with what comes from peer
// (a plain recvReduce when they are the same bytes).
func recvReduceFrom(peer int, dst, src []byte, dt rt.DataType, op rt.ReduceOp) xfer {
	x := recvReduce(peer, dst, dt, op)
	if addrOf(dst) != addrOf(src) {
		x.mode, x.src = xReduceFrom, src
	}
	return x
}

const (
	spinLimit  = 64  // polls between yields
	spinYields = 100 // yields before sleeping on the bell
	// armWindow bounds how long a store can sit in a writer's store buffer
	// past its check of the bell's waiters (fastSend): far more than it takes.
	armWindow = 200 * time.Microsecond
)

// progress moves every transfer to completion, waiting on the bell when
// nothing moves, and fails on abort, a lost peer, or the deadline.
func (c *Comm) progress(what label, xs ...xfer) error { return c.progressAlso(what, nil, xs...) }

// progressAlso is progress that also moves the sends of extra (a group's
// sends that did not fit their rings, p2pGroup) as far as they go while it
// waits for xs; it returns once xs are done, whatever is left of extra.
func (c *Comm) progressAlso(what label, extra []xfer, xs ...xfer) error {
	var start, lastCheck time.Time // read only once waiting starts
	idle, spin := 0, c.spin
	for {
		done, moved := c.passAlso(xs, extra)
		if done {
			return nil
		}
		if moved {
			idle = 0
			continue
		}
		// Poll first (a peer is usually microseconds away), yielding the
		// CPU to the other ranks now and then; sleep on the bell only after
		// spinYields yields without progress. A peer found on this very
		// CPU cannot move while this rank polls: yield at once, and often.
		if idle++; idle == coCheck && spin > coCheck {
			if cpu, peer, shared := c.sharesCPU(xs); shared {
				if c.rank > peer && c.moveOff(cpu) {
					c.count(statMovedOff, 1)
					idle = 0
					continue
				}
				spin = coYield
				c.count(statSharedCPU, 1)
			}
		}
		if idle%spin != 0 {
			continue
		}
		if idle < spinYields*max(c.spin, spinLimit) {
			// Yield to other processes' ranks, and to this process's other
			// goroutine-ranks when there are any (they share its Ps).
			if c.inProcess {
				goruntime.Gosched()
			}
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			continue
		}
		if err := c.AsyncError(); err != nil {
			return err
		}
		if c.seg.state().Load() == stateAborted {
			return rt.Failedf("rank %d: communicator aborted", c.rank)
		}
		if what.recv && c.destroyed.Load() { // Destroy waits for the receives (recvMu): this one ends
			return rt.Errorf("rank %d: %s: the communicator was destroyed while it waited", c.rank, what)
		}
		now := time.Now()
		if start.IsZero() {
			start, lastCheck = now, now
		}
		if now.Sub(lastCheck) > 50*time.Millisecond {
			lastCheck = now
			if err := c.checkPeers(what, xs, now.Sub(start) > c.timeout()); err != nil {
				return err
			}
		}
		seen := c.bell.arm()
		if done, moved = c.passAlso(xs, extra); done {
			c.bell.disarm()
			return nil
		}
		if moved {
			c.bell.disarm()
			idle = 0
			continue
		}
		// A fast box published while this rank armed may have missed the
		// bell (fastSend): look once more after armWindow, still armed;
		// a later writer sees the waiter.
		c.count(statSleeps, 1)
		if !c.bell.wait(seen, armWindow) {
			if done, moved = c.passAlso(xs, extra); done || moved {
				c.count(statLateWakes, 1) // progress came without a wake-up
				c.bell.disarm()
				if done {
					return nil
				}
				idle = 0
				continue
			}
		}
		c.bell.sleep(seen, 20*time.Millisecond)
	}
}

// A rank that has polled coCheck times for a peer asks whether the peer
// shares its CPU (sharesCPU): the scheduler may keep two ranks on one CPU
// for seconds while the other idles (processes started together begin on
// their parent's CPU), and then a rank's every wait lasted the other's
// spin (a 2-rank 8-byte exchange took 13-20 us, not 0.3). The higher rank
// of the two moves its thread to a CPU near (moveOff: only a thread free
// to run on every CPU); where it does not, both yield every coYield polls.
const (
	coCheck = 64
	coYield = 8
	coFresh = 10 * time.Millisecond // a peer's note older than this says nothing
	coMove  = 50 * time.Millisecond // a rank moves off a peer's CPU at most this often
)

// sharesCPU notes the CPU this rank waits on (for its peers to read) and
// says whether the first peer of an unfinished transfer of xs noted the
// same one at a long wait of its own in the last coFresh (a system call
// and a clock read: only in a wait that has lasted a while): the CPU, the
// peer, and whether they share it.
func (c *Comm) sharesCPU(xs []xfer) (cpu, peer int, shared bool) {
	if c.inProcess {
		return 0, 0, false // goroutine ranks yield to each other already
	}
	cpu, ms, ok := c.noteCPU()
	if !ok {
		return 0, 0, false
	}
	for i := range xs {
		if x := &xs[i]; !x.finished() && c.peerSegs[x.peer] != nil { // nil: this rank, or a peer on another machine
			w := c.peerSegs[x.peer].cpu().Load()
			return cpu, x.peer, w&0xffff == uint64(cpu+1)&0xffff && ms-w>>16 <= uint64(coFresh/time.Millisecond)
		}
	}
	return 0, 0, false
}

// noteCPU writes the CPU the calling thread runs on into this rank's
// segment, for its peers to read: the CPU + 1 in the low 16 bits, the wall
// clock's milliseconds above; the CPU and those milliseconds.
func (c *Comm) noteCPU() (cpu int, ms uint64, ok bool) {
	var n uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&n)), 0, 0); e != 0 {
		return 0, 0, false
	}
	ms = uint64(time.Now().UnixMilli())
	c.seg.cpu().Store(ms<<16 | uint64(n+1)&0xffff)
	return int(n), ms, true
}

// passAlso is pass over xs, then over extra (sends moved on the way, whose
// completion done does not count).
func (c *Comm) passAlso(xs, extra []xfer) (done, moved bool) {
	done, moved = c.pass(xs)
	if !done && len(extra) > 0 {
		if _, m := c.pass(extra); m {
			moved = true
		}
	}
	return done, moved
}

// faultPoint lets the fault-injection tests stop a rank process at a named
// point of its life; nil outside them.
var faultPoint = func(string) {}

// pass moves every transfer as far as the rings allow, once. Transfers
// through one ring go in list order, as the peer expects them: a message
// starts only once the ones before it on that ring are whole, even when
// the ring made room for it meanwhile (the peer or a socket helper reads
// while this rank writes). A ring is held for the rest of the pass from
// its first unfinished message on.
func (c *Comm) pass(xs []xfer) (done, moved bool) {
	done = true
	held := false
	for i := range xs {
		x := &xs[i]
		if x.mode == xDrain {
			moved = c.drainBoxes() || moved
			continue
		}
		if x.finished() {
			continue
		}
		r := c.ringOf(x)
		var n int
		switch {
		case r != nil && r.held:
		case x.mode == xSend:
			n = r.push(x.buf, x.done)
		case x.mode == xFastRecv:
			n = c.fastPass(x)
		case x.mode == xBoxFree:
			if c.boxFree(x.peer, x.seq) {
				n = padded(len(x.buf))
			}
		default:
			n = r.pull(x)
		}
		x.done += n
		moved = moved || n > 0
		if !x.finished() {
			done = false
			if r != nil {
				r.held, held = true, true
			}
		}
	}
	if held {
		for i := range xs {
			if r := c.ringOf(&xs[i]); r != nil {
				r.held = false
			}
		}
	}
	return done, moved
}

// ringOf is the ring transfer x moves through (nil: a fast box, or none).
func (c *Comm) ringOf(x *xfer) *ring {
	switch x.mode {
	case xFastRecv, xBoxFree, xDrain:
		return nil
	case xSend:
		return c.out[x.ch][x.peer]
	}
	return c.in[x.ch][x.peer]
}

// checkPeers fails on a lost peer of an unfinished transfer, or, past the
// deadline, names the first transfer that did not finish.
func (c *Comm) checkPeers(what label, xs []xfer, late bool) error {
	for i := range xs {
		x := &xs[i]
		if x.finished() {
			continue
		}
		r, dir := c.in[x.ch][x.peer], "from"
		if x.mode == xSend {
			r, dir = c.out[x.ch][x.peer], "to"
		}
		if r.bad {
			return rt.Failedf("rank %d: %s: the shared ring %s rank %d is corrupt (head %d, tail %d, %d bytes)",
				c.rank, what, dir, x.peer, r.head.Load(), r.tail.Load(), len(r.data))
		}
		if err := c.peerError(x.peer); err != nil {
			return rt.WrapFailed(err, "rank %d: %s", c.rank, what)
		}
	}
	if !late {
		return nil
	}
	// Name every rank this call still waits for, and how far each got.
	var waits []string
	for i := range xs {
		x := &xs[i]
		switch {
		case x.finished():
		case x.mode == xBoxFree:
			waits = append(waits, fmt.Sprintf("waiting for rank %d to finish op #%d", x.peer, x.seq-fastDepth))
		default:
			dir := "receiving from"
			if x.mode == xSend {
				dir = "sending to"
			}
			waits = append(waits, fmt.Sprintf("%s rank %d (%d of %d bytes moved)", dir, x.peer, min(x.done, len(x.buf)), len(x.buf)))
		}
	}
	if len(waits) == 0 {
		return nil
	}
	return rt.Failedf("rank %d: %s timed out after %v %s", c.rank, what, c.timeout(), strings.Join(waits, ", "))
}

// xfers returns transfer list i, empty, with room for n (collectives hold
// collMu; list 1 is the fingerprint round's).
func (c *Comm) xfers(i, n int) []xfer {
	if cap(c.xferLists[i]) < n {
		c.xferLists[i] = make([]xfer, 0, n)
	}
	return c.xferLists[i][:0]
}

// buf returns scratch buffer i of at least n bytes (collectives hold collMu).
func (c *Comm) buf(i, n int) []byte {
	if cap(c.scratch[i]) < n {
		c.scratch[i] = make([]byte, n+n/4)
	}
	return c.scratch[i][:n]
}

func bytesAt(p unsafe.Pointer, n int) []byte {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// sendQueue holds point-to-point sends that did not fit in the ring, so a
// send never waits for its receiver: the bytes are copied and a goroutine
// pushes them in order.
type sendQueue struct {
	mu      sync.Mutex
	q       []queuedSend
	running bool
	idle    *sync.Cond
	hdr     [p2pHeaderSize]byte // the header of the send under way (a queued one has a copy)
}

// queuedSend is a piece of a queued message (its header or its data) and
// the message's payload size, which a timeout names.
type queuedSend struct {
	x     *xfer
	bytes int
}

func (c *Comm) p2pSend(peer int, data []byte) error {
	if peer == c.rank {
		return c.selfSend(data)
	}
	sq := c.sendq[peer]
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if c.destroyed.Load() { // destroyed (or aborted) meanwhile: its rings may be gone
		return c.usable()
	}
	sq.hdr = p2pHeader(len(data))
	xs := [2]xfer{
		{peer: peer, ch: chP2P, mode: xSend, buf: sq.hdr[:]},
		{peer: peer, ch: chP2P, mode: xSend, buf: data},
	}
	next := 0
	if !sq.running {
		r := c.out[chP2P][peer]
		if r.pushWhole(&sq.hdr, data) {
			return nil
		}
		for next < len(xs) {
			x := &xs[next]
			if x.done += r.push(x.buf, x.done); !x.finished() {
				break
			}
			next++
		}
		if next == len(xs) {
			return nil
		}
	}
	for i := next; i < len(xs); i++ {
		c.queueSend(sq, &xs[i], len(data))
	}
	c.count(statSendCopied, 1)
	return nil
}

// queueSend queues what x has left to push (a piece of a message of bytes
// bytes; x.done is whole ring units) on sq, which the caller holds locked:
// copied, as the caller's buffer is the caller's again once the call
// returns, and pushed by sq's drain goroutine, started if none runs.
func (c *Comm) queueSend(sq *sendQueue, x *xfer, bytes int) {
	q := &xfer{peer: x.peer, ch: x.ch, mode: xSend, buf: append([]byte(nil), x.buf[x.done:]...)}
	sq.q = append(sq.q, queuedSend{x: q, bytes: bytes})
	if !sq.running {
		sq.running = true
		go c.drain(x.peer, sq)
	}
}

// p2pGroup runs a group of sends and receives (in issue order): the sends
// first, then the receives, as runComm does, but a send that does not fit
// its ring at once is not copied aside for a goroutine to push: it goes
// on from the caller's buffer while this rank receives (a symmetric
// exchange of large messages streams both ways through the rings), and
// after the receives for as long as its receiver keeps taking it. What is
// left then is queued as p2pSend queues it, so a send never waits for its
// receiver. The send queues of the peers it sends to stay locked until the
// end, so no other send to them comes between. A receive of another size
// than its send does not stop the rest (errP2PSize); the first error is
// returned.
func (c *Comm) p2pGroup(ops []*rt.Op) (err error) {
	g := p2pGroupRun{c: c}
	defer func() {
		if qerr := g.flush(); err == nil {
			err = qerr
		}
	}()
	return g.run(ops)
}

// p2pGroupRun is p2pGroup's state: the sends not yet whole in their rings,
// in order, and the send queues of their peers, which it holds locked (so
// no other send to those peers comes between); a peer whose messages are
// whole in its ring is let go at once.
type p2pGroupRun struct {
	c     *Comm
	held  [4]*sendQueue // the first ones (no allocation for a few peers)
	nheld int
	more  []*sendQueue
	extra []xfer
}

func (g *p2pGroupRun) holding() []*sendQueue {
	if len(g.more) == 0 {
		return g.held[:g.nheld]
	}
	return append(g.held[:g.nheld:g.nheld], g.more...)
}

func (g *p2pGroupRun) holds(sq *sendQueue) bool {
	return slices.Contains(g.held[:g.nheld], sq) || slices.Contains(g.more, sq)
}

func (g *p2pGroupRun) hold(sq *sendQueue) {
	if g.nheld < len(g.held) {
		g.held[g.nheld] = sq
		g.nheld++
		return
	}
	g.more = append(g.more, sq)
}

// letGo unlocks sq, which the group held.
func (g *p2pGroupRun) letGo(sq *sendQueue) {
	if i := slices.Index(g.held[:g.nheld], sq); i >= 0 {
		g.nheld--
		g.held[i], g.held[g.nheld] = g.held[g.nheld], nil
	} else if i := slices.Index(g.more, sq); i >= 0 {
		g.more = slices.Delete(g.more, i, i+1)
	}
	sq.mu.Unlock()
}

// flush queues what is left of the group's sends (copied aside, as
// p2pSend queues one) and unlocks every queue it holds; an error when the
// communicator went (destroyed, broken) with sends unfinished.
func (g *p2pGroupRun) flush() error {
	err := g.c.queueRest(g.extra)
	g.extra = nil
	for _, sq := range g.holding() {
		sq.mu.Unlock()
	}
	g.nheld, g.more = 0, nil
	return err
}

// pending says whether an unfinished send to peer is in extra.
func (g *p2pGroupRun) pending(peer int) bool {
	for i := range g.extra {
		if g.extra[i].peer == peer && !g.extra[i].finished() {
			return true
		}
	}
	return false
}

func (g *p2pGroupRun) run(ops []*rt.Op) error {
	c := g.c
	for _, op := range ops {
		if op.Kind != rt.OpSend {
			continue
		}
		data, peer := bytesAt(op.Send, op.Count*op.Type.Size()), op.Root
		if peer == c.rank {
			if err := c.failed(c.selfSend(data)); err != nil {
				return err
			}
			continue
		}
		sq := c.sendq[peer]
		if !g.holds(sq) {
			// Holding others, never wait for a lock (two threads' groups on
			// one communicator would wait for each other): on contention
			// the unfinished sends are queued and let go first (holding
			// none, the flush does nothing).
			if !sq.mu.TryLock() {
				if err := g.flush(); err != nil {
					return err
				}
				sq.mu.Lock()
			}
			if sq.running { // behind a queue a goroutine drains (it needs the lock between messages): as ungrouped
				sq.mu.Unlock()
				if err := g.flush(); err != nil {
					return err
				}
				if err := c.failed(c.p2pSend(peer, data)); err != nil {
					return err
				}
				continue
			}
			g.hold(sq)
		}
		if c.destroyed.Load() { // its rings may be gone
			return c.usable()
		}
		g.send(peer, data)
		if !g.pending(peer) {
			g.letGo(sq) // whole in the ring: others may send to peer meanwhile
		}
	}
	// A receive into memory a send of the group has not yet pushed would
	// overwrite it (an exchange in place): those sends are queued first.
	for _, op := range ops {
		if op.Kind == rt.OpRecv && g.overlaps(bytesAt(op.Recv, op.Count*op.Type.Size())) {
			if err := g.flush(); err != nil {
				return err
			}
			break
		}
	}
	var first error
	for _, op := range ops {
		if op.Kind != rt.OpRecv {
			continue
		}
		err := c.failed(c.p2pRecvAlso(op.Root, bytesAt(op.Recv, op.Count*op.Type.Size()), g.extra))
		if err != nil {
			if !errors.Is(err, errP2PSize) {
				return err
			}
			if first == nil {
				first = err
			}
		}
	}
	g.finish()
	return first
}

// overlaps says whether b shares a byte with an unfinished send's data.
func (g *p2pGroupRun) overlaps(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	lo, hi := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&b[0]))+uintptr(len(b))
	for i := range g.extra {
		x := &g.extra[i]
		if len(x.buf) == 0 || x.finished() {
			continue
		}
		xlo := uintptr(unsafe.Pointer(&x.buf[0]))
		if xlo < hi && lo < xlo+uintptr(len(x.buf)) {
			return true
		}
	}
	return false
}

// finish pushes on, after the receives, while the receivers take the
// group's unfinished sends, for at most finishStall without progress: what
// is left is queued (flush), so a send never waits for its receiver.
func (g *p2pGroupRun) finish() {
	c := g.c
	var last time.Time // read once waiting starts
	for idle := 0; len(g.extra) > 0 && !c.destroyed.Load(); idle++ {
		done, moved := c.pass(g.extra)
		if done {
			g.extra = nil
			return
		}
		if moved {
			idle, last = 0, time.Time{}
			continue
		}
		if idle%c.spin == c.spin-1 { // yield, as progress does
			now := time.Now()
			if last.IsZero() {
				last = now
			} else if now.Sub(last) > finishStall {
				return
			}
			if c.inProcess {
				goruntime.Gosched()
			}
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}

// finishStall is how long a group's send waits, after the group's
// receives, for a receiver that stopped taking before it is copied aside.
const finishStall = 200 * time.Microsecond

// send pushes a message to peer as far as its ring takes it now, unless
// an earlier one to peer is still unfinished; the rest joins extra.
func (g *p2pGroupRun) send(peer int, data []byte) {
	hdr := p2pHeader(len(data))
	r := g.c.out[chP2P][peer]
	if !g.pending(peer) && r.pushWhole(&hdr, data) {
		return // the common message: whole in the ring now
	}
	if !g.pending(peer) && r.push(hdr[:], 0) == p2pHeaderSize {
		n := 0
		if len(data) > 0 {
			n = r.push(data, 0)
		}
		if n == padded(len(data)) {
			return // the common message: whole in the ring now
		}
		g.extra = append(g.extra, xfer{peer: peer, ch: chP2P, mode: xSend, buf: data, done: n})
		return
	}
	h := new([p2pHeaderSize]byte) // lives until the group ends
	*h = hdr
	g.extra = append(g.extra, xfer{peer: peer, ch: chP2P, mode: xSend, buf: h[:]},
		xfer{peer: peer, ch: chP2P, mode: xSend, buf: data})
}

// queueRest queues the unfinished sends of a group (p2pGroup, which holds
// their queues' locks) as p2pSend queues one: what is left of their data
// copied, a goroutine pushing them. Unfinished sends on a communicator
// that went (destroyed, broken) are its error.
func (c *Comm) queueRest(xs []xfer) error {
	copied := 0
	for _, x := range xs {
		if x.finished() {
			continue
		}
		if c.destroyed.Load() || c.broken.Load() != nil { // nothing will take them
			return c.usable()
		}
		c.queueSend(c.sendq[x.peer], &x, len(x.buf))
		if len(x.buf) != p2pHeaderSize || x.done > 0 {
			copied++ // a message's data (a header alone is no copy of note)
		}
	}
	if copied > 0 {
		c.count(statSendCopied, uint64(copied))
	}
	return nil
}

// Every point-to-point message between two ranks goes after a header of
// one ring unit, p2pMagic and the data's length, so that a receive of
// another size than its send fails naming both, and the message is
// discarded whole: the next ones stay in step.
const (
	p2pHeaderSize = 16
	p2pMagic      = 0x3130503250434358 // "XCCP2P01"
)

func p2pHeader(n int) (h [p2pHeaderSize]byte) {
	binary.LittleEndian.PutUint64(h[:], p2pMagic)
	binary.LittleEndian.PutUint64(h[8:], uint64(n))
	return h
}

// errP2PSize ends a receive's error when its send had another size: the
// message was discarded whole, so the stream from the peer is in step.
var errP2PSize = errors.New("the message was discarded")

// sizeMismatch is a receive's error when its send had another size.
func sizeMismatch(rank, peer, want, sent int) error {
	return &rt.Error{Status: rt.StatusError, Err: errP2PSize, Msg: fmt.Sprintf(
		"rank %d: Recv from rank %d of %d bytes, but rank %d sent %d (a send and its receive have the same count and type size)",
		rank, peer, want, peer, sent)}
}

func (c *Comm) drain(peer int, sq *sendQueue) {
	for {
		sq.mu.Lock()
		if len(sq.q) == 0 {
			sq.running = false
			if sq.idle != nil {
				sq.idle.Broadcast()
			}
			sq.mu.Unlock()
			return
		}
		s := sq.q[0]
		sq.mu.Unlock()
		err := c.progress(label{kind: "Send to rank", peer: peer, bytes: s.bytes}, *s.x)
		sq.mu.Lock()
		sq.q = sq.q[1:]
		if err != nil {
			sq.q = nil
			_ = c.fail(err)
		}
		sq.mu.Unlock()
	}
}

// flushSends waits until queued sends are in the rings.
func (c *Comm) flushSends() {
	for _, sq := range c.sendq {
		sq.mu.Lock()
		if sq.idle == nil {
			sq.idle = sync.NewCond(&sq.mu)
		}
		for sq.running {
			sq.idle.Wait()
		}
		sq.mu.Unlock()
	}
}

func (c *Comm) p2pRecv(peer int, data []byte) error { return c.p2pRecvAlso(peer, data, nil) }

// p2pRecvAlso is p2pRecv moving extra's sends while it waits (progressAlso).
func (c *Comm) p2pRecvAlso(peer int, data []byte, extra []xfer) error {
	if peer == c.rank {
		return c.selfRecv(data)
	}
	c.recvMu[peer].Lock()
	defer c.recvMu[peer].Unlock()
	if c.destroyed.Load() {
		return c.usable()
	}
	// The common message comes whole: polled for here, as progress polls,
	// before the long way (which also moves extra's sends).
	for i, r := 0, c.in[chP2P][peer]; i < coCheck && (i == 0 || len(extra) == 0); i++ {
		if taken, other := r.takeWhole(p2pMagic, data); taken {
			return nil
		} else if other {
			break
		}
	}
	what := label{kind: "Recv from rank", peer: peer, bytes: len(data), recv: true}
	hdr := &c.recvHdr[peer]
	if err := c.progressAlso(what, extra, xfer{peer: peer, ch: chP2P, mode: xCopy, buf: hdr[:], elem: p2pHeaderSize}); err != nil {
		return err
	}
	sent := binary.LittleEndian.Uint64(hdr[8:])
	if binary.LittleEndian.Uint64(hdr[:]) != p2pMagic || sent > maxP2PBytes {
		return c.fail(rt.Failedf("rank %d: Recv from rank %d: the stream from it is out of step (header %x)", c.rank, peer, hdr[:]))
	}
	if int(sent) == len(data) {
		return c.progressAlso(what, extra, xfer{peer: peer, ch: chP2P, mode: xCopy, buf: data, elem: 1})
	}
	// Discard the message in pieces of whole ring units, the last padded
	// as the sender padded the whole.
	for left := int(sent); left > 0; {
		piece := discardBuf[:min(left, len(discardBuf))] // xDiscard never writes it
		left -= len(piece)
		if err := c.progressAlso(what, extra, xfer{peer: peer, ch: chP2P, mode: xDiscard, buf: piece, elem: 1}); err != nil {
			return err
		}
	}
	return sizeMismatch(c.rank, peer, len(data), int(sent))
}

var discardBuf = make([]byte, 64<<10) // a multiple of the ring unit

// maxP2PBytes bounds a header's length: larger is a corrupt stream.
const maxP2PBytes = 1 << 48

// Destroy waits for queued sends and TCP output to drain and for the peers'
// fingerprints of collectives this rank did not wait for (within the
// timeout), marks the communicator closed for its peers and unmaps memory.
// A mismatch found in those fingerprints is its error.
func (c *Comm) Destroy() error {
	c.StopFastPath() // before destroyed is seen: no C call runs past it
	if c.destroyed.Swap(true) {
		return nil
	}
	c.flushSends()
	c.lockColl()
	defer c.unlockColl()
	deadline := time.Now().Add(c.timeout())
	var err error
	healthy := c.AsyncError() == nil
	if healthy {
		err = c.settleBoxes()
	}
	for ch := 0; ch < nch && healthy; ch++ { // a broken one (aborted) has nothing worth draining
		for _, l := range c.links[ch] {
			for l != nil && !l.drained() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
	}
	for i := range c.recvMu {
		c.recvMu[i].Lock()
		defer c.recvMu[i].Unlock()
	}
	for _, sq := range c.sendq { // a send that passed its check pushes before the rings go
		if sq != nil {
			sq.mu.Lock()
			defer sq.mu.Unlock()
		}
	}
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	c.seg.state().CompareAndSwap(stateAlive, stateClosed)
	c.ringPeers()
	if c.ucx != nil && c.AsyncError() == nil {
		// UCX peers may not have read everything yet: the worker stays
		// until they all said goodbye (ucx.go), in the background.
		c.releaseUCX(true, time.Now().Add(c.timeout()))
	}
	c.releaseLocked()
	c.fastFree()
	c.log.Info("communicator destroyed")
	return err
}

// Abort breaks the communicator now, from any thread, even while another
// destroys it; peers see it within their next check.
func (c *Comm) Abort() {
	if c.destroyed.Load() {
		return
	}
	c.lifeMu.Lock()
	if !c.released {
		c.unpublish() // before the peers see the state word (fail): none finishes with this rank's message meanwhile
	}
	c.lifeMu.Unlock()
	_ = c.fail(rt.Failedf("rank %d: communicator aborted", c.rank))
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if !c.released {
		c.seg.state().Store(stateAborted)
		c.unpublish() // and what the aborted call published since
		c.bell.ring()
	}
}

// unpublish empties the fast-box slots this rank wrote in its peers'
// segments for the call in flight, which the abort fails: a peer that has
// not read its message yet then waits for it, finds this rank aborted and
// fails, as this rank's call did, rather than finish that call with this
// rank's data. The messages of calls this rank finished stay: a slower peer
// still finishes them, as this rank did (a rank that aborted straight after
// its all-gather failed its peers' all-gather). Where a call from C holds
// the fast path (its spin, or its resume in Go), its number is C's count
// or the one after (before C took it: then that count is the call before,
// which loses its message in that window of a few instructions). Best
// effort: a peer that read it already finished (the abort came after), and
// a message the aborted call publishes between Abort's two passes may be
// read. The boxes belong to collMu's holder, the aborted call's thread;
// the sequence word alone changes here, atomically.
func (c *Comm) unpublish() {
	seq, cseq := c.inFlight.Load(), uint64(0)
	fromC := c.fx != nil && c.fastWord().Load()&fastC != 0
	if fromC {
		cseq = c.fastSeq()
	}
	if seq == 0 && !fromC {
		return
	}
	for p := range c.box {
		if !c.fastOK(p) {
			continue
		}
		for _, s := range c.box[p].out {
			if s == nil {
				continue
			}
			if seq != 0 {
				slotSeq(s).CompareAndSwap(seq, 0)
			}
			if fromC {
				slotSeq(s).CompareAndSwap(cseq, 0)
				slotSeq(s).CompareAndSwap(cseq+1, 0)
			}
		}
		c.peerBells[p].ring()
	}
}

// takeBack empties the fast boxes holding this rank's message of the
// collective in flight (collSeq, collMu held) where err fails it (C_FAILED):
// a peer that has not read it yet, one that comes late above all, then
// waits for it, finds this rank's communicator broken and fails that call
// too, rather than finish with this rank's data the call this rank failed.
// Messages of earlier calls, which this rank finished, stay.
func (c *Comm) takeBack(err error) error {
	if err == nil || rt.StatusOf(err) != rt.StatusFailed {
		return err
	}
	seq := c.collSeq
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.released {
		return err
	}
	for p := range c.box {
		if !c.fastOK(p) {
			continue
		}
		if s := c.box[p].out[seq%fastDepth]; s != nil && slotSeq(s).CompareAndSwap(seq, 0) {
			c.peerBells[p].ring()
		}
	}
	return err
}

func (c *Comm) ringPeers() {
	for _, ps := range c.peerSegs {
		if ps != nil {
			ps.bell().ring()
		}
	}
}

// release closes links and unmaps every segment; nothing of this rank may
// touch them afterwards (Destroy holds every lock first; fail and Abort
// check released under lifeMu).
func (c *Comm) release() {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	c.releaseLocked()
}

func (c *Comm) releaseLocked() {
	c.released = true
	for ch := 0; ch < nch; ch++ {
		for i, l := range c.links[ch] {
			if l != nil {
				l.close()
				c.links[ch][i] = nil
			}
		}
	}
	c.releaseUCX(false, time.Now())
	c.releasePeerMem()
	for i, ps := range c.peerSegs {
		if ps != nil {
			ps.unmap()
			c.peerSegs[i] = nil
		}
	}
	if c.seg != nil {
		c.seg.unlink()
		c.seg.unmap()
	}
}
