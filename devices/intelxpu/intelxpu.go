// Package intelxpu is the Intel device. On Gaudi (HPU) it forwards to
// Habana's HCCL, which libSynapse.so exports, with the SynapseAI runtime;
// XCCL_SYNAPSE_LIBRARY overrides the path. Facts:
// ../../shared/reference/vendor-apis.md §5a.
//
// Gaudi's HCCL is NCCL-shaped (the shared ncclshape forwarder serves it)
// with these differences (HabanaAI/HCL, hccl_types.h and hccl_helpers.h):
//   - the unique id is 1032 bytes by value ({uint8 internal[1024]; size_t
//     length});
//   - hcclRedOp_t orders MIN=2 MAX=3, the reverse of NCCL, and PROD and AVG
//     are refused (checkReductionOp);
//   - every call takes only FLOAT32, BFLOAT16, FLOAT16, INT32 and UINT32
//     (RETURN_ON_INVALID_DATA_TYPE), so untyped moves go as INT32 units, or
//     FLOAT16 ones where the bytes are not a multiple of 4;
//   - a NULL stream is refused (RETURN_ON_INVALID_STREAM): the NULL stream
//     goes as the device's internal stream, the one the runtime's NULL-stream
//     copies use;
//   - result codes: InvalidArgument=7 and InvalidUsage=8 are the caller's
//     errors (4 and 5 are UnhandledSynapseError and SystemError);
//   - hcclSend/hcclRecv block the device outside a group, so every send and
//     receive is wrapped in hcclGroupStart/End.
//
// On Intel GPUs it forwards to oneCCL's C API (oneccl*, libccl.so.2;
// XCCL_ONECCL_LIBRARY) and counts devices with Level Zero
// (XCCL_LEVELZERO_LIBRARY). Its stream is a sycl::queue* the framework owns,
// so the runtime entries that need SYCL (streams, events, memory) are
// refused; collectives take the framework's queue or NULL for host buffers.
//
// Open tries Gaudi first, then oneCCL.
package intelxpu

import (
	"github.com/xccl-project/xccl/devices/internal/dl"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// GaudiOps is what HCCL reduces of hcclRedOp_t: Sum=0 (Prod=1) Min=2 Max=3
// (Avg=4).
var GaudiOps = map[rt.ReduceOp]int{rt.Sum: 0, rt.Min: 2, rt.Max: 3}

// GaudiDataTypes is what HCCL takes of hcclDataType_t (NCCL's numbering).
var GaudiDataTypes = map[rt.DataType]int{rt.Int32: 2, rt.Uint32: 3, rt.Float16: 6, rt.Float32: 7, rt.BFloat16: 9}

var synapseLibs = []string{"libSynapse.so", "/usr/lib/habanalabs/libSynapse.so"}

// GaudiSpec is Habana HCCL on SynapseAI.
var GaudiSpec = ncclshape.Spec{
	Name: "intelxpu", Vendor: "Habana HCCL",
	CCLEnv: "XCCL_SYNAPSE_LIBRARY", CCLLibs: synapseLibs, CCL: "hccl",
	IDSize: 1032, DTypes: GaudiDataTypes, Ops: GaudiOps,
	MoveTypes:  []ncclshape.MoveType{{Size: 4, Type: 2}, {Size: 2, Type: 6}}, // hcclInt32, hcclFloat16
	UserErrors: []int{7, 8},                                                  // hcclInvalidArgument, hcclInvalidUsage
	GroupP2P:   true,
	// Habana's HCCL documents no send to self: xccl copies device to device.
	SelfCopy: true,
	Runtime: func() (ncclshape.Runtime, error) {
		lib, err := dl.Open("XCCL_SYNAPSE_LIBRARY", synapseLibs...)
		if err != nil {
			return nil, err
		}
		return openSynapse(lib)
	},
}

// Open opens the Gaudi stack, or else the oneCCL one.
func Open() (*ncclshape.Device, error) {
	d, gaudiErr := ncclshape.Open(GaudiSpec)
	if gaudiErr == nil {
		return d, nil
	}
	d, err := ncclshape.Open(OneCCLSpec)
	if err == nil {
		return d, nil
	}
	return nil, rt.WrapFailed(err, "intelxpu: no Gaudi (%v), and no oneCCL", gaudiErr)
}

func init() { rt.Register("intelxpu", func() (rt.Device, error) { return Open() }) }
