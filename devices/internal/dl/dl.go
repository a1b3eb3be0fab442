// Package dl opens vendor libraries at run time: dlopen of a list of
// candidate names (or the path an environment variable gives), dlsym of
// every symbol once, and errors that name the library and the symbol. It
// also holds the C trampolines every vendor package shares: cgo cannot call
// a C function pointer, so each signature gets a small C function.
package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// dlopen/dlsym and their dlerror in one C call: dlerror is per thread.
static void* xccl_dlopen(const char* path, char** err) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) { const char* e = dlerror(); *err = e ? strdup(e) : NULL; }
  return h;
}
static uintptr_t xccl_call0(void* f) { return ((uintptr_t (*)(void))f)(); }
static void* xccl_dlsym(void* h, const char* name, char** err) {
  dlerror();
  void* p = dlsym(h, name);
  if (!p) { const char* e = dlerror(); *err = e ? strdup(e) : NULL; }
  return p;
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// Library is an opened vendor library.
type Library struct {
	Name   string // what was opened: a path or a soname
	Tried  []string
	handle unsafe.Pointer
	also   []*Library // searched after it (With)
}

// With makes l's symbols also come from others, searched in turn after l:
// a vendor that moved part of its API to a second library (CANN's
// communicator calls went from libhccl.so to libhcomm.so). nil entries
// are skipped.
func (l *Library) With(others ...*Library) *Library {
	for _, o := range others {
		if o != nil {
			l.also = append(l.also, o)
			l.Name += "+" + o.Name
		}
	}
	return l
}

// ErrMissing is returned (wrapped) when no candidate library loads.
var ErrMissing = &rt.Error{Status: rt.StatusFailed, Msg: "vendor library not found"}

// Open loads the first candidate that dlopens. envVar, when set in the
// environment, names the one path to try instead.
func Open(envVar string, candidates ...string) (*Library, error) {
	if p := rt.Getenv(envVar); p != "" {
		candidates = []string{p}
	}
	var errs []string
	for _, name := range candidates {
		cn := C.CString(name)
		var cerr *C.char
		h := C.xccl_dlopen(cn, &cerr)
		C.free(unsafe.Pointer(cn))
		if h != nil {
			return &Library{Name: name, Tried: candidates, handle: h}, nil
		}
		msg := "unknown error"
		if cerr != nil {
			msg = C.GoString(cerr)
			C.free(unsafe.Pointer(cerr))
		}
		errs = append(errs, msg)
	}
	return nil, &rt.Error{Status: rt.StatusFailed, Err: ErrMissing,
		Msg: fmt.Sprintf("cannot load any of %v (set %s to its path): %s", candidates, envVar, strings.Join(errs, "; "))}
}

// Sym resolves one symbol, trying each name in turn (a C name, then its
// C++-mangled twin, say). It returns the name that resolved.
func (l *Library) Sym(names ...string) (unsafe.Pointer, string, error) {
	var last string
	for _, name := range names {
		cn := C.CString(name)
		for _, lib := range append([]*Library{l}, l.also...) {
			var cerr *C.char
			p := C.xccl_dlsym(lib.handle, cn, &cerr)
			if p != nil {
				C.free(unsafe.Pointer(cn))
				return p, name, nil
			}
			if cerr != nil {
				last = C.GoString(cerr)
				C.free(unsafe.Pointer(cerr))
			}
		}
		C.free(unsafe.Pointer(cn))
	}
	return nil, "", &rt.Error{Status: rt.StatusFailed,
		Msg: fmt.Sprintf("%s lacks the symbol %s (%s)", l.Name, strings.Join(names, " / "), last)}
}

// Bind resolves a table of symbols: required ones fail the whole bind with
// an error naming the first missing one; optional ones stay nil.
func (l *Library) Bind(required map[string]*unsafe.Pointer, optional map[string]*unsafe.Pointer) error {
	for name, dst := range required {
		p, _, err := l.Sym(strings.Split(name, "|")...)
		if err != nil {
			return err
		}
		*dst = p
	}
	for name, dst := range optional {
		p, _, _ := l.Sym(strings.Split(name, "|")...)
		*dst = p
	}
	return nil
}

// Call0 calls a C function that takes nothing and returns a pointer-sized
// value (test hooks of the fake libraries, version queries).
func Call0(f unsafe.Pointer) uintptr { return uintptr(C.xccl_call0(f)) }
