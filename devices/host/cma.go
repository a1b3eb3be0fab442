package host

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"os"
	"strings"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	rt "github.com/xccl-project/xccl/runtime"
)

// Single-copy transfers between processes of one machine (cross-memory
// attach, process_vm_readv), as OpenMPI's vader and NCCL's P2P/CUMEM do:
// a rank reads a peer's buffer straight into its own, instead of the peer
// copying into a shared ring and the rank copying out of it. The large
// collectives use it when every rank of the communicator can read every
// other (decided together at init: see agreeCMA); otherwise, or when
// XCCL_CMA=0, they use the rings.
//
// Each algorithm first learns the addresses of its peers' buffers (they
// come with the fingerprints, addrsRide, else in one small round through
// the rings), reads what it needs, and ends with a "done"
// round, so no rank returns, and lets its caller reuse a buffer, while a
// peer may still read it. Buffers must stay where they are during the
// call: C memory, or Go heap memory (the Go API's buffers escape to the
// heap).

// cmaToken is what a peer must read from this process to prove it can.
type cmaToken struct{ magic, nonce uint64 }

const cmaMagic = 0x414d43636c636378 // "xcclcCMA"

// cmaEnabled: XCCL_CMA=0 turns single-copy transfers off.
func cmaEnabled() bool { return rt.Getenv("XCCL_CMA") != "0" }

// allowPeersToRead lets this process's siblings read its memory where the
// Yama LSM allows only ancestors (ptrace_scope 1), as OpenMPI does for the
// same reason. Scope 2 and 3 are left alone (no single copy then).
func allowPeersToRead() {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err == nil && strings.TrimSpace(string(b)) == "1" {
		_ = unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0)
	}
}

// cmaRead copies len(dst) bytes at address src of process pid into dst.
func cmaRead(pid int, dst []byte, src uintptr) error {
	return cmaMove(pid, dst, src, unix.ProcessVMReadv)
}

// cmaWrite copies src into process pid at address dst.
func cmaWrite(pid int, dst uintptr, src []byte) error {
	return cmaMove(pid, src, dst, unix.ProcessVMWritev)
}

// cmaMove moves len(local) bytes between local and process pid's memory at
// remote with move (process_vm_readv or process_vm_writev), to the end.
func cmaMove(pid int, local []byte, remote uintptr,
	move func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error)) error {
	for len(local) > 0 {
		l := []unix.Iovec{{Base: &local[0]}}
		l[0].SetLen(len(local))
		r := []unix.RemoteIovec{{Base: remote, Len: len(local)}}
		n, err := move(pid, l, r, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return unix.EFAULT
		}
		local, remote = local[n:], remote+uintptr(n)
	}
	return nil
}

// probeCMA reports whether this rank can read every peer's token.
func (c *Comm) probeCMA() bool {
	if !cmaEnabled() {
		return false
	}
	for p := 0; p < c.n; p++ {
		if p == c.rank {
			continue
		}
		if c.peerSegs[p] == nil || c.peers[p].Token == 0 {
			return false
		}
		var got cmaToken
		b := unsafe.Slice((*byte)(unsafe.Pointer(&got)), unsafe.Sizeof(got))
		if err := cmaRead(c.peers[p].Pid, b, uintptr(c.peers[p].TokenAddr)); err != nil ||
			got.magic != cmaMagic || got.nonce != c.peers[p].Token {
			c.log.Info("single-copy reads unavailable, the rings carry everything",
				zap.Int("peer", p), zap.Error(err))
			return false
		}
	}
	return true
}

