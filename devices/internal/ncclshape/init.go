package ncclshape

/*
#include <string.h>

// ncclCommInitRank(comm*, int nranks, ncclUniqueId BY VALUE, int rank): one
// trampoline per id size, since C passes the id struct itself.
typedef struct { char internal[128]; } id128;
typedef int (*init128_t)(void**, int, id128, int);
static int x_init128(void* f, void* comm, int nranks, const void* id, int rank) {
  id128 v;
  memcpy(&v, id, sizeof v);
  return ((init128_t)f)((void**)comm, nranks, v, rank);
}

*/
import "C"

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
)

type fn = ccall.Fn

func cInit128(f fn, nranks int, id []byte, rank int) (uintptr, int) {
	var comm uintptr
	rc := C.x_init128(f, unsafe.Pointer(&comm), C.int(nranks), unsafe.Pointer(&id[0]), C.int(rank))
	return comm, int(rc)
}
