// Package musa is the Moore Threads device (MUSA GPUs, MTT S4000 and
// the like): Moore Threads' MCCL and the MUSA runtime, loaded at run time
// from /usr/local/musa/lib (XCCL_MUSA_MCCL_LIBRARY and XCCL_MUSART_LIBRARY
// override the paths).
//
// Moore Threads' MCCL is NCCL's API behind the mccl prefix (the same
// prefix and soname as MetaX's MCCL, a different library) taking
// musaStream_t; the MUSA runtime is the CUDA runtime's shape behind the
// musa prefix. Sources:
//   - MooreThreads/torch_musa torch_musa/csrc/distributed/MCCLUtils.h and
//     ProcessGroupMCCL.cpp: mccl.h, mcclUniqueId passed by value to
//     mcclCommInitRank, mcclSum/Prod/Max/Min/Avg, the dtype map (BF16
//     only where MCCL_BF16_SUPPORTED).
//   - FlagCX (flagos-ai/FlagCX @0c721293): makefiles/musa.mk (-lmccl
//     -lmusa, /usr/local/musa/lib), plugin/torch/_build_config.py
//     (libmusart from /usr/local/musa/lib),
//     flagcx/adaptor/ccl/musa_mccl_adaptor.cc (NCCL-numbered FlagCX enums
//     cast straight to MCCL's; gather and scatter post a rank's send to
//     itself inside a group), flagcx/adaptor/device/musa_adaptor.cc.
//   - InfiniTensor/InfiniCore src/infinirt/moore/infinirt_moore.cc and
//     xmake/moore.lua: musaSetDevice, musaStreamCreate, musaMallocHost,
//     musaMemcpyAsync..., libmusart and libmccl.
//
// Weaker facts: the values themselves (128-byte id, mcclInt8=0 ...
// mcclBfloat16=9, mcclSum=0 ... mcclAvg=4) come from vllm_musa's ctypes
// MCCL wrapper (a port of vLLM's NCCL wrapper, read through the code
// index) and from FlagCX's casts; no Moore Threads mccl.h was read.
// musaErrorNotReady = 600 and musaMemcpyHostToDevice=1 DeviceToHost=2
// DeviceToDevice=3 come from copies of MUSA's enums in third-party code
// (index hits), which follow CUDA's. BF16 reductions need a recent MUSA
// architecture (MARCH_TYPE >= 220 in third-party code); older ones get
// MCCL's own error, not a wrong result. libmusart's soname carries the
// MUSA major version (libmusart.so.4, .5 seen).
package musa

import (
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// Spec is MCCL + MUSA.
var Spec = ncclshape.Spec{
	Name: "musa", Vendor: "Moore Threads MCCL",
	CCLEnv: "XCCL_MUSA_MCCL_LIBRARY", CCLLibs: []string{"/usr/local/musa/lib/libmccl.so", "libmccl.so"}, CCL: "mccl",
	RTEnv: "XCCL_MUSART_LIBRARY", RTLibs: []string{"/usr/local/musa/lib/libmusart.so", "libmusart.so", "libmusart.so.5", "libmusart.so.4"}, RT: "musa",
	IDSize: 128, DTypes: ncclshape.NCCLDataTypes, Ops: ncclshape.NCCLOps, ByteType: 0, // mcclInt8
}

func init() {
	rt.Register("musa", func() (rt.Device, error) { return ncclshape.Open(Spec) })
}
