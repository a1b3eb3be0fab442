package host

import (
	"errors"
	"os"
	"runtime"
	"unsafe"
)

// SingleCopyUnavailable says why ranks of this machine cannot read each
// other's memory here (XCCL_CMA=0, or process_vm_readv refused, as under
// qemu-user or a seccomp filter), or nil: then they fall back to the
// rings, and tests of the single-copy path have nothing to check.
func SingleCopyUnavailable() error {
	if !cmaEnabled() {
		return errors.New("XCCL_CMA=0")
	}
	src, dst := []byte{1, 2, 3, 4}, make([]byte, 4)
	err := cmaRead(os.Getpid(), dst, uintptr(unsafe.Pointer(&src[0])))
	runtime.KeepAlive(src)
	return err
}
