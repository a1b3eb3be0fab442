package host

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// Fault injection. A rank process (this test binary, XCCL_TEST_CHILD=fault)
// dies at a chosen point or runs slowly; in-process ranks get a socket
// closed under them or a shared-memory word corrupted. Nothing may hang or
// crash; the survivors' errors name the lost peer, well within the deadline.

const faultOps = 8

func childFault() int {
	mode := os.Getenv("XCCL_TEST_FAULT")
	if at, ok := strings.CutPrefix(mode, "die-at:"); ok {
		faultPoint = func(s string) {
			if s == at {
				os.Exit(3)
			}
		}
	}
	if at, ok := strings.CutPrefix(mode, "sigterm-at:"); ok {
		faultPoint = func(s string) {
			if s == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
				time.Sleep(time.Minute)
			}
		}
	}
	id, err := ParseUniqueIDHex(os.Getenv("XCCL_UNIQUE_ID"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	rank, _ := strconv.Atoi(os.Getenv("XCCL_RANK"))
	n, _ := strconv.Atoi(os.Getenv("XCCL_NRANKS"))
	timeout, err := time.ParseDuration(os.Getenv("XCCL_TEST_TIMEOUT"))
	if err != nil {
		timeout = 20 * time.Second
	}
	o := opts(timeout)
	o.Transport = os.Getenv("XCCL_TRANSPORT")
	c, err := NewComm(id, n, rank, o)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	buf := make([]float32, 1<<16)
	for i := 0; i < faultOps; i++ {
		if mode == "die-between-ops" && i == faultOps/2 {
			os.Exit(3) // no Destroy: gone between two collectives
		}
		if d, ok := strings.CutPrefix(mode, "slow:"); ok {
			pause, _ := time.ParseDuration(d)
			time.Sleep(pause)
		}
		p := unsafe.Pointer(&buf[0])
		if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: len(buf), Type: rt.Float32, Red: rt.Sum}); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	_ = c.Destroy()
	return 0
}

func TestFaultInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cases := []struct {
		mode       string
		transport  string
		initFails  bool // the survivors' CommInit fails
		opsFail    bool // a collective of the survivors fails
		atDeadline bool // the survivors can only tell at their deadline (the rank never reached the root)
	}{
		{"die-at:segment-making", "auto", true, false, true}, // killed while it makes its segment: nothing left behind
		{"die-at:segment-created", "auto", true, false, true},
		{"die-at:joined-root", "auto", true, false, false},
		{"sigterm-at:joined-root", "auto", true, false, false},
		{"die-at:linked", "auto", true, false, false},
		{"die-at:linked", "tcp", true, false, false},
		{"die-between-ops", "auto", false, true, false},
		{"die-between-ops", "tcp", false, true, false},
		{"die-at:linked", "ucx", true, false, false},
		{"die-between-ops", "ucx", false, true, false},
		{"slow:400ms", "auto", false, false, false}, // slower than the spinning, well within the deadline
	}
	for _, tc := range cases {
		t.Run(tc.mode+"/"+tc.transport, func(t *testing.T) {
			if tc.transport == "ucx" {
				SkipWithoutUCX(t)
			}
			timeout := 20 * time.Second
			if tc.atDeadline {
				timeout = 2 * time.Second
			}
			r, err := StartRoot(timeout)
			require.NoError(t, err)
			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), "XCCL_TEST_CHILD=fault", "XCCL_TEST_FAULT="+tc.mode, "XCCL_RANK=2",
				"XCCL_NRANKS=3", "XCCL_UNIQUE_ID="+r.ID.Hex(), "XCCL_TRANSPORT="+tc.transport, "XCCL_TEST_TIMEOUT="+timeout.String())
			child.Stdout, child.Stderr = os.Stderr, os.Stderr
			require.NoError(t, child.Start())
			childDone := false
			defer func() {
				if !childDone {
					_ = child.Process.Kill()
					_ = child.Wait()
				}
			}()
			// Whatever happened, nothing of this job is left in /dev/shm.
			defer func() {
				if !childDone {
					_ = child.Wait()
					childDone = true
				}
				require.Eventually(t, func() bool { return len(jobSegments(r.ID.Job)) == 0 }, 3*time.Second, 20*time.Millisecond,
					"segments left in /dev/shm: %v", jobSegments(r.ID.Job))
			}()

			start := time.Now()
			o := opts(timeout)
			o.Transport = tc.transport
			comms, errs := join(r.ID, 3, []int{0, 1}, o)
			defer destroyAll(comms)
			if tc.initFails {
				for i, err := range errs {
					require.Error(t, err, "rank %d", i)
					require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "rank %d: %v", i, err)
					if !tc.atDeadline {
						require.Contains(t, err.Error(), "rank 2", "rank %d: %v", i, err)
					}
					t.Logf("rank %d: %v", i, err)
				}
				if !tc.atDeadline {
					require.Less(t, time.Since(start), timeout/4, "a rank lost during init is noticed at once")
				}
				return
			}
			require.NoError(t, errors0(errs))
			failed := make([]error, 2)
			var wg sync.WaitGroup
			for i, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]float32, 1<<16)
					p := unsafe.Pointer(&buf[0])
					for k := 0; k < faultOps; k++ {
						if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: len(buf), Type: rt.Float32, Red: rt.Sum}); err != nil {
							failed[i] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			named := 0
			for i, err := range failed {
				if !tc.opsFail {
					require.NoError(t, err, "rank %d", i)
					continue
				}
				require.Error(t, err, "rank %d", i)
				require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "rank %d: %v", i, err)
				if strings.Contains(err.Error(), "rank 2") {
					named++
				} else {
					// Over TCP and UCX a survivor can see the other
					// survivor's abort (TCP: its connections reset; UCX:
					// its abort message) before the dead rank's own failure.
					switch tc.transport {
					case "tcp", "ucx":
						require.Contains(t, err.Error(), fmt.Sprintf("rank %d aborted its communicator or failed", 1-i), "rank %d: %v", i, err)
					default:
						require.Fail(t, "a survivor did not name the dead rank", "rank %d: %v", i, err)
					}
				}
				t.Logf("rank %d: %v", i, err)
			}
			if tc.opsFail {
				require.NotZero(t, named, "some rank names the dead one")
			}
			require.Less(t, time.Since(start), timeout/2)
		})
	}
}

