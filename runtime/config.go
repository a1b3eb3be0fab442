package runtime

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Getenv reads one environment variable. Inside libxccl.so the abi package
// replaces it with C getenv: Go's os.Getenv only sees the environment the
// process was started with, not variables a host (Python) set later.
var Getenv = os.Getenv

// Config is the XCCL_* configuration, read once (see Load).
type Config struct {
	Debug       string        // XCCL_DEBUG: WARN (default), INFO, DEBUG, TRACE
	DebugFile   string        // XCCL_DEBUG_FILE: log file instead of stderr (%h host, %p pid)
	Algo        string        // XCCL_ALGO: force an algorithm (see devices/host)
	Timeout     time.Duration // XCCL_TIMEOUT: seconds for init and every collective (default 300)
	SocketIf    string        // XCCL_SOCKET_IFNAME: interface (or IP) the host device binds to
	Transport   string        // XCCL_TRANSPORT: auto|ucx|tcp|shm for the host device
	HostDevices int           // XCCL_HOST_DEVICES: how many host devices to report (default 8)
	ShmRing     int           // XCCL_SHM_RING_BYTES: bytes per collective ring (default 2 MiB)
	Stats       bool          // XCCL_STATS=1: count calls, bytes and latencies per communicator
	FusionBytes int           // XCCL_FUSION_BYTES: merge grouped all-reduces up to this size (default 64 KiB, 0 off)
	Check       bool          // XCCL_CHECK=1: vendor devices check that all ranks make the same call
	SpinPolls   int           // XCCL_SPIN_POLLS: host device polls between yields while waiting (default: by rank and CPU count)
	Cluster     string        // XCCL_CLUSTER: this process's cluster label for mixed communicators (default: its device kind)
	MixedAlgo   string        // XCCL_MIXED_ALGO: auto|flat|hier, how a mixed all-reduce crosses clusters
	MixedChunk  int           // XCCL_MIXED_CHUNK_BYTES: host staging per step of a mixed call (default 4 MiB)
}

var (
	cfgOnce sync.Once
	cfg     Config
)

// Load returns the configuration, reading the environment on first use.
func Load() Config {
	cfgOnce.Do(func() { cfg = ReadConfig() })
	return cfg
}

// ReadConfig reads the environment now (no caching); tests use it.
func ReadConfig() Config {
	c := Config{
		Debug:       strings.ToUpper(envOr("XCCL_DEBUG", "WARN")),
		DebugFile:   Getenv("XCCL_DEBUG_FILE"),
		Algo:        strings.ToLower(Getenv("XCCL_ALGO")),
		Timeout:     300 * time.Second,
		SocketIf:    Getenv("XCCL_SOCKET_IFNAME"),
		Transport:   strings.ToLower(envOr("XCCL_TRANSPORT", "auto")),
		HostDevices: 8,
		ShmRing:     2 << 20,
		Stats:       Getenv("XCCL_STATS") == "1",
		Check:       Getenv("XCCL_CHECK") == "1",
		FusionBytes: 64 << 10,
		Cluster:     Getenv("XCCL_CLUSTER"),
		MixedAlgo:   strings.ToLower(envOr("XCCL_MIXED_ALGO", "auto")),
		MixedChunk:  4 << 20,
	}
	if v, err := strconv.Atoi(Getenv("XCCL_MIXED_CHUNK_BYTES")); err == nil && v >= 4096 {
		c.MixedChunk = v
	}
	if v := Getenv("XCCL_TIMEOUT"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			c.Timeout = time.Duration(f * float64(time.Second))
		}
	}
	if v, err := strconv.Atoi(Getenv("XCCL_HOST_DEVICES")); err == nil && v > 0 {
		c.HostDevices = v
	}
	if v, err := strconv.Atoi(Getenv("XCCL_SHM_RING_BYTES")); err == nil && v >= 4096 {
		c.ShmRing = v
	}
	if v, err := strconv.Atoi(Getenv("XCCL_SPIN_POLLS")); err == nil && v > 0 {
		c.SpinPolls = v
	}
	if v, err := strconv.Atoi(Getenv("XCCL_FUSION_BYTES")); err == nil && v >= 0 {
		c.FusionBytes = v
	}
	return c
}

func envOr(k, def string) string {
	if v := Getenv(k); v != "" {
		return v
	}
	return def
}
