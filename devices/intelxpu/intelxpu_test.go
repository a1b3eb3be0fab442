package intelxpu_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/intelxpu"
	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
)

// The conformance suite through the fake libSynapse: Gaudi HCCL's swapped
// MIN/MAX, the 1032-byte by-value id, sends only inside groups, the five
// data types and three ops HCCL takes, no NULL stream (the fake refuses
// them, as HabanaAI/HCL does), and the Synapse runtime's uint64 device
// addresses.
func TestConformanceThroughFakeGaudi(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_SYNAPSE_LIBRARY", libs["fakesynapse"])
	d, err := intelxpu.Open()
	require.NoError(t, err)
	require.Equal(t, 1032, d.UniqueIDSize())
	counts := []int{0, 1, 7, 4099}
	if testing.Short() {
		counts = []int{0, 7}
	}
	// Moves go as 4- or 2-byte units (HCCL has no 1-byte type).
	conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true, MoveUnit: 2})
	fakecheck.CheckStream(t, d, libs["fakesynapse"])
	fakecheck.CheckJoins(t, d)

	// Device memory and copies through the Synapse runtime.
	require.NoError(t, d.SetDevice(1))
	p, err := d.MemAlloc(1, 64)
	require.NoError(t, err)
	in := make([]byte, 64)
	for i := range in {
		in[i] = byte(i)
	}
	out := make([]byte, 64)
	require.NoError(t, d.Memcpy(1, p, unsafe.Pointer(&in[0]), 64, rt.HostToDevice, 0))
	require.NoError(t, d.Memcpy(1, unsafe.Pointer(&out[0]), p, 64, rt.DeviceToHost, 0))
	require.Equal(t, in, out)
	require.NoError(t, d.MemFree(1, p, 64))
	// The device's synchronize is synDeviceSynchronize (every stream).
	syncs := fakecheck.Hook(t, libs["fakesynapse"], "fakeDeviceSyncs")
	before := syncs()
	require.NoError(t, d.SynchronizeDevice(1))
	require.Equal(t, before+1, syncs())
	total, free, err := d.MemStats(1)
	require.NoError(t, err)
	require.Greater(t, total, free)
}

// oneCCL's C API through a fake: the 4096-byte id by value with size_t
// nranks, NCCL's enums, Level Zero for the device count, NULL streams.
func TestConformanceThroughFakeOneCCL(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_SYNAPSE_LIBRARY", "/nonexistent/libSynapse.so") // no Gaudi here
	t.Setenv("XCCL_ONECCL_LIBRARY", libs["fakeoneccl"])
	t.Setenv("XCCL_LEVELZERO_LIBRARY", libs["fakeze"])
	t.Setenv("FAKE_DEVICE_COUNT", "3")
	d, err := intelxpu.Open()
	require.NoError(t, err)
	require.Equal(t, 4096, d.UniqueIDSize())
	require.Equal(t, 3, d.DeviceCount())
	require.Contains(t, d.Libraries(), "fakeoneccl")
	_, err = d.CreateStream()
	require.ErrorContains(t, err, "SYCL")
	require.NoError(t, d.SetDevice(2))
	counts := []int{0, 1, 7, 4099}
	if testing.Short() {
		counts = []int{0, 7}
	}
	conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true})

	// onecclMemAlloc, onecclCommFinalize and onecclCommRegister answer
	// onecclNotImplemented here, as on a backend without them: absent, not a
	// failure (the memory would be SYCL's, which this runtime refuses).
	_, err = d.CommMemAlloc(0, 4096)
	require.Error(t, err)
	require.Equal(t, rt.StatusError, rt.StatusOf(err), "%v", err)
	c := conformance.Comms(t, d, 1)[0]
	b := make([]byte, 64)
	h, err := c.Register(unsafe.Pointer(&b[0]), len(b))
	require.NoError(t, err)
	require.NoError(t, c.Finalize())
	require.NoError(t, c.AsyncError(), "not implemented broke the communicator")
	require.NoError(t, c.Deregister(h))
	require.NoError(t, c.Destroy())
}
