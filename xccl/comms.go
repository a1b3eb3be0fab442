package xccl

import (
	"cmp"
	"encoding/binary"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/xccl-project/xccl/mixed"
	rt "github.com/xccl-project/xccl/runtime"
)

// SplitNoColor is the color of a rank that takes part in Split but joins no
// new communicator (NCCL_SPLIT_NOCOLOR).
const SplitNoColor = -1

// Split makes new communicators from c, as ncclCommSplit: every rank of c
// calls it; the ranks that pass the same color (>= 0) form one
// communicator, ranked by key, then by their rank in c. A rank passing
// SplitNoColor gets nil. cfg's zero fields take c's settings (its cluster
// label, and its timeout: the last SetTimeout's, else its init's). It
// blocks until every member has joined (the C entry defers a split inside
// a group to its end: Group.DeferOn).
//
// It runs on any device: two all-gathers over c (the colors and keys, then
// each color's id, made by its lowest rank) through buffers of c's device,
// then CommInitRankConfig on each color's ranks, all on the device c was
// made on. A bad argument on one rank (a color below SplitNoColor, a
// negative timeout) fails every rank, naming the rank that passed it.
func (c *Comm) Split(color, key int, cfg Config) (*Comm, error) {
	if err := c.closed("CommSplit"); err != nil {
		return nil, err
	}
	if cfg.Cluster == "" {
		cfg.Cluster = c.cfg.Cluster
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = c.cfg.Timeout
		if d := time.Duration(c.timeout.Load()); d > 0 { // as ncclCommSplit's child takes its parent's config now
			cfg.Timeout = d
		}
	}
	// A rank's own bad argument fails every rank (after the first
	// exchange, which it still joins), so that none waits for it.
	var bad error
	if cfg.Timeout < 0 {
		bad = rt.Errorf("CommSplit: timeout %v must be positive", cfg.Timeout)
	}
	if color < SplitNoColor {
		bad = rt.Errorf("CommSplit: rank %d passed color %d (a color is >= 0, or -1 for none)", c.rank, color)
	}
	// On c's device, whatever the calling thread's (as ncclCommSplit):
	// the exchange's buffers and the new communicator.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if prev, err := c.dev.GetDevice(); err == nil && prev != c.devID {
		if err := c.dev.SetDevice(c.devID); err != nil {
			return nil, err
		}
		defer func() { _ = c.dev.SetDevice(prev) }()
	}
	const rec = 24 // color, key, whether the rank's arguments are bad
	mine := make([]byte, rec)
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	if bad != nil {
		mine[16] = 1
	}
	all, err := c.hostAllGather(mine)
	if err != nil {
		return nil, rt.WrapFailed(err, "CommSplit: exchanging colors")
	}
	if bad != nil {
		return nil, bad
	}
	colors, keys := make([]int, c.size), make([]int, c.size)
	for r := range c.size {
		colors[r] = int(int64(binary.LittleEndian.Uint64(all[rec*r:])))
		keys[r] = int(int64(binary.LittleEndian.Uint64(all[rec*r+8:])))
		if all[rec*r+16] != 0 {
			if colors[r] < SplitNoColor {
				return nil, rt.Errorf("CommSplit: rank %d passed color %d (a color is >= 0, or -1 for none)", r, colors[r])
			}
			return nil, rt.Errorf("CommSplit: rank %d passed a bad argument", r)
		}
	}
	// The members of this rank's color, in their new order; the first rank
	// of c with a color makes its id.
	var members []int
	for r := range c.size {
		if colors[r] == color {
			members = append(members, r)
		}
	}
	// members are in rank order: a stable sort by key breaks ties by rank
	slices.SortStableFunc(members, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	lead := slices.Index(colors, color)
	size := mixed.IDSize()
	id := make([]byte, size)
	var idErr error
	if color != SplitNoColor && lead == c.rank {
		var fresh []byte
		if fresh, idErr = GetUniqueID(c.dev); idErr == nil {
			copy(id, fresh)
		}
	}
	// Every rank sends a slot: its color's id where it leads one, zeros
	// else (so a leader whose id failed makes its members fail, not wait).
	ids, err := c.hostAllGather(id)
	if err != nil {
		return nil, rt.WrapFailed(err, "CommSplit: exchanging ids")
	}
	if idErr != nil {
		return nil, idErr
	}
	if color == SplitNoColor {
		return nil, nil
	}
	id = ids[lead*size : (lead+1)*size]
	if !slices.ContainsFunc(id, func(b byte) bool { return b != 0 }) {
		return nil, rt.Failedf("CommSplit: rank %d could not make the id of color %d", lead, color)
	}
	return CommInitRankConfig(c.dev, len(members), id, slices.Index(members, c.rank), cfg)
}

