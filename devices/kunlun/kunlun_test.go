package kunlun_test

import (
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/kunlun"
	"github.com/xccl-project/xccl/internal/conformance"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
)

// The conformance suite through the fake BKCL, with its C names and with
// the C++-mangled xccl_* names of new releases (which lack reduce).
func TestConformanceThroughFakeBKCL(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_XPURT_LIBRARY", libs["fakexpurt"])
	counts := []int{0, 1, 7, 4099}
	if testing.Short() {
		counts = []int{0, 7}
	}
	for _, lib := range []string{"fakebkcl", "fakexccl"} {
		t.Run(lib, func(t *testing.T) {
			t.Setenv("XCCL_BKCL_LIBRARY", libs[lib])
			d, err := kunlun.Open()
			require.NoError(t, err)
			require.ErrorContains(t, d.Supports(rt.Int8, rt.Sum), "kunlun (BKCL) has no data type for INT8")
			require.ErrorContains(t, d.Supports(rt.Float32, rt.Avg), "no reduce op for AVG")
			if lib == "fakexccl" {
				comms := conformance.Comms(t, d, 1)
				v := []float32{1}
				require.NoError(t, comms[0].AllReduce(ptr(v), ptr(v), 1, rt.Float32, rt.Max, 0))
				require.Equal(t, float32(1), v[0])
				err := comms[0].Reduce(ptr(v), ptr(v), 1, rt.Float32, rt.Sum, 0, 0)
				require.ErrorContains(t, err, "has no reduce")
				return // the suite's reduce cases need bkcl_reduce
			}
			conformance.Run(t, d, conformance.Config{Ranks: []int{1, 2, 4}, Counts: counts, GCPressure: true})
			fakecheck.CheckStream(t, d, libs[lib])
			fakecheck.CheckJoins(t, d)
		})
	}
}

// xpu_wait(NULL) waits for the default stream alone: the device's
// synchronize also waits for every stream made on it, and leaves the
// thread's device as it was.
func TestSynchronizeDeviceWaitsForItsStreams(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_XPURT_LIBRARY", libs["fakexpurt"])
	t.Setenv("XCCL_BKCL_LIBRARY", libs["fakebkcl"])
	d, err := kunlun.Open()
	require.NoError(t, err)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	require.NoError(t, d.SetDevice(0))
	a, err := d.CreateStream()
	require.NoError(t, err)
	b, err := d.CreateStream()
	require.NoError(t, err)
	gone, err := d.CreateStream()
	require.NoError(t, err)
	require.NoError(t, d.DestroyStream(gone))
	waits := fakecheck.Hook(t, libs["fakexpurt"], "fakeStreamWaits")
	before := waits()
	require.NoError(t, d.SetDevice(1))
	require.NoError(t, d.SynchronizeDevice(0))
	require.Equal(t, before+2, waits(), "the two live streams of device 0")
	cur, err := d.GetDevice()
	require.NoError(t, err)
	require.Equal(t, 1, cur)
	require.NoError(t, d.DestroyStream(a))
	require.NoError(t, d.DestroyStream(b))
}
