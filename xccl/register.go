package xccl

import (
	"sync/atomic"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// registration is one buffer Register took: the range, and the library's
// handle where the device registers (rt.Registrar; 0 where it does not).
type registration struct {
	buf    unsafe.Pointer
	size   int
	vendor uintptr
}

// Handles are opaque to callers and never dereferenced: a tag and a count,
// so a handle of another communicator, or anything else, is refused.
const regTag = 0x5843 << 48 // "XC"

var regCount atomic.Uint64

// Register registers size bytes at buf with the communicator, as
// ncclCommRegister, for collectives that may then use them in place: the
// library's registration where the device has one (NCCL-shaped libraries
// with <ccl>CommRegister, NCCL >= 2.19); elsewhere the range is recorded
// and calls run as before (the host engine's buffers its peers map are
// XcclMemAlloc's, whatever is registered). The handle is for Deregister;
// Destroy releases what is left.
func (c *Comm) Register(buf unsafe.Pointer, size int) (uintptr, error) {
	if err := c.closed("CommRegister"); err != nil {
		return 0, err
	}
	switch {
	case buf == nil:
		return 0, rt.Errorf("CommRegister: buffer is NULL")
	case size <= 0 || size > maxBytes:
		return 0, rt.Errorf("CommRegister: size %d out of range (1 to %d bytes)", size, int64(maxBytes))
	}
	var vendor uintptr
	if r, ok := c.c.(rt.Registrar); ok {
		var err error
		if vendor, err = r.Register(buf, size); err != nil {
			return 0, err
		}
	}
	h := regTag | uintptr(regCount.Add(1)&(1<<48-1))
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if c.regs == nil {
		c.regs = map[uintptr]registration{}
	}
	c.regs[h] = registration{buf: buf, size: size, vendor: vendor}
	return h, nil
}

// Deregister undoes Register(handle), as ncclCommDeregister; also after
// Finalize. A handle this communicator did not give out is C_ERROR.
func (c *Comm) Deregister(h uintptr) error {
	if c.released.Load() {
		return rt.Errorf("CommDeregister: the communicator was destroyed or aborted")
	}
	c.regMu.Lock()
	r, ok := c.regs[h]
	delete(c.regs, h)
	c.regMu.Unlock()
	if !ok {
		return rt.Errorf("CommDeregister: handle %#x is not registered with this communicator", h)
	}
	if r.vendor != 0 {
		return c.c.(rt.Registrar).Deregister(r.vendor)
	}
	return nil
}

// Registered is how many buffers are registered (for tests and stats).
func (c *Comm) Registered() int {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return len(c.regs)
}

// dropRegistrations deregisters what is left, before the communicator goes.
func (c *Comm) dropRegistrations() {
	c.regMu.Lock()
	regs := c.regs
	c.regs = nil
	c.regMu.Unlock()
	for _, r := range regs {
		if r.vendor != 0 {
			_ = c.c.(rt.Registrar).Deregister(r.vendor)
		}
	}
}
