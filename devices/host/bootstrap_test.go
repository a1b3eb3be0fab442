package host

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

func opts(d time.Duration) Options { return Options{Timeout: d, Transport: "auto", RingBytes: 1 << 16} }

func TestUniqueIDRoundTripAndRefusals(t *testing.T) {
	r, err := StartRoot(time.Second)
	require.NoError(t, err)
	defer r.Close()
	b := r.ID.Bytes()
	require.Len(t, b, UniqueIDSize)
	u, err := ParseUniqueID(b)
	require.NoError(t, err)
	require.Equal(t, r.ID, u)
	u2, err := ParseUniqueIDHex(r.ID.Hex())
	require.NoError(t, err)
	require.Equal(t, r.ID, u2)

	for name, mut := range map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:100] },
		"magic":     func(b []byte) []byte { b[0] = 'Y'; return b },
		"version":   func(b []byte) []byte { b[4] = 9; return b },
		"kind":      func(b []byte) []byte { b[5] = 7; return b },
		"reserved":  func(b []byte) []byte { b[100] = 1; return b },
		"port":      func(b []byte) []byte { b[24], b[25] = 0, 0; return b },
		"job":       func(b []byte) []byte { copy(b[32:40], make([]byte, 8)); return b },
	} {
		_, err := ParseUniqueID(mut(append([]byte(nil), b...)))
		require.Error(t, err, name)
		require.Equal(t, rt.StatusError, rt.StatusOf(err), name)
	}
	_, err = ParseUniqueIDHex("zz")
	require.Error(t, err)
}

// An id that names a loopback root made on another machine fails at once,
// saying what to set, instead of dialling this machine's loopback until
// the deadline.
func TestLoopbackRootOfAnotherMachine(t *testing.T) {
	r, err := StartRoot(5 * time.Second)
	require.NoError(t, err)
	defer r.Close()
	require.True(t, r.ID.Root.Addr().IsLoopback())
	require.Equal(t, machineHash(), r.ID.Machine)
	foreign := r.ID
	foreign.Machine ^= 0x5a5a0000
	start := time.Now()
	_, err = NewComm(foreign, 2, 1, opts(5*time.Second))
	require.Error(t, err)
	require.Equal(t, rt.StatusError, rt.StatusOf(err))
	require.Contains(t, err.Error(), "XCCL_SOCKET_IFNAME")
	require.Less(t, time.Since(start), time.Second)
}

// join runs NewComm for the given ranks concurrently.
func join(id UniqueID, nranks int, ranks []int, o Options) ([]*Comm, []error) {
	comms := make([]*Comm, len(ranks))
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Add(1)
		go func(i, r int) {
			defer wg.Done()
			comms[i], errs[i] = NewComm(id, nranks, r, o)
		}(i, r)
	}
	wg.Wait()
	return comms, errs
}

func destroyAll(comms []*Comm) {
	for _, c := range comms {
		if c != nil {
			_ = c.Destroy()
		}
	}
}

func TestWrongSecretIsRefused(t *testing.T) {
	r, err := StartRoot(2 * time.Second)
	require.NoError(t, err)
	bad := r.ID
	bad.Secret = sha256.Sum256([]byte("guess"))
	_, errs := join(bad, 1, []int{0}, opts(2*time.Second))
	require.ErrorContains(t, errs[0], "wrong secret")
	require.Equal(t, rt.StatusFailed, rt.StatusOf(errs[0]))
	// The root survives and still serves the real rank.
	comms, errs := join(r.ID, 1, []int{0}, opts(2*time.Second))
	require.NoError(t, errs[0])
	destroyAll(comms)
}

func TestForeignIDIsRefused(t *testing.T) {
	a, err := StartRoot(2 * time.Second)
	require.NoError(t, err)
	defer a.Close()
	b, err := StartRoot(2 * time.Second)
	require.NoError(t, err)
	defer b.Close()
	foreign := b.ID
	foreign.Root = a.ID.Root // b's id pointed at a's root
	_, errs := join(foreign, 1, []int{0}, opts(2*time.Second))
	require.ErrorContains(t, errs[0], "foreign unique id")
}

// rankZeroWaiting starts rank 0 of nranks on a goroutine and returns once
// it waits at the root; done gives its result.
func rankZeroWaiting(id UniqueID, nranks int, o Options) (done func() (*Comm, error)) {
	var c *Comm
	var err error
	finished := make(chan struct{})
	go func() { defer close(finished); c, err = NewComm(id, nranks, 0, o) }()
	time.Sleep(200 * time.Millisecond)
	return func() (*Comm, error) { <-finished; return c, err }
}

