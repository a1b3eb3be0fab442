// Package ppu is the T-Head (Alibaba) PPU device (PPU-ZW810E, "PPU 810"):
// the NCCL-compatible library and CUDA-compatible runtime of the PPU SDK,
// which carry NCCL's and CUDA's own names, loaded at run time from
// /usr/local/PPU_SDK/CUDA_SDK/lib64 (XCCL_PPU_NCCL_LIBRARY and
// XCCL_PPU_CUDART_LIBRARY override the paths).
//
// As with Iluvatar CoreX, the names are NVIDIA's: a PPU machine is told
// from an NVIDIA one by the SDK's install path alone (no plain soname is
// tried), and XCCL_DEVICE=auto tries this device before nvidia.
//
// Sources:
//   - FlagCX (flagos-ai/FlagCX @0c721293, "[PAL] Add PPU support", #512):
//     flagcx/adaptor/include/ppu_adaptor.h (nccl.h, cuda_runtime.h,
//     ncclComm_t, cudaStream_t), flagcx/adaptor/ccl/ppu_nccl_adaptor.cc
//     (ncclGetUniqueId, ncclCommInitRank with the id by value, nccl*
//     collectives with NCCL-numbered enums cast straight, a rank's send to
//     itself inside a group in gather and scatter), makefiles/ppu.mk
//     (-lnccl, -lcudart), plugin/torch/_build_config.py (ppu-smi as the
//     platform's tool, tried before nvidia-smi).
//   - InfiniTensor/InfiniCore xmake/alibaba.lua: the PPU SDK at
//     /usr/local/PPU_SDK/CUDA_SDK, links cudart and nccl.
//
// Weaker (third-party scripts read through the code index): the libraries'
// directory /usr/local/PPU_SDK/CUDA_SDK/lib64 (PyTorch builds for PPU set
// NCCL_LIB_DIR and LD_LIBRARY_PATH to it; PPU_SDK/envsetup.sh sets up the
// environment), and the model name PPU-ZW810E. The 128-byte id and NCCL's
// numbering rest on the identical names, not on a PPU header. The SDK's
// native runtime (hggc*, libhggcrt1.so, "SAIL mode") is not used.
package ppu

import (
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

const sdk = "/usr/local/PPU_SDK/CUDA_SDK/lib64/"

// Spec is the PPU SDK's NCCL + CUDA runtime.
var Spec = ncclshape.Spec{
	Name: "ppu", Vendor: "T-Head PPU NCCL",
	CCLEnv: "XCCL_PPU_NCCL_LIBRARY", CCLLibs: []string{sdk + "libnccl.so.2", sdk + "libnccl.so"}, CCL: "nccl",
	RTEnv: "XCCL_PPU_CUDART_LIBRARY", RTLibs: []string{sdk + "libcudart.so", sdk + "libcudart.so.12"}, RT: "cuda",
	IDSize: 128, DTypes: ncclshape.NCCLDataTypes, Ops: ncclshape.NCCLOps, ByteType: 0, // ncclInt8
}

func init() {
	rt.Register("ppu", func() (rt.Device, error) { return ncclshape.Open(Spec) })
}
