package host

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/require"

	rt "github.com/xccl-project/xccl/runtime"
)

// TestMain doubles as a rank process: with XCCL_TEST_CHILD set, the test
// binary joins the communicator in XCCL_UNIQUE_ID and all-reduces forever.
func TestMain(m *testing.M) {
	switch os.Getenv("XCCL_TEST_CHILD") {
	case "allreduce-forever":
		os.Exit(childAllReduceForever())
	case "fault":
		os.Exit(childFault())
	case "shared-memory":
		os.Exit(childShared())
	case "one-cpu":
		os.Exit(childOneCPU(false))
	case "one-cpu-wide":
		os.Exit(childOneCPU(true))
	}
	os.Exit(m.Run())
}

func childAllReduceForever() int {
	id, err := ParseUniqueIDHex(os.Getenv("XCCL_UNIQUE_ID"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	rank, _ := strconv.Atoi(os.Getenv("XCCL_RANK"))
	n, _ := strconv.Atoi(os.Getenv("XCCL_NRANKS"))
	c, err := NewComm(id, n, rank, opts(20*time.Second))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ready")
	buf := make([]float32, 1<<20)
	for {
		p := unsafe.Pointer(&buf[0])
		if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: len(buf), Type: rt.Float32, Red: rt.Sum}); err != nil {
			fmt.Println(err)
			return 1
		}
	}
}

// A rank process killed in the middle of all-reduces: every other rank's
// pending call fails with C_FAILED naming it, well before the deadline, and
// later calls fail fast.
func TestKilledRankFailsThePeers(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, transport := range []string{"shm", "tcp", "ucx"} {
		t.Run(transport, func(t *testing.T) {
			if transport == "ucx" {
				SkipWithoutUCX(t)
			}
			const timeout = 20 * time.Second
			r, err := StartRoot(timeout)
			require.NoError(t, err)
			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), "XCCL_TEST_CHILD=allreduce-forever", "XCCL_RANK=2", "XCCL_NRANKS=3",
				"XCCL_UNIQUE_ID="+r.ID.Hex(), "XCCL_TRANSPORT="+transport)
			out, err := child.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, child.Start())
			defer func() { _ = child.Process.Kill(); _ = child.Wait() }()

			o := opts(timeout)
			o.Transport = transport
			comms, errs := join(r.ID, 3, []int{0, 1}, o)
			require.NoError(t, errs[0])
			require.NoError(t, errs[1])
			defer destroyAll(comms)
			line, _ := bufio.NewReader(out).ReadString('\n')
			require.Equal(t, "ready\n", line)

			var killedAt time.Time
			var mu sync.Mutex
			go func() {
				time.Sleep(300 * time.Millisecond)
				mu.Lock()
				killedAt = time.Now()
				mu.Unlock()
				_ = child.Process.Kill()
			}()
			var wg sync.WaitGroup
			failed := make([]error, 2)
			for i, c := range comms {
				wg.Add(1)
				go func(i int, c *Comm) {
					defer wg.Done()
					buf := make([]float32, 1<<20)
					p := unsafe.Pointer(&buf[0])
					for {
						if err := c.exec(&rt.Op{Kind: rt.OpAllReduce, Send: p, Recv: p, Count: len(buf), Type: rt.Float32, Red: rt.Sum}); err != nil {
							failed[i] = err
							return
						}
					}
				}(i, c)
			}
			wg.Wait()
			mu.Lock()
			took := time.Since(killedAt)
			mu.Unlock()
			for i, err := range failed {
				require.Equal(t, rt.StatusFailed, rt.StatusOf(err), "rank %d: %v", i, err)
				require.Regexp(t, "rank [0-2]", err.Error())
				t.Logf("rank %d: %v", i, err)
			}
			require.Less(t, took, timeout/2, "failure must be detected well before the deadline")
			// A broken communicator fails fast.
			start := time.Now()
			one := new(float32)
			err = comms[0].exec(&rt.Op{Kind: rt.OpAllReduce, Send: unsafe.Pointer(one), Recv: unsafe.Pointer(one), Count: 1, Type: rt.Float32, Red: rt.Sum})
			require.Error(t, err)
			require.Less(t, time.Since(start), time.Second)
		})
	}
}