func TestDuplicateRankIsRefused(t *testing.T) {
	r, err := StartRoot(3 * time.Second)
	require.NoError(t, err)
	o := opts(3 * time.Second)
	rankZero := rankZeroWaiting(r.ID, 2, o)
	_, errs := join(r.ID, 2, []int{0}, o)
	require.ErrorContains(t, errs[0], "already joined")
	comms, errs := join(r.ID, 2, []int{1}, o)
	require.NoError(t, errs[0])
	first, firstErr := rankZero()
	require.NoError(t, firstErr)
	destroyAll(append(comms, first))
}

// Ranks that disagree on nranks can never form a communicator: every rank
// fails at once, naming the disagreement, instead of waiting for the
// timeout; a rank coming later is refused saying why.
func TestNranksMismatchFailsEveryRankAtOnce(t *testing.T) {
	r, err := StartRoot(30 * time.Second)
	require.NoError(t, err)
	o := opts(30 * time.Second)
	start := time.Now()
	rankZero := rankZeroWaiting(r.ID, 3, o)
	_, errs := join(r.ID, 2, []int{1}, o)
	require.ErrorContains(t, errs[0], "rank 1 says nranks=2, but earlier ranks said 3")
	_, firstErr := rankZero()
	require.ErrorContains(t, firstErr, "mismatched nranks: rank 1 says nranks=2, but earlier ranks said 3")
	require.Equal(t, rt.StatusFailed, rt.StatusOf(firstErr))
	// A rank coming later from another process (which has no record of
	// this root's verdict: dropped here) is refused with the reason by the
	// root, still listening, not left to its timeout.
	servedJobs.mu.Lock()
	delete(servedJobs.m, r.ID.Job)
	servedJobs.mu.Unlock()
	_, errs = join(r.ID, 3, []int{2}, opts(20*time.Second))
	require.ErrorContains(t, errs[0], "mismatched nranks: rank 1 says nranks=2")
	require.Less(t, time.Since(start), 10*time.Second)
	r.Close()
	<-r.Done()
	require.ErrorContains(t, r.Err(), "mismatched nranks")
}

func TestMissingRankTimesOutNamingIt(t *testing.T) {
	r, err := StartRoot(time.Second)
	require.NoError(t, err)
	start := time.Now()
	_, errs := join(r.ID, 3, []int{0, 2}, opts(time.Second))
	for _, e := range errs {
		require.ErrorContains(t, e, "ranks [1] of 3 never joined")
		require.Equal(t, rt.StatusFailed, rt.StatusOf(e))
	}
	require.Less(t, time.Since(start), 10*time.Second)
}

// A rank the root refused (a second rank 0) while the others waited: their
// timeout names what the root refused meanwhile.
func TestTimeoutNamesRefusedRanks(t *testing.T) {
	r, err := StartRoot(time.Second)
	require.NoError(t, err)
	rankZero := rankZeroWaiting(r.ID, 2, opts(time.Second))
	_, errs := join(r.ID, 2, []int{0}, opts(time.Second))
	require.ErrorContains(t, errs[0], "already joined")
	_, firstErr := rankZero()
	require.ErrorContains(t, firstErr, "ranks [1] of 2 never joined")
	require.ErrorContains(t, firstErr, "rank 0 has already joined")
}

func TestStrangerCannotCrashTheRoot(t *testing.T) {
	r, err := StartRoot(3 * time.Second)
	require.NoError(t, err)
	for _, junk := range [][]byte{nil, []byte("hello"), {0xff, 0xff, 0xff, 0xff}, {0, 0, 0, 3, '{', '}', '!'}} {
		c, err := net.Dial("tcp", r.ID.Root.String())
		require.NoError(t, err)
		_, _ = c.Write(junk)
		c.Close()
	}
	comms, errs := join(r.ID, 2, []int{0, 1}, opts(3*time.Second))
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	destroyAll(comms)
}

// The root follows the ranks' own deadlines (their communicators' config
// may say another timeout than the root's XCCL_TIMEOUT): with a shorter
// one, the ranks that came hear which never did when they give up; with
// a longer one, a late rank still joins.
func TestRootFollowsTheRanksDeadlines(t *testing.T) {
	r, err := StartRoot(20 * time.Second)
	require.NoError(t, err)
	start := time.Now()
	_, errs := join(r.ID, 3, []int{0, 1}, opts(1500*time.Millisecond))
	for i, err := range errs {
		require.ErrorContains(t, err, "ranks [2] of 3 never joined", "rank %d", i)
	}
	require.Less(t, time.Since(start), 3*time.Second, "told at the ranks' deadline, not the root's")
	select {
	case <-r.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the root outlived the ranks' deadline")
	}

	r, err = StartRoot(time.Second)
	require.NoError(t, err)
	late := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second) // past the root's own timeout
		c, err := NewComm(r.ID, 3, 2, opts(10*time.Second))
		if c != nil {
			defer c.Destroy()
		}
		late <- err
	}()
	comms, errs := join(r.ID, 3, []int{0, 1}, opts(10*time.Second))
	defer destroyAll(comms)
	require.NoError(t, errors0(errs))
	require.NoError(t, <-late)
}

