// Package launch reads what a job launcher told this process — its rank,
// the job's size, its rank on this machine — and decides, the same way on
// every rank, where the job's bootstrap root listens and which secret
// proves membership. It is how a program started by xcclrun, OpenMPI's
// mpirun, Slurm's srun, a PMI launcher (MPICH's hydra) or torchrun joins
// one communicator without shipping a unique id around itself.
//
// Launchers, tried in this order (XCCL_LAUNCHER names one to skip the
// search):
//
//	xcclrun   XCCL_RANK, XCCL_NRANKS, XCCL_LOCAL_RANK, XCCL_UNIQUE_ID
//	torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//	openmpi   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//	slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_NUM_NODES, SLURM_STEP_NODELIST
//	pmi       PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//
// torchrun comes before the MPI and Slurm variables because a torchrun in
// an allocation inherits the batch script's SLURM_* (one task); mpirun in
// an allocation likewise comes before Slurm.
//
// The root is rank 0. Its address is XCCL_ROOT_ADDR (host or host:port)
// when set; else torchrun's MASTER_ADDR; else, under Slurm on several
// nodes, the first host of the step's node list; else, when every rank is
// on this machine, loopback. Its port is XCCL_ROOT_PORT, else the one in
// XCCL_ROOT_ADDR, else MASTER_PORT+1 under torchrun (MASTER_PORT is
// torch's own store), else one derived from the launcher's job id, so
// concurrent jobs do not meet. The n-th communicator a process makes this
// way uses the port plus n-1.
//
// Membership is proven with a job key: XCCL_JOB_KEY, or the contents of
// the file XCCL_JOB_KEY_FILE. A root other ranks reach from other
// machines needs one; on loopback the key defaults to one made from the
// job id and the user, which only processes of this user and job know.
package launch

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Env is what the launcher said, and the root every rank agrees on.
type Env struct {
	Launcher  string // xcclrun, torchrun, openmpi, slurm, pmi; "" when run alone
	Rank      int
	Size      int
	LocalRank int
	LocalSize int // 0 when the launcher does not say

	// xcclrun hands out the id itself.
	UniqueIDHex string

	// Everyone else: the root's host and port, the rule that chose them
	// (for messages), whether it is loopback, the job's identity and key.
	RootHost string
	RootPort int
	RootFrom string
	Loopback bool
	Job      string
	Key      []byte
	KeyFrom  string
}

// Root is host:port.
func (e *Env) Root() string { return net.JoinHostPort(e.RootHost, strconv.Itoa(e.RootPort)) }

// String is the one line the INFO log and errors use.
func (e *Env) String() string {
	if e.Launcher == "" {
		return "no launcher: rank 0 of 1"
	}
	s := fmt.Sprintf("%s: rank %d of %d, local rank %d", e.Launcher, e.Rank, e.Size, e.LocalRank)
	if e.UniqueIDHex == "" && e.Size > 1 {
		s += fmt.Sprintf(", root %s (%s), key from %s", e.Root(), e.RootFrom, e.KeyFrom)
	}
	return s
}

// Getenv reads one variable ("" when unset).
type Getenv func(string) string

// The root port derived from the job id (no XCCL_ROOT_PORT or launcher's
// port) lies in [rootPortLow, rootPortHigh): below the ephemeral ports.
const (
	rootPortLow  = 20000
	rootPortHigh = 32768
)

