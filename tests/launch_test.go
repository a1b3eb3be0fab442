package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The C examples join through XcclCommInitFromEnv: started by OpenMPI's
// real mpirun, by hand with torchrun's or Slurm's variables, or alone.

// needMpirun finds mpirun, installing Debian's OpenMPI when this is a root
// machine with apt, and skips (saying why) where neither works.
func needMpirun(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("mpirun"); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Skip("mpirun not installed and not root to install openmpi-bin")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("mpirun not installed and no apt-get to install openmpi-bin")
	}
	install := func() error {
		cmd := exec.Command("apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq", "openmpi-bin")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if install() != nil {
		_ = exec.Command("apt-get", "-o", "DPkg::Lock::Timeout=300", "update", "-qq").Run()
		if err := install(); err != nil {
			t.Skipf("cannot install openmpi-bin: %v", err)
		}
	}
	p, err := exec.LookPath("mpirun")
	require.NoError(t, err, "openmpi-bin installed but no mpirun on PATH")
	return p
}

func TestExamplesUnderMpirun(t *testing.T) {
	mpirun := needMpirun(t)
	for _, np := range []int{1, 2, 4} {
		for _, prog := range [][]string{{"allreduce", "65536"}, {"collectives", "1001"}} {
			t.Run(fmt.Sprintf("%s/np=%d", prog[0], np), func(t *testing.T) {
				args := []string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", fmt.Sprint(np),
					filepath.Join(build, prog[0]), prog[1]}
				out, err := run(t, 120*time.Second, []string{"XCCL_TIMEOUT=60"}, mpirun, args...)
				require.NoError(t, err, out)
				for r := 0; r < np; r++ {
					require.Contains(t, out, fmt.Sprintf("rank %d of %d", r, np), out)
				}
				require.NotContains(t, out, "WRONG")
			})
		}
	}
}

// xccl-perf joins the job mpirun started, as nccl-tests are run: one
// benchmark of np ranks, not np of one.
func TestPerfUnderMpirun(t *testing.T) {
	mpirun := needMpirun(t)
	out, err := run(t, 120*time.Second, []string{"XCCL_TIMEOUT=60"}, mpirun, "--allow-run-as-root", "--oversubscribe",
		"--bind-to", "none", "-np", "2", filepath.Join(build, "xccl-perf"), "-b", "8", "-e", "1K", "-f", "8", "-n", "5", "-settle", "10")
	require.NoError(t, err, out)
	require.Contains(t, out, "all_reduce: 2 ranks", out)
	require.Equal(t, 1, strings.Count(out, "# Out of bounds values : 0 OK"), out)
}

// ranks runs n copies of prog, each with the environment rankEnv gives it,
// and returns each one's output and error.
func ranks(t *testing.T, n int, timeout time.Duration, rankEnv func(r int) []string, prog ...string) ([]string, []error) {
	t.Helper()
	outs, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			// A clean slate: no launcher variables from the test's own
			// environment (a CI job may run under one).
			env := []string{}
			for _, kv := range os.Environ() {
				k := kv[:strings.IndexByte(kv, '=')]
				if !launcherVar(k) {
					env = append(env, kv)
				}
			}
			cmd := exec.Command(prog[0], prog[1:]...)
			cmd.Env = append(env, rankEnv(r)...)
			timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
			out, err := cmd.CombinedOutput()
			if !timer.Stop() {
				err = fmt.Errorf("rank %d did not finish within %v: %v", r, timeout, err)
			}
			outs[r], errs[r] = string(out), err
		}(r)
	}
	wg.Wait()
	return outs, errs
}

func launcherVar(k string) bool {
	for _, p := range []string{"XCCL_RANK", "XCCL_NRANKS", "XCCL_LOCAL_RANK", "XCCL_UNIQUE_ID", "XCCL_ROOT", "XCCL_JOB_KEY",
		"XCCL_LAUNCHER", "OMPI_", "PMIX_", "PMI_", "SLURM_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
		"MASTER_ADDR", "MASTER_PORT"} {
		if k == p || (strings.HasSuffix(p, "_") && strings.HasPrefix(k, p)) || (p == "XCCL_ROOT" && strings.HasPrefix(k, p)) {
			return true
		}
	}
	return false
}

// freePort is a TCP port nothing listens on right now, with the next one
// free too (torchrun's MASTER_PORT is torch's store; xccl's root takes +1).
func freePort(t *testing.T) int {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1)); err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no free pair of ports")
	return 0
}

