package host

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// CanFuse: the host device runs fused all-reduces (rt.Op.Batch) itself.
func (c *devComm) CanFuse() bool { return true }

// fusedRoot marks the fingerprint of a fused all-reduce that runs in its
// direct form with the buffers where they are (fusedDirect): every rank
// that sees it knows the data of the whole batch is in the fast boxes.
// (All-reduce fingerprints otherwise carry root 0.)
const fusedRoot = 1

// fusedSharedRoot marks the fingerprint of a fused all-reduce that tries
// single copy between shared buffers (fusedShared): behind it in the fast
// boxes come the addresses of the rank's buffers, no data.
const fusedSharedRoot = 2

// fusedAllReduce runs a batch of all-reduces as one call: one fingerprint,
// one round. When the whole batch fits a fast box it goes in place
// (fusedDirect); otherwise it packs the send buffers into one staging
// buffer, all-reduces that (one algorithm choice for the whole size) and
// unpacks the result into the receive buffers.
func (c *Comm) fusedAllReduce(op *rt.Op) error {
	es := op.Type.Size()
	inPlace := c.fusedInPlace(op)
	if inPlace {
		if taken, err := c.fastFused(op); taken { // in C when it can (fast.c), unless it may copy once
			return err
		}
	}
	if c.fusedMayShare(op) {
		if ran, err := c.fusedShared(op); ran {
			return c.failed(err)
		}
	}
	if inPlace {
		return c.failed(c.fusedDirect(op))
	}
	c.fuseMu.Lock()
	defer c.fuseMu.Unlock()
	if cap(c.fuseBuf) < op.Count*es {
		c.fuseBuf = make([]byte, op.Count*es+op.Count*es/4)
	}
	stage := c.fuseBuf[:op.Count*es]
	off := 0
	for _, o := range op.Batch {
		n := o.Count * es
		copy(stage[off:off+n], bytesAt(o.Send, n))
		off += n
	}
	p := unsafe.Pointer(&stage[0])
	whole := rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: op.Count, Type: op.Type, Red: op.Red}
	if err := c.exec(&whole); err != nil {
		return err
	}
	c.count(statFusedBatches, 1)
	c.count(statFusedBuffers, uint64(len(op.Batch)))
	off = 0
	for _, o := range op.Batch {
		n := o.Count * es
		copy(bytesAt(o.Recv, n), stage[off:off+n])
		off += n
	}
	return nil
}

// fusedInPlace says whether a batch runs as fusedDirect: every pair linked
// by fast boxes, the whole batch fits one, no widening, no forced algorithm.
func (c *Comm) fusedInPlace(op *rt.Op) bool {
	return c.n > 1 && c.allBoxed && c.opts.Algo == "" && !isHalf(op.Type) && op.Count*op.Type.Size() <= c.fastCap
}

// fusedDirect: every rank writes its fingerprint and its send buffers, one
// after another, into every peer's fast box; then each receive buffer is
// reduced, in rank order, from the peers' boxes and this rank's send
// buffer. Nothing is packed into staging or unpacked from it.
func (c *Comm) fusedDirect(op *rt.Op) error {
	c.lockColl()
	defer c.unlockColl()
	if c.destroyed.Load() {
		return c.usable()
	}
	c.collSeq++
	f := fusedPrint(op, c.collSeq)
	parts := c.fusedParts(op)
	defer clear(parts)
	msgs, err := c.exchangeEach(f, func(int) []byte { return nil }, parts, waitAll)
	if err != nil {
		return c.takeBack(err)
	}
	return c.takeBack(c.fusedFinish(op, f, msgs, parts))
}

// fusedPrint is the fingerprint of fused all-reduce op as collective seq.
func fusedPrint(op *rt.Op, seq uint64) rt.Fingerprint {
	return rt.Fingerprint{Seq: seq, Kind: rt.OpAllReduce, Type: op.Type, Red: op.Red, Root: fusedRoot, Count: uint64(op.Count)}
}

// fusedParts is op's send buffers (in c.parts: clear it after).
func (c *Comm) fusedParts(op *rt.Op) [][]byte {
	es := op.Type.Size()
	parts := c.parts[:0]
	for _, o := range op.Batch {
		parts = append(parts, bytesAt(o.Send, o.Count*es))
	}
	c.parts = parts
	return parts
}