// jobSegments lists the /dev/shm files of job's segments.
func jobSegments(job uint64) []string {
	m, _ := filepath.Glob(fmt.Sprintf("/dev/shm/%s%016x-*", segPrefix(), job))
	return m
}

// inProcessRanks makes n in-process ranks with options o, destroyed at the end
// (if the test did not destroy them).
func inProcessRanks(t *testing.T, n int, o Options) []*Comm {
	t.Helper()
	r, err := StartRoot(10 * time.Second)
	require.NoError(t, err)
	comms, errs := join(r.ID, n, seq(n), o)
	require.NoError(t, errors0(errs))
	t.Cleanup(func() { destroyAll(comms) })
	return comms
}

func errors0(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// runUntilFailure runs large all-reduces on every comm until each fails,
// calling inject once after the first few, and returns the errors.
func runUntilFailure(t *testing.T, comms []*Comm, inject func()) []error {
	t.Helper()
	failed := make([]error, len(comms))
	var wg sync.WaitGroup
	var once sync.Once
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, 1<<20)
			p := unsafe.Pointer(&buf[0])
			for k := 0; ; k++ {
				if k == 3 && i == 0 {
					once.Do(inject)
				}
				if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: len(buf), Type: rt.Float32, Red: rt.Sum}); err != nil {
					failed[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

// A TCP connection closed under a rank in the middle of large all-reduces:
// both ranks fail with C_FAILED naming the other, nothing hangs.
func TestSocketClosedMidMessage(t *testing.T) {
	o := opts(10 * time.Second)
	o.Transport = "tcp"
	comms := inProcessRanks(t, 2, o)
	start := time.Now()
	failed := runUntilFailure(t, comms, func() { _ = comms[1].links[chColl][0].(*tcpLink).conn.Close() })
	for i, err := range failed {
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "rank %d: %v", i, err)
		require.Contains(t, err.Error(), fmt.Sprintf("rank %d", 1-i), "rank %d: %v", i, err)
	}
	require.Less(t, time.Since(start), 5*time.Second)
}

// Corrupted shared-memory words: a ring's head pushed beyond its size (the
// ranks using the ring see it at once), a segment's state word set to
// garbage (seen by a rank waiting for that peer). The rank that reads them
// fails with a message saying so and naming the peer; its peer then fails.
func TestCorruptSharedMemory(t *testing.T) {
	start := func(t *testing.T) []*Comm {
		o := opts(10 * time.Second)
		o.Transport, o.Algo = "shm", "ring"
		return inProcessRanks(t, 2, o)
	}
	t.Run("ring head", func(t *testing.T) {
		comms := start(t)
		begin := time.Now()
		failed := runUntilFailure(t, comms, func() {
			in := comms[0].in[chColl][1]
			in.head.Store(in.tail.Load() + 5*uint64(len(in.data)))
		})
		for i, err := range failed {
			require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
			require.Contains(t, err.Error(), "corrupt")
			require.Contains(t, err.Error(), fmt.Sprintf("rank %d", 1-i))
		}
		require.Less(t, time.Since(begin), 5*time.Second)
	})
	t.Run("state word", func(t *testing.T) {
		comms := start(t)
		comms[0].peerSegs[1].state().Store(77)
		begin := time.Now()
		one := new(float32)
		p := unsafe.Pointer(one)
		op := rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: rt.Float32, Red: rt.Sum}
		err := comms[0].exec(&op) // rank 1 does not come: rank 0 waits, checks rank 1
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
		require.Contains(t, err.Error(), "rank 1's shared segment is corrupt (state word 77)")
		err = comms[1].exec(&op)
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
		require.Contains(t, err.Error(), "rank 0")
		require.Less(t, time.Since(begin), 5*time.Second)
	})
}

