package host

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	goruntime "runtime"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// moveOff moves the calling thread off cpu, which a peer it waits for
// runs on too (sharesCPU), as NCCL's init moves its caller for a while:
// its affinity becomes the CPUs that share cpu's last-level cache (else
// its package) without cpu, then what it was. The kernel moves a thread at
// once when its CPU leaves its mask and leaves it where it is when the
// mask widens again, so the thread ends on a CPU near cpu, its mask as it
// was. Only a thread free to run on every online CPU moves: there setting
// its mask back asks for nothing a cpuset does not already allow (from
// Linux 6.2 a mask set by sched_setaffinity also limits what a cpuset
// later grants), and a thread someone placed stays where it was put. At
// most once every coMove per communicator; whether the thread moved.
func (c *Comm) moveOff(cpu int) bool {
	now := time.Since(processStart).Milliseconds() + 1 // monotonic; 0: never
	last := c.movedAt.Load()
	if last != 0 && now-last < coMove.Milliseconds() || !c.movedAt.CompareAndSwap(last, now) {
		return false
	}
	goruntime.LockOSThread() // the mask is the thread's: set and restored on one
	defer goruntime.UnlockOSThread()
	var was unix.CPUSet
	online, ok := onlineCPUs()
	if !ok || unix.SchedGetaffinity(0, &was) != nil || was != online || !was.IsSet(cpu) {
		return false
	}
	near, ok := nearCPUs(cpu)
	if !ok {
		return false
	}
	near.Clear(cpu)
	for i := range near { // within the mask
		near[i] &= was[i]
	}
	if near.Count() == 0 || unix.SchedSetaffinity(0, &near) != nil {
		return false
	}
	var err error
	for range 3 {
		if err = unix.SchedSetaffinity(0, &was); err == nil {
			break
		}
	}
	if err != nil {
		c.log.Warn("restoring the thread's CPU affinity failed", zap.Error(err))
		return false
	}
	on, _, ok := c.noteCPU()
	return ok && on != cpu
}

var processStart = time.Now()

// onlineCPUs is the set of online CPUs (sysfs), read once.
var onlineCPUs = sync.OnceValues(func() (unix.CPUSet, bool) {
	return cpuListFile("/sys/devices/system/cpu/online")
})

// nearCPUs is the set of CPUs that share cpu's last-level cache, else its
// package (sysfs).
func nearCPUs(cpu int) (unix.CPUSet, bool) {
	dir := "/sys/devices/system/cpu/cpu" + strconv.Itoa(cpu)
	if s, ok := cpuListFile(dir + "/cache/index3/shared_cpu_list"); ok {
		return s, true
	}
	return cpuListFile(dir + "/topology/package_cpus_list")
}

func cpuListFile(path string) (unix.CPUSet, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return unix.CPUSet{}, false
	}
	return parseCPUList(string(b))
}

// parseCPUList reads the kernel's CPU list format ("0-3,8,10-11").
func parseCPUList(s string) (set unix.CPUSet, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return set, false
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= 1<<16 {
			return unix.CPUSet{}, false
		}
		for cpu := a; cpu <= b; cpu++ {
			set.Set(cpu) // past the set's size: ignored
		}
	}
	return set, true
}