// fusedFinish is fusedDirect once every peer's batch came (msgs, from
// exchangeEach or collect): the verdict, then each receive buffer reduced
// in rank order from the peers' slots and this rank's send buffer.
func (c *Comm) fusedFinish(op *rt.Op, f rt.Fingerprint, msgs []byte, parts [][]byte) error {
	if err := c.verdict(f, msgs); err != nil {
		return err
	}
	es, seq := op.Type.Size(), f.Seq
	tmp := c.buf(2, c.fastCap)
	jobs := c.jobs[:0]
	off := 0
	for i, o := range op.Batch {
		n := o.Count * es
		recv, mine := bytesAt(o.Recv, n), parts[i]
		if c.rank != 0 && overlap(recv, mine) {
			mine = append(tmp[off:off], mine...) // recv gets rank 0's first
		}
		jobs = c.addReductions(jobs, recv, func(p int) []byte {
			if p == c.rank {
				return mine
			}
			return c.fastData(p, seq, off+n)[off:]
		})
		off += n
	}
	c.jobs = jobs
	c.reduceJobs(jobs, op.Type, op.Red) // one call into C for the whole batch
	clear(jobs)
	if op.Red == rt.Avg {
		for _, o := range op.Batch {
			finishAvg(bytesAt(o.Recv, o.Count*es), op.Type, c.n)
		}
	}
	c.count(statAllReduceDirect, 1)
	c.count(statFusedBatches, 1)
	c.count(statFusedBuffers, uint64(len(op.Batch)))
	return c.takeLate(nil)
}

// fusedResume goes on with a fused all-reduce that fast.c sent and could
// not finish (the lock held): fusedDirect from its wait for the peers.
func (c *Comm) fusedResume(op *rt.Op) error {
	c.fastIn(true)
	defer c.fastUnlock()
	c.count(statFastResumed, 1)
	f := fusedPrint(op, c.collSeq)
	w0, w1 := f.Body()
	parts := c.fusedParts(op)
	defer clear(parts)
	msgs, err := c.collect(f, w0, w1, nil, waitAll)
	if err == nil {
		err = c.fusedFinish(op, f, msgs, parts)
	}
	return c.failed(c.takeBack(err)) // as fusedAllReduce returns fusedDirect's
}

// fusedShareable says whether this communicator's fused all-reduces may
// copy once between shared buffers: where tryShared's all-reduces may (2
// ranks, or up to roomyRanks with a CPU each; every pair boxed, every rank
// able to read every other; no forced algorithm).
func (c *Comm) fusedShareable() bool {
	return c.cma && c.allBoxed && (c.n == 2 || c.roomy && c.n <= roomyRanks) && c.opts.Algo == ""
}

// fusedMayShare says whether batch op may: from sharedReduceMin bytes in
// all, as a single all-reduce. fast.c runs such a batch only while the
// ranks' last try for its size class found them private (fused_max,
// fused_probe: fusedMemo's copy); else they decide in Go (fusedShared).
func (c *Comm) fusedMayShare(op *rt.Op) bool {
	return c.fusedShareable() && !isHalf(op.Type) && op.Count*op.Type.Size() >= sharedReduceMin
}

