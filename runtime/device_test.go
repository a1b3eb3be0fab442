package runtime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/xccl-project/xccl/devices/all"
	rt "github.com/xccl-project/xccl/runtime"
)

// With no vendor library on this machine, auto falls back to the host
// device, and the probe says why each vendor was passed over.
func TestAutoFallsBackToHost(t *testing.T) {
	t.Setenv("XCCL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2")
	t.Setenv("XCCL_RCCL_LIBRARY", "/nonexistent/librccl.so")
	res := rt.Probe()
	// The NCCL-named vendors identified by install path come first.
	require.Equal(t, "iluvatar", res[0].Name)
	require.Equal(t, "ppu", res[1].Name)
	require.Equal(t, "nvidia", res[2].Name)
	require.False(t, res[2].OK)
	require.Contains(t, res[2].Detail, "XCCL_NCCL_LIBRARY")
	for _, r := range res[:len(res)-1] {
		require.False(t, r.OK, "%s: %s", r.Name, r.Detail)
		require.NotEmpty(t, r.Detail, r.Name)
	}
	last := res[len(res)-1]
	require.Equal(t, "host", last.Name)
	require.True(t, last.OK)
	d, err := rt.Open("auto")
	require.NoError(t, err)
	require.Equal(t, "host", d.Name())
	_, err = rt.Open("nosuchdevice")
	require.ErrorContains(t, err, "unknown device")
	m := rt.CapabilityMatrix(d)
	require.True(t, strings.HasPrefix(m, "BOOL"), m)
	require.Contains(t, m, "COMPLEX64  SUM AVG PRODUCT")
	require.Contains(t, m, "self send/recv: matched by the device")
}

// The process's device is XCCL_DEVICE at the first successful Open(""),
// not when the configuration was read; a failed first choice is not kept;
// after it, XCCL_DEVICE naming another device fails CheckDeviceChoice.
func TestDeviceChosenAtFirstOpen(t *testing.T) {
	rt.Load() // the configuration read before XCCL_DEVICE is set
	require.NoError(t, rt.CheckDeviceChoice(), "nothing chosen yet")
	t.Setenv("XCCL_DEVICE", "nosuchdevice")
	_, err := rt.Open("")
	require.ErrorContains(t, err, "unknown device")
	require.NoError(t, rt.CheckDeviceChoice(), "a failed choice is not kept")
	t.Setenv("XCCL_DEVICE", "HOST")
	d, err := rt.Open("")
	require.NoError(t, err)
	require.Equal(t, "host", d.Name())
	for _, v := range []string{"host", "auto", ""} {
		t.Setenv("XCCL_DEVICE", v)
		require.NoError(t, rt.CheckDeviceChoice(), "XCCL_DEVICE=%q", v)
		again, err := rt.Open("")
		require.NoError(t, err)
		require.Same(t, d, again)
	}
	t.Setenv("XCCL_DEVICE", "nvidia")
	require.ErrorContains(t, rt.CheckDeviceChoice(), `XCCL_DEVICE is "nvidia", but this process already uses device "host"`)
}
