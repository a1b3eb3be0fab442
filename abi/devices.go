package main

// The devices compiled into libxccl.so register themselves here.
import (
	_ "github.com/xccl-project/xccl/devices/dcu"
	_ "github.com/xccl-project/xccl/devices/host"
	_ "github.com/xccl-project/xccl/devices/nvidia"
)
