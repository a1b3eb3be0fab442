package host

// Reduction kernels in C, compiled with -O3 and cloned for AVX2 (the
// loader picks the clone the CPU runs; others get the SSE2 baseline), for
// the integer and real floating types and SUM, PRODUCT, MAX, MIN. They
// compute exactly what the Go loops in kernels.go compute (one IEEE add or
// multiply per element, so nothing to contract into an FMA; NaN-propagating
// MAX/MIN) and take over from 1 KiB on, where
// the cgo call costs less than the speed-up (measured: BenchmarkReduce).

/*
#cgo CFLAGS: -O3 -fno-strict-aliasing
#cgo noescape memcpy
#cgo nocallback memcpy
#include <string.h>
#include "kernels.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
)

// copyShared is copy(dst, src) for dst in memory a peer reads (its ring):
// from copyOutMin to copyOutMax bytes through C's memcpy, which copies
// several KiB as one string that writes whole lines without reading them
// first, where Go's copy stores vectors that fetch each line from the
// peer's cache, dear where the two CPUs are far apart. Measured, 2 ranks,
// sendrecv, alternated (docs/perf/ringcopy-2026-11-27.txt): where the
// VM's CPUs were far apart, 32 KiB 6.0 -> 2.8 us, 128 KiB 20 -> 8, 512 KiB
// 70 -> 30; where near, the same within noise. Larger copies stay Go's,
// whose stores past 1 MiB bypass the caches: C's made 2 MiB 1.7x slower
// where the CPUs were far (and 1.7x faster where near).
func copyShared(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < copyOutMin || n > copyOutMax {
		return copy(dst, src)
	}
	C.memcpy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), C.size_t(n))
	return n
}

const (
	copyOutMin = 4 << 10
	copyOutMax = 512 << 10
)

// cKernelMin is the smallest reduction handed to C.
const cKernelMin = 1 << 10

// useCKernels can be turned off by tests to compare with the Go loops.
var useCKernels = true

// reduceC reduces with the C kernels; false: not handled (too small, or a
// type/op the C side does not cover), use the Go loops.
func reduceC(dst, src []byte, dt rt.DataType, op rt.ReduceOp) bool {
	if !useCKernels || len(dst) < cKernelMin {
		return false
	}
	src = src[:len(dst)]
	return C.xccl_reduce(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), C.size_t(len(dst)), C.int(dt), C.int(op)) == 0
}

// reduce3Into computes dst = a op b (a may be dst itself) for len(dst)
// bytes: in one pass, in C from cKernelMin on, else in Go (a copy and the
// Go loops for bool and complex).
func reduce3Into(dst, a, b []byte, dt rt.DataType, op rt.ReduceOp) {
	if len(dst) < cKernelMin || !useCKernels {
		if reduce3Go(dst, a, b, dt, op) {
			return
		}
	} else if C.xccl_reduce3(unsafe.Pointer(&dst[0]), unsafe.Pointer(&a[0]),
		unsafe.Pointer(&b[0]), C.size_t(len(dst)), C.int(dt), C.int(op)) == 0 {
		return
	}
	copyIfDistinct(dst, a[:len(dst)])
	reduceInto(dst, b[:len(dst)], dt, op)
}

// redJob is one reduction of a list: dst = a op b (a may be dst itself).
type redJob struct{ dst, a, b []byte }

// cJobs is the list handed to C, kept by each communicator (passed to C,
// a local one would move to the heap: an allocation per call).
type cJobs [16]C.xccl_job

// reduceJobs runs the jobs in order: in one call into C when they are
// large enough in all to pay for it, else with the Go loops. Collectives
// hold collMu (c.cjobs).
func (c *Comm) reduceJobs(jobs []redJob, dt rt.DataType, op rt.ReduceOp) {
	total := 0
	for _, j := range jobs {
		total += len(j.dst)
	}
	if useCKernels && total >= cKernelMin && c.reduceJobsC(jobs, dt, op) {
		return
	}
	for _, j := range jobs {
		reduce3Into(j.dst, j.a, j.b, dt, op)
	}
}

// reduceJobsC hands the jobs to C, 16 at a time; false: C does not cover
// the type or op (nothing was done). The addresses travel as integers (a
// list of pointers to Go memory may not be passed to C): the buffers are C
// memory, shared memory or Go heap memory (which does not move), kept alive
// by jobs until C returns.
func (c *Comm) reduceJobsC(jobs []redJob, dt rt.DataType, op rt.ReduceOp) bool {
	if c.cjobs == nil {
		c.cjobs = new(cJobs)
	}
	cj := c.cjobs
	for len(jobs) > 0 {
		k := min(len(jobs), len(cj))
		for i, j := range jobs[:k] {
			if len(j.dst) == 0 {
				cj[i] = C.xccl_job{}
				continue
			}
			cj[i] = C.xccl_job{d: C.uintptr_t(uintptr(unsafe.Pointer(&j.dst[0]))), a: C.uintptr_t(uintptr(unsafe.Pointer(&j.a[0]))),
				b: C.uintptr_t(uintptr(unsafe.Pointer(&j.b[0]))), bytes: C.size_t(len(j.dst))}
		}
		if C.xccl_reduce_jobs(&cj[0], C.int(k), C.int(dt), C.int(op)) != 0 {
			return false
		}
		runtime.KeepAlive(jobs)
		jobs = jobs[k:]
	}
	return true
}