// Two rank processes the scheduler keeps on one CPU (here: each pinned to
// the first CPU it may run on, while it believes it has a CPU of its own):
// a rank waiting for its peer finds it on its CPU and yields at once, not
// after its long spin (the waits are counted). Where the ranks' threads
// may run elsewhere (wide: pinned, then allowed every CPU again, which
// leaves them where they are), rank 1 moves off rank 0's CPU instead.
func TestRanksOnOneCPUYield(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() < 2 {
		t.Skip("needs 2 CPUs to run on")
	}
	for _, mode := range []string{"one-cpu", "one-cpu-wide"} {
		t.Run(mode, func(t *testing.T) {
			r, err := StartRoot(30 * time.Second)
			require.NoError(t, err)
			defer r.Close()
			children := make([]*exec.Cmd, 2)
			outs := make([]strings.Builder, 2)
			for i := range children {
				c := exec.Command(os.Args[0], "-test.run=^$")
				c.Env = append(os.Environ(), "XCCL_TEST_CHILD="+mode, "XCCL_RANK="+strconv.Itoa(i), "XCCL_NRANKS=2",
					"XCCL_UNIQUE_ID="+r.ID.Hex())
				c.Stdout, c.Stderr = &outs[i], &outs[i]
				require.NoError(t, c.Start())
				children[i] = c
			}
			for i, c := range children {
				require.NoError(t, c.Wait(), "rank %d:\n%s", i, outs[i].String())
				t.Logf("rank %d: %s", i, outs[i].String())
			}
			if mode == "one-cpu" {
				for i := range outs {
					require.Contains(t, outs[i].String(), "yielded to a peer on this CPU", "rank %d", i)
					require.Contains(t, outs[i].String(), "never moved", "rank %d", i)
				}
			} else {
				require.Contains(t, outs[1].String(), "moved off the peer's CPU") // counted where its CPU changed
				require.Contains(t, outs[1].String(), "its CPU mask as it was")
				require.Contains(t, outs[0].String(), "never moved") // the lower rank stays
			}
		})
	}
}

// childOneCPU is one rank of TestRanksOnOneCPUYield: the thread that runs
// the communicator's calls is pinned to the first CPU allowed, as is its
// peer's (wide: allowed every CPU again after init); a thousand exchanges
// of 8 bytes, each checked.
func childOneCPU(wide bool) int {
	goruntime.LockOSThread()
	var set, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		fmt.Println(err)
		return 1
	}
	for cpu := 0; cpu < 1024; cpu++ {
		if set.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil { // this thread only
		fmt.Println(err)
		return 1
	}
	id, err := ParseUniqueIDHex(os.Getenv("XCCL_UNIQUE_ID"))
	rank, _ := strconv.Atoi(os.Getenv("XCCL_RANK"))
	var c *Comm
	if err == nil {
		o := opts(30 * time.Second)
		o.SpinPolls = 1 << 12 // a rank that believes it has a CPU of its own spins long
		c, err = NewComm(id, 2, rank, o)
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer c.Destroy()
	if wide { // after init, whose waits sleep (a thread woken may be put on any CPU it may run on)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	var out, in [2]int32
	for k := range 1000 {
		out[0], out[1] = int32(rank*1000+k), int32(-k)
		ops := []*rt.Op{
			{Kind: rt.OpSend, Send: unsafe.Pointer(&out[0]), Count: 2, Type: rt.Int32, Root: 1 - rank},
			{Kind: rt.OpRecv, Recv: unsafe.Pointer(&in[0]), Count: 2, Type: rt.Int32, Root: 1 - rank},
		}
		if err := c.p2pGroup(ops); err != nil {
			fmt.Println(err)
			return 1
		}
		if in[0] != int32((1-rank)*1000+k) || in[1] != int32(-k) {
			fmt.Println("exchange", k, "got", in)
			return 1
		}
	}
	if n := c.EngineStats()["wait.peer_on_this_cpu"]; n > 0 {
		fmt.Println("yielded to a peer on this CPU in", n, "waits")
	} else {
		fmt.Println("never found the peer on this CPU")
	}
	if n := c.EngineStats()["wait.moved_off_peer_cpu"]; n > 0 {
		fmt.Println("moved off the peer's CPU", n, "times")
	} else {
		fmt.Println("never moved")
	}
	var now unix.CPUSet
	if err := unix.SchedGetaffinity(0, &now); err == nil && (wide && now == set || !wide && now == one) {
		fmt.Println("its CPU mask as it was")
	}
	return 0
}