func requireAllCorrect(t *testing.T, outs []string, errs []error) {
	t.Helper()
	for r := range outs {
		require.NoError(t, errs[r], "rank %d:\n%s", r, outs[r])
		require.Contains(t, outs[r], fmt.Sprintf("rank %d of %d", r, len(outs)), outs[r])
		require.NotContains(t, outs[r], "WRONG")
	}
}

func TestExamplesWithTorchrunVariables(t *testing.T) {
	port := freePort(t)
	outs, errs := ranks(t, 4, 60*time.Second, func(r int) []string {
		return []string{fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=4", fmt.Sprintf("LOCAL_RANK=%d", r), "LOCAL_WORLD_SIZE=4",
			"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port), "TORCHELASTIC_RUN_ID=test", "XCCL_TIMEOUT=30"}
	}, filepath.Join(build, "collectives"), "1001")
	requireAllCorrect(t, outs, errs)
}

func TestExamplesWithSlurmVariables(t *testing.T) {
	job := fmt.Sprint(os.Getpid())
	outs, errs := ranks(t, 3, 60*time.Second, func(r int) []string {
		return []string{fmt.Sprintf("SLURM_PROCID=%d", r), "SLURM_NTASKS=3", fmt.Sprintf("SLURM_LOCALID=%d", r),
			"SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0", "SLURM_STEP_NUM_NODES=1", "SLURM_STEP_NODELIST=localhost",
			"XCCL_TIMEOUT=30"}
	}, filepath.Join(build, "allreduce"), "4096")
	requireAllCorrect(t, outs, errs)
}

// nonLoopbackIP is an address of this machine other machines could reach.
func nonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}

func TestJobKeyOffLoopback(t *testing.T) {
	ip := nonLoopbackIP(t)
	torch := func(port int, key func(r int) string) func(r int) []string {
		return func(r int) []string {
			env := []string{fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=2", fmt.Sprintf("LOCAL_RANK=%d", r),
				"MASTER_ADDR=" + ip, fmt.Sprintf("MASTER_PORT=%d", port), "XCCL_TIMEOUT=5"}
			if k := key(r); k != "" {
				env = append(env, "XCCL_JOB_KEY="+k)
			}
			return env
		}
	}
	prog := []string{filepath.Join(build, "collectives"), "7"}

	// No key: refused on every rank at once, naming what to set.
	start := time.Now()
	outs, errs := ranks(t, 2, 30*time.Second, torch(freePort(t), func(int) string { return "" }), prog...)
	for r := range outs {
		require.Error(t, errs[r], outs[r])
		require.Contains(t, outs[r], "XCCL_JOB_KEY", outs[r])
		require.Contains(t, outs[r], "-> 3", "C_ERROR: %s", outs[r])
	}
	require.Less(t, time.Since(start), 4*time.Second, "refused at once, not at the timeout")

	// The same key: it works.
	outs, errs = ranks(t, 2, 60*time.Second, torch(freePort(t), func(int) string { return "s3cret" }), prog...)
	requireAllCorrect(t, outs, errs)

	// A rank with another key cannot join: every rank errors within the
	// timeout, none hangs.
	start = time.Now()
	outs, errs = ranks(t, 2, 30*time.Second, torch(freePort(t), func(r int) string { return fmt.Sprintf("key-%d", r) }), prog...)
	for r := range outs {
		require.Error(t, errs[r], outs[r])
		require.NotContains(t, outs[r], "did not finish")
	}
	require.Less(t, time.Since(start), 20*time.Second)
}

func TestInconsistentLauncherVariables(t *testing.T) {
	outs, errs := ranks(t, 1, 30*time.Second, func(int) []string {
		return []string{"OMPI_COMM_WORLD_RANK=4", "OMPI_COMM_WORLD_SIZE=4"}
	}, filepath.Join(build, "allreduce"), "64")
	require.Error(t, errs[0])
	require.Contains(t, outs[0], "rank 4 out of range for 4 ranks", outs[0])
	require.Contains(t, outs[0], "openmpi", outs[0])

	outs, errs = ranks(t, 1, 30*time.Second, func(int) []string {
		return []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2"}
	}, filepath.Join(build, "allreduce"), "64")
	require.Error(t, errs[0])
	require.Contains(t, outs[0], "XCCL_ROOT_ADDR", outs[0])
}
