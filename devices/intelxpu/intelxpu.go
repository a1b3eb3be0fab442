// Package intelxpu is the Intel device. On Gaudi (HPU) it forwards to
// Habana's HCCL, which libSynapse.so exports, with the SynapseAI runtime;
// XCCL_SYNAPSE_LIBRARY overrides the path. Facts:
// ../../shared/reference/vendor-apis.md §5a.
//
// Gaudi's HCCL is NCCL-shaped (the shared ncclshape forwarder serves it)
// with these differences: the unique id is 1032 bytes by value
// ({uint8 internal[1024]; size_t length}); hcclRedOp_t orders MIN=2 MAX=3,
// the reverse of NCCL; hcclSend/hcclRecv block the device outside a group,
// so every send and receive is wrapped in hcclGroupStart/End.
//
// oneCCL's C API (Intel GPU) passes a sycl::queue* as the stream, which no
// C runtime can create: it is not forwarded yet (see the README).
package intelxpu

import (
	"github.com/xccl-project/xccl/devices/internal/dl"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	rt "github.com/xccl-project/xccl/runtime"
)

// GaudiOps is hcclRedOp_t: Sum=0 Prod=1 Min=2 Max=3 Avg=4.
var GaudiOps = map[rt.ReduceOp]int{rt.Sum: 0, rt.Product: 1, rt.Min: 2, rt.Max: 3, rt.Avg: 4}

var synapseLibs = []string{"libSynapse.so", "/usr/lib/habanalabs/libSynapse.so"}

// GaudiSpec is Habana HCCL on SynapseAI.
var GaudiSpec = ncclshape.Spec{
	Name: "intelxpu", Vendor: "Habana HCCL",
	CCLEnv: "XCCL_SYNAPSE_LIBRARY", CCLLibs: synapseLibs, CCL: "hccl",
	IDSize: 1032, DTypes: ncclshape.NCCLDataTypes, Ops: GaudiOps, ByteType: 0,
	GroupP2P: true,
	Runtime: func() (ncclshape.Runtime, error) {
		lib, err := dl.Open("XCCL_SYNAPSE_LIBRARY", synapseLibs...)
		if err != nil {
			return nil, err
		}
		return openSynapse(lib)
	},
}

// Open opens the Gaudi stack.
func Open() (*ncclshape.Device, error) { return ncclshape.Open(GaudiSpec) }

func init() { rt.Register("intelxpu", func() (rt.Device, error) { return Open() }) }