// agreeCMA: every rank says whether it can read every peer, and whether
// it reaches every peer by fast boxes; single copy and the wide direct
// forms are used only if all can (the ranks must pick the same algorithms).
func (c *Comm) agreeCMA() error {
	if c.n == 1 {
		return nil
	}
	var mine [16]byte
	if c.probeCMA() {
		mine[0] = 1
	}
	mine[1] = 1 // every peer is linked by fast boxes
	for p := 0; p < c.n; p++ {
		if p != c.rank && !c.fastOK(p) {
			mine[1] = 0
		}
	}
	// Ranks plan their waits alike (waitPlan; a quiet rank counts on it)
	// only with the same forced algorithm.
	algo := c.opts.Algo
	if algo == "single-copy" {
		algo = "cma"
	}
	h := fnv.New64a()
	h.Write([]byte(algo))
	binary.LittleEndian.PutUint64(mine[2:], h.Sum64())
	msgs, err := c.allExchange(mine[:], label{kind: "init: single-copy agreement"})
	if err != nil {
		return err
	}
	ok, boxed := true, true
	for p := 0; p < c.n; p++ {
		ok = ok && msgs[p*16] == 1
		boxed = boxed && msgs[p*16+1] == 1
		if string(msgs[p*16+2:p*16+10]) != string(mine[2:10]) {
			return rt.Errorf("rank %d: XCCL_ALGO is %q here and differs on rank %d: every rank must force the same algorithm, or none", c.rank, c.opts.Algo, p)
		}
	}
	c.cma, c.allBoxed = ok, boxed
	c.quick = boxed && c.opts.Algo == "" && c.n > 1
	for p := 0; p < c.n && boxed; p++ {
		if p != c.rank {
			c.boxPeers = append(c.boxPeers, p)
		}
	}
	return nil
}

// allExchange sends mine to every peer and returns every rank's message of
// len(mine) bytes, in rank order (scratch buffer 1; mine must not be in it).
func (c *Comm) allExchange(mine []byte, what label) ([]byte, error) {
	size := len(mine)
	msgs := c.buf(1, c.n*size)
	copy(msgs[c.rank*size:], mine)
	xs := c.xfers(1, 2*(c.n-1))
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			xs = append(xs, sendTo(p, msgs[c.rank*size:(c.rank+1)*size]), recvFrom(p, msgs[p*size:(p+1)*size]))
		}
	}
	return msgs, c.progress(what, xs...)
}

// shareAddrs tells every peer the addresses of this rank's send and
// receive buffers, and the allocations that hold them (peermap.go), and
// learns theirs (learnAddrs). After hugeSingleCopy found them all large
// (sharedEarly), and where they came with the fingerprints (addrsRide), it
// returns at once: the addresses are already there.
func (c *Comm) shareAddrs(send, recv []byte, what label) error {
	if c.sharedEarly || c.addrsIn == c.collSeq {
		c.sharedEarly = false
		return nil
	}
	var mine [addrMsgSize]byte
	putAddrs(mine[:], send, recv)
	c.count(statAddrRounds, 1)
	msgs, err := c.allExchange(mine[:], what)
	if err != nil {
		return err
	}
	c.learnAddrs(func(p int) []byte { return msgs[p*addrMsgSize:] })
	return nil
}

// addrMsgSize is the bytes of a rank's message about its buffers: for the
// send and then the receive buffer, its address and its allocation.
const addrMsgSize = 2 * (8 + allocRefSize)

func putAddrs(m, send, recv []byte) {
	binary.LittleEndian.PutUint64(m[0:], uint64(addrOf(send)))
	refOf(send).put(m[8:])
	binary.LittleEndian.PutUint64(m[addrMsgSize/2:], uint64(addrOf(recv)))
	refOf(recv).put(m[addrMsgSize/2+8:])
}

// learnAddrs reads every rank's message about its buffers (msg(p)):
// c.allLarge says whether every rank's send buffer lies in a large device
// allocation (shared or huge-page), c.allShared whether every rank's
// buffers lie in shared ones; for the collective's size class (sharedMemo)
// tryShared remembers the latter and probes again sharedProbeEach
// collectives on.
func (c *Comm) learnAddrs(msg func(p int) []byte) {
	if len(c.peerAddr) < c.n {
		c.peerAddr, c.peerRefs = make([][2]uintptr, c.n), make([][2]allocRef, c.n)
	}
	c.allLarge, c.allShared = true, true
	for p := 0; p < c.n; p++ {
		m := msg(p)
		for k := 0; k < 2; k++ {
			c.peerAddr[p][k] = uintptr(binary.LittleEndian.Uint64(m[k*addrMsgSize/2:]))
			c.peerRefs[p][k] = getRef(m[k*addrMsgSize/2+8:])
			// An empty buffer (a reduce's receive buffer off the root) needs no mapping.
			c.allShared = c.allShared && (c.peerRefs[p][k].shared() || c.peerAddr[p][k] == 0)
		}
		c.allLarge = c.allLarge && c.peerRefs[p][0].large()
	}
	if c.memoSeq == c.collSeq { // tryShared looked at this collective's class
		c.memo[c.memoAt] = sharedMemo{shared: c.allShared, probe: c.collSeq + sharedProbeEach}
	}
}

