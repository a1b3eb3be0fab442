package xccl

import (
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

const checkBytes = rt.FingerprintSize

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

// check runs the description all-gather for op and compares.
func (c *Comm) check(op *rt.Op) error {
	k := &c.chk
	k.mu.Lock()
	defer k.mu.Unlock()
	n := c.size
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
	me := c.rank
	mine := k.host[me*checkBytes : (me+1)*checkBytes]
	rt.FingerprintOf(op, k.seq).Put(mine)
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
	want := rt.FingerprintOf(op, k.seq)
	var diffs []string
	for p := 0; p < n; p++ {
		theirs, ok := rt.ParseFingerprint(k.host[p*checkBytes:])
		if !ok || theirs != want {
			diffs = append(diffs, fmt.Sprintf("rank %d called %s as op #%d", p, theirs, theirs.Seq))
		}
	}
	if len(diffs) > 0 {
		return rt.Errorf("XCCL_CHECK: collective mismatch: %s; rank %d called %s as op #%d",
			strings.Join(diffs, ", "), me, want, k.seq)
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