// fusedShared runs batch op by single copy where every rank's buffers lie
// in shared allocations the peers map (peermap.go), as allReduceCMA runs
// one buffer: the ranks exchange the fingerprint with their buffers'
// addresses (fusedAddrs); rank r reduces chunk r of the batch's elements,
// reading every rank's send buffers where they are, and writes the result
// into every rank's receive buffers; then they meet (barrier). Nothing is
// packed and no data goes through the boxes: a rank reads and writes its
// chunk once, and the peers' lines stay in their caches from one call to
// the next. It tries while the last try for the batch's size class found
// every rank's buffers shared, else once sharedProbeEach collectives on
// (fusedMemo, as tryShared). ran false: it did not try, or some rank's
// buffers were not all shared (that try was a collective of its own), and
// the caller runs the batch the other way.
func (c *Comm) fusedShared(op *rt.Op) (ran bool, err error) {
	c.lockColl()
	defer c.unlockColl()
	if c.destroyed.Load() {
		return true, c.usable()
	}
	es := op.Type.Size()
	class := bits.Len(uint(op.Count * es))
	if m := c.fusedMemo[class]; !m.shared && c.collSeq+1 < m.probe {
		return false, nil
	}
	c.collSeq++
	seq := c.collSeq
	f := fusedPrint(op, seq)
	f.Root = fusedSharedRoot
	mine := c.fusedAddrs(op)
	defer clear(c.runs) // the caller's buffers
	msgs, err := c.exchangeEach(f, func(int) []byte { return mine }, nil, waitAll)
	if err == nil {
		err = c.verdict(f, msgs)
	}
	if err != nil {
		return true, c.takeBack(err)
	}
	lays := c.fusedLayouts(mine, seq, op.Count, es)
	c.setFusedMemo(class, sharedMemo{shared: lays != nil, probe: seq + sharedProbeEach})
	if lays == nil {
		return false, nil
	}
	name := c.opName("AllReduceFused", op.Count*es)
	if err := c.fusedCopy(op, lays, name); err != nil {
		return true, c.takeBack(err)
	}
	c.count(statAllReduceCMA, 1)
	c.count(statFusedBatches, 1)
	c.count(statFusedBuffers, uint64(len(op.Batch)))
	return true, c.takeBack(c.takeLate(c.barrier(name)))
}

// A rank's message about a fused batch's buffers (fusedAddrs):
//
//	0   buffers k (0: they do not all lie in shared allocations)
//	8   k times: send address, receive address, bytes, the allocation
//	    holding the send buffer (allocRef), the one holding the receive
//	    buffer
const (
	fusedAddrHead = 8
	fusedAddrEach = 24 + 2*allocRefSize
)

// fusedMaxAllocs bounds the shared allocations a rank's batch may lie in
// (sends and receives together): the peers map each and keep at most
// peerMapsKept per rank, so that more would map and unmap on every call.
const fusedMaxAllocs = peerMapsKept / 2

// fusedAddrs is this rank's message about batch op's buffers (scratch
// buffer 3), with buffers that follow one another in both memories as one
// (c.runs): k 0 when a buffer lies in no shared allocation, when they lie
// in more than fusedMaxAllocs, or when the message would not fit a box.
func (c *Comm) fusedAddrs(op *rt.Op) []byte {
	es := op.Type.Size()
	runs := c.runs[:0]
	for _, o := range op.Batch {
		n := o.Count * es
		if k := len(runs) - 1; k >= 0 && follows(runs[k].send, runs[k].n, o.Send) && follows(runs[k].recv, runs[k].n, o.Recv) {
			runs[k].n += n
		} else if n > 0 {
			runs = append(runs, fusedRun{send: o.Send, recv: o.Recv, n: n})
		}
	}
	c.runs = runs
	k := len(runs)
	if fusedAddrHead+k*fusedAddrEach > c.fastCap {
		k = 0
	}
	m := c.buf(3, fusedAddrHead+k*fusedAddrEach)
	var sref, rref allocRef
	var ids [fusedMaxAllocs]uint64
	nids := 0
	known := func(r allocRef) bool { // r counted among the batch's allocations, if there is room
		for _, id := range ids[:nids] {
			if id == r.id {
				return true
			}
		}
		if nids == len(ids) {
			return false
		}
		ids[nids] = r.id
		nids++
		return true
	}
	for i, r := range runs[:k] {
		send, recv := uintptr(r.send), uintptr(r.recv)
		if !sref.shared() || !sref.holds(send, r.n) { // else the last run's allocation holds this one too
			sref = refOf(bytesAt(r.send, r.n))
		}
		if !rref.shared() || !rref.holds(recv, r.n) {
			rref = refOf(bytesAt(r.recv, r.n))
		}
		if !sref.shared() || !rref.shared() || !known(sref) || !known(rref) {
			k = 0
			break
		}
		e := m[fusedAddrHead+i*fusedAddrEach:]
		binary.LittleEndian.PutUint64(e[0:], uint64(send))
		binary.LittleEndian.PutUint64(e[8:], uint64(recv))
		binary.LittleEndian.PutUint64(e[16:], uint64(r.n))
		sref.put(e[24:])
		rref.put(e[24+allocRefSize:])
	}
	binary.LittleEndian.PutUint64(m[0:], uint64(k))
	return m[:fusedAddrHead+k*fusedAddrEach]
}

