// Command xcclrun launches an xccl job on this machine, like torchrun or
// mpirun: it makes a unique id (serving its bootstrap itself), starts N
// ranks with XCCL_RANK, XCCL_NRANKS, XCCL_LOCAL_RANK and XCCL_UNIQUE_ID
// (hex) in their environment, prefixes each rank's output with its rank,
// forwards SIGINT/SIGTERM, and exits non-zero if any rank fails, killing
// the others.
//
//	xcclrun -n 4 ./allreduce 33554432
//
// Across machines, run it on every node with the same -n, --nnodes and
// --master (node 0's address and a free port) and each node's --node-rank:
//
//	xcclrun --nnodes 2 --node-rank 0 --master 10.0.0.1:29400 -n 4 ./allreduce
//	xcclrun --nnodes 2 --node-rank 1 --master 10.0.0.1:29400 -n 4 ./allreduce
//
// Ranks are node-rank*n + local rank; XCCL_SOCKET_IFNAME, unless set, becomes
// the address each node uses toward the master.
package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/xccl-project/xccl/devices/all"
	"github.com/xccl-project/xccl/internal/shmseg"
	rt "github.com/xccl-project/xccl/runtime"
	"github.com/xccl-project/xccl/xccl"
)

func main() {
	n := flag.Int("n", 1, "number of ranks")
	grace := flag.Duration("grace", 3*time.Second, "after a rank fails, how long the others get before SIGKILL")
	quiet := flag.Bool("q", false, "do not prefix output lines with the rank")
	probe := flag.Bool("probe", false, "print which devices load here (and why not), their capability matrices, and exit")
	nnodes := flag.Int("nnodes", 1, "number of nodes (machines) of the job; xcclrun runs on each")
	nodeRank := flag.Int("node-rank", 0, "this node's index in [0, nnodes); node 0 serves the unique id")
	master := flag.String("master", "", "host:port of node 0's rendezvous (needed with --nnodes > 1)")
	rdzv := flag.Duration("rdzv-timeout", 5*time.Minute, "how long nodes wait for each other")
	devices := flag.String("devices", "", "each rank's device and cluster, in rank order: DEVICE[@LABEL][:COUNT],... "+
		"(e.g. nvidia:2,host:2, or host@a,host@b,host@a,host@b); ranks on different devices or labels make a mixed communicator")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: xcclrun -n N [flags] program [args...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *probe {
		os.Exit(printProbe())
	}
	if flag.NArg() < 1 || *n < 1 || *nnodes < 1 || *nodeRank < 0 || *nodeRank >= *nnodes || (*nnodes > 1 && *master == "") {
		flag.Usage()
		os.Exit(2)
	}
	j := job{n: *n, nnodes: *nnodes, node: *nodeRank, master: *master, rdzv: *rdzv}
	if *devices != "" {
		var err error
		if j.ranks, err = parseDevices(*devices, *n); err != nil {
			fmt.Fprintf(os.Stderr, "xcclrun: --devices: %v\n", err)
			os.Exit(2)
		}
	}
	os.Exit(run(j, flag.Args(), *grace, !*quiet))
}

// job is what this xcclrun starts: n ranks of node `node` of nnodes.
type job struct {
	n, nnodes, node int
	master          string
	rdzv            time.Duration
	ranks           []rankDevice // --devices: per local rank; nil: every rank on XCCL_DEVICE
}

// rankDevice is one rank's device and cluster label ("" = the device's).
type rankDevice struct{ device, cluster string }

// parseDevices reads DEVICE[@LABEL][:COUNT],... into n ranks.
func parseDevices(spec string, n int) ([]rankDevice, error) {
	var out []rankDevice
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		count := 1
		if i := strings.LastIndexByte(item, ':'); i >= 0 {
			c, err := strconv.Atoi(item[i+1:])
			if err != nil || c < 1 {
				return nil, fmt.Errorf("bad count in %q", item)
			}
			item, count = item[:i], c
		}
		dev, label, _ := strings.Cut(item, "@")
		if dev == "" {
			return nil, fmt.Errorf("no device in %q", spec)
		}
		for k := 0; k < count; k++ {
			out = append(out, rankDevice{strings.ToLower(dev), label})
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("%q names %d ranks, -n is %d", spec, len(out), n)
	}
	return out, nil
}

// uniqueID makes the id (node 0) or fetches it from node 0, and says which
// device the ranks use. On node 0 of several, rdzv reports the end of the
// rendezvous: an error when nodes never came (the ranks would wait for
// them until their timeout); nil elsewhere.
func uniqueID(j job) (device, idHex string, rdzv <-chan error, err error) {
	deadline := time.Now().Add(j.rdzv)
	if j.nnodes > 1 && os.Getenv("XCCL_SOCKET_IFNAME") == "" {
		// The ranks (and node 0's bootstrap root) must listen where the
		// other nodes reach them: the address used toward the master.
		ip, _, err := net.SplitHostPort(j.master)
		if err == nil && j.node > 0 {
			ip, err = localIPFor(j.master, deadline)
		}
		if err != nil {
			return "", "", nil, err
		}
		os.Setenv("XCCL_SOCKET_IFNAME", ip) // read below by the device, and by every rank
	}
	if j.node > 0 {
		device, idHex, err = fetchID(j.master, j.nnodes, j.node, j.n, deadline)
		return device, idHex, nil, err
	}
	// xccl's id (the same for every device) names a bootstrap this process
	// serves, as NCCL's root does. The ranks' device is XCCL_DEVICE as
	// resolved here, unless --devices says otherwise.
	devName := "mixed"
	if j.ranks == nil {
		dev, err := rt.Open("")
		if err != nil {
			return "", "", nil, err
		}
		devName = dev.Name()
	}
	id, err := xccl.GetUniqueID(nil)
	if err != nil {
		return "", "", nil, fmt.Errorf("unique id: %v", err)
	}
	idHex = hex.EncodeToString(id)
	if j.nnodes > 1 {
		if rdzv, err = serveID(j.master, j.nnodes, j.n, devName, idHex, deadline); err != nil {
			return "", "", nil, err
		}
	}
	return devName, idHex, rdzv, nil
}

func run(j job, argv []string, grace time.Duration, prefix bool) int {
	devName, idHex, rdzv, err := uniqueID(j)
	if err != nil {
		fmt.Fprintf(os.Stderr, "xcclrun: %v\n", err)
		return 1
	}
	n := j.n
	var outMu sync.Mutex
	cmds := make([]*exec.Cmd, n)
	var pipes sync.WaitGroup
	for r := 0; r < n; r++ {
		cmd := exec.Command(argv[0], argv[1:]...)
		global := j.node*n + r
		cmd.Env = append(os.Environ(),
			"XCCL_RANK="+strconv.Itoa(global),
			"XCCL_LOCAL_RANK="+strconv.Itoa(r),
			"XCCL_NRANKS="+strconv.Itoa(j.nnodes*n),
			"XCCL_NODE_RANK="+strconv.Itoa(j.node),
			"XCCL_NNODES="+strconv.Itoa(j.nnodes),
			"XCCL_UNIQUE_ID="+idHex)
		if j.ranks != nil {
			cmd.Env = append(cmd.Env, "XCCL_DEVICE="+j.ranks[r].device)
			if j.ranks[r].cluster != "" {
				cmd.Env = append(cmd.Env, "XCCL_CLUSTER="+j.ranks[r].cluster)
			}
		} else {
			cmd.Env = append(cmd.Env, "XCCL_DEVICE="+devName)
		}
		// Each rank leads its own process group, so signals reach whatever
		// it started too; Pdeathsig takes it down if xcclrun dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		// Our own pipes: exec's StdoutPipe is closed by Wait, which can
		// drop a rank's last lines.
		outR, outW, err1 := os.Pipe()
		errR, errW, err2 := os.Pipe()
		if err := errors.Join(err1, err2); err != nil {
			fmt.Fprintf(os.Stderr, "xcclrun: %v\n", err)
			return 1
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		err := cmd.Start()
		outW.Close()
		errW.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "xcclrun: start rank %d: %v\n", r, err)
			signalAll(cmds[:r], syscall.SIGKILL)
			return 1
		}
		cmds[r] = cmd
		tag := ""
		if prefix {
			tag = fmt.Sprintf("[%d] ", global)
		}
		pipes.Add(2)
		go copyLines(&pipes, &outMu, os.Stdout, outR, tag)
		go copyLines(&pipes, &outMu, os.Stderr, errR, tag)
	}

	// Ending the job: SIGTERM (or the signal xcclrun got) to every rank,
	// then SIGKILL after grace, or at once on a second signal. A rank
	// blocked in a call (Python's SIGINT waits for the call to return)
	// would otherwise live until its timeout.
	var stopMu sync.Mutex
	code, stopping, over := 0, false, false // over: every rank is reaped
	var killTimer *time.Timer
	stop := func(rc int, s syscall.Signal) {
		stopMu.Lock()
		defer stopMu.Unlock()
		if over { // nothing left to signal (their process group ids may be reused)
			return
		}
		if code == 0 {
			code = rc
		}
		if stopping {
			if rc == 0 { // a second signal
				killTimer.Stop()
				signalAll(cmds, syscall.SIGKILL)
			}
			return
		}
		stopping = true
		signalAll(cmds, s)
		killTimer = time.AfterFunc(grace, func() { signalAll(cmds, syscall.SIGKILL) })
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			stop(0, s.(syscall.Signal))
		}
	}()
	if rdzv != nil {
		go func() {
			if err := <-rdzv; err != nil {
				fmt.Fprintf(os.Stderr, "xcclrun: %v; ending this node's ranks\n", err)
				stop(1, syscall.SIGTERM)
			}
		}()
	}

	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, n)
	for r, c := range cmds {
		go func(r int, c *exec.Cmd) { exits <- exit{r, c.Wait()} }(r, c)
	}
	for i := 0; i < n; i++ {
		e := <-exits
		if e.err == nil {
			continue
		}
		rc := 1
		var ee *exec.ExitError
		if errors.As(e.err, &ee) && ee.ExitCode() > 0 {
			rc = ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "xcclrun: rank %d failed: %v\n", j.node*n+e.rank, e.err)
		stop(rc, syscall.SIGTERM)
	}
	stopMu.Lock()
	over = true
	if killTimer != nil {
		killTimer.Stop()
	}
	stopMu.Unlock()
	signal.Stop(sigs)
	pipes.Wait()
	stopMu.Lock()
	defer stopMu.Unlock()
	if code == 0 && stopping { // every rank ended well, but the job was stopped
		code = 1
	}
	// A rank killed while it waited in setup (a signal, a failed peer's
	// SIGTERM) leaves its shared-memory segment, and no rank of the job is
	// left to remove it: remove every segment whose owner is gone.
	shmseg.Sweep()
	return code
}

