// Package gcu is the Enflame GCU device (S60, T20/T21, i20 ...): ECCL and
// the TOPS runtime of TopsRider, loaded at run time (XCCL_ECCL_LIBRARY and
// XCCL_TOPSRT_LIBRARY override the paths). ECCL installs as
// /usr/lib/libeccl.so, the runtime as /opt/tops/lib/libtopsrt.so.
//
// ECCL is NCCL's API behind the eccl prefix taking topsStream_t; the TOPS
// runtime is the CUDA runtime's shape behind the tops prefix, except that
// pinned host memory is topsHostMalloc(ptr, size, flags) (xccl passes
// topsHostMallocDefault = 0) and topsHostFree. Sources:
//   - eccl.h of ECCL 3.1.0 (TopsRider), read through the code index,
//     repository not identified: ECCL_UNIQUE_ID_BYTES 128, passed by value
//     to ecclCommInitRank(comm*, int nranks, id, int rank);
//     ecclDataType_t Int8=0 Uint8=1 Int32=2 Uint32=3 Int64=4 Uint64=5
//     Float16=6 Float32=7 Float64=8 Bfloat16=9; ecclRedOp_t Sum=0 Prod=1
//     Max=2 Min=3 Avg=4; ecclResult_t InvalidArgument=4 InvalidUsage=5;
//     ecclSend/ecclRecv/ecclGroupStart/ecclGroupEnd, ecclCommAbort,
//     ecclCommGetAsyncError, ecclGetErrorString. Its note "only
//     ecclBroadcast and ecclAllGather support 64 bit data types now" is why
//     INT64, UINT64 and FLOAT64 are refused in reductions here.
//   - tops_runtime_api.h and driver_types.h (Enflame, index hits):
//     topsErrorNotReady = 600, topsMemcpyHostToDevice=1 DeviceToHost=2
//     DeviceToDevice=3, topsStreamCreate(topsStream_t*),
//     topsStreamWaitEvent(stream, event, flags), topsHostMallocDefault 0x0.
//   - PaddlePaddle/PaddleCustomDevice backends/gcu/runtime/runtime.cc: the
//     ecclUniqueId by value, the dtype map (U8 U32 U64 I8 I32 I64 F16 F32
//     F64 BF16), all-reduce of INT64/UINT64/FLOAT64 cast down to 32 bits
//     first (the same limit), ops SUM MAX MIN PROD (no AVG), topsHostMalloc
//     with topsHostMallocDefault.
//   - FlagCX (flagos-ai/FlagCX @0c721293): makefiles/enflame.mk (-leccl
//     from /usr/lib, -ltopsrt from /opt/tops/lib),
//     flagcx/adaptor/ccl/eccl_adaptor.cc (NCCL-numbered FlagCX enums cast
//     straight to ECCL's), flagcx/adaptor/device/tops_adaptor.cc (the
//     tops* runtime calls, topsLaunchHostFunc, topsHostMalloc).
//
// Weaker: AVG is in ECCL 3.1's header but unused by Paddle's backend;
// libeccl.so at /usr/lib comes from FlagCX and vLLM/SGLang GCU ports, not
// from Enflame documentation (/opt/tops/lib/libeccl.so, also tried, from a
// third-party install check). eccl.h also says a group aggregates "only
// the same eccl operation now": a group mixing collectives, or sends with
// receives, may be refused by ECCL (with its error, not a wrong result);
// ECCL's own all-to-all (ecclAlltoall, newer releases) is not used. Whether
// ECCL matches a send to self inside a group is not documented, so xccl
// copies device to device instead (SelfCopy).
package gcu

import (
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// DataTypes is ecclDataType_t without the 64-bit types, which ECCL
// reduces in no call (they still move: broadcast, all-gather, send and
// receive travel as bytes). BOOL travels as Uint8 for MAX/MIN.
var DataTypes = map[rt.DataType]int{
	rt.Int8: 0, rt.Uint8: 1, rt.Int32: 2, rt.Uint32: 3,
	rt.Float16: 6, rt.Float32: 7, rt.BFloat16: 9, rt.Bool: 1,
}

// Spec is ECCL + TOPS.
var Spec = ncclshape.Spec{
	Name: "gcu", Vendor: "Enflame ECCL",
	CCLEnv: "XCCL_ECCL_LIBRARY", CCLLibs: []string{"libeccl.so", "/usr/lib/libeccl.so", "/opt/tops/lib/libeccl.so"}, CCL: "eccl",
	RTEnv: "XCCL_TOPSRT_LIBRARY", RTLibs: []string{"libtopsrt.so", "/opt/tops/lib/libtopsrt.so"}, RT: "tops",
	IDSize: 128, DTypes: DataTypes, Ops: ncclshape.NCCLOps, ByteType: 0, // ecclInt8
	SelfCopy: true,
}

func init() {
	rt.Register("gcu", func() (rt.Device, error) { return ncclshape.Open(Spec) })
}