// addrsRide says whether op, a collective of this many bytes (its larger
// buffer) whose fingerprints are about to be exchanged (agree: it is past
// its direct form), sends its buffers' addresses with its fingerprint in
// the fast boxes. Such a collective may copy once (all-reduce from
// cmaAllReduceMin between shared buffers, the others from
// sharedOthersMin, singleCopy; smaller ones that try it, tryShared), and
// would otherwise share the addresses in a round of its own before it
// knows whether it can (shareAddrs returns at once when they came along:
// addrsIn). Private memory then pays no round
// at all. The half types are widened into private scratch first: theirs
// would be the wrong addresses. Measured, 2 ranks, shared buffers (same
// runs): 16 KiB broadcast 1.69 -> 0.85 us, reduce 2.32 -> 1.17,
// reduce-scatter 1.92 -> 1.08; 64 KiB all-gather 2.29 -> 1.62; 32 KiB
// all-reduce 2.34 -> 1.51; 20-30% up to 256 KiB.
func (c *Comm) addrsRide(op *rt.Op, bytes int) bool {
	switch op.Kind {
	case rt.OpAllReduce, rt.OpAllGather, rt.OpReduceScatter, rt.OpBroadcast, rt.OpReduce:
	default:
		return false
	}
	return c.opts.Algo == "" && c.cma && c.allBoxed && !isHalf(op.Type) &&
		(c.sharedTry || bytes >= min(cmaAllReduceMin, sharedOthersMin)) && addrMsgSize <= c.fastCap
}

// hugeSingleCopy decides, together with every rank, a large collective that
// single copy takes only from large device allocations (algo.go): it
// shares the addresses now and says whether every send buffer lies in one.
// If so the single-copy algorithm goes on without sharing them again.
func (c *Comm) hugeSingleCopy(send, recv []byte, what label) (bool, error) {
	return c.shareFirst(send, recv, what, &c.allLarge)
}

// sharedSingleCopy is the same for the all-reduce, which reaches peers
// directly only where every buffer of every rank is shared memory.
func (c *Comm) sharedSingleCopy(send, recv []byte, what label) (bool, error) {
	return c.shareFirst(send, recv, what, &c.allShared)
}

func (c *Comm) shareFirst(send, recv []byte, what label, all *bool) (bool, error) {
	if err := c.shareAddrs(send, recv, what); err != nil {
		return false, err
	}
	c.sharedEarly = *all
	return *all, nil
}

// barrier is one round of empty messages: after it every rank has passed
// the point where it called it. Where every peer is linked by fast boxes
// (and their fingerprints of this collective came: got), a rank tells each
// it is done with this collective (the count boxFree reads, which no rank
// tells for the collective it is in anywhere else) and waits until each
// told it the same: one line each way, where a ring message moves a head
// and a message (measured, 2 ranks, shared buffers, same runs: all-reduce
// 32 KiB 2.55 -> 1.69 us, 128 KiB 4.10 -> 3.43; broadcast 16 KiB 1.89 ->
// 1.10, 256 KiB 5.66 -> 3.52).
func (c *Comm) barrier(what label) error {
	if c.allBoxed {
		seq := c.collSeq
		xs := c.xfers(1, c.n)
		for p := range c.box {
			if !c.fastOK(p) {
				continue
			}
			c.tell(p, seq)
			// Free for collective seq+fastDepth: p is done with seq.
			if !c.boxFree(p, seq+fastDepth) {
				xs = append(xs, xfer{peer: p, ch: chColl, mode: xBoxFree, seq: seq + fastDepth, buf: oneByte[:]})
			}
		}
		if len(xs) == 0 {
			return nil
		}
		return c.progress(what, xs...)
	}
	var token [16]byte
	_, err := c.allExchange(token[:], what)
	return err
}

func addrOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// read copies peer p's bytes at addr into dst, naming the peer on failure.
func (c *Comm) read(p int, dst []byte, addr uintptr, what label) error {
	if v := c.view(p, addr, len(dst)); v != nil {
		copy(dst, v)
		return nil
	}
	return c.cmaFailed(p, cmaRead(c.peers[p].Pid, dst, addr), "reading", what)
}

// cmaFailed names the peer of a failed single-copy call (nil: none failed):
// its own failure if it has one, else what the system call said.
func (c *Comm) cmaFailed(p int, err error, doing string, what label) error {
	if err == nil {
		return nil
	}
	if perr := c.peerError(p); perr != nil {
		return rt.WrapFailed(perr, "rank %d: %s", c.rank, what)
	}
	return rt.Failedf("rank %d: %s: %s rank %d's memory: %v", c.rank, what, doing, p, err)
}

// cmaPiece is how much of a peer's data is read before it is reduced: it
// stays in the cache between the read and the reduction.
const cmaPiece = 128 << 10

// reduceFromPeers leaves in dst this rank's send[off:off+len(dst)] reduced
// with the same bytes of every peer's send buffer, read directly (the
// addresses shared before), and finishes an AVG.
func (c *Comm) reduceFromPeers(dst, send []byte, off int, dt rt.DataType, op rt.ReduceOp, what label) error {
	copyIfDistinct(dst, send[off:off+len(dst)])
	for k := 1; k < c.n; k++ {
		p := (c.rank + k) % c.n // spread the readers over the owners
		if err := c.readReduce(p, dst, c.peerAddr[p][0]+uintptr(off), dt, op, what); err != nil {
			return err
		}
	}
	if op == rt.Avg {
		finishAvg(dst, dt, c.n)
	}
	return nil
}

// readReduce reduces peer p's bytes at addr into dst: straight from its
// memory where it is mapped, else read piece by piece.
func (c *Comm) readReduce(p int, dst []byte, addr uintptr, dt rt.DataType, op rt.ReduceOp, what label) error {
	if v := c.view(p, addr, len(dst)); v != nil {
		reduceInto(dst, v, dt, op)
		return nil
	}
	tmp := c.buf(4, min(cmaPiece, len(dst)))
	for off := 0; off < len(dst); off += len(tmp) {
		k := min(len(tmp), len(dst)-off)
		if err := c.read(p, tmp[:k], addr+uintptr(off), what); err != nil {
			return err
		}
		reduceInto(dst[off:off+k], tmp[:k], dt, op)
	}
	return nil
}

// write copies src into peer p's memory at addr, naming the peer on failure.
func (c *Comm) write(p int, addr uintptr, src []byte, what label) error {
	if v := c.view(p, addr, len(src)); v != nil {
		copy(v, src)
		return nil
	}
	return c.cmaFailed(p, cmaWrite(c.peers[p].Pid, addr, src), "writing", what)
}

