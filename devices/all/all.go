// Package all links every device into a binary: importing it registers
// the host device and every vendor device (each loads its libraries only
// when first used).
package all

import (
	_ "github.com/xccl-project/xccl/devices/ascend"
	_ "github.com/xccl-project/xccl/devices/dcu"
	_ "github.com/xccl-project/xccl/devices/gcu"
	_ "github.com/xccl-project/xccl/devices/host"
	_ "github.com/xccl-project/xccl/devices/iluvatar"
	_ "github.com/xccl-project/xccl/devices/intelxpu"
	_ "github.com/xccl-project/xccl/devices/kunlun"
	_ "github.com/xccl-project/xccl/devices/metax"
	_ "github.com/xccl-project/xccl/devices/mlu"
	_ "github.com/xccl-project/xccl/devices/musa"
	_ "github.com/xccl-project/xccl/devices/nvidia"
	_ "github.com/xccl-project/xccl/devices/ppu"
)