// A replayed hello: an eavesdropper who recorded a real rank's join message
// (MAC included) sends it again on a new connection. The root's challenge
// is new, so the MAC does not verify: refused, and the real ranks still join.
func TestReplayedHandshakeIsRefused(t *testing.T) {
	r, err := StartRoot(5 * time.Second)
	require.NoError(t, err)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", r.ID.Root.String())
		require.NoError(t, err)
		return c
	}
	// Record: answer one challenge properly, as rank 0 of 2 would.
	c := dial()
	m, err := readMsg(c)
	require.NoError(t, err)
	mine := nonce()
	hello := &bootMsg{Job: r.ID.Job, Rank: 0, NRanks: 2, Nonce: mine, Info: &peerInfo{Addr: "127.0.0.1:1"},
		MAC: mac(r.ID.Secret[:], "xccl-join", r.ID.Job, 0, 2, m.Nonce, mine)}
	require.NoError(t, writeMsg(c, hello))
	_, err = readMsg(c) // the root's proof: the recorded rank is in as rank 0
	require.NoError(t, err)
	c.Close() // and gone: the root will see rank 0 as lost

	// Replay the recorded hello as rank 1 on a fresh connection.
	hello.Rank = 1
	c2 := dial()
	defer c2.Close()
	_, err = readMsg(c2) // a new challenge, ignored by the replayer
	require.NoError(t, err)
	require.NoError(t, writeMsg(c2, hello))
	ans, err := readMsg(c2)
	require.NoError(t, err)
	require.Contains(t, ans.Err, "wrong secret")
}

// Abort from another thread ends a call that waits for a rank that never
// comes, within a bound; the peer fails fast from then on. (Its first call
// may still complete: it pairs with what the aborted rank had already sent.)
func TestAbortEndsAPendingCall(t *testing.T) {
	abortEndsAPendingCall(t, inProcessRanks(t, 2, opts(30*time.Second)), "rank 0 aborted", true)
}

// Over TCP too the peer learns why: an abort resets the connections (the
// peer says the rank aborted or failed), a Destroy closes them in order
// (the peer says the rank destroyed its communicator or exited).
func TestTCPPeerSaysWhy(t *testing.T) {
	o := opts(30 * time.Second)
	o.Transport = "tcp"
	abortEndsAPendingCall(t, inProcessRanks(t, 2, o), "rank 0 aborted its communicator or failed (connection", false)
	comms := inProcessRanks(t, 2, o)
	require.NoError(t, comms[0].Destroy())
	one := new(float32)
	err := comms[1].exec(&rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(one), Recv: unsafe.Pointer(one), Count: 1, Type: rt.Float32, Red: rt.Sum})
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
	require.Contains(t, err.Error(), "rank 0 closed its connection")
	require.Contains(t, err.Error(), "destroyed its communicator or exited")
}

