package ncclshape

/*
#include <stdint.h>
#include <stddef.h>
#include <string.h>

// ncclCommInitRank(comm*, int nranks, ncclUniqueId BY VALUE, int rank): one
// trampoline per id size, since C passes the id struct itself.
typedef struct { char internal[128]; } id128;                    // ncclUniqueId
typedef struct { uint8_t internal[1024]; size_t length; } id1032; // Gaudi hcclUniqueId
typedef struct { char internal[4096]; } id4096;                   // onecclUniqueId
typedef int (*init128_t)(void**, int, id128, int);
typedef int (*init1032_t)(void**, int, id1032, int);
typedef int (*init4096_t)(void**, size_t, id4096, int);           // oneCCL: size_t nranks
static int x_init128(void* f, void* comm, int nranks, const void* id, int rank) {
  id128 v;
  memcpy(&v, id, sizeof v);
  return ((init128_t)f)((void**)comm, nranks, v, rank);
}
static int x_init1032(void* f, void* comm, int nranks, const void* id, int rank) {
  id1032 v;
  memcpy(&v, id, sizeof v);
  return ((init1032_t)f)((void**)comm, nranks, v, rank);
}
static int x_init4096(void* f, void* comm, size_t nranks, const void* id, int rank) {
  id4096 v;
  memcpy(&v, id, sizeof v);
  return ((init4096_t)f)((void**)comm, nranks, v, rank);
}

*/
import "C"

import (
	"unsafe"

	"github.com/xccl-project/xccl/devices/internal/ccall"
)

type fn = ccall.Fn

// cInit calls CommInitRank(&comm, nranks, id BY VALUE, rank) with the
// trampoline for the id's size.
func cInit(f fn, size int, sizeT bool, nranks int, id []byte, rank int) (uintptr, int) {
	var comm uintptr
	pc, pid := unsafe.Pointer(&comm), unsafe.Pointer(&id[0])
	var rc C.int
	switch {
	case size == 4096 && sizeT:
		rc = C.x_init4096(f, pc, C.size_t(nranks), pid, C.int(rank))
	case size == 1032:
		rc = C.x_init1032(f, pc, C.int(nranks), pid, C.int(rank))
	default:
		rc = C.x_init128(f, pc, C.int(nranks), pid, C.int(rank))
	}
	return comm, int(rc)
}
