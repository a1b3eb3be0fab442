// Package shmseg names the host device's shared-memory segments in
// /dev/shm and removes those whose owner is gone: for the host device,
// and for xcclrun once its ranks have exited (a rank killed while it
// waited in setup leaves its segment, and nothing else of the job is left
// to remove it). No cgo: the launcher links it.
package shmseg

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Temp ends the name of a segment still being made.
const Temp = ".new"

// Prefix starts the name of every segment of this user.
func Prefix() string { return fmt.Sprintf("xccl-%d-", os.Getuid()) }

// Sweep removes this user's segments whose owner is gone. Each rank
// unlinks its own segment once every peer has mapped it, so a segment is
// left in /dev/shm only by a process that died (or was killed) during
// setup; the next setup on the machine, a survivor of the failed one, or
// the launcher removes it. An owner holds an exclusive lock on its segment
// for as long as it lives, so a lock anyone can take marks a dead owner. A
// segment still under its temporary name may be unlocked for an instant
// while it is made: those go only when a minute old.
func Sweep() (removed int) {
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		return 0
	}
	prefix := Prefix()
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if strings.HasSuffix(name, Temp) {
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < time.Minute {
				continue
			}
		}
		path := "/dev/shm/" + name
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil && unix.Unlink(path) == nil {
			removed++
		}
		_ = unix.Close(fd)
	}
	return removed
}