func copyLines(wg *sync.WaitGroup, mu *sync.Mutex, w io.Writer, r io.ReadCloser, tag string) {
	defer wg.Done()
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mu.Lock()
		fmt.Fprintf(w, "%s%s\n", tag, sc.Bytes())
		mu.Unlock()
	}
}

// signalAll signals every rank's process group.
func signalAll(cmds []*exec.Cmd, s syscall.Signal) {
	for _, c := range cmds {
		if c != nil && c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, s)
		}
	}
}

// printProbe reports every device: loaded or not and why, and what it can
// reduce.
func printProbe() int {
	fmt.Printf("%-10s %-6s %-8s %s\n", "device", "usable", "devices", "detail")
	var usable []string
	for _, r := range rt.Probe() {
		fmt.Printf("%-10s %-6v %-8d %s\n", r.Name, r.OK, r.Devices, r.Detail)
		if r.OK {
			usable = append(usable, r.Name)
		}
	}
	if d, err := rt.Open("auto"); err == nil {
		fmt.Printf("\nXCCL_DEVICE=auto picks: %s\n", d.Name())
	}
	for _, name := range usable {
		d, err := rt.Open(name)
		if err != nil {
			continue
		}
		fmt.Printf("\ncapabilities of %s (data type: reduce ops):\n%s", name, rt.CapabilityMatrix(d))
		fmt.Printf("\nalgorithms of %s:\n%s", name, rt.Algorithms(d))
	}
	return 0
}
