// Package dcu is the AMD / Hygon DCU device: RCCL (NCCL's API and enums)
// and the HIP runtime, loaded at run time (XCCL_RCCL_LIBRARY,
// XCCL_HIP_LIBRARY override the paths; Hygon DTK installs under /opt/dtk).
package dcu

import (
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// Spec is RCCL's shape: identical to NCCL's (rccl.h, nccl.h.in).
var Spec = ncclshape.Spec{
	Name: "dcu", Vendor: "RCCL",
	CCLEnv: "XCCL_RCCL_LIBRARY", CCLLibs: []string{"librccl.so.1", "librccl.so", "/opt/rocm/lib/librccl.so.1", "/opt/dtk/rccl/lib/librccl.so"}, CCL: "nccl",
	RTEnv: "XCCL_HIP_LIBRARY", RTLibs: []string{"libamdhip64.so", "libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so", "/opt/dtk/lib/libamdhip64.so"}, RT: "hip",
	IDSize: 128, DTypes: ncclshape.NCCLDataTypes, Ops: ncclshape.NCCLOps, ByteType: 0,
}

func init() {
	rt.Register("dcu", func() (rt.Device, error) { return ncclshape.Open(Spec) })
}