// Detect reads the launcher's variables through getenv (os.Getenv when
// nil). Errors name the variable that is missing or inconsistent.
func Detect(getenv Getenv) (*Env, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	v := vars{getenv}
	forced := strings.ToLower(strings.TrimSpace(getenv("XCCL_LAUNCHER")))
	var found *launcher
	for i, l := range launchers {
		if forced == l.name || (forced == "" && l.present(v)) {
			found = &launchers[i]
			break
		}
	}
	if found == nil {
		if forced != "" {
			return nil, fmt.Errorf("XCCL_LAUNCHER=%q: want one of xcclrun, torchrun, openmpi, slurm, pmi", forced)
		}
		return &Env{Size: 1}, nil
	}
	name := found.name
	e, err := found.read(v)
	if err != nil {
		return nil, fmt.Errorf("launched by %s: %v", name, err)
	}
	e.Launcher = name
	if e.Rank < 0 || e.Rank >= e.Size {
		return nil, fmt.Errorf("launched by %s: rank %d out of range for %d ranks", name, e.Rank, e.Size)
	}
	if e.LocalRank < 0 || (e.LocalSize > 0 && e.LocalRank >= e.LocalSize) || (e.LocalSize > e.Size) {
		return nil, fmt.Errorf("launched by %s: local rank %d of %d does not fit %d ranks", name, e.LocalRank, e.LocalSize, e.Size)
	}
	if e.UniqueIDHex != "" || e.Size == 1 {
		return e, nil
	}
	if err := e.root(v); err != nil {
		return nil, fmt.Errorf("launched by %s (rank %d of %d): %v", name, e.Rank, e.Size, err)
	}
	if err := e.key(v); err != nil {
		return nil, fmt.Errorf("launched by %s (rank %d of %d): %v", name, e.Rank, e.Size, err)
	}
	return e, nil
}

type vars struct{ get Getenv }

func (v vars) has(names ...string) bool {
	for _, n := range names {
		if v.get(n) == "" {
			return false
		}
	}
	return true
}

// ints reads the named integers; the first missing or malformed one is
// the error.
func (v vars) ints(names ...string) ([]int, error) {
	out := make([]int, len(names))
	for i, n := range names {
		s := strings.TrimSpace(v.get(n))
		if s == "" {
			return nil, fmt.Errorf("%s is not set", n)
		}
		x, err := strconv.Atoi(s)
		if err != nil || x < 0 {
			return nil, fmt.Errorf("%s=%q is not a non-negative integer", n, s)
		}
		out[i] = x
	}
	return out, nil
}

// optInt is an optional integer: def when unset.
func (v vars) optInt(name string, def int) (int, error) {
	if v.get(name) == "" {
		return def, nil
	}
	x, err := v.ints(name)
	if err != nil {
		return 0, err
	}
	return x[0], nil
}

type launcher struct {
	name    string
	present func(vars) bool
	read    func(vars) (*Env, error)
}

var launchers = []launcher{
	{"xcclrun", func(v vars) bool { return v.has("XCCL_NRANKS") || v.has("XCCL_UNIQUE_ID") }, readXcclrun},
	{"torchrun", func(v vars) bool { return v.has("RANK", "WORLD_SIZE") }, readTorchrun},
	{"openmpi", func(v vars) bool { return v.has("OMPI_COMM_WORLD_SIZE") || v.has("OMPI_COMM_WORLD_RANK") }, readOpenMPI},
	{"slurm", func(v vars) bool { return v.has("SLURM_PROCID") && v.has("SLURM_STEP_ID") }, readSlurm},
	{"pmi", func(v vars) bool { return v.has("PMI_RANK") || v.has("PMI_SIZE") }, readPMI},
}

func readXcclrun(v vars) (*Env, error) {
	x, err := v.ints("XCCL_RANK", "XCCL_NRANKS")
	if err != nil {
		return nil, err
	}
	e := &Env{Rank: x[0], Size: x[1], UniqueIDHex: strings.TrimSpace(v.get("XCCL_UNIQUE_ID"))}
	if e.LocalRank, err = v.optInt("XCCL_LOCAL_RANK", e.Rank); err != nil {
		return nil, err
	}
	if e.UniqueIDHex == "" && e.Size > 1 {
		return nil, fmt.Errorf("XCCL_UNIQUE_ID is not set (xcclrun sets it with XCCL_RANK and XCCL_NRANKS)")
	}
	return e, nil
}

func readTorchrun(v vars) (*Env, error) {
	x, err := v.ints("RANK", "WORLD_SIZE")
	if err != nil {
		return nil, err
	}
	e := &Env{Rank: x[0], Size: x[1], Job: "torchrun/" + v.get("TORCHELASTIC_RUN_ID")}
	if e.LocalRank, err = v.optInt("LOCAL_RANK", e.Rank); err != nil {
		return nil, err
	}
	if e.LocalSize, err = v.optInt("LOCAL_WORLD_SIZE", 0); err != nil {
		return nil, err
	}
	return e, nil
}