// allReduceCMA: rank r owns chunk r. Piece by piece it reduces that piece
// of every rank's send buffer into its receive buffer and writes the
// result into every peer's receive buffer while it is still in the cache.
// Where the peers' buffers are mapped (peermap.go) every byte of every
// buffer is read or written once, with plain loads and stores, as by a
// memcpy of the buffer; else the reads and writes are system calls
// (process_vm_readv, process_vm_writev) through a scratch piece. Only rank r
// touches chunk r of any buffer, and it reads a piece everywhere before it
// writes it there, so in place is safe.
func (c *Comm) allReduceCMA(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	es := dt.Size()
	name := c.opName("AllReduce", len(recv))
	if err := c.shareAddrs(send, recv, name); err != nil {
		return err
	}
	off := chunkOffset(len(recv), es, c.n, c.rank)
	mine := c.chunk(recv, es, c.rank)
	if cap(c.views) < 2*c.n {
		c.views = make([][]byte, 2*c.n)
	}
	from, to := c.views[:c.n], c.views[c.n:2*c.n] // peers' chunks, where mapped
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			from[p] = c.view(p, c.peerAddr[p][0]+uintptr(off), len(mine))
			to[p] = c.view(p, c.peerAddr[p][1]+uintptr(off), len(mine))
		}
	}
	piece := cmaPushPiece / es * es
	for o := 0; o < len(mine); o += piece {
		end := min(o+piece, len(mine))
		d := mine[o:end]
		for k := 1; k < c.n; k++ {
			p := (c.rank + k) % c.n
			var src []byte
			if from[p] != nil {
				src = from[p][o:end]
			} else {
				src = c.buf(4, len(d))
				if err := c.read(p, src, c.peerAddr[p][0]+uintptr(off+o), name); err != nil {
					return err
				}
			}
			if k == 1 {
				reduce3Into(d, send[off+o:], src, dt, op)
			} else {
				reduceInto(d, src, dt, op)
			}
		}
		if op == rt.Avg {
			finishAvg(d, dt, c.n)
		}
		for k := 1; k < c.n; k++ {
			p := (c.rank + k) % c.n
			if to[p] != nil {
				copy(to[p][o:end], d)
			} else if err := c.write(p, c.peerAddr[p][1]+uintptr(off+o), d, name); err != nil {
				return err
			}
		}
	}
	clear(c.views[:2*c.n])
	return c.barrier(name) // every chunk is everywhere: nobody reads or writes this rank's buffers any more
}

// cmaPushPiece: the piece of allReduceCMA, small enough to stay in the
// cache between its reduction and its copies to the peers.
const cmaPushPiece = 64 << 10

// chunkOffset is the byte offset of chunk k (see Comm.chunk).
func chunkOffset(bytes, es, n, k int) int {
	count := bytes / es
	q, r := count/n, count%n
	return (k*q + min(k, r)) * es
}

// allGatherCMA: every rank reads every peer's block from its send buffer.
func (c *Comm) allGatherCMA(send, recv []byte) error {
	nb := len(send)
	name := c.opName("AllGather", nb)
	if err := c.shareAddrs(send, recv, name); err != nil {
		return err
	}
	for k := 1; k < c.n; k++ {
		p := (c.rank + k) % c.n
		if err := c.read(p, recv[p*nb:(p+1)*nb], c.peerAddr[p][0], name); err != nil {
			return err
		}
	}
	return c.barrier(name)
}

// reduceScatterCMA: rank r reduces block r of every rank's send buffer.
func (c *Comm) reduceScatterCMA(send, recv []byte, dt rt.DataType, op rt.ReduceOp) error {
	nb := len(recv)
	name := c.opName("ReduceScatter", nb)
	if err := c.shareAddrs(send, recv, name); err != nil {
		return err
	}
	if err := c.reduceFromPeers(recv, send, c.rank*nb, dt, op, name); err != nil {
		return err
	}
	return c.barrier(name)
}

// broadcastCMA: every rank reads the root's buffer.
func (c *Comm) broadcastCMA(buf []byte, root int) error {
	name := c.opName("Broadcast", len(buf))
	if err := c.shareAddrs(buf, buf, name); err != nil {
		return err
	}
	if c.rank != root {
		if err := c.read(root, buf, c.peerAddr[root][0], name); err != nil {
			return err
		}
	}
	return c.barrier(name)
}

// reduceCMA: the root reduces every peer's send buffer, read piece by
// piece, into its receive buffer; the others only wait until it is done.
func (c *Comm) reduceCMA(send, recv []byte, dt rt.DataType, op rt.ReduceOp, root int) error {
	name := c.opName("Reduce", len(send))
	if err := c.shareAddrs(send, recv, name); err != nil {
		return err
	}
	if c.rank == root {
		if err := c.reduceFromPeers(recv, send, 0, dt, op, name); err != nil {
			return err
		}
	}
	return c.barrier(name)
}
