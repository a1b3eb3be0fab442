package host_test

import (
	"testing"

	"github.com/xccl-project/xccl/devices/host"
	"github.com/xccl-project/xccl/internal/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, host.New(), conformance.Config{})
}