// abortEndsAPendingCall: rank 0 of comms, aborted from another goroutine
// while it waits for rank 1, fails within a bound; rank 1 then fails fast
// with an error containing peerMsg: in the same call where unsent (rank 0's
// message, in a fast box, is taken back by the abort), else at most one
// call later (over TCP the message may have arrived).
func abortEndsAPendingCall(t *testing.T, comms []*Comm, peerMsg string, unsent bool) {
	t.Helper()
	one := new(float32)
	p := unsafe.Pointer(one)
	op := rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: rt.Float32, Red: rt.Sum}
	time.AfterFunc(200*time.Millisecond, comms[0].Abort)
	start := time.Now()
	err := comms[0].exec(&op) // rank 1 never calls
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
	require.Contains(t, err.Error(), "aborted")
	require.Less(t, time.Since(start), 2*time.Second)
	start = time.Now()
	if err = comms[1].exec(&op); err == nil && !unsent {
		err = comms[1].exec(&op)
	}
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
	require.Contains(t, err.Error(), peerMsg)
	require.Less(t, time.Since(start), 2*time.Second)
}

// A rank that comes late to a call its peer already failed (timed out)
// fails it too, rather than finish it with the message the peer left in
// its fast box: the ranks agree that the call failed. The calls before it
// stand.
func TestALateRankFailsTheCallItsPeerFailed(t *testing.T) {
	for _, count := range []int{1, 64} {
		comms := inProcessRanks(t, 2, opts(30*time.Second))
		bufs := [2][]float32{make([]float32, count), make([]float32, count)}
		ops := [2]rt.Op{}
		for r := range 2 {
			p := unsafe.Pointer(&bufs[r][0])
			ops[r] = rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: count, Type: rt.Float32, Red: rt.Sum}
		}
		var wg sync.WaitGroup
		errs := [2]error{}
		for r := range 2 {
			bufs[r][0] = float32(r + 1)
			wg.Add(1)
			go func() { defer wg.Done(); errs[r] = comms[r].exec(&ops[r]) }()
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, float32(3), bufs[1][0])

		require.NoError(t, comms[0].SetTimeout(200*time.Millisecond))
		err := comms[0].exec(&ops[0]) // rank 1 is late
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
		require.Contains(t, err.Error(), "timed out")
		bufs[1][0] = 2
		start := time.Now()
		err = comms[1].exec(&ops[1])
		require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "count %d: the late rank finished the call its peer failed (%v)", count, err)
		require.Contains(t, err.Error(), "rank 0 aborted")
		require.Less(t, time.Since(start), 2*time.Second)
		require.Equal(t, float32(2), bufs[1][0], "its buffer untouched")
	}
}

// A rank that aborts straight after a call it finished leaves that call's
// message to its peers: a slower peer finishes the call too (its later
// calls fail). A small broadcast's root returns once it has sent, so its
// abort comes before rank 1 reads. Abort once emptied every fast-box slot
// the rank had written: the peer waited for a message that was gone and
// failed the call the aborting rank had finished (an all-gather, in a
// split's setup, as often as not).
func TestAnAbortAfterACallLeavesItsMessage(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(30*time.Second))
	bufs := [2][]int32{{7, 8, 9}, {0, 0, 0}}
	op := func(r int) *rt.Op {
		p := unsafe.Pointer(&bufs[r][0])
		return &rt.Op{Kind: rt.OpBroadcast, Send: p, Recv: p, Count: 3, Type: rt.Int32, Root: 0}
	}
	require.NoError(t, comms[0].exec(op(0))) // rank 1 has not come: the root does not wait
	comms[0].Abort()
	require.NoError(t, comms[1].exec(op(1)), "rank 1 failed the call rank 0 finished")
	require.Equal(t, []int32{7, 8, 9}, bufs[1])
	err := comms[1].exec(op(1))
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "the next call: %v", err)
	require.Contains(t, err.Error(), "rank 0 aborted")
}