// follows says whether b begins where the n bytes at a end (compared as
// integers: a pointer past the end of a Go allocation is not one).
func follows(a unsafe.Pointer, n int, b unsafe.Pointer) bool {
	return uintptr(a)+uintptr(n) == uintptr(b)
}

// fusedRun is buffers of a fused batch that follow one another in both the
// send and the receive memory: n bytes from send and from recv.
type fusedRun struct {
	send, recv unsafe.Pointer
	n          int
}

// fusedLayout is a rank's message about its batch's buffers (fusedAddrs).
type fusedLayout []byte

func (l fusedLayout) bufs() int { return int(binary.LittleEndian.Uint64(l[0:])) }

// buf is buffer i's send and receive addresses and its bytes.
func (l fusedLayout) buf(i int) (send, recv uintptr, n int) {
	e := l[fusedAddrHead+i*fusedAddrEach:]
	return uintptr(binary.LittleEndian.Uint64(e[0:])), uintptr(binary.LittleEndian.Uint64(e[8:])),
		int(binary.LittleEndian.Uint64(e[16:]))
}

// refs is the allocations holding buffer i's send and receive buffers.
func (l fusedLayout) refs(i int) (send, recv allocRef) {
	e := l[fusedAddrHead+i*fusedAddrEach:]
	return getRef(e[24:]), getRef(e[24+allocRefSize:])
}

// fusedLayouts reads every rank's message about its buffers for
// collective seq (mine this rank's): nil unless every rank's buffers are
// all shared and add up to total elements of es bytes.
func (c *Comm) fusedLayouts(mine []byte, seq uint64, total, es int) []fusedLayout {
	if cap(c.lays) < c.n {
		c.lays = make([]fusedLayout, c.n)
	}
	lays := c.lays[:c.n]
	for p := range lays {
		l := fusedLayout(mine)
		if p != c.rank {
			l = c.fastData(p, seq, fusedAddrHead)
			k := l.bufs()
			if k <= 0 || k > (c.fastCap-fusedAddrHead)/fusedAddrEach {
				return nil
			}
			l = c.fastData(p, seq, fusedAddrHead+k*fusedAddrEach)
		}
		sum := 0
		for i := range l.bufs() {
			send, recv, n := l.buf(i)
			sref, rref := l.refs(i)
			if !sref.shared() || !rref.shared() || !sref.holds(send, n) || !rref.holds(recv, n) {
				return nil
			}
			sum += n
		}
		if l.bufs() == 0 || sum != total*es {
			return nil
		}
		lays[p] = l
	}
	return lays
}

