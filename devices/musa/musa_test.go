package musa_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xccl-project/xccl/devices/internal/fakecheck"
	"github.com/xccl-project/xccl/devices/internal/ncclshape"
	"github.com/xccl-project/xccl/devices/metax"
	"github.com/xccl-project/xccl/devices/musa"
	"github.com/xccl-project/xccl/internal/fakevendor"
	rt "github.com/xccl-project/xccl/runtime"
)

// Moore Threads' MCCL has NCCL's shape behind mccl* names: the fake MCCL
// and the fake MUSA runtime (musa* names), through the real dlopen path.
func TestConformanceThroughFakeMUSA(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_MUSA_MCCL_LIBRARY", libs["fakemccl"])
	t.Setenv("XCCL_MUSART_LIBRARY", libs["fakemusart"])
	d, err := ncclshape.Open(musa.Spec)
	require.NoError(t, err)
	require.Equal(t, "musa", d.Name())
	fakecheck.Suite(t, d, libs["fakemccl"])
}

// MetaX and Moore Threads ship the same soname with the same symbols: the
// runtime beside it decides, and the variables of one never reach the
// other.
func TestSharedSonameIsToldApartByTheRuntime(t *testing.T) {
	libs, err := fakevendor.Build(t.TempDir())
	require.NoError(t, err)
	t.Setenv("XCCL_MUSA_MCCL_LIBRARY", libs["fakemccl"])
	t.Setenv("XCCL_MUSART_LIBRARY", libs["fakemcruntime"]) // MACA's runtime beside MCCL
	_, err = ncclshape.Open(musa.Spec)
	require.ErrorContains(t, err, "lacks the symbol musa")

	t.Setenv("XCCL_MUSART_LIBRARY", libs["fakemusart"])
	t.Setenv("XCCL_METAX_MCCL_LIBRARY", "/nonexistent/libmccl.so")
	_, err = ncclshape.Open(metax.Spec)
	require.ErrorContains(t, err, "XCCL_METAX_MCCL_LIBRARY")
	d, err := ncclshape.Open(musa.Spec)
	require.NoError(t, err)
	require.NoError(t, d.Supports(rt.BFloat16, rt.Avg))
}