// Destroy from one thread while another waits in a receive whose send
// never comes ends that receive (C_ERROR, destroyed) instead of waiting
// for it until the timeout, as Destroy waits for the receives.
func TestDestroyEndsAWaitingReceive(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(30*time.Second))
	buf := make([]float32, 4)
	got := make(chan error, 1)
	go func() {
		got <- comms[1].exec(&rt.Op{Kind: rt.OpRecv, Recv: unsafe.Pointer(&buf[0]), Count: 4, Type: rt.Float32, Root: 0})
	}()
	time.Sleep(100 * time.Millisecond) // the receive waits
	start := time.Now()
	require.NoError(t, comms[1].Destroy())
	require.Less(t, time.Since(start), 5*time.Second, "Destroy waited for the receive")
	err := <-got
	require.Error(t, err)
	require.Contains(t, err.Error(), "destroyed")
}

// A per-communicator timeout: a call whose peer never comes fails after
// that timeout, naming the peer, not after XCCL_TIMEOUT.
func TestPerCommunicatorTimeout(t *testing.T) {
	comms := inProcessRanks(t, 2, opts(60*time.Second))
	require.Error(t, comms[0].SetTimeout(0))
	require.NoError(t, comms[0].SetTimeout(300*time.Millisecond))
	one := new(float32)
	p := unsafe.Pointer(one)
	start := time.Now()
	err := comms[0].exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: 1, Type: rt.Float32, Red: rt.Sum})
	took := time.Since(start)
	require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "%v", err)
	require.Contains(t, err.Error(), "timed out after 300ms")
	require.Contains(t, err.Error(), "rank 1")
	require.Greater(t, took, 250*time.Millisecond)
	require.Less(t, took, 3*time.Second)
}

// After a peer's abort one helper may see EOF or EPIPE before the other
// sees the reset: the reset still names what happened.
func TestTCPResetOutranksEOF(t *testing.T) {
	for _, first := range []error{io.EOF, &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}} {
		l := &tcpLink{}
		b := newPrivateBell()
		l.fail(first, b)
		l.fail(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, b)
		require.ErrorIs(t, l.error(), syscall.ECONNRESET, "after %v", first)
		l.fail(io.EOF, b)
		require.ErrorIs(t, l.error(), syscall.ECONNRESET, "a later EOF keeps the reset")
	}
	l := &tcpLink{}
	l.fail(io.ErrUnexpectedEOF, newPrivateBell())
	l.fail(syscall.ECONNRESET, newPrivateBell())
	require.ErrorIs(t, l.error(), io.ErrUnexpectedEOF, "any other first error stays")
}

// A rank that fails because it lost a peer tells its own peers whom it
// lost: they name that rank, not the messenger (3 ranks: rank 2 goes,
// rank 0 notices first and aborts, rank 1 hears it from rank 0).
func TestAbortNamesTheLostRank(t *testing.T) {
	r, err := StartRoot(10 * time.Second)
	require.NoError(t, err)
	comms, errs := join(r.ID, 3, []int{0, 1, 2}, opts(10*time.Second))
	defer destroyAll(comms)
	require.NoError(t, errors0(errs))
	if comms[0].peerSegs[2] == nil || comms[1].peerSegs[0] == nil {
		t.Skip("no shared memory between the ranks")
	}
	comms[2].seg.state().Store(stateClosed) // as if rank 2 destroyed its communicator
	err = comms[0].peerError(2)
	require.ErrorContains(t, err, "rank 2 destroyed its communicator")
	_ = comms[0].fail(err)
	err = comms[1].peerError(0)
	require.ErrorContains(t, err, "rank 0 aborted its communicator: it lost rank 2")
	comms[2].seg.state().Store(stateAlive)
}

// A failure that lands after Destroy released the segment (an Abort from
// another thread that passed its check as Destroy began), with a culprit
// recorded by Destroy's own peer checks, touches nothing (a reviewer's case:
// the cause word was written to the unmapped segment).
func TestLateFailAfterRelease(t *testing.T) {
	r, err := StartRoot(10 * time.Second)
	require.NoError(t, err)
	comms, errs := join(r.ID, 2, []int{0, 1}, opts(10*time.Second))
	require.NoError(t, errors0(errs))
	defer comms[1].Destroy()
	if comms[0].peerSegs[1] == nil {
		t.Skip("no shared memory between the ranks")
	}
	comms[1].seg.state().Store(stateClosed)
	require.Error(t, comms[0].peerError(1)) // sets the culprit, fails nothing
	comms[1].seg.state().Store(stateAlive)
	require.NoError(t, comms[0].AsyncError())
	_ = comms[0].Destroy()
	_ = comms[0].fail(rt.Failedf("rank 0: communicator aborted"))
}