// fusedCopy is fusedShared's work on this rank: chunk c.rank of the
// batch's bytes, in pieces over which no rank's buffer changes, each
// reduced from every rank's send buffer and written into every rank's
// receive buffer. Only this rank touches its chunk anywhere, and it reads
// a piece everywhere before it writes it, so in place is safe. Where every
// peer's allocations are mapped the pieces are reduced in one call into C
// (reduceJobs) and then copied; else piece by piece through system calls.
func (c *Comm) fusedCopy(op *rt.Op, lays []fusedLayout, name label) error {
	es, dt, red := op.Type.Size(), op.Type, op.Red
	bytes := op.Count * es
	lo, hi := chunkOffset(bytes, es, c.n, c.rank), chunkOffset(bytes, es, c.n, c.rank+1)
	if lo == hi {
		return nil // fewer elements than ranks
	}
	maps, mapped := c.fusedMaps(lays)
	defer clear(maps)
	if cap(c.curs) < c.n {
		c.curs = make([]fusedCur, c.n)
	}
	curs := c.curs[:c.n]
	for p := range curs {
		curs[p] = fusedCur{at: -1}
		for curs[p].next(lays[p]); curs[p].start+curs[p].n <= lo; {
			curs[p].next(lays[p])
		}
	}
	jobs, copies := c.jobs[:0], c.copies[:0]
	for pos := lo; pos < hi; {
		end := hi
		for _, u := range curs {
			end = min(end, u.start+u.n)
		}
		u, r := curs[c.rank], c.runs[curs[c.rank].at]
		d := bytesAt(r.recv, r.n)[pos-u.start : end-u.start]
		mine := bytesAt(r.send, r.n)[pos-u.start : end-u.start]
		for k := 1; k < c.n; k++ {
			p := (c.rank + k) % c.n
			src := curs[p].send + uintptr(pos-curs[p].start)
			dst := curs[p].recv + uintptr(pos-curs[p].start)
			if mapped {
				a := mine
				if k > 1 {
					a = d
				}
				jobs = append(jobs, redJob{dst: d, a: a, b: mappedAt(maps, p, curs[p].sref, src, len(d))})
				copies = append(copies, redJob{dst: mappedAt(maps, p, curs[p].rref, dst, len(d)), a: d})
				continue
			}
			if k == 1 {
				copyIfDistinct(d, mine)
			}
			if err := c.readReduce(p, d, src, dt, red, name); err != nil {
				return err
			}
			if k == c.n-1 {
				if red == rt.Avg {
					finishAvg(d, dt, c.n)
				}
				for j := 1; j < c.n; j++ {
					q := (c.rank + j) % c.n
					if err := c.write(q, curs[q].recv+uintptr(pos-curs[q].start), d, name); err != nil {
						return err
					}
				}
			}
		}
		for p := range curs {
			if curs[p].start+curs[p].n == end && end < hi {
				curs[p].next(lays[p])
			}
		}
		pos = end
	}
	c.reduceJobs(jobs, dt, red)
	for i, j := range copies {
		if red == rt.Avg && i%(c.n-1) == 0 {
			finishAvg(j.a, dt, c.n)
		}
		copy(j.dst, j.a)
	}
	clear(jobs)
	clear(copies)
	c.jobs, c.copies = jobs, copies
	return nil
}

// fusedCur is fusedCopy's place in one rank's batch: buffer at, which
// starts start bytes into the batch and holds n, at addresses send, recv
// in allocations sref, rref.
type fusedCur struct {
	at, start, n int
	send, recv   uintptr
	sref, rref   allocRef
}

func (u *fusedCur) next(l fusedLayout) {
	u.at++
	u.start += u.n
	u.send, u.recv, u.n = l.buf(u.at)
	u.sref, u.rref = l.refs(u.at)
}

// fusedMap is where peer's allocation id is mapped here.
type fusedMap struct {
	peer int
	id   uint64
	mem  unsafe.Pointer
}

// fusedMaps maps every peer's allocations of the batch (at most
// fusedMaxAllocs each, half of what peermap keeps), once per batch rather
// than through mapPeer's checks per piece; mapped false: some could not
// be, and system calls reach the peers' buffers.
func (c *Comm) fusedMaps(lays []fusedLayout) (maps []fusedMap, mapped bool) {
	maps = c.fmaps[:0]
	defer func() { c.fmaps = maps }()
	for p, l := range lays {
		if p == c.rank {
			continue
		}
		for i := range l.bufs() {
			sref, rref := l.refs(i)
			for _, r := range [2]allocRef{sref, rref} {
				if findMap(maps, p, r.id) != nil {
					continue
				}
				mem := c.mapPeer(p, r)
				if mem == nil {
					return maps, false
				}
				maps = append(maps, fusedMap{peer: p, id: r.id, mem: mem})
			}
		}
	}
	return maps, true
}

func findMap(maps []fusedMap, p int, id uint64) *fusedMap {
	for i := range maps {
		if maps[i].peer == p && maps[i].id == id {
			return &maps[i]
		}
	}
	return nil
}

// mappedAt is the n bytes at addr in peer p's allocation r, as mapped here.
func mappedAt(maps []fusedMap, p int, r allocRef, addr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(findMap(maps, p, r.id).mem, addr-r.base)), n)
}
