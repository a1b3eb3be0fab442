package main

// Every device is compiled into libxccl.so and registers itself.
import _ "github.com/xccl-project/xccl/devices/all"
