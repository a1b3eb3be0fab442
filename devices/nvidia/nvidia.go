// Package nvidia is the NVIDIA device: NCCL and the CUDA runtime, loaded at
// run time (XCCL_NCCL_LIBRARY, XCCL_CUDART_LIBRARY override the paths).
package nvidia

import (
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// Spec is NCCL's shape: nccl.h enums, a 128-byte id by value.
var Spec = ncclshape.Spec{
	Name: "nvidia", Vendor: "NCCL",
	CCLEnv: "XCCL_NCCL_LIBRARY", CCLLibs: []string{"libnccl.so.2", "libnccl.so"}, CCL: "nccl",
	RTEnv: "XCCL_CUDART_LIBRARY", RTLibs: []string{"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}, RT: "cuda",
	IDSize: 128, DTypes: ncclshape.NCCLDataTypes, Ops: ncclshape.NCCLOps, ByteType: 0, // ncclInt8
}

func init() {
	rt.Register("nvidia", func() (rt.Device, error) { return ncclshape.Open(Spec) })
}