func readOpenMPI(v vars) (*Env, error) {
	x, err := v.ints("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
	if err != nil {
		return nil, err
	}
	e := &Env{Rank: x[0], Size: x[1]}
	if e.LocalRank, err = v.optInt("OMPI_COMM_WORLD_LOCAL_RANK", 0); err != nil {
		return nil, err
	}
	if e.LocalSize, err = v.optInt("OMPI_COMM_WORLD_LOCAL_SIZE", 0); err != nil {
		return nil, err
	}
	e.Job = "openmpi/" + firstSet(v, "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid")
	return e, nil
}

func readSlurm(v vars) (*Env, error) {
	x, err := v.ints("SLURM_PROCID", "SLURM_NTASKS")
	if err != nil {
		return nil, err
	}
	e := &Env{Rank: x[0], Size: x[1], Job: "slurm/" + v.get("SLURM_JOB_ID") + "." + v.get("SLURM_STEP_ID")}
	if e.LocalRank, err = v.optInt("SLURM_LOCALID", 0); err != nil {
		return nil, err
	}
	return e, nil
}

func readPMI(v vars) (*Env, error) {
	x, err := v.ints("PMI_RANK", "PMI_SIZE")
	if err != nil {
		return nil, err
	}
	e := &Env{Rank: x[0], Size: x[1], Job: "pmi/" + firstSet(v, "PMI_KVSNAME", "PMIX_NAMESPACE", "PMI_FD", "PMI_PORT")}
	if e.LocalRank, err = v.optInt("MPI_LOCALRANKID", 0); err != nil {
		return nil, err
	}
	if e.LocalSize, err = v.optInt("MPI_LOCALNRANKS", 0); err != nil {
		return nil, err
	}
	return e, nil
}

func firstSet(v vars, names ...string) string {
	for _, n := range names {
		if s := v.get(n); s != "" {
			return s
		}
	}
	return ""
}

// root applies the rule every rank computes alike.
func (e *Env) root(v vars) error {
	port := 0
	switch addr := strings.TrimSpace(v.get("XCCL_ROOT_ADDR")); {
	case addr != "":
		e.RootFrom = "XCCL_ROOT_ADDR"
		if h, p, err := net.SplitHostPort(addr); err == nil {
			e.RootHost = h
			if port, err = strconv.Atoi(p); err != nil || port <= 0 || port > 65535 {
				return fmt.Errorf("XCCL_ROOT_ADDR=%q: bad port", addr)
			}
		} else {
			e.RootHost = strings.Trim(addr, "[]")
		}
	case e.Launcher == "torchrun":
		e.RootHost = strings.TrimSpace(v.get("MASTER_ADDR"))
		if e.RootHost == "" {
			return fmt.Errorf("MASTER_ADDR is not set (torchrun sets it; or set XCCL_ROOT_ADDR)")
		}
		mp, err := v.ints("MASTER_PORT")
		if err != nil {
			return fmt.Errorf("%v (torchrun sets it; or set XCCL_ROOT_PORT)", err)
		}
		port, e.RootFrom = mp[0]+1, "MASTER_ADDR, MASTER_PORT+1"
		e.Job += "/" + e.RootHost + ":" + strconv.Itoa(mp[0])
	case e.Launcher == "slurm" && slurmNodes(v) > 1:
		list := firstSet(v, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
		h, err := FirstHost(list)
		if err != nil {
			return fmt.Errorf("SLURM_STEP_NODELIST=%q: %v", list, err)
		}
		e.RootHost, e.RootFrom = h, "the first node of SLURM_STEP_NODELIST"
	case e.single(v):
		e.RootHost, e.RootFrom = "127.0.0.1", "loopback: every rank is on this machine"
	default:
		return fmt.Errorf("the ranks are on several machines and %s does not say where rank 0 runs: "+
			"set XCCL_ROOT_ADDR=host[:port] (an address of rank 0's machine that every rank reaches) on every rank, "+
			"e.g. mpirun -x XCCL_ROOT_ADDR=node01 -x XCCL_JOB_KEY ...", e.Launcher)
	}
	var err error
	if port, err = v.optInt("XCCL_ROOT_PORT", port); err != nil {
		return err
	}
	if port == 0 {
		// Derived from the job, so concurrent jobs of one machine differ;
		// below Linux's ephemeral ports (32768 up by default), which any
		// outgoing connection of the machine may hold (a bind there failed
		// "address already in use" under a busy test run).
		h := sha256.Sum256([]byte("xccl-root-port\x00" + e.Job))
		port = rootPortLow + int(binary.BigEndian.Uint32(h[:4])%(rootPortHigh-rootPortLow))
		e.RootFrom += ", port from the job id"
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("root port %d out of range", port)
	}
	e.RootPort = port
	e.Loopback = isLoopback(e.RootHost)
	return nil
}

// single: the launcher says every rank is on this machine.
func (e *Env) single(v vars) bool {
	switch e.Launcher {
	case "slurm":
		return slurmNodes(v) == 1
	default:
		return e.LocalSize == e.Size
	}
}

func slurmNodes(v vars) int {
	for _, n := range []string{"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"} {
		if x, err := strconv.Atoi(v.get(n)); err == nil && x > 0 {
			return x
		}
	}
	return 0
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (e *Env) key(v vars) error {
	if k := v.get("XCCL_JOB_KEY"); k != "" {
		e.Key, e.KeyFrom = []byte(k), "XCCL_JOB_KEY"
		return nil
	}
	if f := v.get("XCCL_JOB_KEY_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("XCCL_JOB_KEY_FILE: %v", err)
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			return fmt.Errorf("XCCL_JOB_KEY_FILE=%s is empty", f)
		}
		e.Key, e.KeyFrom = b, "XCCL_JOB_KEY_FILE"
		return nil
	}
	if !e.Loopback {
		return fmt.Errorf("the root %s (%s) is reachable from other machines, so the ranks must prove they belong to the job: "+
			"set XCCL_JOB_KEY (the same secret on every rank) or XCCL_JOB_KEY_FILE (a file every rank reads)", e.Root(), e.RootFrom)
	}
	e.Key, e.KeyFrom = []byte(fmt.Sprintf("loopback/%d/%s", os.Getuid(), e.Job)), "the job id and user (loopback)"
	return nil
}

// Secret and JobID are what every rank derives alike for the seq-th
// communicator the process makes from the environment (0, 1, ...).
func (e *Env) Secret(seq int) [32]byte {
	return sha256.Sum256([]byte(fmt.Sprintf("xccl-job-secret\x00%s\x00%d\x00%s\x00%s", e.Job, seq, e.Root(), e.Key)))
}

// JobID is never zero.
func (e *Env) JobID(seq int) uint64 {
	h := sha256.Sum256([]byte(fmt.Sprintf("xccl-job-id\x00%s\x00%d\x00%s\x00%d\x00%s", e.Job, seq, e.Root(), e.Size, e.Key)))
	return binary.BigEndian.Uint64(h[:8]) | 1
}

// FirstHost is the first host of a Slurm host list ("n[01-04,07],m3" → "n01").
func FirstHost(list string) (string, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		return "", fmt.Errorf("empty host list")
	}
	end := len(list)
	depth := 0
	for i, c := range list {
		if c == '[' {
			depth++
		} else if c == ']' {
			depth--
		} else if c == ',' && depth == 0 {
			end = i
			break
		}
	}
	first := list[:end]
	var out strings.Builder
	for {
		open := strings.IndexByte(first, '[')
		if open < 0 {
			if strings.ContainsRune(first, ']') {
				return "", fmt.Errorf("unbalanced brackets")
			}
			out.WriteString(first)
			return out.String(), nil
		}
		closeAt := strings.IndexByte(first, ']')
		if closeAt < open {
			return "", fmt.Errorf("unbalanced brackets")
		}
		r := first[open+1 : closeAt]
		if i := strings.IndexAny(r, ",-"); i >= 0 {
			r = r[:i]
		}
		if r == "" {
			return "", fmt.Errorf("empty range")
		}
		out.WriteString(first[:open] + r)
		first = first[closeAt+1:]
	}
}
