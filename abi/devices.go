package main

// The devices compiled into libxccl.so register themselves here.
import _ "github.com/xccl-project/xccl/devices/host"
