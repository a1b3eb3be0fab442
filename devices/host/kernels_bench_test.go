package host

import (
	"fmt"
	"testing"

	rt "github.com/xccl-project/xccl/runtime"
)

// BenchmarkReduce: dst op= src for the common types, in cache (64 KiB)
// and beyond it (16 MiB); compare with ../shared/bench/peers/memcpy_bw.
func BenchmarkReduce(b *testing.B) {
	for _, dt := range []rt.DataType{rt.Float32, rt.Float64, rt.Int32} {
		for _, op := range []rt.ReduceOp{rt.Sum, rt.Max} {
			for _, size := range []int{64 << 10, 16 << 20} {
				for _, impl := range []string{"go", "c"} {
					b.Run(fmt.Sprintf("%v/%v/%d/%s", dt, op, size, impl), func(b *testing.B) {
						defer func(old bool) { useCKernels = old }(useCKernels)
						useCKernels = impl == "c"
						d, s := make([]byte, size), make([]byte, size)
						b.SetBytes(int64(size))
						for i := 0; i < b.N; i++ {
							reduceInto(d, s, dt, op)
						}
					})
				}
			}
		}
	}
}
