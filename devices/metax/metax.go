// Package metax is the MetaX device (C500 and the rest of the MXC line):
// MCCL and the MACA runtime, loaded at run time from /opt/maca
// (XCCL_METAX_MCCL_LIBRARY and XCCL_MACA_LIBRARY override the paths).
//
// MCCL is RCCL ported to MACA: NCCL's names behind the mccl prefix, NCCL's
// argument orders and values, a 128-byte id by value; the MACA runtime is
// the CUDA runtime's shape behind the mc prefix (mcSetDevice,
// mcMemcpyAsync, mcMallocHost, mcLaunchHostFunc...). Sources:
//   - mccl.h of MCCL 2.16.5 (MetaX, "Modifications Copyright ... MetaX"),
//     read through the code index, repository not identified:
//     MCCL_UNIQUE_ID_BYTES 128; mcclDataType_t Int8=0 ... Bfloat16=9;
//     mcclRedOp_t Sum=0 Prod=1 Max=2 Min=3 Avg=4; mcclResult_t
//     InvalidArgument=4 InvalidUsage=5; every call takes mcStream_t.
//   - FlagCX (flagos-ai/FlagCX @0c721293): makefiles/metax.mk (-lmccl,
//     -lmcruntime, /opt/maca/lib64), .github/configs/metax.yml
//     (LD_LIBRARY_PATH=/opt/maca/lib), flagcx/adaptor/ccl/mccl_adaptor.cc
//     (casts FlagCX's NCCL-numbered enums straight to MCCL's),
//     flagcx/adaptor/device/maca_adaptor.cc (the mc* runtime calls).
//   - InfiniTensor/InfiniCore xmake/metax.lua: MACA (libmcruntime,
//     libmccl) or, on HPCC installs, hc* names in libhcruntime/libhccl;
//     only MACA is bound here.
//
// Unconfirmed (no MACA header with the numbers was found): mcErrorNotReady
// = 600 (MACA derives from HIP, whose value it is) and the copy kinds
// mcMemcpyHostToDevice=1 DeviceToHost=2 DeviceToDevice=3 (a third-party
// ctypes binding of libmcruntime.so uses these). Sends to self inside a
// group are left to MCCL, as NCCL's are (runtime.SelfInGroup): FlagCX's
// MCCL gather and scatter, and Paddle's metax_gpu all-to-all, post a
// rank's send to itself and its receive from itself in one group; no MCCL
// document says so.
//
// Moore Threads' MCCL has the same soname (libmccl.so) and the same
// symbol names: the install paths are tried first, every library is
// opened RTLD_LOCAL and symbols are looked up in the opened handle only,
// and the runtime library (libmcruntime.so here, libmusart.so there) tells
// the two apart.
package metax

import (
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// Spec is MCCL + MACA.
var Spec = ncclshape.Spec{
	Name: "metax", Vendor: "MetaX MCCL",
	CCLEnv: "XCCL_METAX_MCCL_LIBRARY", CCLLibs: []string{"/opt/maca/lib/libmccl.so", "/opt/maca/lib64/libmccl.so", "libmccl.so"}, CCL: "mccl",
	RTEnv: "XCCL_MACA_LIBRARY", RTLibs: []string{"/opt/maca/lib/libmcruntime.so", "/opt/maca/lib64/libmcruntime.so", "libmcruntime.so"}, RT: "mc",
	IDSize: 128, DTypes: ncclshape.NCCLDataTypes, Ops: ncclshape.NCCLOps, ByteType: 0, // mcclInt8
}

func init() {
	rt.Register("metax", func() (rt.Device, error) { return ncclshape.Open(Spec) })
}
