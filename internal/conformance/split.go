package conformance

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

// Split checks Comm.Split (ncclCommSplit) over comms, one communicator's
// ranks: colors r%2, but the last of three or more ranks passes
// SplitNoColor and gets nil; keys reverse the order, so new rank 0 is the
// highest old one. Each new communicator has its members and ranks, sums
// only its members' values, and passes the suite at counts; a split of it
// with one color and equal keys keeps its order. A negative color on one
// rank fails every rank, naming it, and c stays usable. It returns the new
// communicators of colors 0 and 1, each in its rank order.
func Split(t *testing.T, dev rt.Device, comms []*xccl.Comm, counts []int) [][]*xccl.Comm {
	t.Helper()
	n := len(comms)
	colorOf := func(r int) int {
		if n >= 3 && r == n-1 {
			return xccl.SplitNoColor
		}
		return r % 2
	}
	split := make([]*xccl.Comm, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		var err error
		split[r], err = c.Split(colorOf(r), -r, xccl.Config{})
		return err
	})
	for r := range n {
		if split[r] != nil {
			t.Cleanup(func() { _ = split[r].Destroy() })
		}
	}
	var out [][]*xccl.Comm
	for _, color := range []int{0, 1} {
		var members []int // old ranks, new order: by key -r
		for r := n - 1; r >= 0; r-- {
			if colorOf(r) == color {
				members = append(members, r)
			}
		}
		if len(members) == 0 {
			continue
		}
		group := make([]*xccl.Comm, len(members))
		for i, r := range members {
			c := split[r]
			if c == nil {
				t.Fatalf("rank %d (color %d) got no communicator", r, color)
			}
			if c.Size() != len(members) || c.Rank() != i {
				t.Fatalf("rank %d (color %d): rank %d of %d, want %d of %d", r, color, c.Rank(), c.Size(), i, len(members))
			}
			group[i] = c
		}
		out = append(out, group)
		want := float32(0)
		for _, r := range members {
			want += float32(r + 1)
		}
		OnAll(t, group, func(i int, c *xccl.Comm) error {
			v := []float32{float32(members[i] + 1), 0}
			if err := c.AllReduce(unsafe.Pointer(&v[0]), unsafe.Pointer(&v[1]), 1, rt.Float32, rt.Sum, 0); err != nil {
				return err
			}
			if err := dev.SynchronizeDevice(0); err != nil {
				return err
			}
			if v[1] != want {
				return fmt.Errorf("color %d: sum %v, want %v", color, v[1], want)
			}
			return nil
		})
		RunComms(t, dev, group, counts)
		again := make([]*xccl.Comm, len(group))
		OnAll(t, group, func(i int, c *xccl.Comm) error {
			var err error
			again[i], err = c.Split(7, 0, xccl.Config{})
			return err
		})
		for i, c := range again {
			if c == nil || c.Rank() != i || c.Size() != len(group) {
				t.Fatalf("split of the split: rank %d got %v", i, c)
			}
			t.Cleanup(func() { _ = c.Destroy() })
		}
		RunComms(t, dev, again, []int{5})
	}
	if n >= 3 && split[n-1] != nil {
		t.Fatalf("rank %d passed SplitNoColor and got a communicator", n-1)
	}
	if n < 2 {
		return out
	}
	errs := make([]error, n)
	OnAll(t, comms, func(r int, c *xccl.Comm) error {
		color := 0
		if r == 1 {
			color = -7
		}
		nc, err := c.Split(color, 0, xccl.Config{})
		if nc != nil {
			_ = nc.Destroy()
		}
		errs[r] = err
		return nil
	})
	for r, err := range errs {
		if err == nil || rt.StatusOf(err) != rt.StatusError || !strings.Contains(err.Error(), "rank 1 passed color -7") {
			t.Fatalf("rank %d: a color of -7 on rank 1 gave %v", r, err)
		}
	}
	RunComms(t, dev, comms, []int{3})
	return out
}
