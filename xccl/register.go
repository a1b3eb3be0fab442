package xccl

import (
	"sync/atomic"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// Handles are opaque to callers and never dereferenced: a tag and a count,
// so a handle of another communicator, or anything else, is refused.
const regTag = 0x5843 << 48 // "XC"

var regCount atomic.Uint64

// Register registers size bytes at buf with the communicator, as
// ncclCommRegister, for collectives that may then use them in place: the
// library's registration where the device has one (NCCL-shaped libraries
// with <ccl>CommRegister, NCCL >= 2.19); elsewhere the handle only stands
// for the range and calls run as before (the host engine's buffers its
// peers map are XcclMemAlloc's, whatever is registered). The handle is for
// Deregister; the library's destroy releases what is left, after the work
// issued, as NCCL's does. The memory must stay allocated until then.
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
	// Under regMu, with the library's call: Destroy and Abort close the
	// record first (regsGone), so no registration reaches a library
	// communicator that is going, and none is made that nothing releases.
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if c.regsGone {
		return 0, rt.Errorf("CommRegister: the communicator was destroyed or aborted")
	}
	var vendor uintptr
	if r, ok := c.c.(rt.Registrar); ok {
		var err error
		if vendor, err = r.Register(buf, size); err != nil {
			return 0, err
		}
	}
	h := regTag | uintptr(regCount.Add(1)&(1<<48-1))
	if c.regs == nil {
		c.regs = map[uintptr]uintptr{}
	}
	c.regs[h] = vendor
	return h, nil
}

// Deregister undoes Register(handle), as ncclCommDeregister; also after
// Finalize. A handle this communicator did not give out (or gave and took
// back) is C_ERROR. Where the library's deregistration fails the handle is
// gone all the same: the library's destroy releases what it holds.
func (c *Comm) Deregister(h uintptr) error {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if c.regsGone || c.released.Load() {
		return rt.Errorf("CommDeregister: the communicator was destroyed or aborted")
	}
	vendor, ok := c.regs[h]
	if !ok {
		return rt.Errorf("CommDeregister: handle %#x is not registered with this communicator", h)
	}
	delete(c.regs, h)
	if vendor != 0 {
		return c.c.(rt.Registrar).Deregister(vendor)
	}
	return nil
}

// Registered is how many buffers are registered (for tests).
func (c *Comm) Registered() int {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return len(c.regs)
}

// closeRegistrations ends Register and Deregister before the communicator
// goes (Destroy, Abort): the library's destroy releases its registrations
// itself, after the work issued on them (NCCL frees its registration cache
// in ncclCommDestroy); deregistering here first could pull them from under
// kernels still running.
func (c *Comm) closeRegistrations() {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	c.regsGone = true
	c.regs = nil
}
