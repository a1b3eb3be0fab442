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
	FusionBytes int           // XCCL_FUSION_BYTES: merge grouped all-reduces up to this size (default 0: off; every rank must group alike)
	Check       bool          // XCCL_CHECK=1: vendor devices check that all ranks make the same call
	SpinPolls   int           // XCCL_SPIN_POLLS: host device polls between yields while waiting (default: by rank and CPU count)
	Cluster     string        // XCCL_CLUSTER: this process's cluster label for mixed communicators (default: its device kind)
	MixedAlgo   string        // XCCL_MIXED_ALGO: auto|flat|hier, how a mixed all-reduce crosses clusters
	MixedChunk  int           // XCCL_MIXED_CHUNK_BYTES: host staging per step of a mixed call (default 4 MiB)
	// Ignored says which variables were set to values that cannot be used,
	// and what is used instead; the logger warns of each once.
	Ignored []string
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
		Cluster:     Getenv("XCCL_CLUSTER"),
		MixedAlgo:   strings.ToLower(envOr("XCCL_MIXED_ALGO", "auto")),
		MixedChunk:  4 << 20,
	}
	c.MixedChunk = c.intVar("XCCL_MIXED_CHUNK_BYTES", c.MixedChunk, 4096, "at least 4096")
	if v := Getenv("XCCL_TIMEOUT"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			c.Timeout = time.Duration(f * float64(time.Second))
		} else {
			c.ignore("XCCL_TIMEOUT", v, "seconds above 0", c.Timeout.String())
		}
	}
	c.HostDevices = c.intVar("XCCL_HOST_DEVICES", c.HostDevices, 1, "at least 1")
	c.ShmRing = c.intVar("XCCL_SHM_RING_BYTES", c.ShmRing, 4096, "at least 4096")
	if v := c.ShmRing; v&(v-1) != 0 {
		c.Ignored = append(c.Ignored, "XCCL_SHM_RING_BYTES="+strconv.Itoa(v)+" is no power of two: the next one above is used")
	}
	c.SpinPolls = c.intVar("XCCL_SPIN_POLLS", c.SpinPolls, 1, "at least 1")
	c.FusionBytes = c.intVar("XCCL_FUSION_BYTES", c.FusionBytes, 0, "0 (off) or more")
	if !c.oneOf("XCCL_DEBUG", c.Debug, "WARN", "WARN", "INFO", "DEBUG", "TRACE", "ERROR", "NONE", "OFF", "VERSION") {
		c.Debug = "WARN"
	}
	// "" is the automatic choice; auto says so too.
	if c.Algo == "auto" || c.Algo != "" && !c.oneOf("XCCL_ALGO", c.Algo, "automatic", "auto", "direct", "ring", "cma", "single-copy") {
		c.Algo = ""
	}
	// XCCL_MIXED_ALGO is checked where mixed communicators are made (rank
	// 0's rules): a bad value fails their init, naming it.
	return c
}

// intVar is variable k as an integer of at least lo, else def (and a
// warning where it is set).
func (c *Config) intVar(k string, def, lo int, want string) int {
	v := Getenv(k)
	if v == "" {
		return def
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= lo {
		return n
	}
	c.ignore(k, v, want, strconv.Itoa(def))
	return def
}

// oneOf says whether value (variable k's, as read) is one of ok, and
// warns where it is not.
func (c *Config) oneOf(k, value, instead string, ok ...string) bool {
	for _, o := range ok {
		if strings.EqualFold(value, o) {
			return true
		}
	}
	c.ignore(k, Getenv(k), "one of "+strings.Join(ok, ", "), instead)
	return false
}

func (c *Config) ignore(k, v, want, instead string) {
	c.Ignored = append(c.Ignored, k+"="+strconv.Quote(v)+" is not "+want+": "+instead+" is used")
}

func envOr(k, def string) string {
	if v := Getenv(k); v != "" {
		return v
	}
	return def
}