// An id makes one communicator: a rank in the root's process that joins
// it again is refused at once (C_ERROR), not left to its timeout.
func TestUsedIDIsRefused(t *testing.T) {
	r, err := StartRoot(10 * time.Second)
	require.NoError(t, err)
	comms, errs := join(r.ID, 1, []int{0}, opts(10*time.Second))
	defer destroyAll(comms)
	require.NoError(t, errors0(errs))
	<-r.Done()
	start := time.Now()
	c, err := NewComm(r.ID, 1, 0, opts(10*time.Second))
	require.Nil(t, c)
	require.ErrorContains(t, err, "was used already")
	require.Equal(t, rt.StatusError, rt.StatusOf(err))
	require.Less(t, time.Since(start), time.Second)
}

// Ranks with different timeouts: the root tells every rank that came which
// never did at the earliest of their deadlines, when the first gives up
// (the communicator cannot form after that; a reviewer's case).
func TestRootTellsAtTheEarliestDeadline(t *testing.T) {
	r, err := StartRoot(20 * time.Second)
	require.NoError(t, err)
	var errs [2]error
	var wg sync.WaitGroup
	wg.Add(2)
	start := time.Now()
	go func() { defer wg.Done(); _, errs[0] = NewComm(r.ID, 3, 0, opts(6*time.Second)) }()
	go func() {
		defer wg.Done()
		time.Sleep(100 * time.Millisecond)
		_, errs[1] = NewComm(r.ID, 3, 1, opts(1500*time.Millisecond))
	}()
	wg.Wait()
	for i, err := range errs {
		require.ErrorContains(t, err, "ranks [2] of 3 never joined", "rank %d", i)
	}
	require.Less(t, time.Since(start), 4*time.Second)
}

// A rank of this process that comes after the id's root gave up is told
// so (C_FAILED), not that the id was used.
func TestLateRankAfterTheRootGaveUp(t *testing.T) {
	r, err := StartRoot(300 * time.Millisecond)
	require.NoError(t, err)
	<-r.Done()
	_, err = NewComm(r.ID, 2, 0, opts(2*time.Second))
	require.ErrorContains(t, err, "gave up")
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err))
}

// The record of ended jobs keeps the last servedKeep: a process that makes
// communicators without end holds a bounded record.
func TestServedJobsBounded(t *testing.T) {
	r := &jobRecord{m: map[uint64]error{}}
	boom := errors.New("boom")
	for j := uint64(1); j <= servedKeep+100; j++ {
		var err error
		if j%2 == 0 {
			err = boom
		}
		r.Store(j, err)
	}
	require.Equal(t, servedKeep, r.Len())
	ended, _ := r.Ended(100)
	require.False(t, ended, "the 100 oldest are forgotten")
	ended, _ = r.Ended(101)
	require.True(t, ended, "the 101st is kept")
	r.Store(101, nil) // stored again: no second place in the order
	r.Store(servedKeep+101, nil)
	require.Equal(t, servedKeep, r.Len())
	ended, _ = r.Ended(101)
	require.False(t, ended, "the oldest by first store goes first")
	ended, _ = r.Ended(102)
	require.True(t, ended)
	ended, err := r.Ended(servedKeep + 100)
	require.True(t, ended)
	require.ErrorIs(t, err, boom)
	ended, err = r.Ended(servedKeep + 99)
	require.True(t, ended)
	require.NoError(t, err)
}

// A rank told of many ranks that never come (a wrong nranks, or a job of
// many machines) holds no pages for their rings while it waits: its
// segment stays sparse until the ranks of its machine are known.
func TestSegmentHoldsNoPagesForRanksNotYetKnown(t *testing.T) {
	r, err := StartRoot(time.Second)
	require.NoError(t, err)
	const nranks = 2000
	o := opts(2 * time.Second)
	o.RingBytes = 1 << 20 // the default: 4 GiB of rings and boxes, were they reserved
	done := make(chan error, 1)
	go func() {
		_, errs := join(r.ID, nranks, []int{0}, o)
		done <- errs[0]
	}()
	pattern := fmt.Sprintf("/dev/shm/%s%016x-r0-*", segPrefix(), r.ID.Job)
	var held int64
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && held == 0; time.Sleep(10 * time.Millisecond) {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			var st unix.Stat_t
			if unix.Stat(p, &st) == nil {
				require.Equal(t, int64(segSize(nranks, o.RingBytes)), st.Size, "the segment's size covers every rank")
				held = st.Blocks * 512
			}
		}
	}
	require.NotZero(t, held, "rank 0's segment was not seen while it waited")
	require.Less(t, held, int64(1<<20), "bytes of /dev/shm held by a rank whose %d peers never came", nranks-1)
	err = <-done
	require.ErrorContains(t, err, "never joined")
}
