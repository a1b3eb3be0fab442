// Package iluvatar is the Iluvatar CoreX device (BI-V100, BI-V150, MR-V100
// ...): CoreX's NCCL and CUDA-compatible runtime, which carry NCCL's and
// CUDA's own names and values, loaded at run time from the CoreX install
// (/usr/local/corex; XCCL_COREX_NCCL_LIBRARY and XCCL_COREX_CUDART_LIBRARY
// override the paths).
//
// Because the names are NVIDIA's, a CoreX machine is told from an NVIDIA
// one by the install path alone: only the CoreX paths are tried (no plain
// soname, which would find NVIDIA's libraries as readily), and
// XCCL_DEVICE=auto tries this device before nvidia. Where CoreX lives
// elsewhere, the two variables name its libraries; without them the
// nvidia device would load CoreX's libraries through LD_LIBRARY_PATH and
// work as well, named "nvidia".
//
// Sources:
//   - FlagCX (flagos-ai/FlagCX @0c721293): makefiles/iluvatar_corex.mk
//     (DEVICE_HOME=CCL_HOME=/usr/local/corex, lib, -lnccl -lcudart),
//     plugin/torch/_build_config.py (/usr/local/corex/lib64, cudart; ixsmi
//     as the platform's tool), flagcx/adaptor/ccl/ixnccl_adaptor.cc (nccl*
//     calls, NCCL-numbered enums cast straight, a rank's send to itself
//     inside a group in gather and scatter),
//     flagcx/adaptor/device/ixcuda_adaptor.cc (cuda* runtime calls),
//     docs/paddle/iluvatar.md (/usr/local/corex-4.3.0/lib64: the install
//     directory carries a version and /usr/local/corex names it).
//   - PaddlePaddle/PaddleCustomDevice backends/iluvatar_gpu/runtime/
//     runtime.cc: nccl.h, cuda_runtime.h, ncclUniqueId by value,
//     ncclUint8 for BOOL.
//   - InfiniTensor/InfiniCore xmake/iluvatar.lua: links cudart and nccl,
//     builds the CUDA sources with the CoreX clang.
//
// Weaker: that CoreX's NCCL keeps every NCCL value (128-byte id, dtype and
// op numbering) rests on the identical names and on the casts above, not
// on a CoreX header; Paddle's iluvatar_gpu map leaves FLOAT64 out, which
// may mean CoreX refuses it (the library then returns an error, never a
// wrong result).
package iluvatar

import (
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// Spec is CoreX NCCL + CoreX CUDA runtime.
var Spec = ncclshape.Spec{
	Name: "iluvatar", Vendor: "Iluvatar CoreX NCCL",
	CCLEnv: "XCCL_COREX_NCCL_LIBRARY",
	CCLLibs: []string{"/usr/local/corex/lib64/libnccl.so.2", "/usr/local/corex/lib64/libnccl.so",
		"/usr/local/corex/lib/libnccl.so.2", "/usr/local/corex/lib/libnccl.so"},
	CCL:    "nccl",
	RTEnv:  "XCCL_COREX_CUDART_LIBRARY",
	RTLibs: []string{"/usr/local/corex/lib64/libcudart.so", "/usr/local/corex/lib/libcudart.so"},
	RT:     "cuda",
	IDSize: 128, DTypes: ncclshape.NCCLDataTypes, Ops: ncclshape.NCCLOps, ByteType: 0, // ncclInt8
}

func init() {
	rt.Register("iluvatar", func() (rt.Device, error) { return ncclshape.Open(Spec) })
}
