package xccl

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// XCCL_CHECK=1: cross-rank call checking on vendor devices. The host
// device checks every collective itself (a fingerprint exchange, free for
// small all-reduces); a vendor library does not, and mismatched calls hang
// or corrupt. With XCCL_CHECK=1, before each collective outside a group the
// ranks all-gather a 32-byte description of the call through the vendor
// itself (on the call's stream, then synchronised), and every rank returns
// C_ERROR naming both calls when they differ. It costs a small all-gather
// and a synchronisation per call: a debugging aid.

const checkBytes = 32

type checker struct {
	mu    sync.Mutex
	seq   uint64
	dev   int
	buf   unsafe.Pointer // device memory: n descriptions
	size  int
	host  []byte
	ready bool
}

// SetCheck turns XCCL_CHECK's cross-rank call checking on or off for this
// communicator (all its ranks must agree). The host device always checks.
func (c *Comm) SetCheck(on bool) { c.checking = on && c.dev.Name() != "host" }

// describe encodes op as this rank's checkBytes description.
func describe(b []byte, seq uint64, op *rt.Op) {
	clear(b)
	binary.LittleEndian.PutUint64(b[0:], seq)
	b[8], b[9], b[10] = byte(op.Kind), byte(op.Type), byte(op.Red)
	binary.LittleEndian.PutUint32(b[12:], uint32(op.Root))
	binary.LittleEndian.PutUint64(b[16:], uint64(op.Count))
	switch op.Kind {
	case rt.OpAllReduce, rt.OpAllGather, rt.OpReduceScatter:
		binary.LittleEndian.PutUint32(b[12:], 0)
	case rt.OpBroadcast:
		b[10] = 0
	case rt.OpAllToAll: // counts per peer differ by design: check the kind only
		b[9], b[10] = 0, 0
		binary.LittleEndian.PutUint64(b[16:], 0)
	}
}

func describeString(b []byte) string {
	kind := rt.OpKind(b[8])
	s := fmt.Sprintf("%v(count=%d, %v", kind, binary.LittleEndian.Uint64(b[16:]), rt.DataType(b[9]))
	switch kind {
	case rt.OpAllReduce, rt.OpReduceScatter:
		s += ", " + rt.ReduceOp(b[10]).String()
	case rt.OpReduce:
		s += fmt.Sprintf(", %v, root=%d", rt.ReduceOp(b[10]), int32(binary.LittleEndian.Uint32(b[12:])))
	case rt.OpBroadcast:
		s += fmt.Sprintf(", root=%d", int32(binary.LittleEndian.Uint32(b[12:])))
	case rt.OpAllToAll:
		return "AllToAll()"
	}
	return s + ")"
}

// check runs the description all-gather for op and compares.
func (c *Comm) check(op *rt.Op) error {
	k := &c.chk
	k.mu.Lock()
	defer k.mu.Unlock()
	n := c.c.Size()
	if !k.ready {
		dev, err := c.dev.GetDevice()
		if err != nil {
			return err
		}
		k.dev, k.size = dev, n*checkBytes
		if k.buf, err = c.dev.MemAlloc(dev, k.size); err != nil {
			return rt.WrapFailed(err, "XCCL_CHECK: device memory for call descriptions")
		}
		k.host = make([]byte, k.size)
		k.ready = true
	}
	k.seq++
	me := c.c.Rank()
	mine := k.host[me*checkBytes : (me+1)*checkBytes]
	describe(mine, k.seq, op)
	slot := unsafe.Pointer(uintptr(k.buf) + uintptr(me*checkBytes))
	if err := c.dev.Memcpy(k.dev, slot, unsafe.Pointer(&mine[0]), checkBytes, rt.HostToDevice, op.Stream); err != nil {
		return err
	}
	g := rt.Op{Kind: rt.OpAllGather, Comm: c.c, Send: slot, Recv: k.buf, Count: checkBytes, Type: rt.Uint8, Stream: op.Stream}
	if err := c.c.Run(&g); err != nil {
		return err
	}
	if err := c.dev.Memcpy(k.dev, unsafe.Pointer(&k.host[0]), k.buf, k.size, rt.DeviceToHost, op.Stream); err != nil {
		return err
	}
	if op.Stream != 0 {
		if err := c.dev.SynchronizeStream(op.Stream); err != nil {
			return err
		}
	} else if err := c.dev.SynchronizeDevice(k.dev); err != nil {
		return err
	}
	var diffs []string
	for p := 0; p < n; p++ {
		theirs := k.host[p*checkBytes : (p+1)*checkBytes]
		if string(theirs) != string(k.host[me*checkBytes:(me+1)*checkBytes]) {
			diffs = append(diffs, fmt.Sprintf("rank %d called %s as op #%d", p, describeString(theirs), binary.LittleEndian.Uint64(theirs)))
		}
	}
	if len(diffs) > 0 {
		return rt.Errorf("XCCL_CHECK: collective mismatch: %s; rank %d called %s as op #%d",
			strings.Join(diffs, ", "), me, describeString(mine), k.seq)
	}
	return nil
}

func (c *Comm) freeCheck() {
	k := &c.chk
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ready {
		_ = c.dev.MemFree(k.dev, k.buf, k.size)
		k.ready = false
	}
}
