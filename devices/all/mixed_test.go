package all_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/ascend"
	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/devices/mlu"
	"github.com/xccl-project/xccl/devices/nvidia"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// Small staging pieces, so the larger counts are cut into chunks.
func TestMain(m *testing.M) {
	os.Setenv("XCCL_MIXED_CHUNK_BYTES", "65536")
	os.Exit(m.Run())
}

func counts() []int {
	if testing.Short() {
		return []int{0, 7, 40009}
	}
	return []int{0, 1, 7, 40009}
}

type vendors struct{ nvidia, ascend, mlu rt.Device }

func openVendors(t *testing.T) vendors {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_NCCL_LIBRARY", libs["fakenccl"])
	t.Setenv("XCCL_CUDART_LIBRARY", libs["fakecudart"])
	t.Setenv("XCCL_HCCL_LIBRARY", libs["fakehccl"])
	t.Setenv("XCCL_ACL_LIBRARY", libs["fakeascendcl"])
	t.Setenv("XCCL_CNCL_LIBRARY", libs["fakecncl"])
	t.Setenv("XCCL_CNRT_LIBRARY", libs["fakecnrt"])
	var v vendors
	v.nvidia, err = ncclshape.Open(nvidia.Spec)
	require.NoError(t, err)
	v.ascend, err = ascend.Open()
	require.NoError(t, err)
	v.mlu, err = mlu.Open()
	require.NoError(t, err)
	return v
}

func run(t *testing.T, devs []rt.Device, labels []string) []*xccl.Comm {
	comms := conformance.MixedComms(t, devs, labels)
	for _, c := range comms {
		require.True(t, c.Mixed(), "clusters %v / %v make a mixed communicator", labels, devs)
	}
	conformance.RunComms(t, host.New(), comms, counts())
	return comms
}

// Host ranks split by cluster label: 2+2, interleaved, and 1+3.
func TestHostClustersByLabel(t *testing.T) {
	h := host.New()
	for name, labels := range map[string][]string{
		"2+2":         {"a", "a", "b", "b"},
		"interleaved": {"a", "b", "a", "b"},
		"1+3":         {"a", "b", "b", "b"},
	} {
		t.Run(name, func(t *testing.T) {
			comms := run(t, []rt.Device{h, h, h, h}, labels)
			s := comms[0].Stats().Engine
			require.NotZero(t, s["mixed.hierarchical_calls"], "%v", s)
			require.NotZero(t, s["mixed.flat_calls"], "%v", s)
		})
	}
}

// Two fake NCCL ranks and two host ranks, interleaved.
func TestFakeNCCLAndHost(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	comms := run(t, []rt.Device{v.nvidia, h, v.nvidia, h}, []string{"", "", "", ""})
	require.Contains(t, comms[0].Capabilities(), "nvidia[0 2] host[1 3]")
}

// Three vendors and the host, uneven: one HCCL rank, two CNCL ranks, one
// host rank. AVG, which HCCL and CNCL cannot reduce, is a SUM on their
// libraries scaled on the host for real types, and goes through the host
// engine for the rest; FLOAT64, which CNCL lacks, goes through the host.
func TestThreeVendorsAndHost(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	comms := run(t, []rt.Device{v.mlu, v.ascend, h, v.mlu}, []string{"", "", "", ""})
	caps := comms[1].Capabilities()
	require.Contains(t, caps, "FLOAT32    hierarchical: SUM AVG MAX MIN PRODUCT; through the host engine: -", caps)
	require.Contains(t, caps, "INT32      hierarchical: SUM MAX MIN PRODUCT; through the host engine: AVG", caps)
	require.Contains(t, caps, "FLOAT64    hierarchical: -; through the host engine: SUM AVG MAX MIN PRODUCT", caps)
}

// One cluster through xccl's id is the device's own communicator: the
// vendor sees the whole call.
func TestOneClusterIsPassThrough(t *testing.T) {
	v := openVendors(t)
	comms := conformance.MixedComms(t, []rt.Device{v.nvidia, v.nvidia}, []string{"", ""})
	for _, c := range comms {
		require.False(t, c.Mixed())
		require.Contains(t, c.Capabilities(), "FLOAT32")
	}
	conformance.RunComms(t, v.nvidia, comms, []int{0, 7})
	h := host.New()
	hc := conformance.MixedComms(t, []rt.Device{h, h, h}, []string{"x", "x", "x"})
	require.False(t, hc[0].Mixed())
}

// A cluster label over two device kinds is refused on every rank.
func TestClusterOfTwoDevicesRefused(t *testing.T) {
	v := openVendors(t)
	h := host.New()
	id, err := xccl.GetUniqueID(h)
	require.NoError(t, err)
	errs := make(chan error, 2)
	for r, d := range []rt.Device{v.nvidia, h} {
		go func() {
			_, err := xccl.CommInitRankCluster(d, 2, id, r, "same")
			errs <- err
		}()
	}
	for i := 0; i < 2; i++ {
		err := <-errs
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), "one device kind"), "%v", err)
	}
}