// hostAllGather all-gathers host bytes over c, through
// buffers on the device c was made on (the host device's are host memory;
// a vendor's are its device memory), which is the calling thread's (Split).
func (c *Comm) hostAllGather(mine []byte) ([]byte, error) {
	dev, id := c.dev, c.devID
	n := len(mine)
	send, err := dev.MemAlloc(id, n)
	if err != nil {
		return nil, err
	}
	defer dev.MemFree(id, send, n)
	recv, err := dev.MemAlloc(id, n*c.size)
	if err != nil {
		return nil, err
	}
	defer dev.MemFree(id, recv, n*c.size)
	if err := dev.Memcpy(id, send, unsafe.Pointer(&mine[0]), n, rt.HostToDevice, 0); err != nil {
		return nil, err
	}
	// On a stream of its own, waited for alone: synchronizing the device
	// would wait for other ranks' streams too, where this process drives
	// several ranks on one device (threads), and the rank that waits for
	// them may be the one they wait for.
	s, err := dev.CreateStream()
	if err != nil {
		return nil, err
	}
	defer dev.DestroyStream(s)
	if err := c.AllGather(send, recv, n, rt.Uint8, s); err != nil {
		return nil, err
	}
	if err := dev.SynchronizeStream(s); err != nil {
		return nil, err
	}
	out := make([]byte, n*c.size)
	if err := dev.Memcpy(id, unsafe.Pointer(&out[0]), recv, len(out), rt.DeviceToHost, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// CommInitAll makes one communicator of len(devs) ranks in this process,
// rank i on device devs[i] of dev, as ncclCommInitAll: each rank joins on a
// thread of its own, bound to its device, so that one thread can then drive
// them all with group calls. On any failure every rank made is destroyed.
func CommInitAll(dev rt.Device, devs []int, cfg Config) ([]*Comm, error) {
	if dev == nil {
		return nil, rt.Errorf("CommInitAll: no device")
	}
	if len(devs) < 1 {
		return nil, rt.Errorf("CommInitAll: ndev %d must be at least 1", len(devs))
	}
	for i, d := range devs {
		if d < 0 || d >= dev.DeviceCount() {
			return nil, rt.Errorf("CommInitAll: devlist[%d] = %d out of range [0, %d) for device %s", i, d, dev.DeviceCount(), dev.Name())
		}
	}
	id, err := GetUniqueID(dev)
	if err != nil {
		return nil, err
	}
	n := len(devs)
	comms, errs := make([]*Comm, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if prev, err := dev.GetDevice(); err == nil {
				defer func() { _ = dev.SetDevice(prev) }() // the thread goes back as it was
			}
			if errs[i] = dev.SetDevice(devs[i]); errs[i] == nil {
				comms[i], errs[i] = CommInitRankConfig(dev, n, id, i, cfg)
			}
		}()
	}
	wg.Wait()
	// The cause first: a rank's own error (C_ERROR) before the others'
	// failures, which are often their timeouts waiting for it.
	failed := -1
	for i, err := range errs {
		if err != nil && (failed < 0 || rt.StatusOf(err) == rt.StatusError && rt.StatusOf(errs[failed]) != rt.StatusError) {
			failed = i
		}
	}
	if failed < 0 {
		return comms, nil
	}
	for _, c := range comms {
		if c != nil {
			_ = c.Destroy()
		}
	}
	return nil, rt.WrapFailed(errs[failed], "CommInitAll (rank %d on device %d)", failed, devs[failed])
}
